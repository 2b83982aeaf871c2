#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "base/id_map.h"
#include "engine/cold_hooks.h"
#include "engine/engine.h"
#include "engine/job_log.h"
#include "storage/cold_index.h"
#include "storage/cold_ready_index.h"
#include "storage/record.h"
#include "storage/syncer.h"

namespace stalkd::storage {

// A mark (Binlog::Mark, MarkOf: bytes of records placed so far) rebuilt from its low 32 bits
// `low`, given `placed`, the bytes placed by now: the largest value not above `placed` with
// those low bits. A job's entry keeps only the low bits of its mark (4 bytes, not 8). As the
// true mark is not above `placed` and has those low bits, the rebuilt one is never below
// it: a reply held until Covers(mark) never goes out before its records are durable. It is
// above the true mark only when more than 4 GiB of records were placed since, and then
// still not above `placed`: such a reply waits at most for one more sync.
constexpr int64_t MarkFromLow(int64_t placed, uint32_t low) {
  return placed - int64_t{static_cast<uint32_t>(static_cast<uint32_t>(placed) - low)};
}

// What Binlog keeps of each live job (its JobMeta), 20 bytes: for a job the disk tier keeps only in
// the log, most of what it costs in memory.
struct BinlogJobMeta {
  BinlogJobMeta() = default;
  BinlogJobMeta(uint32_t full, uint32_t size, uint32_t reserve, uint32_t last)
      : full_seq(full), full_size(size), resv(reserve), seq_or_off(last) {}

  // Segment of the job's latest record (stats-job "file").
  uint32_t last_seq() const { return whole ? full_seq : seq_or_off; }
  void set_last_seq(uint32_t seq) {
    whole = false;
    seq_or_off = seq;
  }
  // With options_.disk_tier: where the kFull record starts in its segment, while it is the
  // job's latest record (no state record since: it alone holds the job) and its offset
  // fits 4 bytes; else null. Only then is its segment also the latest record's.
  const uint32_t* full_off() const { return whole ? &seq_or_off : nullptr; }
  void set_full_off(uint32_t off) {  // the kFull record (in full_seq) is the latest one
    whole = true;
    seq_or_off = off;
  }
  void clear_full_off() {  // a later record (or the offset does not fit)
    if (whole) set_last_seq(full_seq);
  }

