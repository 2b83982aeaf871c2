#pragma once

// What the files of storage::Binlog share (binlog.cc, binlog_compaction.cc,
// binlog_recovery.cc, binlog_adopt.cc); not for use outside them.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/check.h"
#include "base/clock.h"
#include "base/sparse_id_map.h"
#include "engine/engine.h"
#include "storage/binlog.h"
#include "storage/record.h"

namespace stalkd::storage {

namespace binlog_internal {

// Room kept for every live job: one state change and its delete. A job with extensions
// (engine::JobExtra) has larger state records.
inline uint32_t JobReserve(bool extra) {
  return static_cast<uint32_t>(StateRecordSize(extra) + kDeleteRecordSize);
}
// j's extension as its records carry it: one with something a restart keeps (tries, a TTL,
// a key or attributes), which a job has from its put on, or none. A JobExtra that the
// engine adds later only for a reservation's own TTR is not written (no reservation is),
// so such a job's records stay a plain job's.
inline const engine::JobExtra* LoggedExtra(const engine::Job& j) {
  const engine::JobExtra* x = j.extra();
  return x && x->has_options() ? x : nullptr;
}
// The size of j's kFull record.
inline size_t FullSizeOf(const engine::Job& j) {
  const engine::JobExtra* x = LoggedExtra(j);
  size_t tube = j.tube->name().size();
  return x ? FullRecordSize(tube, j.body_size, x->blob_size) : FullRecordSize(tube, j.body_size);
}

// CLOCK_REALTIME in nanoseconds: the records' times are wall-clock times.
int64_t WallNow();
// A wall-clock time t on the engine's clock, whose Now() is `now` at wall-clock `wall`
// (saturating: the times come from a file).
Nanos FromWall(int64_t t, Nanos now, int64_t wall);

// A job record as the engine restores it; times go from wall clock to the engine's clock.
// (Reserved jobs come back ready.)
engine::RestoredJob ToRestored(const JobRecord& x, Nanos now, int64_t wall);

// A whole file mapped read-only.
struct Mapped {
  uint32_t seq = 0;
  std::string path;
  int fd = -1;
  uint32_t version = kFormatVersion;  // of a stalkd segment, once its header is checked
  const char* data = nullptr;
  size_t size = 0;
  ~Mapped();
  bool Open(std::string* error);
  void DropPages() const;  // MADV_DONTNEED: the process no longer holds its pages
};

// A live job as replayed from the segments (or found through a checkpoint): where its
// records are, not what they hold (32 bytes a job, so that a replay of millions of jobs
// does not hold them all: their records are parsed again from the mapped segments when
// the job is restored, ReplayedJob).
struct Replayed {
  int64_t full_off = 0;   // where the kFull record starts in its segment
  int64_t state_off = 0;  // where the latest state record starts (in last_seq), if any
  uint32_t full_seq = 0;  // 0 (no segment has it): a tail's job whose kFull record is not in it
  uint32_t last_seq = 0;  // segment of the latest record
  uint32_t full_size = 0;
  bool full_latest = true;  // no state record after the kFull record
  // A checkpoint's tail (Replay::after_checkpoint): the job's delete is in it; its entry stays so
  // the checkpoint's entry for the job is not used.
  bool deleted = false;
};
static_assert(sizeof(Replayed) == 32);

// A tube's default tries as its latest kTubeTries record says (not 0: a clear erases it).
struct ReplayedTries {
  uint32_t tries;
  uint32_t seq;
  uint32_t size;
};

}  // namespace binlog_internal

// What RecoverStalkd has read of the segments so far (binlog_recovery.cc), or taken from a
// checkpoint (binlog_checkpoint.cc).
struct Binlog::Replay {
  std::vector<std::unique_ptr<binlog_internal::Mapped>> maps;  // the segments, oldest first
  std::vector<bool> has_data;                                  // whether each holds any record
  std::vector<size_t> ends;                                    // where each one's records end
  // The newest segment with any record: damage in it with nothing valid after is a torn
  // tail, cut by a crash.
  size_t tail = 0;
  // The live jobs: 32 bytes each however sparse their ids (an IdMap's page would cost
  // 256 entries for one id that outlived its neighbours).
  SparseIdMap<binlog_internal::Replayed> jobs;
  std::unordered_map<std::string, binlog_internal::ReplayedTries> tube_tries;
  uint64_t max_id = 0;  // over every record, deletes included
  // Replaying the records after a checkpoint's position (binlog_checkpoint.cc): a state
  // record or a delete of a job with no entry makes one (the job's kFull record is in the
  // checkpoint), and a delete leaves its entry, marked deleted; but only for a job the
  // checkpoint may list (an id up to its highest, listed_max): one put after it is
  // forgotten at its delete, as in a replay, so a start holds nothing for a run's churn.
  // from: where each segment's records to replay start.
  bool after_checkpoint = false;
  uint64_t listed_max = 0;
  std::vector<size_t> from;

