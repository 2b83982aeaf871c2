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

using engine::Job;

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
  int budget = kMigrateBudget;
  while (budget > 0 && head->scan < head->ids.size()) {
    uint64_t id = head->ids[head->scan];
    auto it = jobs_.find(id);
    if (it == jobs_.end() || it->second.full_seq != head->seq) {
      head->scan++;
      continue;
    }
    Job* j = engine_->FindMutable(id);
    if (!j) {
      head->scan++;
      continue;
    }
    // Only free space: the reservations of live jobs stay untouched.
    size_t size = it->second.full_size;
    while (UsableAfter(size) < reserved_) {
      if (!AddFutureSegment()) return;
    }
    head->scan++;
    head->live--;
    WriteFull(*j, 0);
    if (head->live == 0) head->dead_at = placed_;
    records_migrated_++;
    budget--;
  }
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