  uint32_t full_seq = 0;  // segment of the job's latest kFull record
  uint32_t full_size = 0;
  // Bytes reserved for its future records: at most JobReserve(true) (a state record with
  // extensions and a delete), so 31 bits are plenty.
  uint32_t resv : 31 = 0;
  uint32_t whole : 1 = 0;  // seq_or_off is full_off, and last_seq is full_seq
  // The low 32 bits of placed_ after its latest put or state record (MarkOf: MarkFromLow).
  uint32_t mark_lo = 0;
  uint32_t seq_or_off = 0;  // last_seq, or full_off while whole
};
static_assert(sizeof(BinlogJobMeta) == 20);

struct BeanstalkdReadResult;
class CheckpointReader;
struct PrefixMatch;

struct BinlogOptions {
  std::string dir;                  // -b
  int64_t segment_size = 10485760;  // -s, a multiple of 4096
  int64_t fsync_ms = 50;            // -f; 0: sync before the replies of every iteration
  bool fsync_never = false;         // -F
  bool skip_damaged = false;        // --binlog-skip-damaged
  // Sync on a thread of its own (the server): Flush only starts a sync, and sync_fd()
  // becomes readable when it has finished. Otherwise Flush syncs before it returns.
  bool background_sync = false;
  int verbosity = 0;
  // The disk tier reads jobs back from their records (docs/DISK-TIER.md): keep where each
  // job's kFull record starts while it is the job's latest record (in the job's entry).
  bool disk_tier = false;
  // Called now and then while Recover replays and restores (between segments, every few
  // thousand jobs), so the server can answer health probes meanwhile; may be empty. When it
  // returns false (a signal asked the server to stop), Recover stops and returns false,
  // having changed nothing but a torn tail it cleared, and stopped() is true.
  std::function<bool()> progress;
  // With disk_tier: Recover gives the delayed jobs it restores from a checkpoint as kept on
  // disk only (never read into memory) to this, for the disk tier's index (the ready ones to
  // restore_cold_ready). Without it, a checkpoint is not used.
  std::function<void(const ColdIndex::Entry&)> restore_cold;
  // With disk_tier and restore_cold: a replay (a start after a crash) gives the jobs the
  // tier could keep on disk, whole in their kFull record, to these instead of the engine:
  // delayed ones to restore_cold, ready ones to this (and a start from a checkpoint its
  // ready jobs on disk). Without it, a replay restores every job into memory, and a
  // checkpoint is not used.
  std::function<void(const ColdReadyIndex::Entry&)> restore_cold_ready;
};

// The durable binlog (-b DIR): a write-ahead log of segments binlog.N in stalkd's format
// (storage/record.h, docs/BINLOG.md). The engine reports changes through the JobLog calls,
// which only append to a buffer; Flush() writes the buffer with one write per segment and
// syncs it according to the -f/-F policy. The server calls Flush() once per loop iteration
// (group commit).
//
// Durability is tracked by marks: written_mark() counts the bytes written so far, and
// durable_mark() how many of them are known to be synced. With background_sync, one sync
// runs at a time on the Syncer's thread while the loop goes on; the next one starts at the
// first Flush after it has finished (-f 0) or when the -f period is due. A reply depends on the
// records up to Mark() or MarkOf(job) when it is made; the server sends it once Covers() that mark.
//
// Space: every segment is preallocated. A put is admitted only if its kFull record fits and
// room stays reserved for one later state change and the delete of every live job, so
// those never fail for lack of space. A job larger than a segment of -s is admitted too:
// the current segment grows by its size to hold it. Compaction moves the few live jobs of the
// oldest segment forward so the head segments can be unlinked; it only uses unreserved space.
//
// Errors: a failed write, sync or preallocation is logged; after a failed write or sync the
// binlog refuses every put (Admit is false) and writes nothing more, and the server keeps
// serving the jobs it has in memory.
class Binlog final : public engine::JobLog, public engine::ColdReader {
 public:
  Binlog(BinlogOptions options, const Clock& clock);
  ~Binlog() override;
  Binlog(const Binlog&) = delete;
  Binlog& operator=(const Binlog&) = delete;

  // Creates the directory if needed and takes an exclusive flock on DIR/lock (the same
  // lock file beanstalkd uses). false: *error says why (e.g. another server holds it).
  bool Lock(std::string* error);

  // Reads every segment (or an existing beanstalkd binlog, which it then rewrites in
  // stalkd's format), restores the jobs into `engine`, and opens a fresh segment for
  // writing. Call after Lock, before set_log. false: start-up must stop; *error names the
  // file and offset. `engine` must outlive the binlog (compaction reads jobs from it).
  bool Recover(engine::Engine* engine, std::string* error);

  // Writes everything recorded since the last call and syncs per policy; unlinks dead
  // segments and does a bounded amount of compaction. Returns when a sync is next due
  // (-f MS with unsynced data), else kForever.
  //
  // Under -f 0 (background_sync), `idle` says the loop has nothing else to do: the next
  // sync then starts at once. While the loop is busy it waits, up to kMaxSyncDefer, so
  // that it also carries what the clients whose replies the last sync released send back
  // meanwhile: fewer, larger syncs, each costing the loop and the sync thread a wake-up.
  // Returns now while a sync waits so (the loop then polls without sleeping).
  Nanos Flush(bool idle = true);
  static constexpr Nanos kMaxSyncDefer = 1'000'000;
  // How far ahead of the first records a fresh current segment's zero-fill starts.
  static constexpr int64_t kFillLead = 1 << 20;
  // With background_sync: readable when a sync has finished; then call OnSyncDone. The
  // next sync starts at a later Flush (under -f 0, an idle one or 1 ms on), so it also
  // covers what the loop does meanwhile (the loop runs one iteration, with its Flush,
  // after every wake-up). -1 without background_sync.
  int sync_fd() const;
  // Zero-fills the sync thread has not finished (for tests).
  size_t fills_pending() { return syncer_ ? syncer_->fills_pending() : 0; }
  void OnSyncDone();
  int64_t written_mark() const { return written_mark_; }
  int64_t durable_mark() const { return durable_mark_; }
  // -f 0: a reply may go out only once the records before it are durable.
  bool replies_wait_for_sync() const { return options_.fsync_ms == 0 && !options_.fsync_never; }
  // A reply that depends on the records up to `mark` (Mark, MarkOf) may go out: they are
  // written, and under -f 0 synced. After a failure nothing more becomes durable and
  // replies go out as they are (the connections owed durable ones were closed).
  bool Covers(int64_t mark) const override {
    return failed_ || mark <= (replies_wait_for_sync() ? durable_mark_ : written_mark_);
  }
  // Flush and sync everything, waiting for a background sync first (shutdown). Afterwards
  // every written byte is durable.
  void Close();

