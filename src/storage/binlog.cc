#include "storage/binlog.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "base/check.h"
#include "storage/beanstalkd_binlog.h"
#include "storage/file.h"
#include "storage/record.h"

namespace stalkd::storage {

using engine::Job;
using engine::JobState;

namespace {

// Room kept for every live job: one state change and its delete.
constexpr uint32_t kJobReserve = kStateRecordSize + kDeleteRecordSize;
// Jobs compaction may move per Flush.
constexpr int kMigrateBudget = 1000;

int64_t WallNow() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

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

// A whole file mapped read-only.
struct Mapped {
  uint32_t seq = 0;
  std::string path;
  int fd = -1;
  const char* data = nullptr;
  size_t size = 0;
  ~Mapped() {
    if (data) munmap(const_cast<char*>(data), size);
    if (fd >= 0) close(fd);
  }
  bool Open(std::string* error) {
    fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);  // beanstalkd makes them 0400
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
      *error = path + ": " + strerror(errno);
      return false;
    }
    size = static_cast<size_t>(st.st_size);
    if (size == 0) return true;
    void* p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      *error = path + ": mmap: " + strerror(errno);
      return false;
    }
    madvise(p, size, MADV_SEQUENTIAL);
    data = static_cast<const char*>(p);
    return true;
  }
};

}  // namespace

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

namespace {
// Syncer::Target::id of the binlog directory (segments use their sequence number).
constexpr uint32_t kDirTarget = UINT32_MAX;
}  // namespace

Binlog::Binlog(BinlogOptions options, const Clock& clock)
    : options_(std::move(options)), clock_(clock) {}

