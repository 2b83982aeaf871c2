// Reclaiming space: compaction moves the few live jobs and tube defaults of the oldest
// segment forward, and dead head segments are removed once what made them dead is durable.
// Also the tube defaults' records, which pin their segment as jobs' kFull records do.

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <string>
#include <string_view>

#include "storage/binlog.h"
#include "storage/binlog_internal.h"
#include "storage/file.h"
#include "storage/record.h"

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

// Compaction finds the head segment's live jobs by reading its records in order (no list
// of them is kept in memory: with the disk tier, most jobs live only on disk). A kFull
// record whose job's latest kFull record is in the head moves that job: the one in memory
// is written whole again, one only on disk has its latest record copied. Once moved, a job's
// latest record is in the current segment, so a second kFull record of it further on in the
// head (the job was written whole again) is passed, and the head's live count goes down once.
// Each Flush reads at most kCompactReadPerFlush bytes and moves at most kMigrateBudget jobs.
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
  if (clock_.Now() < scan_retry_at_) return;  // a read of the head failed a short while ago
  int64_t read = kCompactReadPerFlush;
  std::string why;
  for (int budget = kMigrateBudget; budget > 0 && head->live > 0;) {
    Record r;
    size_t size = 0;
    switch (NextHeadRecord(head, &read, &r, &size, &why)) {
      case Scan::kWait:
        return;
      case Scan::kEnd:
        std::string().swap(scan_buf_);
        return MigrateTubeTries(head, budget);
      case Scan::kError:
        return HeadReadFailed(head, why);
      case Scan::kSkip:
        continue;
      case Scan::kRecord:
        break;
    }
    const JobMeta* m = r.type == RecordType::kFull ? jobs_.Find(r.job.id) : nullptr;
    if (m && m->full_seq == head->seq) {
      const uint64_t id = r.job.id;
      const uint32_t full_size = m->full_size;
      engine::Job* j = engine_->FindMutable(id);
      // Live in the log, absent from the engine: a job the disk tier keeps only here.
      const bool cold = !j && m->full_off();
      if (j || cold) {
        // Only free space: the reservations of live jobs stay untouched.
        if (!RoomFor(full_size, 0)) return;  // this record again at a later Flush
        // A job on disk is found by its record's place, kept in 4 bytes (NoteFull): copied
        // past 4 GiB in its segment (a large -s), it could be read no more. It waits for the
        // next segment, as the disk tier's rewrites do (RewriteWhole).
        const Segment* c = Current();
        const bool next = static_cast<int64_t>(full_size) > c->size - c->end;
        if (cold && (next ? int64_t{kSegmentHeaderSize} : c->end) > int64_t{UINT32_MAX}) return;
        if (cold && !MigrateCold(id, full_size)) {
          return HeadReadFailed(head, "cannot copy the record of job " + std::to_string(id));
        }
        head->live--;
        if (j) WriteFull(*j, 0);
        if (head->live == 0) head->dead_at = placed_;
        records_migrated_++;
        budget--;
      }
    }
    head->scan += static_cast<int64_t>(size);
  }
  if (head->live == 0) std::string().swap(scan_buf_);
}

namespace {
uint32_t RecordLength(const char* header) {  // the len field of a record header (record.h)
  const auto* p = reinterpret_cast<const unsigned char*>(header + 4);
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}
}  // namespace

