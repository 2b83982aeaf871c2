// The disk tier's checkpoint (docs/DISK-TIER.md): written at a clean shutdown; a later
// start uses it if the segments continue those it covers (a prefix of the binlog), and then
// restores the jobs kept on disk without reading their records and replays only the
// records after its position on top. Anything in doubt makes it replay every record, as
// without a checkpoint: a checkpoint never stops a start and never loses a job.

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/tube.h"
#include "storage/binlog.h"
#include "storage/binlog_internal.h"
#include "storage/cold_checkpoint.h"
#include "storage/crc32c.h"
#include "storage/file.h"
#include "storage/record.h"

namespace stalkd::storage {

using binlog_internal::FromWall;
using binlog_internal::JobReserve;
using binlog_internal::Mapped;
using binlog_internal::Replayed;
using binlog_internal::WallNow;

void Binlog::RemoveCheckpoint(const char* why) {
  bool removed = false;
  for (const char* name : {kCheckpointName, kCheckpointTmpName}) {
    if (unlinkat(dir_fd_, name, 0) == 0) {
      removed = true;
      if (why) Log("removed %s/%s: %s", options_.dir.c_str(), name, why);
    }
  }
  // Gone for good before anything is written: a later start never finds it again.
  if (removed) file::SyncDir(dir_fd_);
}

bool Binlog::LoadCheckpoint(Replay* replay, bool* used, std::string* error) {
  *used = false;
  const std::string path = options_.dir + "/" + kCheckpointName;
  if (unlinkat(dir_fd_, kCheckpointTmpName, 0) == 0) {
    Log("removing %s/%s: a checkpoint whose writing did not finish", options_.dir.c_str(),
        kCheckpointTmpName);
  }
  checkpoint_ = std::make_unique<CheckpointReader>();
  std::string why;
  int err = 0;
  bool ok = checkpoint_->Open(path, &why, &err);
  if (!ok && err == ENOENT) {
    checkpoint_.reset();
    return true;
  }
  if (ok && (!options_.disk_tier || !options_.restore_cold || !options_.restore_cold_ready)) {
    ok = false;
    why = "the disk tier is off: no --hot-memory";
  }
  PrefixMatch match;
  if (ok) {
    std::vector<SegmentView> views;
    for (const auto& m : replay->maps) views.push_back({m->seq, m->data, m->size});
    ok = MatchPrefix(checkpoint_->meta(), views, &match, &why);
  }
  for (size_t i = 0; ok && i < replay->maps.size(); i++) {
    const bool data = match.from[i] > int64_t{kSegmentHeaderSize};
    if (data && !replay->has_data[i]) {
      ok = false;
      why = "binlog." + std::to_string(replay->maps[i]->seq) + ": its first record differs";
    }
  }
  std::string fatal;
  if (ok) ok = CheckpointTail(replay, match, &why, &fatal);
  if (ok) ok = CheckpointedHot(replay, &why, &fatal);
  if (!ok && !fatal.empty()) {
    *error = fatal;
    // A damaged record in the tail (a full replay stops there too), or asked to stop while
    // reading: nothing was written but a torn tail cleared, so the checkpoint stays for
    // the next start.
    checkpoint_.reset();
    return false;
  }
  if (!ok) {
    Log("%s: not used (%s); every record is read instead", path.c_str(), why.c_str());
    replay->ForgetJobs();
    replay->tube_tries.clear();
    replay->after_checkpoint = false;
    replay->max_id = 0;
    replay->from.assign(replay->maps.size(), kSegmentHeaderSize);
    replayed_records_ = 0;
    skipped_ = 0;
    checkpoint_.reset();
    RemoveCheckpoint(nullptr);
    return true;
  }
  replay->max_id = std::max(replay->max_id, checkpoint_->meta().max_id);
  checkpoint_tail_ = replayed_records_;
  *used = true;
  return true;
}

// The records after the checkpoint's position, replayed on top of what it lists. Records
// are absolute (storage/record.h): a kFull record holds the whole job, a state record the
// job's whole new state and counters, a delete and a kTubeTries record their whole effect;
// so a record whose effect the checkpoint already holds (a job moved by compaction, then
// the checkpoint written, say) changes nothing when replayed again, and the tail decides
// for every job it names. A tube default or job the checkpoint lists in a segment removed
// since must have a record in the tail (compaction wrote it again, or it was deleted).
bool Binlog::CheckpointTail(Replay* replay, const PrefixMatch& match, std::string* why,
                            std::string* error) {
  const CheckpointMeta& meta = checkpoint_->meta();
  for (const CheckpointTubeTries& t : meta.tube_tries) {
    const bool listed = std::any_of(meta.segments.begin(), meta.segments.end(),
                                    [&](const CheckpointSegment& c) { return c.seq == t.seq; });
    if (!listed || t.tries == 0 || t.tube.empty()) {
      *why = "tube default of '" + t.tube + "' is not in a segment";
      return false;
    }
    replay->tube_tries[t.tube] = {t.tries, t.seq, t.size};
  }
  for (size_t i = 0; i < replay->maps.size(); i++) {
    replay->from[i] = static_cast<size_t>(match.from[i]);
  }
  // At its position in a segment it lists there must be a record or the end of the
  // records. Anything else (a record cut there by a crash, or a position not where a record
  // starts) is left to a full replay, which reads the segment from its start: taken for a
  // torn tail here, the rest of a record before it would be erased.
  for (size_t i = 0; i < replay->maps.size(); i++) {
    const Mapped& m = *replay->maps[i];
    const size_t at = replay->from[i];
    if (at <= kSegmentHeaderSize) continue;
    Record r;
    size_t size = 0;
    std::string bad;
    if (ParseRecord(m.data + at, m.size - at, &r, &size, &bad, m.version) == Parse::kBad) {
      *why = m.path + " offset " + std::to_string(at) + ", its position: no record (" + bad + ")";
      return false;
    }
  }
  replay->after_checkpoint = true;
  replay->listed_max = meta.max_id;  // the jobs it may list: those put after it are not
  for (size_t i = 0; i < replay->maps.size(); i++) {
    if (!ReplaySegment(i, replay, error) || !GoOn(error)) return false;
  }
  for (const auto& [name, t] : replay->tube_tries) {
    if (!replay->MapOf(t.seq)) {
      *why = "tube default of '" + name + "' is in binlog." + std::to_string(t.seq) +
             ", removed since, and not in a later record";
      return false;
    }
  }
  if (!match.removed.empty()) {
    Log("%s/%s: %zu segments it covers were removed since; every job it lists in them has a "
        "later record",
        options_.dir.c_str(), kCheckpointName, match.removed.size());
  }
  return true;
}

// The checkpoint's jobs, merged with the tail's. A job the tail names is restored as a
// replay restores it (its kFull record, from the tail or else from the checkpoint, and its
// latest state record); of the others, those in memory at its writing have their kFull
// records read and checked, their places noted in replay->jobs; those on disk wait for
// RestoreCheckpointedCold. Every job's record must lie inside a segment that is still
// there, and those read must be the job's. Then rewinds the checkpoint for the cold jobs.
// Every 16,384 records read it lets the loop turn (GoOn), as a replay does; false with
// stopped_ set and *error if the server was asked to stop meanwhile.
bool Binlog::CheckpointedHot(Replay* replay, std::string* why, std::string* error) {
  const CheckpointMeta& meta = checkpoint_->meta();
  std::unordered_map<uint32_t, size_t> at;  // segment index by sequence number
  for (size_t i = 0; i < meta.segments.size(); i++) at[meta.segments[i].seq] = i;
  CheckpointJob j;
  std::string buf;
  auto fail = [&](const std::string& what) {
    *why = "job " + std::to_string(j.id) + ": " + what;
    return false;
  };
  // Reads and checks j's kFull record (pread, not from the map: the page cache holds the
  // pages, not this process; scattered over every segment, they would count in its
  // resident memory). Only checked here, not kept: the restore parses it again.
  auto check = [&](const Mapped& m) {
    if (++checkpoint_reads_ % 16384 == 0 && !GoOn(error)) return false;
    buf.assign(j.size, '\0');
    ssize_t got = 0;
    while (got >= 0 && static_cast<size_t>(got) < buf.size()) {
      const ssize_t n = pread(m.fd, buf.data() + got, buf.size() - static_cast<size_t>(got),
                              int64_t{j.off} + got);
      if (n <= 0 && !(n < 0 && errno == EINTR))
        return fail(std::string("read: ") + strerror(errno));
      got += n > 0 ? n : 0;
    }
    Record r;
    size_t size = 0;
    std::string bad;
    if (ParseRecord(buf.data(), buf.size(), &r, &size, &bad, m.version) != Parse::kOk ||
        r.type != RecordType::kFull || r.job.id != j.id || size != j.size) {
      return fail("binlog." + std::to_string(j.seq) + " offset " + std::to_string(j.off) +
                  " is not its record" + (bad.empty() ? "" : " (" + bad + ")"));
    }
    return true;
  };
  while (checkpoint_->Next(&j, why)) {
    auto it = at.find(j.seq);
    if (it == at.end() || j.off < kSegmentHeaderSize || j.size < kRecordHeaderSize ||
        int64_t{j.off} + j.size > meta.segments[it->second].end) {
      return fail("its record is not in the segments");
    }
    if (j.id > meta.max_id) return fail("above the highest id");
    if (j.cold && j.resv < kDeleteRecordSize) return fail("no room kept for its delete");
    if (j.cold && j.resv > JobReserve(true)) return fail("more room kept than a job uses");
    Replayed* t = replay->jobs.Find(j.id);
    if (t && (t->deleted || t->full_seq != 0)) continue;  // the tail has it whole, or deleted
    const Mapped* m = replay->MapOf(j.seq);
    if (!m) {
      return fail("its record is in binlog." + std::to_string(j.seq) +
                  ", removed since, and not in a later record");
    }
    if (j.cold && !t) continue;  // restored from the checkpoint, unread
    if (!check(*m)) return false;
    if (t) {  // the tail has only state records: they go on top of this one
      t->full_off = int64_t{j.off};
      t->full_seq = j.seq;
      t->full_size = j.size;
    } else {
      replay->jobs.Emplace(j.id, Replayed{int64_t{j.off}, 0, j.seq, j.seq, j.size, true});
    }
  }
  return why->empty() && checkpoint_->Rewind(why);
}

bool Binlog::RestoreCheckpointedCold(const Replay& replay, uint64_t below, Nanos now, int64_t wall,
                                     std::string* error) {
  if (!checkpoint_) return true;
  const CheckpointMeta& meta = checkpoint_->meta();
  CheckpointJob j;
  std::string why;
  while (checkpoint_->NextBelow(below, &j, &why)) {
    // A job the tail names is restored from replay.jobs (or was deleted).
    if (!j.cold || replay.jobs.Find(j.id)) continue;
    const engine::Tube* t = engine_->RestoreCold(j.id, meta.tubes[j.tube]);
    Segment* seg = FindSegment(j.seq);
    std::pair<JobMeta*, bool> made{nullptr, false};
    if (t && seg) made = jobs_.Emplace(j.id, JobMeta{j.seq, j.size, j.resv, j.seq});
    if (!made.second) {
      why = "cannot restore job " + std::to_string(j.id);
      break;
    }
    made.first->set_full_off(j.off);
    seg->live++;
    reserved_ += j.resv;
    live_bytes_ += j.size;
    restored_++;
    restored_cold_++;
    const Nanos created = FromWall(j.created_wall, now, wall);
    if (j.ready) {
      options_.restore_cold_ready(ColdReadyIndex::Entry{j.id, j.pri, created, t});
      restored_cold_ready_++;
    } else {
      options_.restore_cold(
          ColdIndex::Entry{j.id, FromWall(j.deadline_wall, now, wall), created, t});
    }
    // A stop here leaves the checkpoint in place: nothing has been written.
    if (restored_cold_ % 16384 == 0 && !GoOn(error)) return false;
  }
  if (why.empty()) return true;
  // Its second reading failed (an I/O error): it is removed before anything is written.
  checkpoint_.reset();
  RemoveCheckpoint(nullptr);
  *error = options_.dir + "/" + kCheckpointName + ": " + why + "; start again to replay";
  return false;
}

// The checkpoint stays: it still describes a prefix of the binlog as this run goes on
// writing (records are only appended after a segment's end or in new segments; segments are
// only removed oldest first, by compaction, which writes again what it moves), so the next
// start after a crash uses it too, with a longer tail (docs/DISK-TIER.md).
void Binlog::FinishCheckpointedCold() {
  checkpoint_.reset();
  Log("%s: %zu jobs kept on disk restored from the checkpoint (%zu of them ready), their "
      "records not read; %zu records after it replayed",
      options_.dir.c_str(), restored_cold_, restored_cold_ready_, checkpoint_tail_);
  checkpoint_used_ = true;
}

// CRC of the last bytes of s's records (cold_checkpoint.h), read from its file.
bool Binlog::SegmentTail(const Segment& s, uint32_t* crc) {
  const int64_t from = std::max<int64_t>(kSegmentHeaderSize, s.end - kCheckpointTailBytes);
  const size_t want = static_cast<size_t>(std::max<int64_t>(0, s.end - from));
  std::string bytes(want, '\0');
  const std::string path = PathOf(s.seq);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  size_t got = 0;
  while (fd >= 0 && got < want) {
    ssize_t n = pread(fd, bytes.data() + got, want - got, from + static_cast<int64_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  if (fd >= 0) close(fd);
  if (got != want) {
    Log("checkpoint not written: cannot read %s", path.c_str());
    return false;
  }
  *crc = want > 0 ? Crc32c(bytes.data(), want) : 0;  // SegmentTailCrc of the file's bytes
  return true;
}

bool Binlog::MakeJobsWhole(const ColdIndex& cold, const std::vector<uint64_t>& ids) {
  size_t rewritten = 0;
  for (uint64_t id : ids) {
    if (jobs_.Find(id)->full_off()) continue;
    engine::Job* j = cold.Contains(id) ? nullptr : engine_->FindMutable(id);
    if (!j) {
      Log("checkpoint not written: job %" PRIu64 " is neither in memory nor whole in a record", id);
      return false;
    }
    if (!WriteWholeAgain(*j)) {  // as compaction moves a job: in its current state
      Log("checkpoint not written: no space to write job %" PRIu64 " whole again", id);
      return false;
    }
    rewritten++;
    if (!jobs_.Find(id)->full_off()) {
      Log("checkpoint not written: job %" PRIu64 " lies beyond 4 GiB in its segment", id);
      return false;
    }
  }
  if (rewritten > 0 && options_.verbosity > 0) {
    Log("checkpoint: %zu jobs changed since their put written whole again", rewritten);
  }
  return true;
}

bool Binlog::WriteCheckpoint(const ColdIndex& cold, const ColdReadyIndex& ready) {
  if (!options_.disk_tier || failed_ || !engine_ || segs_.empty()) return false;
  std::vector<uint64_t> ids;
  ids.reserve(jobs_.size());
  jobs_.ForEach([&](uint64_t id, JobMeta&) { ids.push_back(id); });
  std::sort(ids.begin(), ids.end());
  if (!MakeJobsWhole(cold, ids)) return false;
  Close();  // every record written and synced before the checkpoint that covers it
  if (failed_) return false;
  CheckpointMeta meta;
  meta.max_id = max_id_;
  for (const auto& s : segs_) {
    CheckpointSegment c{s->seq, s->size, s->end, 0};
    if (!SegmentTail(*s, &c.tail_crc)) return false;
    meta.segments.push_back(c);
  }
  for (const auto& [name, t] : tube_tries_)
    meta.tube_tries.push_back({name, t.tries, t.seq, t.size});
  std::unordered_map<const engine::Tube*, uint32_t> tube_of;
  ColdIndex::Entry e;
  ColdReadyIndex::Entry r;
  for (uint64_t id : ids) {
    const engine::Tube* t = cold.Get(id, &e) ? e.tube : ready.Get(id, &r) ? r.tube : nullptr;
    if (t && tube_of.emplace(t, meta.tubes.size()).second) meta.tubes.push_back(t->name());
  }
  meta.jobs = ids.size();
  const Nanos now = clock_.Now();
  const int64_t wall = WallNow();
  CheckpointWriter w;
  std::string error;
  bool ok = w.Begin(options_.dir, dir_fd_, meta, &error);
  size_t cold_jobs = 0, ready_jobs = 0;
  for (size_t i = 0; ok && i < ids.size(); i++) {
    const JobMeta& m = *jobs_.Find(ids[i]);
    CheckpointJob j{ids[i], m.full_seq, *m.full_off(), m.full_size};
    if (cold.Get(ids[i], &e)) {
      j.cold = true;
      j.resv = m.resv;
      j.tube = tube_of[e.tube];
      j.deadline_wall = wall + (e.deadline - now);
      j.created_wall = wall + (e.created - now);
      cold_jobs++;
    } else if (ready.Get(ids[i], &r)) {
      j.cold = true;
      j.ready = true;
      j.resv = m.resv;
      j.tube = tube_of[r.tube];
      j.pri = r.pri;
      j.created_wall = wall + (r.created - now);
      cold_jobs++;
      ready_jobs++;
    }
    ok = w.Add(j, &error);
  }
  if (!ok || !w.Finish(&error)) {
    Log("checkpoint not written: %s", error.c_str());
    return false;
  }
  Log("%s/%s: %zu jobs, %zu of them kept on disk only (%zu ready; %" PRId64 " bytes)",
      options_.dir.c_str(), kCheckpointName, ids.size(), cold_jobs, ready_jobs, w.bytes());
  return true;
}

}  // namespace stalkd::storage