  // engine::JobLog
  bool Admit(const engine::Job& j) override;
  void Put(const engine::Job& j) override;
  void Update(const engine::Job& j) override;
  bool CanUpdate(const engine::Job& j) override;
  void Delete(const engine::Job& j) override;
  void TubeTries(std::string_view tube, uint32_t tries) override;
  bool CanRecordTubeTries(std::string_view tube, uint32_t tries) override;
  uint32_t FileOf(const engine::Job& j) const override;
  int64_t Mark() const override { return placed_; }
  int64_t MarkOf(const engine::Job& j) const override;

  // engine::ColdReader (binlog_cold.cc): the disk tier's reads of kFull records.
  bool Demotable(const engine::Job& j) const override;
  bool Read(uint64_t id, std::string* buf, engine::RestoredJob* out) override;
  Rewrite RewriteWhole(const engine::Job& j) override;
  bool RewritePending(const engine::Job& j) const override {
    const JobMeta* m = jobs_.Find(j.id);
    return !failed_ && m && m->full_off() && !Demotable(j);
  }
  size_t RewritesUnwritten() const override {
    return written_mark_ >= rewrite_mark_ ? 0 : rewrites_unwritten_;
  }

  struct Stats {
    uint32_t oldest_index = 0;
    uint32_t current_index = 0;
    int64_t records_written = 0;
    int64_t records_migrated = 0;
    int64_t max_size = 0;
    size_t segments = 0;          // segment files on disk, including preallocated ones
    int64_t dropped_updates = 0;  // state or tube-tries changes not written: no space (logged)
    bool failed = false;          // a write or sync failed; puts are refused
    int64_t live_bytes = 0;       // bytes of the records that still matter
    int64_t placed_bytes = 0;     // bytes placed in the segments on disk (live or dead)
    int64_t compaction_read = 0;  // bytes compaction read of head segments to find their jobs
    int64_t compaction_read_errors = 0;  // reads of a head segment that failed or found damage
  };
  // Compaction reads at most this much of the head segment per Flush, kCompactChunk at a
  // time (or what a larger record needs); a record larger than that is read over several.
  static constexpr int64_t kCompactReadPerFlush = 1 << 20;
  static constexpr int64_t kCompactChunk = 64 << 10;
  // After a failed read of the head segment (an I/O error, a damaged record), compaction
  // leaves it alone this long (the segment, and its jobs, stay).
  static constexpr Nanos kCompactRetry = 10'000'000'000;
  Stats stats() const;
  // Background syncs completed, and how long the last took from its start.
  uint64_t syncs() const { return syncs_; }
  Nanos last_sync_duration() const { return last_sync_duration_; }
  // A write or sync has failed: nothing more is written and puts are refused.
  bool failed() const { return failed_; }

  // binlog_checkpoint.cc (docs/DISK-TIER.md): at a clean shutdown, after Close, with the
  // disk tier's index. Makes every live job in memory whole in its latest record (writing
  // its kFull record again if a state record came after it), syncs, and writes
  // DIR/checkpoint, so that the next start restores the jobs of `cold` and `ready` without
  // reading their records. false (logged) if it could not: the next start replays everything.
  bool WriteCheckpoint(const ColdIndex& cold, const ColdReadyIndex& ready);
  // Jobs Recover restored from a checkpoint without reading their records (0: none used),
  // and of them the ready ones (restore_cold_ready).
  size_t restored_cold() const { return restored_cold_; }
  size_t restored_cold_ready() const { return restored_cold_ready_; }
  // Records a start from the checkpoint read to check them: those of the jobs it lists as
  // in memory.
  size_t checkpoint_reads() const { return checkpoint_reads_; }
  // Recover used the checkpoint, and replayed this many records after its position.
  bool checkpoint_used() const { return checkpoint_used_; }
  size_t checkpoint_tail() const { return checkpoint_tail_; }
  // Records Recover replayed (every one, or a checkpoint's tail).
  size_t replayed_records() const { return replayed_records_; }
  // Jobs a replay restored straight to the disk tier's index (restore_cold_ready).
  size_t replayed_cold() const { return replayed_cold_; }

