#include "storage/binlog.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "base/check.h"
#include "storage/binlog_internal.h"
#include "storage/cold_checkpoint.h"
#include "storage/file.h"
#include "storage/record.h"

namespace stalkd::storage {

using binlog_internal::FullSizeOf;
using binlog_internal::JobReserve;
using binlog_internal::LoggedExtra;
using binlog_internal::WallNow;
using engine::Job;
using engine::JobExtra;
using engine::JobState;

int64_t binlog_internal::WallNow() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

namespace {

DiskState ToDisk(JobState s) {
  switch (s) {
    case JobState::kDelayed:
      return DiskState::kDelayed;
    case JobState::kReserved:
      return DiskState::kReserved;
    case JobState::kBuried:
      return DiskState::kBuried;
    default:
      return DiskState::kReady;
  }
}

ExtraRecord ToExtraRecord(const JobExtra& x, Nanos now, int64_t wall) {
  ExtraRecord r;
  r.present = true;
  r.limited = x.limited;
  r.tries_left = x.limited ? x.tries_left : 0;
  r.has_ttl = x.has_ttl();
  r.expires_wall = r.has_ttl ? wall + (x.expires_at - now) : 0;
  r.bury_reason = x.bury_reason;
  r.key_len = x.key_len;
  r.attr_count = x.attr_count;
  r.blob = x.blob_view();
  return r;
}

// Syncer::Target::id of the binlog directory (segments use their sequence number).
constexpr uint32_t kDirTarget = UINT32_MAX;

}  // namespace

Binlog::Binlog(BinlogOptions options, const Clock& clock)
    : options_(std::move(options)), clock_(clock) {}

Binlog::~Binlog() {
  syncer_.reset();  // its thread may be syncing our fds
  for (auto& s : segs_) {
    if (s->fd >= 0) close(s->fd);
    if (s->read_fd >= 0) close(s->read_fd);
  }
  if (dir_fd_ >= 0) close(dir_fd_);
  if (lock_fd_ >= 0) close(lock_fd_);
}

std::string Binlog::PathOf(uint32_t seq) const {
  return options_.dir + "/binlog." + std::to_string(seq);
}

void Binlog::Log(const char* fmt, ...) const {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "stalkd: binlog: ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

void Binlog::Fail(const char* what, const std::string& path, int err) {
  Log("%s %s: %s; from now on puts are refused (OUT_OF_MEMORY) and nothing more is written; "
      "restart the server to recover",
      what, path.c_str(), strerror(err));
  failed_ = true;
  buf_.clear();
  sealed_.clear();
}

bool Binlog::Lock(std::string* error) {
  if (mkdir(options_.dir.c_str(), 0700) != 0 && errno != EEXIST) {
    *error = "cannot create " + options_.dir + ": " + strerror(errno);
    return false;
  }
  dir_fd_ = open(options_.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd_ < 0) {
    *error = "cannot open " + options_.dir + ": " + strerror(errno);
    return false;
  }
  std::string path = options_.dir + "/lock";
  lock_fd_ = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd_ < 0) {
    *error = "cannot open " + path + ": " + strerror(errno);
    return false;
  }
  if (flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    *error = errno == EWOULDBLOCK ? "another server is using the binlog directory " + options_.dir +
                                        " (" + path + " is locked)"
                                  : "cannot lock " + path + ": " + strerror(errno);
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------- space

int64_t Binlog::RoomIn(const Segment& s) {
  return std::max<int64_t>(0, s.size - s.end - int64_t{kMaxSmallRecord});
}

int64_t Binlog::UsableAfter(size_t record_size) const {
  const int64_t x = static_cast<int64_t>(record_size);
  const Segment* s = Current();
  const int64_t rem = s->size - s->end;
  if (x <= rem) return std::max<int64_t>(0, rem - x - int64_t{kMaxSmallRecord}) + future_room_;
  if (cur_ + 1 >= segs_.size()) return -1;
  // The record goes to the next segment, which is empty: its header is all it holds.
  const int64_t next = RoomIn(*segs_[cur_ + 1]);
  return std::max<int64_t>(0, next - x) + future_room_ - next;
}

bool Binlog::MakeRoom(size_t record_size, int64_t keep) {
  while (UsableAfter(record_size) < reserved_ + keep) {
    if (!AddFutureSegment()) return false;
  }
  return true;
}

bool Binlog::RoomFor(size_t record_size, int64_t keep) {
  const int64_t x = static_cast<int64_t>(record_size);
  const Segment* s = Current();
  if (x > options_.segment_size - int64_t{kSegmentHeaderSize} && x > s->size - s->end &&
      !GrowCurrent(record_size)) {
    return false;
  }
  return MakeRoom(record_size, keep);
}

// The current segment grows by the record's size (rounded up to 4096): the record goes
// there, and the room after it, which the reservations count on, stays as it was.
bool Binlog::GrowCurrent(size_t record_size) {
  Segment* s = Current();
  const int64_t grow = (static_cast<int64_t>(record_size) + 4095) / 4096 * 4096;
  int err = file::Preallocate(s->fd, s->size + grow, s->size);
  if (err != 0) {
    if (!space_warned_) {
      Log("cannot grow %s by %" PRId64
          " bytes for a job larger than -s: %s; such puts get "
          "OUT_OF_MEMORY until space is freed",
          PathOf(s->seq).c_str(), grow, strerror(err));
    }
    space_warned_ = true;
    return false;
  }
  s->size += grow;
  if (space_warned_) Log("space available again (%s grown)", PathOf(s->seq).c_str());
  space_warned_ = false;
  if (options_.verbosity > 0) {
    Log("%s grown to %" PRId64 " bytes for a record of %zu bytes", PathOf(s->seq).c_str(), s->size,
        record_size);
  }
  return true;
}

// Creates binlog.`seq`, preallocated, with its header; returns its fd, or -1 (logged, but
// only once until a segment can be created again). The file becomes visible under its name
// only once whole: it is made as binlog.`seq`.tmp (header, then preallocation) and renamed,
// so a process killed at any instant leaves either no segment or a whole one (a leftover
// .tmp is removed by the next Recover). The rename reaches the disk with the directory's
// fsync at the next sync, which also syncs the header (the segment is dirty); after a power
// loss before it, the file may be there without its header, which recovery drops: no record
// can be durable in it, as the sync that makes one durable writes the header too.
int Binlog::CreateSegmentFile(uint32_t seq) {
  const std::string name = "binlog." + std::to_string(seq);
  const std::string tmp = name + ".tmp";
  const std::string path = PathOf(seq);
  int fd = openat(dir_fd_, tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (!space_warned_) Log("cannot create %s.tmp: %s", path.c_str(), strerror(errno));
    space_warned_ = true;
    return -1;
  }
  std::string header;
  AppendSegmentHeader(&header);
  const char* what = "write the header of";
  int err = file::WriteAt(fd, header.data(), header.size(), 0);
  if (err == 0) {
    what = "preallocate";
    err = file::Preallocate(fd, options_.segment_size);
  }
  if (err == 0) {
    what = "rename into place";
    err = file::RenameNew(dir_fd_, tmp.c_str(), name.c_str());
  }
  if (err != 0) {
    if (!space_warned_) {
      Log("cannot %s %s (%" PRId64
          " bytes): %s; puts that need new space get "
          "OUT_OF_MEMORY until space is freed",
          what, path.c_str(), options_.segment_size, strerror(err));
    }
    space_warned_ = true;
    close(fd);
    unlinkat(dir_fd_, tmp.c_str(), 0);
    return -1;
  }
  if (space_warned_) Log("space available again (%s created)", path.c_str());
  space_warned_ = false;
  return fd;
}

bool Binlog::AddFutureSegment() {
  if (failed_) return false;
  uint32_t seq = segs_.back()->seq + 1;
  int fd = CreateSegmentFile(seq);
  if (fd < 0) return false;
  auto seg = std::make_unique<Segment>();
  seg->seq = seq;
  seg->fd = fd;
  seg->size = options_.segment_size;
  seg->end = seg->written = static_cast<int64_t>(kSegmentHeaderSize);
  seg->dirty = true;
  future_room_ += RoomIn(*seg);
  segs_.push_back(std::move(seg));
  dir_dirty_ = true;
  if (syncer_) syncer_->Fill(fd, seq, kSegmentHeaderSize, options_.segment_size);
  return true;
}

// ---------------------------------------------------------------------------- records

JobRecord Binlog::ToRecord(const Job& j) const {
  JobRecord r;
  Nanos now = clock_.Now();
  int64_t wall = WallNow();
  r.id = j.id;
  r.state = ToDisk(j.state());
  r.pri = j.pri;
  r.delay_s = j.delay_s();
  r.ttr_s = j.ttr_s;
  r.created_wall = wall - (now - j.created());
  r.deadline_wall = j.state() == JobState::kDelayed ? wall + (j.deadline() - now) : 0;
  r.counts = j.counts();
  if (const JobExtra* x = LoggedExtra(j)) r.extra = ToExtraRecord(*x, now, wall);
  return r;
}

void Binlog::AppendJobFull(const Job& j, std::string* out) const {
  JobRecord r = ToRecord(j);
  r.tube = j.tube->name();
  r.body = std::string_view(j.data(), j.body_size);
  AppendFull(out, r);
}

void Binlog::AppendJobState(const Job& j, std::string* out) const { AppendState(out, ToRecord(j)); }

void Binlog::WriteFull(const Job& j, uint32_t resv) {
  size_t size = FullSizeOf(j);
  bool ok = Place(size, [&](std::string* b) { AppendJobFull(j, b); });
  STALKD_CHECK(ok);  // Admit or the caller made room
  Segment* s = Current();
  NoteFull(j.id, s, size, resv);
}

void Binlog::NoteFull(uint64_t id, Segment* s, size_t size, uint32_t resv) {
  max_id_ = std::max(max_id_, id);
  s->live++;
  auto [m, fresh] = jobs_.Emplace(id, JobMeta{s->seq, static_cast<uint32_t>(size), resv, s->seq});
  if (fresh) {
    m->mark_lo = static_cast<uint32_t>(placed_);
    reserved_ += resv;
  } else {  // moved by compaction: the same state, so its mark stays
    m->full_seq = s->seq;
    m->set_last_seq(s->seq);
    live_bytes_ -= m->full_size;  // the new size is added below
    m->full_size = static_cast<uint32_t>(size);
  }
  const int64_t off = s->end - static_cast<int64_t>(size);
  if (options_.disk_tier && off <= int64_t{UINT32_MAX}) {  // else the tier leaves the job alone
    m->set_full_off(static_cast<uint32_t>(off));
  }
  live_bytes_ += static_cast<int64_t>(size);
  records_written_++;
}

bool Binlog::Admit(const Job& j) {
  if (failed_) return false;
  return RoomFor(FullSizeOf(j), JobReserve(LoggedExtra(j) != nullptr));
}

void Binlog::Put(const Job& j) {
  if (failed_) return;
  WriteFull(j, JobReserve(LoggedExtra(j) != nullptr));
}

bool Binlog::CanUpdate(const Job& j) {
  const JobMeta* m = jobs_.Find(j.id);
  // After a failed write nothing is written any more (docs/BINLOG.md); a job the log does
  // not hold (adopted while being written) has nothing to keep.
  if (failed_ || !m) return true;
  const size_t size = StateRecordSize(LoggedExtra(j) != nullptr);
  return m->resv >= size + kDeleteRecordSize || MakeRoom(size, 0);
}

void Binlog::Update(const Job& j) {
  JobMeta* found = jobs_.Find(j.id);
  if (!found) return;
  // The kFull record no longer holds the job as it is (even if this change is dropped).
  found->clear_full_off();
  if (failed_) return;
  JobMeta& m = *found;
  const bool extra = LoggedExtra(j) != nullptr;
  const uint32_t size = static_cast<uint32_t>(StateRecordSize(extra));
  const uint32_t full = JobReserve(extra);
  const bool reserved = m.resv >= size + kDeleteRecordSize;  // this record uses it
  if ((!reserved && !MakeRoom(size, 0)) ||
      !PlaceOrAddSegment(size, [&](std::string* b) { AppendJobState(j, b); })) {
    DropUpdate(j);  // Place fails only when the reservations outgrew the room (BINLOG.md)
    return;
  }
  if (reserved) {
    m.resv -= size;
    reserved_ -= size;
  }
  m.set_last_seq(Current()->seq);
  m.mark_lo = static_cast<uint32_t>(placed_);
  records_written_++;
  // Top the reservation up again from free space, if there is any.
  if (m.resv < full && UsableAfter(0) - reserved_ >= int64_t{full - m.resv}) {
    reserved_ += full - m.resv;
    m.resv = full;
  }
}

void Binlog::DropUpdate(const Job& j) {
  dropped_updates_++;
  Log("no space to record the new state of job %" PRIu64
      "; after a restart it comes back in its previous state",
      j.id);
}

int64_t Binlog::MarkOf(const Job& j) const {
  const JobMeta* m = jobs_.Find(j.id);
  return m ? MarkFromLow(placed_, m->mark_lo) : placed_;
}

uint32_t Binlog::FileOf(const Job& j) const {
  const JobMeta* m = jobs_.Find(j.id);
  return m ? m->last_seq() : 0;
}

void Binlog::Delete(const Job& j) {
  const JobMeta* found = jobs_.Find(j.id);
  if (!found) return;
  JobMeta m = *found;
  jobs_.Erase(j.id);
  reserved_ -= m.resv;  // the delete record below uses what is left of it
  if (!failed_) {
    if (PlaceOrAddSegment(kDeleteRecordSize, [&](std::string* b) { AppendDelete(b, j.id); })) {
      records_written_++;
    } else {  // only when the reservations outgrew the room (docs/BINLOG.md)
      dropped_updates_++;
      Log("no space to record the delete of job %" PRIu64 "; after a restart it comes back", j.id);
    }
  }
  live_bytes_ -= m.full_size;
  Unpin(m.full_seq);
}

void Binlog::Unpin(uint32_t seq) {
  Segment* seg = FindSegment(seq);
  if (seg && --seg->live == 0) seg->dead_at = placed_;
}

// ---------------------------------------------------------------------------- flush

bool Binlog::WritePending() {
  auto write = [this](Segment* s, const std::string& bytes) {
    if (bytes.empty()) return true;
    int err = file::WriteAt(s->fd, bytes.data(), bytes.size(), s->written);
    if (err != 0) {
      Fail("write to", PathOf(s->seq), err);
      return false;
    }
    s->written += static_cast<int64_t>(bytes.size());
    s->dirty = true;
    return true;
  };
  for (Sealed& x : sealed_) {
    if (!write(x.seg, x.bytes)) return false;
  }
  sealed_.clear();
  if (!write(Current(), buf_)) return false;
  buf_.clear();
  written_mark_ = placed_;
  return true;
}

// The dirty segments and, if a file was created or removed, the directory; all marked clean.
std::vector<Syncer::Target> Binlog::TakeSyncTargets() {
  std::vector<Syncer::Target> targets;
  for (auto& s : segs_) {
    if (s->fd >= 0 && s->dirty) targets.push_back({s->fd, false, s->seq});
    s->dirty = false;
  }
  if (dir_dirty_) targets.push_back({dir_fd_, true, kDirTarget});
  dir_dirty_ = false;
  return targets;
}

void Binlog::SyncFailed(const Syncer::Result& r) {
  Fail("fsync of", r.failed_id == kDirTarget ? options_.dir : PathOf(r.failed_id), r.err);
}

// A finished segment is closed once all of it is written and synced: nothing more is
// written to it.
void Binlog::CloseFinished() {
  for (size_t i = 0; i < cur_; i++) {
    Segment* s = segs_[i].get();
    if (s->fd >= 0 && !s->dirty && s->written == s->end) {
      close(s->fd);
      s->fd = -1;
    }
  }
}

// Syncs on this thread (none may be running in the background).
bool Binlog::Sync() {
  std::vector<Syncer::Target> targets = TakeSyncTargets();
  if (!options_.fsync_never) {
    Syncer::Result r;
    r.err = Syncer::SyncAll(targets, &r.failed_id);
    if (r.err != 0) {
      SyncFailed(r);
      return false;
    }
  }
  durable_mark_ = written_mark_;  // under -F, as durable as it gets
  CloseFinished();
  return true;
}

Nanos Binlog::Flush(bool idle) {
  if (failed_) return kForever;
  Compact();
  // Keep a spare segment beyond the reserved room, so bursts of puts rarely wait for one.
  const int64_t spare =
      options_.segment_size - int64_t{kSegmentHeaderSize} - int64_t{kMaxSmallRecord};
  if (UsableAfter(0) < reserved_ + spare && !space_warned_) AddFutureSegment();
  if (syncer_ && replies_wait_for_sync()) {
    if (std::optional<Nanos> wake = HoldSync(idle)) return *wake;
  }
  bool wrote = !buf_.empty() || !sealed_.empty();
  if (!WritePending()) return kForever;
  if (wrote) unsynced_ = true;
  if (options_.fsync_never) {
    Sync();  // closes finished segments; syncs nothing
    unsynced_ = false;
    CollectGarbage();
    return kForever;
  }
  return SyncIfDue();
}

// Under -f 0 no reply waits for a write alone, only for a sync: while one runs, the
// records wait in memory and go out with one write just before the next sync, which
// starts once the loop is idle or has held it back for kMaxSyncDefer. Returns what Flush
// returns while they wait, or nullopt when they go out now.
std::optional<Nanos> Binlog::HoldSync(bool idle) {
  if (syncer_->busy()) return kForever;
  bool pending = !buf_.empty() || !sealed_.empty() || unsynced_;
  if (pending && !idle) {
    Nanos now = clock_.Now();
    if (!defer_since_) defer_since_ = now;
    if (now - *defer_since_ < kMaxSyncDefer) return now;
  }
  defer_since_.reset();
  return std::nullopt;
}

// Starts (background_sync) or does a sync if there is unsynced data and -f says it is
// time. Returns when one is next due.
Nanos Binlog::SyncIfDue() {
  if (!unsynced_) return kForever;
  if (syncer_ && syncer_->busy()) return kForever;  // the Flush after OnSyncDone starts it
  Nanos now = clock_.Now();
  Nanos period = options_.fsync_ms * 1'000'000;
  if (options_.fsync_ms > 0 && now - last_sync_ < period) return last_sync_ + period;
  last_sync_ = now;
  unsynced_ = false;
  if (syncer_) {
    syncing_mark_ = written_mark_;
    syncer_->Start(TakeSyncTargets());
    return kForever;
  }
  if (!Sync()) return kForever;
  CollectGarbage();  // every record that made these segments dead is durable now
  return kForever;
}

int Binlog::sync_fd() const { return syncer_ ? syncer_->notify_fd() : -1; }

// The outcome of a background sync: what it covered is durable, or the store has failed.
bool Binlog::TakeSyncResult(const Syncer::Result& r) {
  if (r.err != 0) {
    SyncFailed(r);
    return false;
  }
  durable_mark_ = syncing_mark_;
  return true;
}

void Binlog::OnSyncDone() {
  Syncer::Result r;
  if (!syncer_ || !syncer_->Collect(&r) || !TakeSyncResult(r)) return;
  last_sync_duration_ = clock_.Now() - last_sync_;
  syncs_++;
  CloseFinished();
  CollectGarbage();
}

void Binlog::Close() {
  if (segs_.empty()) return;
  Syncer::Result r;
  if (syncer_ && syncer_->Wait(&r)) TakeSyncResult(r);
  if (failed_ || !WritePending()) return;
  if (!options_.fsync_never) Sync();
}

Binlog::Stats Binlog::stats() const {
  Stats s;
  if (!segs_.empty()) {
    s.oldest_index = segs_.front()->seq;
    s.current_index = Current()->seq;
  }
  s.records_written = records_written_;
  s.records_migrated = records_migrated_;
  s.max_size = options_.segment_size;
  s.segments = segs_.size();
  s.dropped_updates = dropped_updates_;
  s.failed = failed_;
  s.live_bytes = live_bytes_;
  s.compaction_read = compaction_read_;
  s.compaction_read_errors = compaction_read_errors_;
  for (const auto& seg : segs_) s.placed_bytes += seg->end;
  return s;
}

}  // namespace stalkd::storage
