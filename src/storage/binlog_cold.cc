// The disk tier's reads of the binlog (docs/DISK-TIER.md): a job whose latest record is its
// kFull record can leave memory; it is read back from that record, and compaction moves it
// by copying the record's bytes. A job changed since its put gets its kFull record written
// again, in its current state, so that it can leave memory too.

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <string>

#include "storage/binlog.h"
#include "storage/binlog_internal.h"

namespace stalkd::storage {

using binlog_internal::FullSizeOf;
using binlog_internal::ToRestored;
using binlog_internal::WallNow;

Binlog::Segment* Binlog::FindSegment(uint32_t seq) const {
  auto seg = std::lower_bound(segs_.begin(), segs_.end(), seq,
                              [](const auto& s, uint32_t x) { return s->seq < x; });
  return seg != segs_.end() && (*seg)->seq == seq ? seg->get() : nullptr;
}

bool Binlog::Demotable(const engine::Job& j) const {
  const JobMeta* m = jobs_.Find(j.id);
  const uint32_t* off = m ? m->full_off() : nullptr;
  if (failed_ || !off) return false;
  const Segment* s = FindSegment(m->full_seq);
  return s && int64_t{*off} + m->full_size <= s->written;
}

bool Binlog::ReadFullBytes(const JobMeta& m, uint32_t full_off, std::string* buf) {
  Segment* s = FindSegment(m.full_seq);
  if (!s) return false;
  const int64_t off = full_off;
  buf->resize(m.full_size);
  if (off >= s->written) {  // placed, not yet written: still in a buffer (a move just now)
    const std::string* pending = s == Current() ? &buf_ : nullptr;
    for (const Sealed& x : sealed_) {
      if (x.seg == s) pending = &x.bytes;
    }
    const auto at = static_cast<size_t>(off - s->written);
    if (!pending || at + m.full_size > pending->size()) return false;
    pending->copy(buf->data(), m.full_size, at);
    return true;
  }
  if (s->read_fd < 0) {
    s->read_fd = open(PathOf(s->seq).c_str(), O_RDONLY | O_CLOEXEC);
    if (s->read_fd < 0) {
      Log("disk tier: cannot open %s: %s", PathOf(s->seq).c_str(), strerror(errno));
      return false;
    }
  }
  size_t got = 0;
  while (got < m.full_size) {
    ssize_t n =
        pread(s->read_fd, buf->data() + got, m.full_size - got, off + static_cast<int64_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Log("disk tier: cannot read %s at %" PRId64 ": %s", PathOf(s->seq).c_str(), off,
          n < 0 ? strerror(errno) : "end of file");
      return false;
    }
    got += static_cast<size_t>(n);
  }
  return true;
}

bool Binlog::Read(uint64_t id, std::string* buf, engine::RestoredJob* out) {
  const JobMeta* m = jobs_.Find(id);
  const uint32_t* off = m ? m->full_off() : nullptr;
  if (!off || !ReadFullBytes(*m, *off, buf)) return false;
  Record r;
  size_t size = 0;
  std::string why;
  if (ParseRecord(buf->data(), buf->size(), &r, &size, &why) != Parse::kOk ||
      r.type != RecordType::kFull || r.job.id != id || size != buf->size()) {
    Log("disk tier: the record of job %" PRIu64 " in %s at %u is not its job record (%s)", id,
        PathOf(m->full_seq).c_str(), *off, why.c_str());
    return false;
  }
  *out = ToRestored(r.job, clock_.Now(), WallNow());
  return true;
}

bool Binlog::WriteWholeAgain(const engine::Job& j) {
  if (!RoomFor(FullSizeOf(j), 0)) return false;
  const uint32_t old = jobs_.Find(j.id)->full_seq;
  WriteFull(j, 0);  // a job the log holds: its reservation is kept, its mark stays
  Unpin(old);
  return true;
}

engine::ColdReader::Rewrite Binlog::RewriteWhole(const engine::Job& j) {
  const JobMeta* m = jobs_.Find(j.id);
  if (failed_ || !options_.disk_tier || !m || m->full_off()) {
    return Rewrite::kNo;
  }
  // Its place must fit the 4-byte offsets, or it would be rewritten again and again.
  if (Current()->end + static_cast<int64_t>(FullSizeOf(j)) > int64_t{UINT32_MAX}) {
    return Rewrite::kNo;
  }
  if (!WriteWholeAgain(j)) return Rewrite::kNoRoom;
  if (written_mark_ >= rewrite_mark_) rewrites_unwritten_ = 0;  // the earlier ones are written
  rewrites_unwritten_++;
  rewrite_mark_ = placed_;
  return Rewrite::kDone;
}

bool Binlog::MigrateCold(uint64_t id, size_t size) {
  const JobMeta* m = jobs_.Find(id);
  const uint32_t* off = m ? m->full_off() : nullptr;
  std::string bytes;
  if (!off || !ReadFullBytes(*m, *off, &bytes) || bytes.size() != size) return false;
  bool ok = Place(size, [&](std::string* b) { b->append(bytes); });
  STALKD_CHECK(ok);  // the caller made room
  NoteFull(id, Current(), size, 0);
  return true;
}

}  // namespace stalkd::storage
