#include "storage/cold_checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>

#include "storage/crc32c.h"
#include "storage/file.h"
#include "storage/record.h"

namespace stalkd::storage {

namespace {

constexpr size_t kChunk = 1 << 20;  // what the writer and reader buffer
constexpr size_t kHeaderSize = 8 + 4 + 8;
constexpr size_t kJobHotSize = 8 + 4 + 4 + 4 + 1;
constexpr size_t kJobColdExtra = 4 + 4 + 8 + 8;   // delayed
constexpr size_t kJobReadyExtra = 4 + 4 + 4 + 8;  // ready
constexpr uint8_t kFlagCold = 1;                  // a delayed job on disk
constexpr uint8_t kFlagColdReady = 2;             // a ready job on disk (version 2)

void Le(std::string* o, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) o->push_back(static_cast<char>(v >> (8 * i)));
}
uint64_t FromLe(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}
void Name(std::string* o, const std::string& s) {
  Le(o, s.size(), 1);
  o->append(s);
}

std::string Printf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Printf(const char* fmt, ...) {
  char b[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b, sizeof b, fmt, ap);
  va_end(ap);
  return b;
}

}  // namespace

uint32_t SegmentTailCrc(const char* data, int64_t end) {
  const int64_t from = std::max<int64_t>(kSegmentHeaderSize, end - kCheckpointTailBytes);
  return end > from ? Crc32c(data + from, static_cast<size_t>(end - from)) : 0;
}

bool MatchPrefix(const CheckpointMeta& meta, const std::vector<SegmentView>& found,
                 PrefixMatch* out, std::string* why) {
  out->from.assign(found.size(), int64_t{kSegmentHeaderSize});
  out->removed.clear();
  const auto has_records = [](const CheckpointSegment& c) {
    return c.end > int64_t{kSegmentHeaderSize};
  };
  uint32_t newest = 0;    // the newest segment it lists
  uint32_t position = 0;  // the newest it lists with records: where the tail starts
  for (const CheckpointSegment& c : meta.segments) {
    if (c.seq <= newest) {
      *why = Printf("its segments are not in order (binlog.%u after binlog.%u)", c.seq, newest);
      return false;
    }
    newest = c.seq;
    if (c.end < int64_t{kSegmentHeaderSize} || c.end > c.size) {
      *why = Printf("binlog.%u: records to %" PRId64 " in %" PRId64 " bytes", c.seq, c.end, c.size);
      return false;
    }
    if (has_records(c)) position = c.seq;
  }
  size_t k = 0;  // into found
  bool any_found = false;
  for (const CheckpointSegment& c : meta.segments) {
    while (k < found.size() && found[k].seq < c.seq) {
      *why = Printf("binlog.%u is not among the segments it covers", found[k].seq);
      return false;
    }
    if (k == found.size() || found[k].seq != c.seq) {  // gone since
      if (!has_records(c)) continue;  // an empty one a start dropped: it held no record
      if (any_found || c.seq == position) {
        *why = Printf("binlog.%u, which held records when it was written, is gone", c.seq);
        return false;
      }
      out->removed.push_back(c.seq);
      continue;
    }
    const SegmentView& f = found[k];
    if (static_cast<int64_t>(f.size) < c.end) {
      *why = Printf("binlog.%u has %zu bytes, it covers records to %" PRId64, f.seq, f.size, c.end);
      return false;
    }
    if (SegmentTailCrc(f.data, c.end) != c.tail_crc) {
      *why = Printf("binlog.%u differs before offset %" PRId64 " (tail CRC)", f.seq, c.end);
      return false;
    }
    out->from[k++] = c.end;
    any_found = true;
  }
  return true;  // found[k...] came after it: their records are the tail's
}

// ---------------------------------------------------------------------------- writer

CheckpointWriter::~CheckpointWriter() {
  if (fd_ >= 0) {
    close(fd_);
    unlinkat(dir_fd_, kCheckpointTmpName, 0);  // never finished
  }
}