  // Number of jobs restored by Recover, and of damaged records it skipped.
  size_t restored() const { return restored_; }
  size_t skipped() const { return skipped_; }
  // Recover returned false because options.progress asked it to stop.
  bool stopped() const { return stopped_; }

 private:
  struct Segment;
  using JobMeta = BinlogJobMeta;
  // A tube's default tries as the log holds it (nonzero: 0 has no entry).
  struct TubeTriesMeta {
    uint32_t seq;    // segment of its latest kTubeTries record
    uint32_t tries;  // the value of that record
    uint32_t size;   // of that record
  };

  // binlog.cc: placement, writing, flush and sync.
  std::string PathOf(uint32_t seq) const;
  void Log(const char* fmt, ...) const __attribute__((format(printf, 2, 3)));
  void Fail(const char* what, const std::string& path, int err);

  // Room left for records, not counting the last kMaxSmallRecord bytes of each segment.
  int64_t UsableAfter(size_t record_size) const;
  // That room in one segment.
  static int64_t RoomIn(const Segment& s);
  // Makes UsableAfter(record_size) cover the reservations plus `keep`, preallocating
  // segments as needed; false if it cannot.
  bool MakeRoom(size_t record_size, int64_t keep);
  // MakeRoom for any record: one larger than a segment of -s first grows the current
  // segment by its size (GrowCurrent), so that it goes there.
  bool RoomFor(size_t record_size, int64_t keep);
  bool GrowCurrent(size_t record_size);
  int CreateSegmentFile(uint32_t seq);
  bool AddFutureSegment();
  template <typename Encode>
  bool Place(size_t size, Encode encode);  // defined in binlog_internal.h
  // Place, preallocating one more segment first if no segment has room for the record
  // (which the reservations should have prevented; see ReserveRestoredRoom).
  template <typename Encode>
  bool PlaceOrAddSegment(size_t size, Encode encode);  // defined in binlog_internal.h
  // A state change with no room to record it: counted and logged.
  void DropUpdate(const engine::Job& j);
  Segment* Current() const { return segs_[cur_].get(); }
  Segment* FindSegment(uint32_t seq) const;  // nullptr if gone (binlog_cold.cc)
  // A job or tube default whose latest record was in segment `seq` left it.
  void Unpin(uint32_t seq);
  JobRecord ToRecord(const engine::Job& j) const;  // everything but tube and body
  void AppendJobFull(const engine::Job& j, std::string* out) const;
  void AppendJobState(const engine::Job& j, std::string* out) const;
  void WriteFull(const engine::Job& j, uint32_t resv);
  // Accounts a kFull record of `size` bytes just placed at the end of s for job id.
  void NoteFull(uint64_t id, Segment* s, size_t size, uint32_t resv);
  void WriteTubeTries(std::string_view tube, uint32_t tries);
  std::optional<Nanos> HoldSync(bool idle);
  bool WritePending();
  Nanos SyncIfDue();
  std::vector<Syncer::Target> TakeSyncTargets();
  bool Sync();
  void SyncFailed(const Syncer::Result& r);
  bool TakeSyncResult(const Syncer::Result& r);
  void CloseFinished();

