// Fuzzes the disk tier's checkpoint file (storage/cold_checkpoint.h). Arbitrary bytes as the
// file, as they are or with a valid CRC appended (so that the meta and job parsing are
// reached): the reader never crashes, hangs or reads out of bounds; it rejects the file with
// a reason, or every job it gives is within its promises (ids increasing, known flags, a
// cold job's tube one of the file's, a ready one only in version 2), no more than the file
// announced, the same again after Rewind; and a file it reads whole re-encodes, through the writer,
// to exactly its bytes. Structured input: a small valid set of segments, tubes and jobs (delayed
// and ready ones on disk, in version 2; in version 1 no ready one) goes through the writer and
// reads back equal; with one byte changed, the reader rejects it (CRC).
//
// Input: byte 0 chooses the mode (0: raw, 1: raw with a valid CRC, 2: structured).
#define FUZZ_NAME "checkpoint_fuzz"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "storage/cold_checkpoint.h"
#include "storage/crc32c.h"

namespace {

using stalkd::fuzz::Input;
using stalkd::storage::CheckpointJob;
using stalkd::storage::CheckpointMeta;
using stalkd::storage::CheckpointReader;
using stalkd::storage::CheckpointSegment;
using stalkd::storage::CheckpointTubeTries;
using stalkd::storage::CheckpointWriter;

// A directory of our own for the file (tmpfs if there is one: the writer fsyncs).
struct Dir {
  std::string path;
  int fd = -1;
  Dir() {
    for (const char* base : {"/dev/shm", "/tmp"}) {
      std::string t = std::string(base) + "/checkpoint_fuzz.XXXXXX";
      if (mkdtemp(t.data())) {
        path = t;
        break;
      }
    }
    FUZZ_CHECK(!path.empty(), "no temporary directory");
    fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    FUZZ_CHECK(fd >= 0, "open %s", path.c_str());
  }
  std::string File() const { return path + "/" + stalkd::storage::kCheckpointName; }
};

Dir* the_dir = nullptr;

// Removes the directory and what is in it, at exit.
void RemoveDir() {
  unlinkat(the_dir->fd, stalkd::storage::kCheckpointName, 0);
  unlinkat(the_dir->fd, stalkd::storage::kCheckpointTmpName, 0);
  rmdir(the_dir->path.c_str());
}

const Dir& TheDir() {
  if (!the_dir) {
    the_dir = new Dir;
    atexit(RemoveDir);
  }
  return *the_dir;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  FUZZ_CHECK(fd >= 0, "create %s", path.c_str());
  FUZZ_CHECK(write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()),
             "write %s", path.c_str());
  close(fd);
}

std::string ReadFile(const std::string& path) {
  std::string out;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  FUZZ_CHECK(fd >= 0, "open %s", path.c_str());
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

// Writes meta and jobs with the writer; the file's bytes.
std::string WriteCheckpoint(const CheckpointMeta& meta, const std::vector<CheckpointJob>& jobs) {
  const Dir& dir = TheDir();
  CheckpointWriter w;
  std::string error;
  FUZZ_CHECK(w.Begin(dir.path, dir.fd, meta, &error), "Begin: %s", error.c_str());
  for (const CheckpointJob& j : jobs) FUZZ_CHECK(w.Add(j, &error), "Add: %s", error.c_str());
  FUZZ_CHECK(w.Finish(&error), "Finish: %s", error.c_str());
  const std::string bytes = ReadFile(dir.File());
  FUZZ_CHECK(static_cast<int64_t>(bytes.size()) == w.bytes(), "bytes() %lld, file %zu",
             static_cast<long long>(w.bytes()), bytes.size());
  return bytes;
}

// Reads DIR/checkpoint through; checks what the reader promises. Whether it read it whole
// (then *meta and *jobs hold it).
bool ReadCheckpoint(CheckpointMeta* meta, std::vector<CheckpointJob>* jobs) {
  CheckpointReader r;
  std::string why;
  if (!r.Open(TheDir().File(), &why)) {
    FUZZ_CHECK(!why.empty(), "Open failed without a reason");
    return false;
  }
  *meta = r.meta();
  for (size_t i = 1; i < meta->segments.size(); i++) {
    FUZZ_CHECK(meta->segments[i - 1].seq < meta->segments[i].seq, "segments out of order");
  }
  bool whole = false;
  for (int pass = 0; pass < 2; pass++) {
    std::vector<CheckpointJob> got;
    CheckpointJob j;
    why.clear();
    while (r.Next(&j, &why)) {
      FUZZ_CHECK(got.size() < meta->jobs, "more jobs than announced (%llu)",
                 static_cast<unsigned long long>(meta->jobs));
      FUZZ_CHECK(got.empty() || j.id > got.back().id, "ids out of order");
      FUZZ_CHECK(j.id > 0, "job id 0");
      if (j.cold) {
        FUZZ_CHECK(j.tube < meta->tubes.size(), "tube %u of %zu", j.tube, meta->tubes.size());
        FUZZ_CHECK(!j.ready || meta->version >= 2, "a ready job on disk in version %u",
                   meta->version);
        FUZZ_CHECK(j.ready ? j.deadline_wall == 0 : j.pri == 0, "fields of the other kind");
      } else {
        FUZZ_CHECK(j.resv == 0 && j.tube == 0 && j.deadline_wall == 0 && j.created_wall == 0 &&
                       !j.ready && j.pri == 0,
                   "a hot job with cold fields");
      }
      got.push_back(j);
    }
    if (got.size() < meta->jobs) FUZZ_CHECK(!why.empty(), "stopped early without a reason");
    if (pass == 0) {
      whole = got.size() == meta->jobs && why.empty();
      *jobs = std::move(got);
      FUZZ_CHECK(r.Rewind(&why), "Rewind: %s", why.c_str());
    } else {
      FUZZ_CHECK(got == *jobs, "not the same jobs after Rewind");
      FUZZ_CHECK((got.size() == meta->jobs && why.empty()) == whole, "not the same end");
    }
  }
  return whole;
}

// Any file: checked as read; if read whole, it must be exactly what the writer makes of it.
void CheckAnyFile(const std::string& bytes) {
  WriteFile(TheDir().File(), bytes);
  CheckpointMeta meta;
  std::vector<CheckpointJob> jobs;
  if (!ReadCheckpoint(&meta, &jobs)) return;
  FUZZ_CHECK(WriteCheckpoint(meta, jobs) == bytes, "a file read whole is not the writer's");
}

std::string Bytes(Input& in, size_t max) { return std::string(in.Bytes(in.Byte() % (max + 1))); }
// A tube's name: 1 to 200 bytes, as a server's tubes have.
std::string TubeName(Input& in) { return "t" + Bytes(in, 199); }

uint64_t U64(Input& in, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) v |= uint64_t{in.Byte()} << (8 * i);
  return v;
}

