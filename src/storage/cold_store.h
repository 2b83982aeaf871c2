#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/clock.h"
#include "engine/cold_hooks.h"
#include "engine/engine.h"
#include "storage/cold_buried_index.h"
#include "storage/cold_index.h"
#include "storage/cold_ready_index.h"

namespace stalkd::storage {

struct ColdStoreOptions {
  size_t budget = SIZE_MAX;     // memory for jobs (Engine::memory_used) to stay under
  Nanos lead = 2 * kSecond;     // a job on disk is read back this long before it is due
  uint32_t tick_budget = 1000;  // jobs moved either way per Tick
  // Ready jobs: a tube keeps at least this many in memory (demotion stops there), and when
  // it has fewer than half as many and more on disk, Tick reads its first ones back up to
  // this many, so that reserves seldom wait for a read. 0: every ready job but the first
  // may go, and they come back one at a time, when a reserve reaches them.
  uint32_t ready_hot = 64;
  // Buried jobs: a tube keeps its first this many in memory (demotion takes its newest
  // first and stops there), and when fewer than half as many are left in memory with more on
  // disk, Tick reads the next ones back up to this many (kick and peek-buried seldom wait).
  uint32_t buried_hot = 64;
};

// The disk tier (docs/DISK-TIER.md): while the engine's memory for jobs is over the budget,
// delayed jobs not due within twice the lead time leave memory (the binlog already holds
// their whole record) and are listed in a ColdIndex; they are read back, synchronously,
// `lead` before they are due, and at once when a command needs them. Then ready jobs at the
// end of their tube's order leave memory, listed in a ColdReadyIndex; a tube's first ready
// job is always in memory when a command looks at it (PromoteReadyFirst), and Tick reads
// the first ones back ahead when a tube runs low (ready_hot). A job changed since its put
// (released, timed out) first has the log write its record whole again
// (ColdReader::RewriteWhole), and goes once that is written.
class ColdStore final : public engine::ColdTier {
 public:
  // What a look at a job did: nothing (it must stay: the next visit goes past it), nothing
  // yet (its record may be written whole again in a later Tick: the next visit looks at it
  // again), nothing while its rewritten record waits to be written (not counted as a look: at
  // most the log's unwritten rewrites), took it out of memory, or had its record written
  // whole again (it stays until that is written, and the look goes on further).
  enum class Took { kNo, kLater, kPending, kYes, kRewrote };
  // Per tube, how many entries from its heap's end the last demotion visit had to leave.
  using Depths = std::unordered_map<const engine::Tube*, size_t>;

  // engine and reader must outlive the store.
  ColdStore(engine::Engine& engine, engine::ColdReader& reader, ColdStoreOptions options);

  void Promote(uint64_t id) override;
  size_t PromoteEarliest(const engine::Tube* t, size_t n) override;
  bool MayPrecede(const engine::Tube* t, const engine::Job* hot_first) const override;
  size_t Count(const engine::Tube* t) const override { return index_.Count(t); }
  size_t Count() const override { return index_.size(); }
  ReadyCounts ReadyOnDisk(const engine::Tube* t) const override;
  void PromoteReadyFirst(const engine::Tube* t, const engine::Job* hot_first) override;
  void ReadyLeft(const engine::Tube* t) override {
    if (!evicting_ && ready_.Count(t) > 0) Look(t);
  }
  size_t PromoteReady(const engine::Tube* t, size_t n) override;
  size_t BuriedOnDisk(const engine::Tube* t) const override {
    return t ? buried_.Count(t) : buried_.size();
  }
  size_t PromoteBuried(const engine::Tube* t, size_t n) override;
  void BuriedLeft(const engine::Tube* t) override {
    if (!evicting_ && buried_.Count(t) > 0 && to_look_buried_set_.insert(t).second) {
      to_look_buried_.push_back(t);
    }
  }
  void ListIds(const engine::Tube* t, engine::JobState state, uint64_t from, uint64_t below,
               std::vector<uint64_t>* out) const override;
  bool IdBounds(uint64_t* lo, uint64_t* hi) const override {
    *lo = std::min({index_.lo(), ready_.lo(), buried_.lo()});
    *hi = std::max({index_.hi(), ready_.hi(), buried_.hi()});
    return *lo <= *hi;
  }
  Nanos Tick() override;
  Stats stats() const override;

  const ColdIndex& index() const { return index_; }
  // A job the binlog restored from its checkpoint as kept on disk only (never in memory).
  // Its creation time, from the record's wall clock, is cut to 16 ns as a Job keeps it
  // (engine::Job::created; nothing else changes once the job is back in memory), so that
  // it fits the index's 16 bytes as the job's did before the restart.
  void AddRestored(ColdIndex::Entry e) {
    index_.SetHorizon(engine_.clock().Now() + options_.lead);
    e.created = static_cast<Nanos>(static_cast<uint64_t>(e.created) & ~uint64_t{15});
    index_.Add(e);
  }
  // A ready job a replay restored as kept on disk only (never in memory): its tube's first
  // may be on disk, to be looked at in the next Tick.
  void AddRestoredReady(const ColdReadyIndex::Entry& e) {
    ready_.Add(e);
    Look(e.tube);
  }
  const ColdReadyIndex& ready_index() const { return ready_; }
  const ColdBuriedIndex& buried_index() const { return buried_; }
  // Times the rewrites of changed jobs stopped for lack of space in the binlog (logged).
  uint64_t no_room_episodes() const { return no_room_episodes_; }
  // Tubes Tick has looked at for their ready jobs, so far (for tests of its cost).
  uint64_t looked_tubes() const { return looked_tubes_; }
  // Buried list entries DemoteBuried and PromoteBuriedId stepped over so far (for tests of
  // their cost).
  uint64_t buried_steps() const { return buried_steps_; }