bool CheckpointWriter::Begin(const std::string& dir, int dir_fd, const CheckpointMeta& meta,
                             std::string* error) {
  if (meta.version < kCheckpointOldestVersion || meta.version > kCheckpointVersion) {
    *error = "checkpoint: cannot write version " + std::to_string(meta.version);
    return false;
  }
  // What the reader refuses is never written: a tube has a name, of a length byte's size.
  auto bad = [](const std::string& name) { return name.empty() || name.size() > 255; };
  bool bad_tube = std::any_of(meta.tubes.begin(), meta.tubes.end(), bad);
  for (const CheckpointTubeTries& t : meta.tube_tries) bad_tube = bad_tube || bad(t.tube);
  if (bad_tube) {
    *error = "checkpoint: a tube name that is empty or over 255 bytes";
    return false;
  }
  dir_ = dir;
  dir_fd_ = dir_fd;
  version_ = meta.version;
  fd_ = openat(dir_fd, kCheckpointTmpName, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd_ < 0) {
    *error = dir + "/" + kCheckpointTmpName + ": " + strerror(errno);
    return false;
  }
  buf_.append(kCheckpointMagic, sizeof kCheckpointMagic);
  Le(&buf_, meta.version, 4);
  Le(&buf_, meta.max_id, 8);
  Le(&buf_, meta.segments.size(), 4);
  for (const CheckpointSegment& s : meta.segments) {
    Le(&buf_, s.seq, 4);
    Le(&buf_, static_cast<uint64_t>(s.size), 8);
    Le(&buf_, static_cast<uint64_t>(s.end), 8);
    Le(&buf_, s.tail_crc, 4);
  }
  Le(&buf_, meta.tubes.size(), 4);
  for (const std::string& t : meta.tubes) Name(&buf_, t);
  Le(&buf_, meta.tube_tries.size(), 4);
  for (const CheckpointTubeTries& t : meta.tube_tries) {
    Name(&buf_, t.tube);
    Le(&buf_, t.tries, 4);
    Le(&buf_, t.seq, 4);
    Le(&buf_, t.size, 4);
  }
  Le(&buf_, meta.jobs, 8);
  left_ = meta.jobs;
  return true;
}

bool CheckpointWriter::Add(const CheckpointJob& j, std::string* error) {
  if (left_ == 0 || j.id <= last_id_) {
    *error = "checkpoint: jobs out of order or more than announced";
    return false;
  }
  const bool ready = j.cold && j.ready;
  if (ready && version_ < 2) {
    *error = "checkpoint: version " + std::to_string(version_) + " lists no ready job on disk";
    return false;
  }
  left_--;
  last_id_ = j.id;
  Le(&buf_, j.id, 8);
  Le(&buf_, j.seq, 4);
  Le(&buf_, j.off, 4);
  Le(&buf_, j.size, 4);
  Le(&buf_, !j.cold ? 0 : ready ? kFlagColdReady : kFlagCold, 1);
  if (j.cold) {
    Le(&buf_, j.resv, 4);
    Le(&buf_, j.tube, 4);
    if (ready) {
      Le(&buf_, j.pri, 4);
    } else {
      Le(&buf_, static_cast<uint64_t>(j.deadline_wall), 8);
    }
    Le(&buf_, static_cast<uint64_t>(j.created_wall), 8);
  }
  return buf_.size() < kChunk || Write(error);
}

bool CheckpointWriter::Write(std::string* error) {
  crc_ = Crc32cExtend(crc_, buf_.data(), buf_.size());
  int err = file::WriteAt(fd_, buf_.data(), buf_.size(), bytes_);
  if (err != 0) {
    *error = dir_ + "/" + kCheckpointTmpName + ": " + strerror(err);
    return false;
  }
  bytes_ += static_cast<int64_t>(buf_.size());
  buf_.clear();
  return true;
}