Binlog::Scan Binlog::NextHeadRecord(Segment* head, int64_t* read, Record* r, size_t* size,
                                    std::string* why) {
  if (scan_seq_ != head->seq) {  // a new head: nothing of it read yet
    scan_seq_ = head->seq;
    scan_buf_.clear();
    scan_at_ = 0;
  }
  const auto buf_end = [this] { return scan_at_ + static_cast<int64_t>(scan_buf_.size()); };
  // Buffers head's bytes up to `to`: kRecord once they are there; kEnd if its data ends
  // before (all of it written).
  const auto fill = [&](int64_t to) {
    if (!ReadHead(head, to, read, why)) return Scan::kError;
    if (buf_end() >= to) return Scan::kRecord;
    if (buf_end() < head->written) return Scan::kWait;  // this Flush's reads are spent
    return head->written < head->end ? Scan::kWait : Scan::kEnd;
  };
  if (head->scan == 0) {  // its header first, for the format of its records
    const Scan got = fill(kSegmentHeaderSize);
    if (got == Scan::kEnd) *why = "segment header cut short";
    if (got != Scan::kRecord) return got == Scan::kEnd ? Scan::kError : got;
    if (!CheckSegmentHeader(scan_buf_.data(), kSegmentHeaderSize, why, &head->version)) {
      return Scan::kError;
    }
    head->scan = kSegmentHeaderSize;
  }
  const int64_t off = head->scan;
  if (off >= head->written) return head->written < head->end ? Scan::kWait : Scan::kEnd;
  if (head->resync && *read <= 0) return Scan::kWait;  // the search's work is bounded too
  Scan got = fill(off + static_cast<int64_t>(kRecordHeaderSize));
  if (got == Scan::kRecord) {
    const int64_t to = off + static_cast<int64_t>(kRecordHeaderSize) +
                       RecordLength(scan_buf_.data() + (off - scan_at_));
    if (to <= head->end) got = fill(to);         // else ParseRecord says it runs past the end
    if (got == Scan::kEnd) got = Scan::kRecord;  // so does it if the data ends first
  }
  if (got != Scan::kRecord && got != Scan::kEnd) return got;
  // The record, or the end of the data (fewer than a record header's bytes, all zeros).
  const char* p = scan_buf_.data() + (off - scan_at_);
  const Parse parsed =
      ParseRecord(p, static_cast<size_t>(buf_end() - off), r, size, why, head->version);
  if (parsed == Parse::kOk) head->resync = false;
  if (parsed == Parse::kOk || (parsed == Parse::kEnd && !head->resync)) {
    return parsed == Parse::kOk ? Scan::kRecord : Scan::kEnd;
  }
  if (!options_.skip_damaged) return Scan::kError;
  // --binlog-skip-damaged: on to the next valid record, as start-up does (PassDamaged). The
  // search costs this Flush's budget a byte per offset, and what it checksums: nothing when
  // the length runs past the bytes there (ParseRecord stops at that).
  if (!head->resync) {
    Log("compaction: %s: offset %" PRId64 ": damaged record (%s) skipped",
        PathOf(head->seq).c_str(), off, why->c_str());
    compaction_read_errors_++;
  }
  head->resync = true;
  head->scan++;
  const int64_t body = buf_end() - off - static_cast<int64_t>(kRecordHeaderSize);
  const int64_t len = body >= 0 ? int64_t{RecordLength(p)} : 0;
  *read -= 1 + (len <= body ? len : 0);
  return Scan::kSkip;
}

bool Binlog::ReadHead(Segment* head, int64_t to, int64_t* read, std::string* why) {
  const int64_t want = std::min(to, head->written);
  if (scan_buf_.empty() || head->scan < scan_at_) {  // nothing of use: start at the cursor
    scan_buf_.clear();
    scan_at_ = head->scan;
  }
  const int64_t have = scan_at_ + static_cast<int64_t>(scan_buf_.size());
  if (have >= want) return true;
  // The bytes before the cursor are done with.
  if (head->scan >= have) {
    scan_buf_.clear();
    scan_at_ = head->scan;
  } else if (head->scan > scan_at_) {
    scan_buf_.erase(0, static_cast<size_t>(head->scan - scan_at_));
    scan_at_ = head->scan;
  }
  if (head->read_fd < 0) {
    head->read_fd = open(PathOf(head->seq).c_str(), O_RDONLY | O_CLOEXEC);
    if (head->read_fd < 0) {
      *why = std::string("cannot open it: ") + strerror(errno);
      return false;
    }
  }
  int64_t at = scan_at_ + static_cast<int64_t>(scan_buf_.size());
  while (at < want) {
    if (*read <= 0) break;  // the rest at a later Flush
    const int64_t n = std::min({std::max(want - at, kCompactChunk), *read, head->written - at});
    const size_t old = scan_buf_.size();
    scan_buf_.resize(old + static_cast<size_t>(n));
    ssize_t got = pread(head->read_fd, scan_buf_.data() + old, static_cast<size_t>(n), at);
    scan_buf_.resize(old + static_cast<size_t>(std::max<ssize_t>(got, 0)));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      *why = got < 0 ? strerror(errno) : "end of file";
      return false;
    }
    at += got;
    *read -= got;
    compaction_read_ += got;
  }
  return true;
}

// A read of the head failed (logged): compaction leaves it for kCompactRetry, then reads
// again from the record it had got to. The segment stays meanwhile, with its jobs.
void Binlog::HeadReadFailed(Segment* head, const std::string& why) {
  compaction_read_errors_++;
  Log("compaction: cannot read %s at offset %" PRId64
      " (%s); it stays, and is read again in %" PRId64 " s",
      PathOf(head->seq).c_str(), head->scan, why.c_str(), kCompactRetry / kSecond);
  scan_retry_at_ = clock_.Now() + kCompactRetry;
  std::string().swap(scan_buf_);
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
