// Reclaiming space: compaction moves the few live jobs and tube defaults of the oldest
// segment forward, and dead head segments are removed once what made them dead is durable.
// Also the tube defaults' records, which pin their segment as jobs' kFull records do.

#include <string.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "storage/binlog.h"
#include "storage/binlog_internal.h"
#include "storage/file.h"

namespace stalkd::storage {

namespace {
// Jobs (and tube defaults) compaction may move per Flush.
constexpr int kMigrateBudget = 1000;
}  // namespace

// A tube's default tries lives apart from its jobs: the latest value is kept by name, and
// its record pins its segment like a job's kFull record (compaction moves it on). A clear
// (0) pins nothing, as a delete does not: once the records before it are gone, it clears
// nothing. The record comes from free space; without any, the change is refused
// (CanRecordTubeTries), so the drop below is only a safety net.
void Binlog::TubeTries(std::string_view tube, uint32_t tries) {
  if (failed_) return;
  auto it = tube_tries_.find(std::string(tube));
  uint32_t logged = it == tube_tries_.end() ? 0 : it->second.tries;
  if (tries == logged) return;  // the log says so already
  if (!MakeRoom(TubeTriesRecordSize(tube.size()), 0)) {
    dropped_updates_++;
    Log("no space to record the default tries of tube %.*s; after a restart it is %u",
        static_cast<int>(tube.size()), tube.data(), logged);
    return;
  }
  WriteTubeTries(tube, tries);
}

bool Binlog::CanRecordTubeTries(std::string_view tube, uint32_t tries) {
  if (failed_) return true;  // nothing is written any more
  auto it = tube_tries_.find(std::string(tube));
  uint32_t logged = it == tube_tries_.end() ? 0 : it->second.tries;
  return tries == logged || MakeRoom(TubeTriesRecordSize(tube.size()), 0);
}

// Places the record (room made by the caller) and moves the tube's entry to it.
void Binlog::WriteTubeTries(std::string_view tube, uint32_t tries) {
  STALKD_CHECK(tube.size() <= kMaxTubeName);
  const size_t size = TubeTriesRecordSize(tube.size());
  bool ok = Place(size, [&](std::string* b) { AppendTubeTries(b, tube, tries); });
  STALKD_CHECK(ok);
  records_written_++;
  auto it = tube_tries_.find(std::string(tube));
  if (it != tube_tries_.end()) {
    Unpin(it->second.seq);
    live_bytes_ -= it->second.size;
    if (tries == 0) tube_tries_.erase(it);
  }
  if (tries == 0) return;
  Segment* s = Current();
  s->live++;
  live_bytes_ += static_cast<int64_t>(size);
  tube_tries_[std::string(tube)] = TubeTriesMeta{s->seq, tries, static_cast<uint32_t>(size)};
}

void Binlog::Compact() {
  if (failed_ || !engine_) return;
  const int64_t s = options_.segment_size;
  Segment* head = segs_.front().get();
  if (cur_ == 0 || head->live == 0) return;  // nothing to move, or the head is dead already
  // Keep the closed and current segments within twice the live data plus two segments (a
  // segment grown for a job larger than -s counts with its size, as the job does).
  int64_t used = 0;
  for (size_t i = 0; i <= cur_; i++) used += segs_[i]->size;
  if (used <= 2 * live_bytes_ + 2 * s) return;
  for (int budget = kMigrateBudget; budget > 0; budget--) {
    size_t size = 0;
    uint64_t id = 0;
    bool cold = false;
    engine::Job* j = NextToMigrate(head, &size, &id, &cold);
    if (!j && !cold) return MigrateTubeTries(head, budget);
    // Only free space: the reservations of live jobs stay untouched.
    if (!RoomFor(size, 0)) return;
    if (cold && !MigrateCold(id, size)) return;  // a read error, logged: try again later
    head->scan++;
    head->live--;
    if (j) WriteFull(*j, 0);
    if (head->live == 0) head->dead_at = placed_;
    records_migrated_++;
  }
}

// The next job whose latest kFull record is in `head`, at head->scan, and the size of that
// record; nullptr when there is none. Moves head->scan past the ids it finds stale.
engine::Job* Binlog::NextToMigrate(Segment* head, size_t* size, uint64_t* id, bool* cold) {
  for (; head->scan < head->ids.size(); head->scan++) {
    *id = head->ids[head->scan];
    const JobMeta* m = jobs_.Find(*id);
    if (!m || m->full_seq != head->seq) continue;
    *size = m->full_size;
    if (engine::Job* j = engine_->FindMutable(*id)) return j;
    // Live in the log, absent from the engine: a job the disk tier keeps only here.
    if (full_offs_.Find(*id)) {
      *cold = true;
      return nullptr;
    }
  }
  return nullptr;
}

// Writes again, with their current value, the tube defaults whose latest record is in
// `head` (what keeps it once its jobs have moved), at most `budget` of them.
void Binlog::MigrateTubeTries(Segment* head, int budget) {
  for (auto& [name, t] : tube_tries_) {
    if (head->live == 0 || budget == 0) return;
    if (t.seq != head->seq) continue;
    if (!MakeRoom(t.size, 0)) return;
    WriteTubeTries(name, t.tries);  // updates t in place, and head's live count
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
    if (s->read_fd >= 0) close(s->read_fd);
    std::string path = PathOf(s->seq);
    int err = file::Unlink(path.c_str(), s->size);
    if (err != 0) Log("cannot remove %s: %s", path.c_str(), strerror(err));
    if (options_.verbosity > 1) Log("removed %s", path.c_str());
    segs_.pop_front();
    cur_--;
    dir_dirty_ = true;
  }
}

}  // namespace stalkd::storage