bool CheckpointWriter::Finish(std::string* error) {
  if (left_ != 0) {
    *error = "checkpoint: fewer jobs than announced";
    return false;
  }
  if (!Write(error)) return false;
  Le(&buf_, crc_, 4);
  if (!Write(error)) return false;
  int err = file::SyncData(fd_);
  const std::string tmp = dir_ + "/" + kCheckpointTmpName;
  if (err == 0 && renameat(dir_fd_, kCheckpointTmpName, dir_fd_, kCheckpointName) != 0) {
    err = errno;
  }
  if (err == 0) err = file::SyncDir(dir_fd_);
  close(fd_);
  fd_ = -1;
  if (err != 0) {
    *error = tmp + ": " + strerror(err);
    unlinkat(dir_fd_, kCheckpointTmpName, 0);
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------- reader

CheckpointReader::~CheckpointReader() {
  if (fd_ >= 0) close(fd_);
}

bool CheckpointReader::Fill(size_t n, std::string* why) {
  if (buf_.size() - pos_ >= n) return true;
  buf_.erase(0, pos_);
  pos_ = 0;
  const size_t want = std::max(n, kChunk);
  while (buf_.size() < want && file_pos_ < file_size_) {
    const size_t old = buf_.size();
    const size_t get = static_cast<size_t>(
        std::min<int64_t>(static_cast<int64_t>(want - old), file_size_ - file_pos_));
    buf_.resize(old + get);
    ssize_t r = pread(fd_, buf_.data() + old, get, file_pos_);
    if (r < 0 && errno == EINTR) r = 0;
    if (r < 0) {
      buf_.resize(old);
      *why = std::string("read: ") + strerror(errno);
      return false;
    }
    buf_.resize(old + static_cast<size_t>(r));
    file_pos_ += r;
    if (r == 0) break;  // shorter than it said: caught below
  }
  if (buf_.size() < n) {
    *why = "cut short";
    return false;
  }
  return true;
}

bool CheckpointReader::Take(void* out, size_t n, std::string* why) {
  if (!Fill(n, why)) return false;
  memcpy(out, buf_.data() + pos_, n);
  pos_ += n;
  return true;
}

bool CheckpointReader::Open(const std::string& path, std::string* why, int* err_no) {
  fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd_ < 0 || fstat(fd_, &st) != 0) {
    if (err_no) *err_no = errno;
    *why = strerror(errno);
    return false;
  }
  file_size_ = st.st_size;
  if (file_size_ < static_cast<int64_t>(kHeaderSize + 4)) {
    *why = "cut short";
    return false;
  }
  // The whole file's CRC first, so that nothing of a damaged file is used.
  uint32_t crc = 0;
  const int64_t body = file_size_ - 4;
  while (file_pos_ < body) {
    buf_.clear();
    pos_ = 0;
    const size_t n = static_cast<size_t>(std::min<int64_t>(kChunk, body - file_pos_));
    if (!Fill(n, why)) return false;
    crc = Crc32cExtend(crc, buf_.data(), n);
    file_pos_ -= static_cast<int64_t>(buf_.size() - n);  // keep the trailer unread
  }
  buf_.clear();
  pos_ = 0;
  unsigned char trailer[4];
  if (!Take(trailer, 4, why)) return false;
  if (FromLe(trailer, 4) != crc) {
    *why = "bad CRC";
    return false;
  }
  buf_.clear();
  pos_ = 0;
  file_pos_ = 0;
  return ReadMeta(why);
}

bool CheckpointReader::ReadMeta(std::string* why) {
  unsigned char b[8];
  auto u = [&](int bytes, uint64_t* v) {
    if (!Take(b, static_cast<size_t>(bytes), why)) return false;
    *v = FromLe(b, bytes);
    return true;
  };
  auto name = [&](std::string* s) {
    uint64_t len = 0;
    if (!u(1, &len)) return false;
    if (len == 0) {  // as in a record: a tube has a name
      *why = "a tube with no name";
      return false;
    }
    s->resize(len);
    return Take(s->data(), len, why);
  };
  char magic[8];
  uint64_t version = 0, n = 0, v = 0;
  if (!Take(magic, 8, why)) return false;
  if (memcmp(magic, kCheckpointMagic, 8) != 0) {
    *why = "not a checkpoint (bad magic)";
    return false;
  }
  if (!u(4, &version) || !u(8, &meta_.max_id)) return false;
  if (version < kCheckpointOldestVersion || version > kCheckpointVersion) {
    *why = "unsupported version " + std::to_string(version);
    return false;
  }
  meta_.version = static_cast<uint32_t>(version);
  if (!u(4, &n)) return false;
  for (uint64_t i = 0; i < n; i++) {
    CheckpointSegment s;
    uint64_t size = 0, end = 0;
    if (!u(4, &v) || !u(8, &size) || !u(8, &end)) return false;
    s.seq = static_cast<uint32_t>(v);
    s.size = static_cast<int64_t>(size);
    s.end = static_cast<int64_t>(end);
    if (!u(4, &v)) return false;
    s.tail_crc = static_cast<uint32_t>(v);
    if (!meta_.segments.empty() && s.seq <= meta_.segments.back().seq) {
      *why = "segments out of order";
      return false;
    }
    meta_.segments.push_back(s);
  }
  if (!u(4, &n)) return false;
  for (uint64_t i = 0; i < n; i++) {
    if (!name(&meta_.tubes.emplace_back())) return false;
  }
  if (!u(4, &n)) return false;
  for (uint64_t i = 0; i < n; i++) {
    CheckpointTubeTries t;
    uint64_t tries = 0, seq = 0, size = 0;
    if (!name(&t.tube) || !u(4, &tries) || !u(4, &seq) || !u(4, &size)) return false;
    t.tries = static_cast<uint32_t>(tries);
    t.seq = static_cast<uint32_t>(seq);
    t.size = static_cast<uint32_t>(size);
    meta_.tube_tries.push_back(std::move(t));
  }
  if (!u(8, &meta_.jobs)) return false;
  // Each job takes at least kJobHotSize bytes, before the trailer.
  const int64_t at = file_pos_ - static_cast<int64_t>(buf_.size() - pos_);
  if (meta_.jobs > static_cast<uint64_t>(file_size_ - 4 - at) / kJobHotSize) {
    *why = "more jobs than the file holds";
    return false;
  }
  jobs_at_ = at;
  jobs_left_ = meta_.jobs;
  return true;
}

bool CheckpointReader::Next(CheckpointJob* j, std::string* why) {
  if (jobs_left_ == 0) {
    // What follows the last job must be the trailer, exactly.
    const int64_t at = file_pos_ - static_cast<int64_t>(buf_.size() - pos_);
    if (at != file_size_ - 4) *why = "bytes after the last job";
    return false;
  }
  unsigned char b[kJobHotSize + std::max(kJobColdExtra, kJobReadyExtra)];
  if (!Take(b, kJobHotSize, why)) return false;
  *j = CheckpointJob{};
  j->id = FromLe(b, 8);
  j->seq = static_cast<uint32_t>(FromLe(b + 8, 4));
  j->off = static_cast<uint32_t>(FromLe(b + 12, 4));
  j->size = static_cast<uint32_t>(FromLe(b + 16, 4));
  const uint8_t flags = b[20];
  if (flags != 0 && flags != kFlagCold && (flags != kFlagColdReady || meta_.version < 2)) {
    *why = "job " + std::to_string(j->id) + ": unknown flags";
    return false;
  }
  if (j->id <= last_id_) {
    *why = "job " + std::to_string(j->id) + ": ids out of order";
    return false;
  }
  last_id_ = j->id;
  jobs_left_--;
  j->cold = flags != 0;
  j->ready = flags == kFlagColdReady;
  if (j->cold) {
    unsigned char* c = b + kJobHotSize;
    if (!Take(c, j->ready ? kJobReadyExtra : kJobColdExtra, why)) return false;
    j->resv = static_cast<uint32_t>(FromLe(c, 4));
    j->tube = static_cast<uint32_t>(FromLe(c + 4, 4));
    if (j->ready) {
      j->pri = static_cast<uint32_t>(FromLe(c + 8, 4));
      j->created_wall = static_cast<int64_t>(FromLe(c + 12, 8));
    } else {
      j->deadline_wall = static_cast<int64_t>(FromLe(c + 8, 8));
      j->created_wall = static_cast<int64_t>(FromLe(c + 16, 8));
    }
    if (j->tube >= meta_.tubes.size()) {
      *why = "job " + std::to_string(j->id) + ": no such tube";
      return false;
    }
  }
  return true;
}

bool CheckpointReader::NextBelow(uint64_t below, CheckpointJob* j, std::string* why) {
  if (!holding_ && !Next(&held_, why)) return false;
  holding_ = true;
  if (held_.id >= below) return false;
  *j = held_;
  holding_ = false;
  return true;
}

bool CheckpointReader::Rewind(std::string* why) {
  holding_ = false;
  buf_.clear();
  pos_ = 0;
  file_pos_ = jobs_at_;
  jobs_left_ = meta_.jobs;
  last_id_ = 0;
  (void)why;
  return fd_ >= 0;
}

}  // namespace stalkd::storage
