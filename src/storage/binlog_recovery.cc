// Start-up: reading the segments, restoring their jobs into the engine (a torn tail is
// cleared, a damaged record stops start-up or is skipped), then writing on where the last
// run left off (or in a fresh segment).

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "storage/binlog.h"
#include "storage/binlog_internal.h"
#include "storage/file.h"
#include "storage/record.h"

namespace stalkd::storage {

using binlog_internal::FromWall;
using binlog_internal::Mapped;
using binlog_internal::Replayed;
using binlog_internal::ToRestored;
using binlog_internal::WallNow;
using engine::JobState;

Nanos binlog_internal::FromWall(int64_t t, Nanos now, int64_t wall) {
  Nanos d = 0, out = 0;
  if (__builtin_sub_overflow(t, wall, &d)) d = t < wall ? INT64_MIN : INT64_MAX;
  if (__builtin_add_overflow(now, d, &out)) out = d < 0 ? INT64_MIN : INT64_MAX;
  return out;
}

binlog_internal::Mapped::~Mapped() {
  if (data) munmap(const_cast<char*>(data), size);
  if (fd >= 0) close(fd);
}

void binlog_internal::Mapped::DropPages() const {
  if (data) madvise(const_cast<char*>(data), size, MADV_DONTNEED);
}

bool binlog_internal::Mapped::Open(std::string* error) {
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

namespace {

void ToRestoredExtra(const ExtraRecord& x, Nanos now, int64_t wall, engine::RestoredJob* rj) {
  rj->has_extra = true;
  rj->limited = x.limited;
  rj->tries_left = x.tries_left;
  // A TTL that passed while the server was down is restored as passed: the engine deletes
  // the job at its first Tick, as any expiry (and that writes its delete record).
  rj->expires_at =
      x.has_ttl ? std::min(FromWall(x.expires_wall, now, wall), kForever - 1) : kForever;
  rj->bury_reason = x.bury_reason;
  rj->key_len = x.key_len;
  rj->attr_count = x.attr_count;
  rj->blob = x.blob;
}

}  // namespace

engine::RestoredJob binlog_internal::ToRestored(const JobRecord& x, Nanos now, int64_t wall) {
  engine::RestoredJob rj;
  rj.id = x.id;
  rj.tube = x.tube;
  rj.state = x.state == DiskState::kDelayed  ? JobState::kDelayed
             : x.state == DiskState::kBuried ? JobState::kBuried
                                             : JobState::kReady;
  rj.pri = x.pri;
  rj.delay_s = x.delay_s;
  rj.ttr_s = x.ttr_s;
  rj.created = FromWall(x.created_wall, now, wall);
  rj.deadline = FromWall(x.deadline_wall, now, wall);
  rj.counts = x.counts;
  rj.body = x.body;
  if (x.extra.present) ToRestoredExtra(x.extra, now, wall, &rj);
  return rj;
}

namespace {

// The sequence numbers of the binlog.N files in `dir`, in order, and the names of the
// binlog.N.tmp files there (segments whose creation was cut short: CreateSegmentFile).
bool ListSegments(const std::string& dir, std::vector<uint32_t>* seqs,
                  std::vector<std::string>* unfinished, std::string* error) {
  DIR* d = opendir(dir.c_str());
  if (!d) {
    *error = "cannot read " + dir + ": " + strerror(errno);
    return false;
  }
  while (dirent* e = readdir(d)) {
    const char* name = e->d_name;
    if (strncmp(name, "binlog.", 7) != 0) continue;
    char* end = nullptr;
    unsigned long n = strtoul(name + 7, &end, 10);
    if (end == name + 7 || n == 0 || n > UINT32_MAX) continue;
    if (*end == '\0') {
      seqs->push_back(static_cast<uint32_t>(n));
    } else if (strcmp(end, ".tmp") == 0) {
      unfinished->push_back(name);
    }
  }
  closedir(d);
  std::sort(seqs->begin(), seqs->end());
  return true;
}

// Whether the file at `path` never got a header: it holds only zeros (or nothing), or fewer
// bytes than a stalkd header that begin one. So it holds no record: a segment made by an
// older stalkd (or by beanstalkd, which preallocates before it writes its version) when the
// process died between creating the file and writing its header, or one whose rename reached
// the disk before its header did (a power loss before the next sync).
bool NeverGotHeader(const std::string& path, bool* never, std::string* error) {
  *never = false;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = path + ": " + strerror(errno);
    return false;
  }
  // Reads up to `size` bytes at `off`: fewer only at the end of the file; -1 on an error.
  auto read_at = [fd](char* buf, size_t size, int64_t off) -> ssize_t {
    size_t got = 0;
    while (got < size) {
      ssize_t n = pread(fd, buf + got, size - got, off + static_cast<int64_t>(got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return -1;
      if (n == 0) break;
      got += static_cast<size_t>(n);
    }
    return static_cast<ssize_t>(got);
  };
  auto zeros = [](const char* p, ssize_t n) {
    return std::all_of(p, p + n, [](char c) { return c == 0; });
  };
  std::string header;
  AppendSegmentHeader(&header);
  char buf[1 << 16];
  ssize_t n = read_at(buf, kSegmentHeaderSize, 0);
  if (n >= 0 && n < static_cast<ssize_t>(kSegmentHeaderSize)) {
    *never = zeros(buf, n) || memcmp(buf, header.data(), static_cast<size_t>(n)) == 0;
  } else if (n > 0 && zeros(buf, n)) {  // a header of zeros: is the rest zeros too?
    int64_t off = n;
    *never = true;
    while (*never && (n = read_at(buf, sizeof buf, off)) > 0) {
      *never = zeros(buf, n);
      off += n;
    }
  }
  if (n < 0) *error = path + ": " + strerror(errno);
  close(fd);
  return n >= 0;
}

}  // namespace

void Binlog::Replay::Apply(const Record& r, uint32_t seq, size_t size, size_t off) {
  if (r.type != RecordType::kAdoptDone && r.type != RecordType::kTubeTries) {
    max_id = std::max(max_id, r.job.id);
  }
  switch (r.type) {
    case RecordType::kFull: {
      const Replayed x{static_cast<int64_t>(off), 0, seq, seq, static_cast<uint32_t>(size), true};
      auto [at, added] = jobs.Emplace(r.job.id, x);
      if (!added) *at = x;  // written whole again (a compaction move, a rewrite)
      break;
    }
    case RecordType::kState: {
      Replayed* x = jobs.Find(r.job.id);
      if (!x && after_checkpoint && r.job.id <= listed_max)
        x = jobs.Emplace(r.job.id, Replayed{0, 0, 0, seq, 0, false}).first;
      if (!x || x->deleted) break;  // its kFull record was in a removed segment: gone
      x->last_seq = seq;
      x->state_off = static_cast<int64_t>(off);
      x->full_latest = false;
      break;
    }
    case RecordType::kDelete:
      if (after_checkpoint && r.job.id <= listed_max) {
        Replayed gone;
        gone.deleted = true;
        *jobs.Emplace(r.job.id, gone).first = gone;
      } else {
        jobs.Erase(r.job.id);
      }
      break;
    case RecordType::kAdoptDone:
      break;
    case RecordType::kTubeTries:
      if (r.tries == 0) {
        tube_tries.erase(std::string(r.job.tube));
      } else {
        tube_tries[std::string(r.job.tube)] = {r.tries, seq, static_cast<uint32_t>(size)};
      }
      break;
  }
}

bool Binlog::Recover(engine::Engine* engine, std::string* error) {
  engine_ = engine;
  std::vector<uint32_t> seqs, stalkd_seqs, beanstalkd_seqs;
  std::vector<std::string> unfinished;
  if (!ListSegments(options_.dir, &seqs, &unfinished, error)) return false;
  for (const std::string& name : unfinished) {
    Log("removing %s/%s: a segment whose creation did not finish", options_.dir.c_str(),
        name.c_str());
    unlinkat(dir_fd_, name.c_str(), 0);
  }
  if (!DropHeaderless(&seqs, error)) return false;
  if (!ClassifySegments(seqs, &stalkd_seqs, &beanstalkd_seqs, error)) return false;
  if (!beanstalkd_seqs.empty()) {
    RemoveCheckpoint("a beanstalkd binlog is adopted");
    bool adopted = false;
    if (!AdoptBeanstalkd(beanstalkd_seqs, &stalkd_seqs, &adopted, error)) return false;
    if (adopted) return true;
  }
  return RecoverStalkd(stalkd_seqs, error);
}

// Removes the files that never got a header (NeverGotHeader): they hold no record.
bool Binlog::DropHeaderless(std::vector<uint32_t>* seqs, std::string* error) {
  std::vector<uint32_t> kept;
  for (uint32_t seq : *seqs) {
    bool never = false;
    if (!NeverGotHeader(PathOf(seq), &never, error)) return false;
    if (!never) {
      kept.push_back(seq);
      continue;
    }
    Log("removing %s: it never got its header (the process that made it died first), so it "
        "holds no record",
        PathOf(seq).c_str());
    file::Unlink(PathOf(seq).c_str(), 0);
  }
  if (kept.size() != seqs->size()) file::SyncDir(dir_fd_);
  *seqs = std::move(kept);
  return true;
}

// Sorts the segments into stalkd's (by their magic) and the others.
bool Binlog::ClassifySegments(const std::vector<uint32_t>& seqs, std::vector<uint32_t>* stalkd_seqs,
                              std::vector<uint32_t>* beanstalkd_seqs, std::string* error) {
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
      stalkd_seqs->push_back(seq);
    } else {
      beanstalkd_seqs->push_back(seq);  // beanstalkd's, or empty, or damaged (checked later)
    }
  }
  return true;
}

bool Binlog::RecoverStalkd(const std::vector<uint32_t>& seqs, std::string* error) {
  uint32_t max_seq = 0;
  for (const auto& s : segs_) max_seq = std::max(max_seq, s->seq);  // adopted segments
  for (uint32_t seq : seqs) max_seq = std::max(max_seq, seq);
  Replay replay;
  if (!MapSegments(seqs, &replay, error)) return false;
  // A checkpoint that covers a prefix of these segments spares reading them (the cold jobs'
  // records are not read at all): only the records after its position are replayed; else
  // every record is.
  bool checkpointed = false;
  if (!LoadCheckpoint(&replay, &checkpointed, error)) return false;
  for (size_t i = 0; !checkpointed && i < replay.maps.size(); i++) {
    if (!ReplaySegment(i, &replay, error) || !GoOn(error)) return false;
  }
  if (!checkpointed && options_.verbosity > 0) {
    Log("%s: %zu records replayed", options_.dir.c_str(), replayed_records_);
  }
  if (skipped_ > 0) Log("skipped %zu damaged records (--binlog-skip-damaged)", skipped_);
  if (!RestoreReplayed(replay, error)) return false;
  if (checkpointed) FinishCheckpointedCold();
  engine_->ReserveIdsThrough(replay.max_id);
  max_id_ = std::max(max_id_, replay.max_id);
  const Segment* current = ReuseSegments(&replay);
  replay.maps.clear();  // unmaps
  DropEmptySegments(seqs, replay.has_data);
  if (!current) return OpenForWriting(max_seq + 1, error);
  auto it =
      std::find_if(segs_.begin(), segs_.end(), [&](const auto& x) { return x.get() == current; });
  cur_ = static_cast<size_t>(it - segs_.begin());
  if (options_.verbosity > 0) {
    Log("writing on in %s at offset %" PRId64 ", with %zu preallocated segments after it",
        PathOf(current->seq).c_str(), current->end, segs_.size() - 1 - cur_);
  }
  return FinishOpening(error);
}

// Writing goes on where the last run left off: after the last record of the newest segment
// that has any (or in the first segment, if none has), and in the empty segments the last
// run preallocated after it. So a restart needs no new space (a full disk has none), and
// the room the last run kept for its jobs' deletes and changes is there again. false, with
// nothing changed, if that segment cannot take records (an older format, or read-only);
// a fresh segment is then made. Returns the segment to write in, or nullptr.
Binlog::Segment* Binlog::ReuseSegments(Replay* replay) {
  const size_t n = replay->maps.size();
  if (n == 0) return nullptr;
  const size_t cur = replay->tail < n ? replay->tail : 0;
  auto writable = [](const Mapped& m) {
    return m.version == kFormatVersion && m.fd >= 0 && (fcntl(m.fd, F_GETFL) & O_ACCMODE) == O_RDWR;
  };
  if (!writable(*replay->maps[cur])) return nullptr;
  auto seg_of = [this](uint32_t seq) {
    return std::find_if(segs_.begin(), segs_.end(), [&](const auto& x) { return x->seq == seq; })
        ->get();
  };
  Segment* current = nullptr;
  future_room_ = 0;
  for (size_t i = cur; i < n; i++) {
    Mapped& m = *replay->maps[i];
    Segment* s = seg_of(m.seq);
    // Future segments: empty, and as large as a segment of -s at least, so any record
    // that is not grown for (GrowCurrent) fits in one.
    if (i > cur && (!writable(m) || replay->ends[i] != kSegmentHeaderSize ||
                    s->size < options_.segment_size)) {
      continue;  // removed with the other empty segments
    }
    s->fd = std::exchange(m.fd, -1);
    s->end = s->written = static_cast<int64_t>(replay->ends[i]);
    if (i == cur) {
      current = s;
    } else {
      future_room_ += RoomIn(*s);
    }
  }
  return current;  // the rest of it was never written, or was a torn tail, now zeros
}

bool Binlog::GoOn(std::string* error) {
  if (!options_.progress || options_.progress()) return true;
  stopped_ = true;
  *error = "recovery of " + options_.dir + " stopped: the server was asked to stop";
  return false;
}

// Maps every segment and checks its header; notes which hold records.
bool Binlog::MapSegments(const std::vector<uint32_t>& seqs, Replay* replay, std::string* error) {
  replay->has_data.resize(seqs.size());
  replay->ends.resize(seqs.size());
  replay->from.assign(seqs.size(), kSegmentHeaderSize);
  for (size_t i = 0; i < seqs.size(); i++) {
    auto m = std::make_unique<Mapped>();
    m->seq = seqs[i];
    m->path = PathOf(seqs[i]);
    if (!m->Open(error)) return false;
    file::Found(static_cast<int64_t>(m->size));
    std::string why;
    if (!CheckSegmentHeader(m->data, m->size, &why, &m->version)) {
      *error = m->path + ": offset 0: " + why;
      return false;
    }
    replay->has_data[i] = m->size > kSegmentHeaderSize && m->data[kSegmentHeaderSize + 8] != 0;
    replay->maps.push_back(std::move(m));
  }
  replay->tail = seqs.size();
  for (size_t i = seqs.size(); i-- > 0;) {
    if (replay->has_data[i]) {
      replay->tail = i;
      break;
    }
  }
  return true;
}

// Applies the records of segment i from replay->from[i], up to its end or the end of its
// data, and notes where that is.
bool Binlog::ReplaySegment(size_t i, Replay* replay, std::string* error) {
  const Mapped& m = *replay->maps[i];
  size_t off = replay->from[i];
  while (off < m.size) {
    Record r;
    size_t size = 0;
    std::string why;
    Parse p = ParseRecord(m.data + off, m.size - off, &r, &size, &why, m.version);
    if (p == Parse::kEnd) break;
    if (p == Parse::kBad) {
      bool torn = false;
      if (!PassDamaged(*replay, i, why, &off, &torn, error)) return false;
      if (torn) break;
      continue;
    }
    replay->Apply(r, m.seq, size, off);
    replayed_records_++;
    off += size;
  }
  replay->ends[i] = std::min(off, m.size);
  m.DropPages();  // read once: the restore reads again only the records of its jobs
  return true;
}

// The record at *off in segment i is damaged (`why`). A torn tail (*torn) is cleared: its
// bytes are overwritten with zeros and synced, so new records can follow the last whole
// one in the room the file already has (a full disk has no other). Other damage stops
// start-up (false) unless --binlog-skip-damaged, which moves *off to the next valid record.
bool Binlog::PassDamaged(const Replay& replay, size_t i, const std::string& why, size_t* off,
                         bool* torn, std::string* error) {
  const Mapped& m = *replay.maps[i];
  size_t next = FindNextRecord(m.data, m.size, *off + 1, m.version);
  if (i == replay.tail && next == m.size) {
    size_t last = m.size;  // past the last byte that is not zero
    while (last > *off && m.data[last - 1] == 0) last--;
    Log("%s: offset %zu: %s; torn tail (%zu bytes) cleared", m.path.c_str(), *off, why.c_str(),
        last - *off);
    std::string zeros(std::min<size_t>(last - *off, 1 << 20), '\0');
    for (size_t at = *off; at < last; at += zeros.size()) {
      size_t n = std::min(zeros.size(), last - at);
      int err = file::WriteAt(m.fd, zeros.data(), n, static_cast<int64_t>(at));
      if (err == 0 && at + n == last) err = file::SyncData(m.fd);
      if (err != 0) {
        *error = m.path + ": cannot clear the torn tail: " + strerror(err);
        return false;
      }
    }
    *torn = true;
    return true;
  }
  if (!options_.skip_damaged) {
    *error = m.path + ": offset " + std::to_string(*off) + ": damaged record (" + why +
             "); start with --binlog-skip-damaged to skip it";
    return false;
  }
  Log("%s: offset %zu: damaged record (%s) skipped", m.path.c_str(), *off, why.c_str());
  skipped_++;
  *off = next;
  return true;
}

// A Segment for every mapped one, in order; returns them by sequence number.
std::unordered_map<uint32_t, Binlog::Segment*> Binlog::AddReplayedSegments(const Replay& replay) {
  std::unordered_map<uint32_t, Segment*> by_seq;
  for (const auto& m : replay.maps) {
    auto seg = std::make_unique<Segment>();
    seg->seq = m->seq;
    seg->size = seg->end = seg->written = static_cast<int64_t>(m->size);
    by_seq[m->seq] = seg.get();
    segs_.push_back(std::move(seg));
  }
  std::sort(segs_.begin(), segs_.end(),
            [](const auto& a, const auto& b) { return a->seq < b->seq; });
  return by_seq;
}

// Segments without any record (preallocated ones of the last run) are no longer needed,
// unless writing goes on in them (ReuseSegments: they are open).
void Binlog::DropEmptySegments(const std::vector<uint32_t>& seqs,
                               const std::vector<bool>& has_data) {
  for (size_t i = 0; i < seqs.size(); i++) {
    if (has_data[i]) continue;
    auto it =
        std::find_if(segs_.begin(), segs_.end(), [&](const auto& x) { return x->seq == seqs[i]; });
    if (it == segs_.end() || (*it)->live > 0 || (*it)->fd >= 0) continue;
    file::Unlink(PathOf(seqs[i]).c_str(), (*it)->size);
    segs_.erase(it);
    dir_dirty_ = true;
  }
}

bool Binlog::OpenForWriting(uint32_t seq, std::string* error) {
  if (!AddFirstSegment(seq)) {
    *error = "cannot create " + PathOf(seq) + " (see above)";
    return false;
  }
  return FinishOpening(error);
}

// The current segment is open: room for the restored jobs, then a sync of the directory.
bool Binlog::FinishOpening(std::string* error) {
  ReserveRestoredRoom();
  if (!Sync()) {
    *error = "cannot sync " + options_.dir;
    return false;
  }
  CollectGarbage();
  Sync();
  last_sync_ = clock_.Now();
  if (options_.background_sync && !options_.fsync_never) StartSyncer();
  return true;
}

// Creates binlog.`seq` and makes it the current segment.
bool Binlog::AddFirstSegment(uint32_t seq) {
  // A placeholder for the sequence number, so AddFutureSegment numbers from seq.
  bool placeholder = segs_.empty() || segs_.back()->seq + 1 != seq;
  if (placeholder) {
    auto p = std::make_unique<Segment>();
    p->seq = seq - 1;
    segs_.push_back(std::move(p));
  }
  cur_ = segs_.size() - 1;
  bool ok = AddFutureSegment();
  // The placeholder is last if no segment was added, else just before the new one.
  if (placeholder) segs_.erase(segs_.end() - (ok ? 2 : 1));
  if (!ok) return false;
  cur_ = segs_.size() - 1;
  future_room_ = 0;  // AddFutureSegment counted it; it is the current one
  return true;
}

// Room for every restored job's reservation, plus a spare segment. Without enough (a full
// disk), every job keeps room for its delete, and room for one change goes to as many jobs
// as the rest allows (a command that would change one of the others is refused until there
// is room for it). The room a run leaves always covers its jobs' deletes (each
// reservation counts one), so a restart on the same segments never lacks it.
void Binlog::ReserveRestoredRoom() {
  const int64_t spare =
      options_.segment_size - int64_t{kSegmentHeaderSize} - int64_t{kMaxSmallRecord};
  while (UsableAfter(0) < reserved_ + spare) {
    if (!AddFutureSegment()) break;
  }
  const int64_t room = UsableAfter(0);
  if (room >= reserved_) return;
  const int64_t deletes = static_cast<int64_t>(jobs_.size() * kDeleteRecordSize);
  int64_t changes = 0;  // room given to jobs for one change
  size_t without = 0;
  jobs_.ForEach([&](uint64_t, JobMeta& m) {
    const int64_t change = int64_t{m.resv} - int64_t{kDeleteRecordSize};
    if (room - deletes - changes >= change) {
      changes += change;
    } else {
      m.resv = kDeleteRecordSize;
      without++;
    }
  });
  reserved_ = deletes + changes;
  Log("not enough space for the changes of every restored job: %zu of %zu jobs can be "
      "deleted but not changed (release, bury, kick answer OUT_OF_MEMORY) and puts are "
      "refused until space is freed",
      without, jobs_.size());
  if (room < deletes) {
    Log("not even enough space for the deletes of the restored jobs (%" PRId64 " bytes of %" PRId64
        "): a delete that finds no room is not recorded (logged)",
        room, deletes);
  }
}

void Binlog::StartSyncer() {
  syncer_ = std::make_unique<Syncer>();
  if (!syncer_->ok()) {
    Log("cannot start the sync thread (%s); syncing in the loop instead", strerror(errno));
    syncer_.reset();
  }
  // The current segment was created before the thread and its first records go to its
  // start at once: it is filled first, from kFillLead bytes on, ahead of them.
  Segment* s = Current();
  int64_t from = (s->end + kFillLead + 4095) / 4096 * 4096;
  if (syncer_ && from < s->size) {
    s->fill_from = from;
    syncer_->Fill(s->fd, s->seq, from, s->size);
  }
  for (size_t i = cur_ + 1; syncer_ && i < segs_.size(); i++) {
    syncer_->Fill(segs_[i]->fd, segs_[i]->seq, kSegmentHeaderSize, segs_[i]->size);
  }
}

}  // namespace stalkd::storage