 private:
  // Reads job id's record into *r (views into buf_); false (counted, logged) if it fails or
  // is not of tube t (and priority *pri, if given): the job is lost to this run, and its
  // reference on its tube t goes at the next Tick.
  bool ReadBack(uint64_t id, const engine::Tube* t, const uint32_t* pri, engine::RestoredJob* r);
  // Reads e's job back into the engine.
  void Bring(const ColdIndex::Entry& e);
  bool BringReady(const ColdReadyIndex::Entry& e);  // false: a read error
  // Brings back t's first ready job on disk while it precedes t's first in memory (at most
  // one, but for read errors); returns how many it brought back.
  uint32_t FixReadyFirst(const engine::Tube* t);
  // Demotes up to `budget` jobs while over the budget; true if more are left to demote.
  bool Demote(Nanos now, uint32_t budget);
  uint32_t DemoteDelayed(Nanos now, uint32_t budget, size_t goal);
  uint32_t DemoteReady(Nanos now, uint32_t budget, size_t goal);
  // Buried jobs (cold_store_buried.cc): the newest of each tube first, never its first
  // buried_hot; BringBuried reads e's job back into its tube's list before `before` (the
  // first job there with a higher bury number, null: at the end); false: a read error.
  uint32_t DemoteBuried(Nanos now, uint32_t budget, size_t goal);
  Took TakeBuried(const engine::Tube& t, engine::Job* j, Nanos now);
  bool BringBuried(const ColdBuriedIndex::Entry& e, const engine::Job* before);
  // Promote(id) of a buried job on disk: back at its place in its tube's list.
  bool PromoteBuriedId(uint64_t id);
  // Tick's part for buried jobs: the tubes a buried job left in memory that are below
  // buried_hot / 2 get their next ones back, up to buried_hot (up to budget reads); true if
  // some are left for the next Tick.
  bool RefillBuried(uint32_t budget);
  // A job that may go but changed since its put (not Demotable): has the log write its kFull
  // record again (it goes once that is written, in a later Tick), within rewrites_left_ and
  // as long as the jobs rewritten and not yet gone would not take memory below the goal.
  // true if it did. On a lack of space, stops the rewrites for a second, logged once.
  bool Rewrite(const engine::Job& j, Nanos now);
  // A job that may go but changed since its put: kPending while its rewritten record waits
  // to be written, else kRewrote if Rewrite did it, kLater if not.
  Took Changed(const engine::Job& j, Nanos now);
  // Has the next Tick look at t (a tube with ready jobs on disk): its first, then its refill.
  void Look(const engine::Tube* t) {
    if (to_look_set_.insert(t).second) to_look_.push_back(t);
  }
  // Tick's part for ready jobs: the first of each tube to look at, then the refills of those
  // running low, in turn (up to budget reads); true if refills are left for the next Tick.
  bool RefillReady(uint32_t budget);

  engine::Engine& engine_;
  engine::ColdReader& reader_;
  ColdStoreOptions options_;
  ColdIndex index_;
  ColdReadyIndex ready_;
  ColdBuriedIndex buried_;
  // Tubes a buried job left in memory since the last Tick (BuriedLeft), with jobs on disk.
  std::vector<const engine::Tube*> to_look_buried_;
  std::unordered_set<const engine::Tube*> to_look_buried_set_;
  size_t buried_cursor_ = 0;  // DemoteBuried's round over the tubes
  Depths buried_resume_;      // per tube: the id of the job its next visit starts at
  // The tubes with ready jobs on disk that the next Tick looks at: those a ready job left in
  // memory since (ReadyLeft) and those restored to disk. Every other tube with ready jobs on
  // disk has its first in memory and no refill due, as its last look left it. Addresses are
  // only keys until ready_ says the tube still has jobs on disk (which keep it alive).
  std::vector<const engine::Tube*> to_look_;
  std::unordered_set<const engine::Tube*> to_look_set_;
  std::vector<const engine::Tube*> looking_;  // RefillReady's, swapped with to_look_
  // Tubes looked at and due a refill that the read budget has not reached yet, in turn.
  std::deque<const engine::Tube*> refills_;
  std::unordered_set<const engine::Tube*> refills_set_;
  bool evicting_ = false;    // a demotion: Evict's ReadyLeft is not a change to look at
  size_t ready_cursor_ = 0;  // DemoteReady's round over the tubes
  Depths ready_depth_;       // per tube: entries from its heap's end that had to stay
  Depths delayed_depth_;     // the same for DemoteDelayed
  std::vector<ColdIndex::Entry> scratch_;
  std::vector<const engine::Tube*> lost_tubes_;  // of jobs that could not be read back
  std::string buf_;
  size_t tube_cursor_ = 0;
  uint64_t promotions_ = 0;
  uint64_t demotions_ = 0;
  uint64_t waited_reads_ = 0;
  uint64_t read_errors_ = 0;
  uint64_t rewrites_ = 0;
  uint32_t rewrites_left_ = 0;  // in this Tick's Demote
  size_t rewrite_goal_ = 0;     // this Tick's goal for memory_used
  size_t rewritten_bytes_ = 0;  // footprint of the jobs rewritten, until their records are written
  Nanos rewrite_retry_at_ = 0;  // after a lack of space
  bool no_room_ = false;        // the last rewrite found no space (logged once)
  uint64_t no_room_episodes_ = 0;
  uint64_t looked_tubes_ = 0;
  uint64_t buried_steps_ = 0;
};

}  // namespace stalkd::storage