  // binlog_compaction.cc: moving live jobs forward and removing dead segments.
  void Compact();
  enum class Scan { kRecord, kWait, kEnd, kError, kSkip };
  // The record of `head` at head->scan, read from its file (*read: what this Flush may still
  // read): kRecord (*r, views into scan_buf_, and its *size), kWait (not yet written, or the
  // read budget is spent), kEnd (no more records), kError (*why). With skip_damaged, a
  // damaged record is passed as at start-up: kSkip, head->scan moved on by a byte while
  // no valid record starts there.
  Scan NextHeadRecord(Segment* head, int64_t* read, Record* r, size_t* size, std::string* why);
  // Makes scan_buf_ hold head's bytes up to `to` (or its written end), reading at most *read
  // bytes. false: a read failed (*why); else whether it got there is for the caller to see.
  bool ReadHead(Segment* head, int64_t to, int64_t* read, std::string* why);
  void HeadReadFailed(Segment* head, const std::string& why);
  // binlog_cold.cc: moves a job that is only on disk by copying its kFull record.
  bool MigrateCold(uint64_t id, size_t size);
  bool ReadFullBytes(const JobMeta& m, uint32_t off, std::string* buf);
  // Writes j's kFull record again in its current state, as compaction moves a job: from free
  // space only (its reservation stays as it is), the segment of its previous kFull record
  // unpinned (removable once the new one is durable). false: no room, nothing written.
  // The checkpoint's MakeJobsWhole and the disk tier's RewriteWhole.
  bool WriteWholeAgain(const engine::Job& j);
  void MigrateTubeTries(Segment* head, int budget);
  void CollectGarbage();

  // binlog_recovery.cc: reading the segments at start-up and opening the binlog for writing.
  struct Replay;
  bool DropHeaderless(std::vector<uint32_t>* seqs, std::string* error);
  bool ClassifySegments(const std::vector<uint32_t>& seqs, std::vector<uint32_t>* stalkd_seqs,
                        std::vector<uint32_t>* beanstalkd_seqs, std::string* error);
  bool RecoverStalkd(const std::vector<uint32_t>& seqs, std::string* error);
  bool MapSegments(const std::vector<uint32_t>& seqs, Replay* replay, std::string* error);
  bool ReplaySegment(size_t i, Replay* replay, std::string* error);
  // options_.progress, if any; false (and *error) when it asks recovery to stop.
  bool GoOn(std::string* error);
  bool PassDamaged(const Replay& replay, size_t i, const std::string& why, size_t* off, bool* torn,
                   std::string* error);
  std::unordered_map<uint32_t, Segment*> AddReplayedSegments(const Replay& replay);
  // binlog_restore.cc: the replayed jobs into the engine or the disk tier's index.
  bool RestoreReplayed(Replay& replay, std::string* error);
  void RestoreTubeTries(const Replay& replay, const std::unordered_map<uint32_t, Segment*>& by_seq);
  void DropEmptySegments(const std::vector<uint32_t>& seqs, const std::vector<bool>& has_data);
  Segment* ReuseSegments(Replay* replay);
  bool OpenForWriting(uint32_t seq, std::string* error);
  bool FinishOpening(std::string* error);
  bool AddFirstSegment(uint32_t seq);
  void ReserveRestoredRoom();
  void StartSyncer();

  // binlog_checkpoint.cc: the checkpoint of the disk tier's index.
  // Whether DIR/checkpoint covers a prefix of the mapped segments (*used); if so, replays
  // the records after its position and fills *replay with the jobs whose records must be
  // read (the tail's, and those it lists as in memory), each segment's end, the tube
  // defaults and the highest id, and keeps the file open for RestoreCheckpointedCold. A
  // checkpoint not used is removed (and a checkpoint.tmp always), before anything is
  // written. false: start-up must stop (a damaged record in the tail, or asked to stop).
  bool LoadCheckpoint(Replay* replay, bool* used, std::string* error);
  bool CheckpointTail(Replay* replay, const PrefixMatch& match, std::string* why,
                      std::string* error);
  bool CheckpointedHot(Replay* replay, std::string* why, std::string* error);
  // Restores the checkpoint's cold jobs with ids below `below` (the log's entries, the tubes'
  // references, the index), in id order, but those the tail names (in replay.jobs):
  // RestoreReplayed calls it before each job it restores, so that tubes are made in the
  // order of their lowest live id, as in a replay.
  bool RestoreCheckpointedCold(const Replay& replay, uint64_t below, Nanos now, int64_t wall,
                               std::string* error);
  // After the last of them: logs the restore (the checkpoint stays).
  void FinishCheckpointedCold();
  void RemoveCheckpoint(const char* why);
  // Writes the kFull record of every live job in memory whose latest record is not its
  // kFull record. false: no room, or a job the log cannot describe (logged).
  bool MakeJobsWhole(const ColdIndex& cold, const std::vector<uint64_t>& ids);
  bool SegmentTail(const Segment& s, uint32_t* crc);