Binlog::~Binlog() {
  syncer_.reset();  // its thread may be syncing our fds
  for (auto& s : segs_) {
    if (s->fd >= 0) close(s->fd);
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

int64_t Binlog::UsableAfter(size_t record_size) const {
  const int64_t s = options_.segment_size;
  const int64_t per_segment = s - int64_t{kSegmentHeaderSize} - int64_t{kMaxSmallRecord};
  const int64_t x = static_cast<int64_t>(record_size);
  const int64_t future = static_cast<int64_t>(segs_.size() - 1 - cur_);
  const int64_t rem = s - Current()->end;
  if (x <= rem)
    return std::max<int64_t>(0, rem - x - int64_t{kMaxSmallRecord}) + future * per_segment;
  if (future == 0) return -1;
  return std::max<int64_t>(0, s - int64_t{kSegmentHeaderSize} - x - int64_t{kMaxSmallRecord}) +
         (future - 1) * per_segment;
}

bool Binlog::AddFutureSegment() {
  if (failed_) return false;
  uint32_t seq = segs_.back()->seq + 1;
  std::string path = PathOf(seq);
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (!space_warned_) Log("cannot create %s: %s", path.c_str(), strerror(errno));
    space_warned_ = true;
    return false;
  }
  int err = file::Preallocate(fd, options_.segment_size);
  std::string header;
  AppendSegmentHeader(&header);
  if (err == 0) err = file::WriteAt(fd, header.data(), header.size(), 0);
  if (err != 0) {
    if (!space_warned_) {
      Log("cannot preallocate %s (%" PRId64
          " bytes): %s; puts that need new space get "
          "OUT_OF_MEMORY until space is freed",
          path.c_str(), options_.segment_size, strerror(err));
    }
    space_warned_ = true;
    close(fd);
    unlink(path.c_str());
    return false;
  }
  if (space_warned_) Log("space available again (%s created)", path.c_str());
  space_warned_ = false;
  auto seg = std::make_unique<Segment>();
  seg->seq = seq;
  seg->fd = fd;
  seg->end = seg->written = static_cast<int64_t>(kSegmentHeaderSize);
  seg->dirty = true;
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
  return r;
}

void Binlog::AppendJobFull(const Job& j, std::string* out) const {
  JobRecord r = ToRecord(j);
  r.tube = j.tube->name();
  r.body = std::string_view(j.data(), j.body_size);
  AppendFull(out, r);
}

void Binlog::AppendJobState(const Job& j, std::string* out) const { AppendState(out, ToRecord(j)); }

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

void Binlog::WriteFull(const Job& j, uint32_t resv) {
  size_t size = FullRecordSize(j.tube->name().size(), j.body_size);
  bool ok = Place(size, [&](std::string* b) { AppendJobFull(j, b); });
  STALKD_CHECK(ok);  // Admit or the caller made room
  Segment* s = Current();
  s->live++;
  s->ids.push_back(j.id);
  auto [it, fresh] =
      jobs_.try_emplace(j.id, JobMeta{s->seq, static_cast<uint32_t>(size), resv, s->seq, placed_});
  if (fresh) {
    reserved_ += resv;
  } else {  // moved by compaction: the same state, so its mark stays
    it->second.full_seq = it->second.last_seq = s->seq;
    it->second.full_size = static_cast<uint32_t>(size);
    live_bytes_ -= static_cast<int64_t>(size);  // same size as before; added back below
  }
  live_bytes_ += static_cast<int64_t>(size);
  records_written_++;
}

bool Binlog::Admit(const Job& j) {
  if (failed_) return false;
  size_t size = FullRecordSize(j.tube->name().size(), j.body_size);
  if (static_cast<int64_t>(size) > options_.segment_size - int64_t{kSegmentHeaderSize}) {
    if (options_.verbosity > 0) {
      Log("job of %u bytes does not fit in a segment of %" PRId64 " bytes (-s)", j.body_size,
          options_.segment_size);
    }
    return false;
  }
  while (UsableAfter(size) < reserved_ + int64_t{kJobReserve}) {
    if (!AddFutureSegment()) return false;
  }
  return true;
}

void Binlog::Put(const Job& j) {
  if (failed_) return;
  WriteFull(j, kJobReserve);
}

void Binlog::Update(const Job& j) {
  auto it = jobs_.find(j.id);
  if (failed_ || it == jobs_.end()) return;
  JobMeta& m = it->second;
  if (m.resv >= kJobReserve) {
    m.resv -= kStateRecordSize;  // this record uses the job's reservation
    reserved_ -= kStateRecordSize;
  } else if (UsableAfter(kStateRecordSize) < reserved_ &&
             !(AddFutureSegment() && UsableAfter(kStateRecordSize) >= reserved_)) {
    dropped_updates_++;
    Log("no space to record the new state of job %" PRIu64
        "; after a restart it comes back in its previous state",
        j.id);
    return;
  }
  bool ok = Place(kStateRecordSize, [&](std::string* b) { AppendJobState(j, b); });
  STALKD_CHECK(ok);
  m.last_seq = Current()->seq;
  m.mark = placed_;
  records_written_++;
  // Top the reservation up again from free space, if there is any.
  if (m.resv < kJobReserve && UsableAfter(0) - reserved_ >= int64_t{kStateRecordSize}) {
    m.resv += kStateRecordSize;
    reserved_ += kStateRecordSize;
  }
}

int64_t Binlog::MarkOf(const Job& j) const {
  auto it = jobs_.find(j.id);
  return it == jobs_.end() ? placed_ : it->second.mark;
}

uint32_t Binlog::FileOf(const Job& j) const {
  auto it = jobs_.find(j.id);
  return it == jobs_.end() ? 0 : it->second.last_seq;
}

void Binlog::Delete(const Job& j) {
  auto it = jobs_.find(j.id);
  if (it == jobs_.end()) return;
  JobMeta m = it->second;
  jobs_.erase(it);
  if (!failed_) {
    bool ok = Place(kDeleteRecordSize, [&](std::string* b) { AppendDelete(b, j.id); });
    STALKD_CHECK(ok);  // the job's reservation guarantees the room
    records_written_++;
  }
  reserved_ -= m.resv;
  live_bytes_ -= m.full_size;
  auto seg = std::lower_bound(segs_.begin(), segs_.end(), m.full_seq,
                              [](const auto& s, uint32_t seq) { return s->seq < seq; });
  if (seg != segs_.end() && (*seg)->seq == m.full_seq && --(*seg)->live == 0) {
    (*seg)->dead_at = placed_;
  }
}

// ---------------------------------------------------------------------------- flush

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

Nanos Binlog::Flush(bool idle) {
  if (failed_) return kForever;
  Compact();
  // Keep a spare segment beyond the reserved room, so bursts of puts rarely wait for one.
  const int64_t spare =
      options_.segment_size - int64_t{kSegmentHeaderSize} - int64_t{kMaxSmallRecord};
  if (UsableAfter(0) < reserved_ + spare && !space_warned_) AddFutureSegment();
  // Under -f 0 no reply waits for a write alone, only for a sync: while one runs, the
  // records wait in memory and go out with one write just before the next sync, which
  // starts once the loop is idle or has held it back for kMaxSyncDefer.
  if (syncer_ && replies_wait_for_sync()) {
    if (syncer_->busy()) return kForever;
    bool pending = !buf_.empty() || !sealed_.empty() || unsynced_;
    if (pending && !idle) {
      Nanos now = clock_.Now();
      if (!defer_since_) defer_since_ = now;
      if (now - *defer_since_ < kMaxSyncDefer) return now;
    }
    defer_since_.reset();
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
  return s;
}

// ---------------------------------------------------------------------------- recovery

bool Binlog::Recover(engine::Engine* engine, std::string* error) {
  engine_ = engine;
  std::vector<uint32_t> stalkd_seqs, beanstalkd_seqs;
  DIR* d = opendir(options_.dir.c_str());
  if (!d) {
    *error = "cannot read " + options_.dir + ": " + strerror(errno);
    return false;
  }
  std::vector<uint32_t> seqs;
  while (dirent* e = readdir(d)) {
    const char* name = e->d_name;
    if (strncmp(name, "binlog.", 7) != 0) continue;
    char* end = nullptr;
    unsigned long n = strtoul(name + 7, &end, 10);
    if (end == name + 7 || *end != '\0' || n == 0 || n > UINT32_MAX) continue;
    seqs.push_back(static_cast<uint32_t>(n));
  }
  closedir(d);
  std::sort(seqs.begin(), seqs.end());
  for (uint32_t seq : seqs) {
    char head[8] = {};
    int fd = open(PathOf(seq).c_str(), O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, head, sizeof head) : -1;
    if (fd >= 0) close(fd);
    if (n < 0) {
      *error = PathOf(seq) + ": " + strerror(errno);
      return false;
    }
    if (n == 8 && memcmp(head, kSegmentMagic, 8) == 0) {
      stalkd_seqs.push_back(seq);
    } else {
      beanstalkd_seqs.push_back(seq);  // beanstalkd's, or empty, or damaged (checked later)
    }
  }
  if (!beanstalkd_seqs.empty()) {
    bool adopted = false;
    if (!AdoptBeanstalkd(beanstalkd_seqs, &stalkd_seqs, &adopted, error)) return false;
    if (adopted) return true;
  }
  return RecoverStalkd(stalkd_seqs, error);
}

namespace {

struct Replayed {
  JobRecord rec;  // views into the mapped segments
  uint32_t full_seq;
  uint32_t last_seq;
  uint32_t full_size;
};

}  // namespace

// A job record as the engine restores it; times go from wall clock to the engine's clock.
// (Reserved jobs come back ready.)
static engine::RestoredJob ToRestored(const JobRecord& x, Nanos now, int64_t wall) {
  engine::RestoredJob rj;
  rj.id = x.id;
  rj.tube = x.tube;
  rj.state = x.state == DiskState::kDelayed  ? JobState::kDelayed
             : x.state == DiskState::kBuried ? JobState::kBuried
                                             : JobState::kReady;
  rj.pri = x.pri;
  rj.delay_s = x.delay_s;
  rj.ttr_s = x.ttr_s;
  rj.created = now - (wall - x.created_wall);
  rj.deadline = now + (x.deadline_wall - wall);
  rj.counts = x.counts;
  rj.body = x.body;
  return rj;
}

bool Binlog::RecoverStalkd(const std::vector<uint32_t>& seqs, std::string* error) {
  std::vector<std::unique_ptr<Mapped>> maps;
  std::unordered_map<uint64_t, Replayed> jobs;
  jobs.reserve(1024);
  uint64_t max_id = 0;  // over every record, deletes included
  uint32_t max_seq = 0;
  for (const auto& s : segs_) max_seq = std::max(max_seq, s->seq);  // adopted segments
  // The newest segment with any record: damage in it with nothing valid after is a torn
  // tail, cut by a crash.
  std::vector<bool> has_data(seqs.size());
  for (size_t i = 0; i < seqs.size(); i++) {
    auto m = std::make_unique<Mapped>();
    m->seq = seqs[i];
    m->path = PathOf(seqs[i]);
    if (!m->Open(error)) return false;
    max_seq = std::max(max_seq, seqs[i]);
    std::string why;
    if (!CheckSegmentHeader(m->data, m->size, &why)) {
      *error = m->path + ": offset 0: " + why;
      return false;
    }
    has_data[i] = m->size > kSegmentHeaderSize && m->data[kSegmentHeaderSize + 8] != 0;
    maps.push_back(std::move(m));
  }
  size_t tail = seqs.size();
  for (size_t i = seqs.size(); i-- > 0;) {
    if (has_data[i]) {
      tail = i;
      break;
    }
  }

  for (size_t i = 0; i < maps.size(); i++) {
    Mapped& m = *maps[i];
    size_t off = kSegmentHeaderSize;
    while (off < m.size) {
      Record r;
      size_t size = 0;
      std::string why;
      Parse p = ParseRecord(m.data + off, m.size - off, &r, &size, &why);
      if (p == Parse::kEnd) break;
      if (p == Parse::kBad) {
        size_t next = FindNextRecord(m.data, m.size, off + 1);
        if (i == tail && next == m.size) {
          Log("%s: offset %zu: %s; torn tail (%zu bytes) truncated", m.path.c_str(), off,
              why.c_str(), m.size - off);
          if (ftruncate(m.fd, static_cast<off_t>(off)) != 0) {
            *error = m.path + ": cannot truncate the torn tail: " + strerror(errno);
            return false;
          }
          break;
        }
        if (!options_.skip_damaged) {
          *error = m.path + ": offset " + std::to_string(off) + ": damaged record (" + why +
                   "); start with --binlog-skip-damaged to skip it";
          return false;
        }
        Log("%s: offset %zu: damaged record (%s) skipped", m.path.c_str(), off, why.c_str());
        skipped_++;
        off = next;
        continue;
      }
      if (r.type != RecordType::kAdoptDone) max_id = std::max(max_id, r.job.id);
      switch (r.type) {
        case RecordType::kFull:
          jobs[r.job.id] = Replayed{r.job, m.seq, m.seq, static_cast<uint32_t>(size)};
          break;
        case RecordType::kState: {
          auto it = jobs.find(r.job.id);
          if (it == jobs.end()) break;  // its kFull record was in a removed segment: gone
          JobRecord& x = it->second.rec;
          std::string_view tube = x.tube, body = x.body;
          x = r.job;
          x.tube = tube;
          x.body = body;
          it->second.last_seq = m.seq;
          break;
        }
        case RecordType::kDelete:
          jobs.erase(r.job.id);
          break;
        case RecordType::kAdoptDone:
          break;
      }
      off += size;
    }
  }
  if (skipped_ > 0) Log("skipped %zu damaged records (--binlog-skip-damaged)", skipped_);

  // Restore in id order, so buried jobs keep their order.
  std::vector<const Replayed*> order;
  order.reserve(jobs.size());
  for (const auto& [id, r] : jobs) order.push_back(&r);
  std::sort(order.begin(), order.end(),
            [](const Replayed* a, const Replayed* b) { return a->rec.id < b->rec.id; });
  std::unordered_map<uint32_t, Segment*> by_seq;
  for (const auto& m : maps) {
    auto seg = std::make_unique<Segment>();
    seg->seq = m->seq;
    seg->end = seg->written = static_cast<int64_t>(m->size);
    by_seq[m->seq] = seg.get();
    segs_.push_back(std::move(seg));
  }
  std::sort(segs_.begin(), segs_.end(),
            [](const auto& a, const auto& b) { return a->seq < b->seq; });
  Nanos now = clock_.Now();
  int64_t wall = WallNow();
  jobs_.reserve(jobs_.size() + order.size());
  for (const Replayed* r : order) {
    const JobRecord& x = r->rec;
    engine::RestoredJob rj = ToRestored(x, now, wall);
    if (jobs_.count(x.id)) continue;  // adopted already (cannot happen: ids differ)
    if (!engine_->Restore(rj)) {
      *error = "cannot restore job " + std::to_string(x.id);
      return false;
    }
    Segment* seg = by_seq[r->full_seq];
    seg->live++;
    seg->ids.push_back(x.id);
    jobs_[x.id] = JobMeta{r->full_seq, r->full_size, kJobReserve, r->last_seq, 0};
    reserved_ += kJobReserve;
    live_bytes_ += r->full_size;
    restored_++;
  }
  maps.clear();  // unmaps
  engine_->ReserveIdsThrough(max_id);

  // Segments without any record (preallocated ones of the last run) are no longer needed.
  for (size_t i = 0; i < seqs.size(); i++) {
    if (has_data[i]) continue;
    auto it =
        std::find_if(segs_.begin(), segs_.end(), [&](const auto& x) { return x->seq == seqs[i]; });
    if (it == segs_.end() || (*it)->live > 0) continue;
    file::Unlink(PathOf(seqs[i]).c_str(), 0);
    segs_.erase(it);
    dir_dirty_ = true;
  }
  return OpenForWriting(max_seq + 1, error);
}

bool Binlog::OpenForWriting(uint32_t seq, std::string* error) {
  // A placeholder for the sequence number, so AddFutureSegment numbers from seq.
  bool placeholder = segs_.empty() || segs_.back()->seq + 1 != seq;
  if (placeholder) {
    auto p = std::make_unique<Segment>();
    p->seq = seq - 1;
    segs_.push_back(std::move(p));
  }
  cur_ = segs_.size() - 1;
  bool ok = AddFutureSegment();
  if (placeholder) {
    segs_.erase(segs_.end() - 2);
  }
  if (!ok) {
    *error = "cannot create " + PathOf(seq) + " (see above)";
    return false;
  }
  cur_ = segs_.size() - 1;
  // Room for every restored job's reservation, plus a spare segment.
  const int64_t spare =
      options_.segment_size - int64_t{kSegmentHeaderSize} - int64_t{kMaxSmallRecord};
  while (UsableAfter(0) < reserved_ + spare) {
    if (!AddFutureSegment()) break;
  }
  if (UsableAfter(0) < reserved_) {
    Log("not enough space to reserve room for the changes of the restored jobs; puts are "
        "refused until space is freed");
  }
  if (!Sync()) {
    *error = "cannot sync " + options_.dir;
    return false;
  }
  CollectGarbage();
  Sync();
  last_sync_ = clock_.Now();
  if (options_.background_sync && !options_.fsync_never) {
    syncer_ = std::make_unique<Syncer>();
    if (!syncer_->ok()) {
      Log("cannot start the sync thread (%s); syncing in the loop instead", strerror(errno));
      syncer_.reset();
    }
    // The current segment was created before the thread and its first records go to its
    // start at once: it is filled first, from kFillLead bytes on, ahead of them.
    Segment* s = Current();
    int64_t from = (s->end + kFillLead + 4095) / 4096 * 4096;
    if (syncer_ && from < options_.segment_size) {
      s->fill_from = from;
      syncer_->Fill(s->fd, s->seq, from, options_.segment_size);
    }
    for (size_t i = cur_ + 1; syncer_ && i < segs_.size(); i++) {
      syncer_->Fill(segs_[i]->fd, segs_[i]->seq, kSegmentHeaderSize, options_.segment_size);
    }
  }
  return true;
}

bool Binlog::AdoptBeanstalkd(const std::vector<uint32_t>& bseqs, std::vector<uint32_t>* stalkd_seqs,
                             bool* adopted, std::string* error) {
  *adopted = false;
  uint32_t max_b = bseqs.back();
  for (uint32_t seq : *stalkd_seqs) {
    if (seq < max_b) {
      *error = PathOf(seq) + " (stalkd's format) is older than " + PathOf(max_b) +
               " (beanstalkd's): remove the files that do not belong to this directory";
      return false;
    }
  }
  // A finished adoption wrote kAdoptDone; then beanstalkd's files are left-overs.
  bool done = false;
  for (uint32_t seq : *stalkd_seqs) {
    Mapped m;
    m.path = PathOf(seq);
    if (!m.Open(error)) return false;
    size_t off = kSegmentHeaderSize;
    while (!done && off < m.size) {
      Record r;
      size_t size = 0;
      std::string why;
      if (ParseRecord(m.data + off, m.size - off, &r, &size, &why) != Parse::kOk) break;
      done = r.type == RecordType::kAdoptDone;
      off += size;
    }
  }
  if (done) {
    for (uint32_t seq : bseqs) file::Unlink(PathOf(seq).c_str(), 0);
    Log("removed beanstalkd's binlog files left by a finished adoption");
    file::SyncDir(dir_fd_);
    return true;
  }
  for (uint32_t seq : *stalkd_seqs) {
    Log("removing %s: left by an adoption that did not finish", PathOf(seq).c_str());
    file::Unlink(PathOf(seq).c_str(), 0);
  }
  stalkd_seqs->clear();

  std::vector<std::unique_ptr<Mapped>> maps;
  std::vector<BeanstalkdFile> files;
  for (uint32_t seq : bseqs) {
    auto m = std::make_unique<Mapped>();
    m->path = PathOf(seq);
    if (!m->Open(error)) return false;
    files.push_back({m->path, std::string_view(m->data ? m->data : "", m->size)});
    maps.push_back(std::move(m));
  }
  BeanstalkdReadResult read;
  if (!ReadBeanstalkdBinlog(files, options_.skip_damaged, &read, error)) return false;
  maps.clear();
  for (const std::string& note : read.notes) Log("%s", note.c_str());
  skipped_ = read.skipped;

  Nanos now = clock_.Now();
  int64_t wall = WallNow();
  for (const auto& [id, bj] : read.jobs) {
    const JobRecord& x = bj.rec;
    engine::RestoredJob rj = ToRestored(x, now, wall);
    rj.id = id;
    rj.tube = bj.tube;
    rj.body = bj.body;
    if (!engine_->Restore(rj)) {
      *error = "cannot restore job " + std::to_string(id) + " from beanstalkd's binlog";
      return false;
    }
  }
  // Write every job into fresh stalkd segments, then mark the adoption finished.
  if (!OpenForWriting(max_b + 1, error)) return false;
  for (const auto& [id, bj] : read.jobs) {
    const Job* j = engine_->Find(id);
    size_t size = FullRecordSize(bj.tube.size(), bj.body.size());
    if (static_cast<int64_t>(size) > options_.segment_size - int64_t{kSegmentHeaderSize}) {
      *error = "job " + std::to_string(id) + " of beanstalkd's binlog does not fit in a " +
               "segment of " + std::to_string(options_.segment_size) + " bytes; raise -s";
      return false;
    }
    while (UsableAfter(size) < reserved_ + int64_t{kJobReserve}) {
      if (!AddFutureSegment()) {
        *error = "not enough disk space to adopt beanstalkd's binlog";
        return false;
      }
    }
    WriteFull(*j, kJobReserve);
    restored_++;
  }
  if (UsableAfter(kAdoptDoneRecordSize) < reserved_ && !AddFutureSegment()) {
    *error = "not enough disk space to adopt beanstalkd's binlog";
    return false;
  }
  STALKD_CHECK(Place(kAdoptDoneRecordSize, [](std::string* b) { AppendAdoptDone(b); }));
  bool never = options_.fsync_never;
  options_.fsync_never = false;  // the old files go only once the new ones are durable
  bool ok = WritePending() && Sync();
  options_.fsync_never = never;
  if (!ok) {
    *error = "cannot write the adopted jobs (see above)";
    return false;
  }
  for (uint32_t seq : bseqs) file::Unlink(PathOf(seq).c_str(), 0);
  file::SyncDir(dir_fd_);
  Log("adopted %zu jobs from beanstalkd's binlog (binlog.%u to binlog.%u, now removed)",
      read.jobs.size(), bseqs.front(), max_b);
  *adopted = true;
  return true;
}

}  // namespace stalkd::storage
