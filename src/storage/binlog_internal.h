#pragma once

// What the files of storage::Binlog share (binlog.cc, binlog_compaction.cc,
// binlog_recovery.cc, binlog_adopt.cc); not for use outside them.

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/check.h"
#include "base/clock.h"
#include "engine/engine.h"
#include "storage/binlog.h"
#include "storage/record.h"

namespace stalkd::storage {

namespace binlog_internal {

// Room kept for every live job: one state change and its delete.
inline constexpr uint32_t kJobReserve = kStateRecordSize + kDeleteRecordSize;

// CLOCK_REALTIME in nanoseconds: the records' times are wall-clock times.
int64_t WallNow();

// A job record as the engine restores it; times go from wall clock to the engine's clock.
// (Reserved jobs come back ready.)
engine::RestoredJob ToRestored(const JobRecord& x, Nanos now, int64_t wall);

// A whole file mapped read-only.
struct Mapped {
  uint32_t seq = 0;
  std::string path;
  int fd = -1;
  const char* data = nullptr;
  size_t size = 0;
  ~Mapped();
  bool Open(std::string* error);
};

}  // namespace binlog_internal

struct Binlog::Segment {
  uint32_t seq = 0;
  int fd = -1;                // open while written to or not yet synced
  int64_t end = 0;            // bytes placed (header and records), written or not
  int64_t written = 0;        // bytes written to the file
  int64_t live = 0;           // live jobs whose latest kFull record is here
  std::vector<uint64_t> ids;  // jobs whose kFull record was placed here (may be stale)
  size_t scan = 0;            // compaction's cursor into ids
  bool dirty = false;         // written since the last sync
  int64_t fill_from = 0;      // > 0: the sync thread may be zero-filling from here on
  int64_t dead_at = 0;        // placed_ when live last fell to 0: removable once durable
};

// Appends the record that `encode` writes to the current segment's buffer, first moving
// to the next segment if it would not fit. Returns false (nothing appended) if there is no
// next segment.
template <typename Encode>
bool Binlog::Place(size_t size, Encode encode) {
  Segment* s = Current();
  bool next = static_cast<int64_t>(size) > options_.segment_size - s->end;
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
    if (syncer_) syncer_->StopFill(s->seq);  // ours to write from now on
  }
  size_t before = buf_.size();
  encode(&buf_);
  STALKD_CHECK(buf_.size() - before == size);
  s->end += static_cast<int64_t>(size);
  placed_ += static_cast<int64_t>(size);
  return true;
}

}  // namespace stalkd::storage
