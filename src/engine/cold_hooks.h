#pragma once

// The disk tier's seams (docs/DISK-TIER.md): what the engine-side code needs from a log
// that can read a job back (ColdReader, implemented by storage::Binlog), and what the
// store asks of the tier before a command that may touch a job kept only on disk
// (ColdTier, implemented by storage::ColdStore). Both keep the engine free of I/O.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/clock.h"
#include "engine/job.h"
#include "engine/job_log.h"

namespace stalkd::engine {

class Tube;

class ColdReader {
 public:
  virtual ~ColdReader() = default;
  // Whether j's latest record is its whole record (body included), written to its file:
  // then the job can leave memory and be read back exactly as it is.
  virtual bool Demotable(const Job& j) const = 0;
  // Reads job id's record into *buf and fills *out with views into *buf. false: the log
  // does not hold it as Demotable promised, or the read failed (logged).
  virtual bool Read(uint64_t id, std::string* buf, RestoredJob* out) = 0;
  // For a job not Demotable because it changed since its put (a state record followed its
  // kFull record): writes its kFull record again in its current state, as compaction moves a
  // job, from free space only (no job's reservation), so that it is Demotable once the log
  // has written that record to its file (its next write). kNo: nothing to do or nothing the
  // log can do (Demotable already, rewritten and not yet written, the log failed, or the
  // record would lie where its place cannot be kept); kNoRoom: no free space. Either way
  // nothing is written.
  enum class Rewrite { kDone, kNo, kNoRoom };
  virtual Rewrite RewriteWhole(const Job& j) = 0;
  // Whether j was rewritten by RewriteWhole and that record is not yet written to its file
  // (j is Demotable once it is).
  virtual bool RewritePending(const Job& j) const = 0;
  // Rewrites done and not yet written to their files (bounds what waits in the log's buffer).
  virtual size_t RewritesUnwritten() const = 0;
};

class ColdTier {
 public:
  virtual ~ColdTier() = default;
  // Brings job id back into memory if it is on disk only (before any command naming it).
  virtual void Promote(uint64_t id) = 0;
  // Brings back the n delayed jobs of t due first among those on disk, or all of them
  // (n = SIZE_MAX), so that the engine's own order over t's jobs is exact for the first n.
  // Returns how many left the disk (a record that could not be read counts: it is gone).
  virtual size_t PromoteEarliest(const Tube* t, size_t n) = 0;
  // Whether t's first delayed job might be on disk: its in-memory first is absent or not
  // known to come before every job of t on disk.
  virtual bool MayPrecede(const Tube* t, const Job* hot_first) const = 0;
  virtual size_t Count(const Tube* t) const = 0;  // t's delayed jobs on disk
  virtual size_t Count() const = 0;               // every delayed job on disk

  // Ready jobs on disk. A tube's first ready job (priority, then id) is in memory whenever
  // the engine or a command looks at it: demotion never takes it, and when jobs leave the
  // tube's ready heap (a reservation, a delete) PromoteReadyFirst brings the next back if it
  // is on disk: before a command looks at the tube's first ready job (reserve, peek-ready,
  // pause-tube), after a reservation took one (the engine calls it), and in Tick.
  struct ReadyCounts {
    size_t ready = 0;
    size_t urgent = 0;  // pri < 1024
  };
  virtual ReadyCounts ReadyOnDisk(const Tube* t) const = 0;  // nullptr: every tube
  // Brings back t's first ready job on disk if it may come before hot_first (t's first in
  // memory, nullptr if none), so that the engine's first ready job of t is t's first.
  virtual void PromoteReadyFirst(const Tube* t, const Job* hot_first) = 0;
  // A ready job left t's heap in memory (reserved, deleted, expired, purged: any way but
  // the tier's own Evict): t's first ready job may now be on disk, or t may be running
  // low. Tick looks at the tubes so reported, not at every tube with jobs on disk. Called
  // from inside the engine's changes: it must only take note.
  virtual void ReadyLeft(const Tube* t) = 0;
  // Brings back t's first n ready jobs on disk (a purge, a slice at a time); returns how
  // many left the disk, as PromoteEarliest.
  virtual size_t PromoteReady(const Tube* t, size_t n) = 0;
  // Buried jobs on disk: t's buried jobs are in bury order (Engine::BurySeq) split between
  // its list in memory and the disk; a command that looks at t's first buried jobs (peek,
  // kick, respawn, purge) has PromoteBuried bring back those of them that are on disk.
  virtual size_t BuriedOnDisk(const Tube* t) const = 0;  // nullptr: every tube
  // Brings back the buried jobs on disk among t's first n in bury order (SIZE_MAX: all), so
  // that the engine's list's first n are t's first n. Returns how many left the disk (a
  // record that could not be read counts, as for PromoteEarliest).
  virtual size_t PromoteBuried(const Tube* t, size_t n) = 0;
  // A buried job left t's list in memory (kicked, deleted, reserved, purged: any way but the
  // tier's own Evict): Tick may bring t's next ones back ahead. Only takes note.
  virtual void BuriedLeft(const Tube* t) = 0;
  // Appends to *out the ids of t's jobs on disk in `state` (delayed, ready or buried; none in
  // the others) with from <= id < below, in id order, without reading them (list-jobs). Looks
  // at each id of the range: bound it.
  virtual void ListIds(const Tube* t, JobState state, uint64_t from, uint64_t below,
                       std::vector<uint64_t>* out) const = 0;
  // Bounds of the ids of all jobs on disk: none is below *lo or above *hi (exact unless jobs
  // at the ends left since; list-jobs scans between them as over the ids in memory). False
  // if none is on disk.
  virtual bool IdBounds(uint64_t* lo, uint64_t* hi) const = 0;
  // Promotes jobs falling due soon and demotes jobs while memory is over the budget.
  // Returns when it next has work (kForever: none), Now() if it left work for later.
  virtual Nanos Tick() = 0;

  struct Stats {
    uint64_t cold = 0;          // jobs kept on disk only
    uint64_t index_bytes = 0;   // memory of the disk tier's indexes
    uint64_t promotions = 0;    // jobs read back into memory
    uint64_t demotions = 0;     // jobs that left memory
    uint64_t waited_reads = 0;  // promotions a command waited for (read in its turn)
    uint64_t read_errors = 0;   // records that could not be read back (logged)
    uint64_t rewrites = 0;      // kFull records written again so that a job could leave memory
    size_t budget = 0;          // the memory budget for jobs
  };
  virtual Stats stats() const = 0;
};

}  // namespace stalkd::engine
