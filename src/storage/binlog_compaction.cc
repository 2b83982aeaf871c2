// Reclaiming space: compaction moves the few live jobs of the oldest segment forward, and
// dead head segments are removed once what made them dead is durable.

#include <string.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "storage/binlog.h"
#include "storage/binlog_internal.h"
#include "storage/file.h"

namespace stalkd::storage {

namespace {
// Jobs compaction may move per Flush.
constexpr int kMigrateBudget = 1000;
}  // namespace

void Binlog::Compact() {
  if (failed_ || !engine_) return;
  const int64_t s = options_.segment_size;
  Segment* head = segs_.front().get();
  if (cur_ == 0 || head->live == 0) return;  // nothing to move, or the head is dead already
  // Keep the closed and current segments within twice the live data plus two segments.
  if (static_cast<int64_t>(cur_ + 1) * s <= 2 * live_bytes_ + 2 * s) return;
  for (int budget = kMigrateBudget; budget > 0; budget--) {
    size_t size = 0;
    engine::Job* j = NextToMigrate(head, &size);
    if (!j) return;
    // Only free space: the reservations of live jobs stay untouched.
    while (UsableAfter(size) < reserved_) {
      if (!AddFutureSegment()) return;
    }
    head->scan++;
    head->live--;
    WriteFull(*j, 0);
    if (head->live == 0) head->dead_at = placed_;
    records_migrated_++;
  }
}

// The next job whose latest kFull record is in `head`, at head->scan, and the size of that
// record; nullptr when there is none. Moves head->scan past the ids it finds stale.
engine::Job* Binlog::NextToMigrate(Segment* head, size_t* size) {
  for (; head->scan < head->ids.size(); head->scan++) {
    uint64_t id = head->ids[head->scan];
    auto it = jobs_.find(id);
    if (it == jobs_.end() || it->second.full_seq != head->seq) continue;
    if (engine::Job* j = engine_->FindMutable(id)) {
      *size = it->second.full_size;
      return j;
    }
  }
  return nullptr;
}

void Binlog::CollectGarbage() {
  // Only the oldest segments go: a later one may hold the delete record of a job whose
  // kFull record is in an earlier one.
  // Nor one with records still to be written (they would go to a closed file).
  while (cur_ > 0 && segs_.front()->live == 0 && segs_.front()->dead_at <= durable_mark_ &&
         segs_.front()->written == segs_.front()->end) {
    Segment* s = segs_.front().get();
    if (s->fd >= 0) close(s->fd);
    std::string path = PathOf(s->seq);
    int err = file::Unlink(path.c_str(), options_.segment_size);
    if (err != 0) Log("cannot remove %s: %s", path.c_str(), strerror(err));
    if (options_.verbosity > 1) Log("removed %s", path.c_str());
    segs_.pop_front();
    cur_--;
    dir_dirty_ = true;
  }
}

}  // namespace stalkd::storage