// A small valid checkpoint from the input: written, read back equal, and rejected with a
// byte changed.
void RoundTrip(Input& in) {
  CheckpointMeta meta;
  meta.version = in.Byte() % 4 == 0 ? 1 : stalkd::storage::kCheckpointVersion;
  meta.max_id = U64(in, 8);
  const size_t segments = in.Byte() % 5;
  uint32_t seq = 0;
  for (size_t i = 0; i < segments; i++) {
    CheckpointSegment s;
    seq += 1 + in.Byte();
    s.seq = seq;
    s.size = static_cast<int64_t>(U64(in, 8));
    s.end = static_cast<int64_t>(U64(in, 8));
    s.tail_crc = static_cast<uint32_t>(U64(in, 4));
    meta.segments.push_back(s);
  }
  const size_t tubes = in.Byte() % 5;
  for (size_t i = 0; i < tubes; i++) meta.tubes.push_back(TubeName(in));
  const size_t tries = in.Byte() % 4;
  for (size_t i = 0; i < tries; i++) {
    CheckpointTubeTries t;
    t.tube = TubeName(in);
    t.tries = static_cast<uint32_t>(U64(in, 4));
    t.seq = static_cast<uint32_t>(U64(in, 4));
    t.size = static_cast<uint32_t>(U64(in, 4));
    meta.tube_tries.push_back(t);
  }
  std::vector<CheckpointJob> jobs;
  const size_t n = U64(in, 2) % 2000;
  uint64_t id = 0;
  for (size_t i = 0; i < n; i++) {
    CheckpointJob j;
    const uint8_t b = in.Byte();
    id += b < 250 ? 1 + b : 1 + (U64(in, 8) >> 1);
    if (id == 0) break;  // wrapped
    j.id = id;
    j.seq = static_cast<uint32_t>(U64(in, 2));
    j.off = static_cast<uint32_t>(U64(in, 4));
    j.size = static_cast<uint32_t>(U64(in, 3));
    const uint8_t kind = in.Byte();
    j.cold = !meta.tubes.empty() && (kind & 1);
    if (j.cold) {
      j.ready = meta.version >= 2 && (kind & 2);
      j.resv = static_cast<uint32_t>(U64(in, 2));
      j.tube = in.Byte() % meta.tubes.size();
      if (j.ready) {
        j.pri = static_cast<uint32_t>(U64(in, 4));
      } else {
        j.deadline_wall = static_cast<int64_t>(U64(in, 8));
      }
      j.created_wall = static_cast<int64_t>(U64(in, 8));
    }
    jobs.push_back(j);
    if (jobs.size() > 1 && jobs.back().id <= jobs[jobs.size() - 2].id) {
      jobs.pop_back();  // wrapped past 2^64
      break;
    }
  }
  meta.jobs = jobs.size();
  const std::string bytes = WriteCheckpoint(meta, jobs);
  CheckpointMeta back;
  std::vector<CheckpointJob> back_jobs;
  FUZZ_CHECK(ReadCheckpoint(&back, &back_jobs), "the writer's file not read whole");
  FUZZ_CHECK(back == meta, "meta read back differs");
  FUZZ_CHECK(back_jobs == jobs, "jobs read back differ");
  // One byte changed: the CRC catches it (CRC-32C finds every burst of 32 bits or less).
  const uint8_t x = in.Byte();
  if (x != 0) {
    std::string bad = bytes;
    bad[U64(in, 3) % bad.size()] ^= static_cast<char>(x);
    WriteFile(TheDir().File(), bad);
    CheckpointReader r;
    std::string why;
    FUZZ_CHECK(!r.Open(TheDir().File(), &why) && !why.empty(), "a changed byte was not caught");
  }
  // Cut short anywhere: never accepted with other contents.
  const size_t cut = U64(in, 3) % bytes.size();
  CheckAnyFile(bytes.substr(0, cut));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 16) return 0;
  Input in(data, size);
  const uint8_t mode = in.Byte() % 3;
  if (mode == 2) {
    RoundTrip(in);
    return 0;
  }
  std::string bytes(in.Bytes(size));
  if (mode == 1) {
    const uint32_t crc = stalkd::storage::Crc32c(bytes.data(), bytes.size());
    for (int i = 0; i < 4; i++) bytes.push_back(static_cast<char>(crc >> (8 * i)));
  }
  CheckAnyFile(bytes);
  return 0;
}