  void Apply(const Record& r, uint32_t seq, size_t size, size_t off);
  void ForgetJobs() {  // a checkpoint not used after all: its jobs go
    std::destroy_at(&jobs);
    std::construct_at(&jobs);
  }
  // The mapped segment `seq`, or nullptr.
  const binlog_internal::Mapped* MapOf(uint32_t seq) const;
  // r's job as its records say (views into the maps): its kFull record, and the fields of
  // its latest state record if one came after it. false if they do not parse (*why).
  bool Job(uint64_t id, const binlog_internal::Replayed& r, JobRecord* out, std::string* why) const;
  // Gives the pages of the mapped segments Job() read since the last call back (they are
  // read again from the page cache if needed): a restore must not keep every segment
  // resident. Job() notes the segments it read (touched) and about how many pages.
  void DropTouched() const;
  mutable std::vector<bool> touched;  // by index into maps
  mutable size_t touched_pages = 0;
};

struct Binlog::Segment {
  uint32_t seq = 0;
  int fd = -1;          // open while written to or not yet synced
  int read_fd = -1;     // opened by the disk tier's first read of a record here
  int64_t size = 0;     // bytes preallocated: -s, or more for a job larger than -s
  int64_t end = 0;      // bytes placed (header and records), written or not
  int64_t written = 0;  // bytes written to the file
  // Live jobs whose latest kFull record is here, and tube defaults (kTubeTries, tries not 0)
  // whose latest record is here: the segment stays until they are deleted or moved on.
  int64_t live = 0;
  // Compaction reads the head segment's records in order to find its live jobs (no list of
  // them is kept): the file offset of the next record to look at (0: the header is not
  // read yet), and the segment's format version, from its header.
  int64_t scan = 0;
  uint32_t version = 0;
  bool resync = false;    // a damaged record was found at `scan`: look for the next valid one
  bool dirty = false;     // written since the last sync
  int64_t fill_from = 0;  // > 0: the sync thread may be zero-filling from here on
  int64_t dead_at = 0;    // placed_ when live last fell to 0: removable once durable
};

// Appends the record that `encode` writes to the current segment's buffer, first moving
// to the next segment if it would not fit. Returns false (nothing appended) if there is no
// next segment.
template <typename Encode>
bool Binlog::Place(size_t size, Encode encode) {
  Segment* s = Current();
  bool next = static_cast<int64_t>(size) > s->size - s->end;
  if (next && cur_ + 1 >= segs_.size()) return false;
  // The fill ahead of the records stops when they reach it, or when they move on (the file
  // is closed once its records are written and synced).
  if (s->fill_from > 0 && (next || s->end + static_cast<int64_t>(size) > s->fill_from)) {
    syncer_->StopFill(s->seq);
    s->fill_from = 0;
  }
  if (next) {
    sealed_.push_back({s, std::move(buf_)});
    buf_.clear();
    ++cur_;
    s = Current();
    future_room_ -= RoomIn(*s);              // no longer a future segment
    if (syncer_) syncer_->StopFill(s->seq);  // ours to write from now on
  }
  size_t before = buf_.size();
  encode(&buf_);
  STALKD_CHECK(buf_.size() - before == size);
  s->end += static_cast<int64_t>(size);
  placed_ += static_cast<int64_t>(size);
  return true;
}

template <typename Encode>
bool Binlog::PlaceOrAddSegment(size_t size, Encode encode) {
  const Segment* s = Current();
  if (static_cast<int64_t>(size) > s->size - s->end && cur_ + 1 >= segs_.size() &&
      !AddFutureSegment()) {
    return false;
  }
  return Place(size, encode);
}

}  // namespace stalkd::storage