  // binlog_adopt.cc: adopting beanstalkd's binlog.
  bool AdoptBeanstalkd(const std::vector<uint32_t>& bseqs, std::vector<uint32_t>* stalkd_seqs,
                       bool* adopted, std::string* error);
  bool SettleEarlierAdoption(const std::vector<uint32_t>& bseqs, std::vector<uint32_t>* stalkd_seqs,
                             bool* done, std::string* error);
  bool HasAdoptDone(const std::vector<uint32_t>& seqs, bool* done, std::string* error);
  bool ReadBeanstalkd(const std::vector<uint32_t>& bseqs, BeanstalkdReadResult* read,
                      std::string* error);
  bool RestoreAdopted(const BeanstalkdReadResult& read, std::string* error);
  bool WriteAdopted(const BeanstalkdReadResult& read, std::string* error);
  bool MarkAdopted(std::string* error);

  BinlogOptions options_;
  const Clock& clock_;
  engine::Engine* engine_ = nullptr;
  int lock_fd_ = -1;
  int dir_fd_ = -1;

  std::deque<std::unique_ptr<Segment>> segs_;  // oldest first: closed, current, future
  size_t cur_ = 0;
  std::string buf_;  // bytes recorded for the current segment, not yet written
  struct Sealed {
    Segment* seg;
    std::string bytes;
  };
  std::vector<Sealed> sealed_;  // bytes for segments left by rotation, not yet written

  IdMap<JobMeta> jobs_;  // grows without rehashing every job (a stall at millions)
  std::unordered_map<std::string, TubeTriesMeta> tube_tries_;
  int64_t reserved_ = 0;     // sum of JobMeta::resv
  int64_t future_room_ = 0;  // RoomIn of the segments after the current one
  int64_t live_bytes_ = 0;
  Nanos last_sync_duration_ = 0;  // of the last background sync, from Start to Collect
  uint64_t syncs_ = 0;            // sum of JobMeta::full_size and TubeTriesMeta::size
  bool dir_dirty_ = false;
  bool unsynced_ = false;  // bytes written since the last sync started
  int64_t placed_ = 0;     // bytes of records placed so far (buffered or written)
  int64_t written_mark_ = 0;
  int64_t durable_mark_ = 0;
  int64_t syncing_mark_ = 0;        // the written mark when the running sync started
  std::unique_ptr<Syncer> syncer_;  // with background_sync
  Nanos last_sync_ = 0;
  std::optional<Nanos> defer_since_;  // -f 0: when a sync was first held back for a busy loop
  bool failed_ = false;
  bool space_warned_ = false;

  int64_t records_written_ = 0;
  int64_t records_migrated_ = 0;
  // Compaction's read of the head segment: bytes of segment scan_seq_ from offset scan_at_.
  std::string scan_buf_;
  int64_t scan_at_ = 0;
  uint32_t scan_seq_ = 0;
  Nanos scan_retry_at_ = 0;  // after a failed read of the head: no compaction before this
  int64_t compaction_read_ = 0;
  int64_t compaction_read_errors_ = 0;
  int64_t dropped_updates_ = 0;
  size_t restored_ = 0;
  size_t restored_cold_ = 0;
  size_t restored_cold_ready_ = 0;
  size_t checkpoint_reads_ = 0;
  size_t checkpoint_tail_ = 0;
  bool checkpoint_used_ = false;
  size_t replayed_records_ = 0;
  size_t replayed_cold_ = 0;
  size_t skipped_ = 0;
  uint64_t max_id_ = 0;                           // the highest id of any record placed or replayed
  std::unique_ptr<CheckpointReader> checkpoint_;  // between LoadCheckpoint and its use
  bool stopped_ = false;
  // RewriteWhole's records not yet written: their count, and placed_ after the latest one.
  size_t rewrites_unwritten_ = 0;
  int64_t rewrite_mark_ = 0;
};

}  // namespace stalkd::storage
