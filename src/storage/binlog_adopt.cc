// Adopting beanstalkd's binlog (format 7): its jobs are restored, written into fresh
// stalkd segments followed by a kAdoptDone record, and only once those are durable are
// beanstalkd's files removed.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/check.h"
#include "storage/beanstalkd_binlog.h"
#include "storage/binlog.h"
#include "storage/binlog_internal.h"
#include "storage/file.h"
#include "storage/record.h"

namespace stalkd::storage {

using binlog_internal::FullSizeOf;
using binlog_internal::JobReserve;
using binlog_internal::Mapped;
using binlog_internal::ToRestored;
using binlog_internal::WallNow;

bool Binlog::AdoptBeanstalkd(const std::vector<uint32_t>& bseqs, std::vector<uint32_t>* stalkd_seqs,
                             bool* adopted, std::string* error) {
  *adopted = false;
  bool done = false;
  if (!SettleEarlierAdoption(bseqs, stalkd_seqs, &done, error)) return false;
  if (done) return true;
  BeanstalkdReadResult read;
  if (!ReadBeanstalkd(bseqs, &read, error) || !RestoreAdopted(read, error)) return false;
  // Write every job into fresh stalkd segments, then mark the adoption finished.
  uint32_t max_b = bseqs.back();
  if (!OpenForWriting(max_b + 1, error) || !WriteAdopted(read, error) || !MarkAdopted(error)) {
    return false;
  }
  for (uint32_t seq : bseqs) file::Unlink(PathOf(seq).c_str(), 0);
  file::SyncDir(dir_fd_);
  Log("adopted %zu jobs from beanstalkd's binlog (binlog.%u to binlog.%u, now removed)",
      read.jobs.size(), bseqs.front(), max_b);
  *adopted = true;
  return true;
}

// stalkd segments beside beanstalkd's files are an earlier adoption's. If it finished
// (*done), beanstalkd's files are left-overs and are removed; if not, its segments are.
bool Binlog::SettleEarlierAdoption(const std::vector<uint32_t>& bseqs,
                                   std::vector<uint32_t>* stalkd_seqs, bool* done,
                                   std::string* error) {
  uint32_t max_b = bseqs.back();
  for (uint32_t seq : *stalkd_seqs) {
    if (seq < max_b) {
      *error = PathOf(seq) + " (stalkd's format) is older than " + PathOf(max_b) +
               " (beanstalkd's): remove the files that do not belong to this directory";
      return false;
    }
  }
  if (!HasAdoptDone(*stalkd_seqs, done, error)) return false;
  if (*done) {
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
  return true;
}

// A finished adoption wrote kAdoptDone: *done says whether one of the segments holds it.
bool Binlog::HasAdoptDone(const std::vector<uint32_t>& seqs, bool* done, std::string* error) {
  for (uint32_t seq : seqs) {
    Mapped m;
    m.path = PathOf(seq);
    if (!m.Open(error)) return false;
    size_t off = kSegmentHeaderSize;
    while (!*done && off < m.size) {
      Record r;
      size_t size = 0;
      std::string why;
      if (ParseRecord(m.data + off, m.size - off, &r, &size, &why) != Parse::kOk) break;
      *done = r.type == RecordType::kAdoptDone;
      off += size;
    }
  }
  return true;
}

// Maps beanstalkd's files and replays them into *read.
bool Binlog::ReadBeanstalkd(const std::vector<uint32_t>& bseqs, BeanstalkdReadResult* read,
                            std::string* error) {
  std::vector<std::unique_ptr<Mapped>> maps;
  std::vector<BeanstalkdFile> files;
  for (uint32_t seq : bseqs) {
    auto m = std::make_unique<Mapped>();
    m->path = PathOf(seq);
    if (!m->Open(error)) return false;
    files.push_back({m->path, std::string_view(m->data ? m->data : "", m->size)});
    maps.push_back(std::move(m));
  }
  if (!ReadBeanstalkdBinlog(files, options_.skip_damaged, read, error)) return false;
  maps.clear();
  for (const std::string& note : read->notes) Log("%s", note.c_str());
  skipped_ = read->skipped;
  return true;
}

bool Binlog::RestoreAdopted(const BeanstalkdReadResult& read, std::string* error) {
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
  return true;
}

// Writes a kFull record of every adopted job, as the engine holds it.
bool Binlog::WriteAdopted(const BeanstalkdReadResult& read, std::string* error) {
  for (const auto& [id, bj] : read.jobs) {
    const engine::Job* j = engine_->Find(id);
    size_t size = FullSizeOf(*j);
    if (!RoomFor(size, JobReserve(false))) {
      *error = "not enough disk space to adopt beanstalkd's binlog";
      return false;
    }
    WriteFull(*j, JobReserve(false));
    restored_++;
  }
  return true;
}

// Appends kAdoptDone after the adopted jobs and makes them all durable.
bool Binlog::MarkAdopted(std::string* error) {
  if (!MakeRoom(kAdoptDoneRecordSize, 0)) {
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
  return true;
}

}  // namespace stalkd::storage
