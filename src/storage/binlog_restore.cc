// Start-up, after the segments are read (or a checkpoint says what they hold): the live jobs
// go into the engine, or, with the disk tier, those it could keep on disk go straight into
// its index without entering memory (docs/DISK-TIER.md, "Restarts").

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "storage/binlog.h"
#include "storage/binlog_internal.h"
#include "storage/record.h"

namespace stalkd::storage {

using binlog_internal::FromWall;
using binlog_internal::JobReserve;
using binlog_internal::Mapped;
using binlog_internal::Replayed;
using binlog_internal::ToRestored;
using binlog_internal::WallNow;

namespace {

// How many pages of the maps the restore may have touched before it gives them back: 16 MiB
// (a restore from a checkpoint reads records scattered over every segment, a page each).
constexpr size_t kDropAfterPages = 4096;

// Whether a job that x describes, whose latest record is its kFull record, may start on
// disk: as the tier's demotion would take it (Engine::Evictable: delayed or ready, no key,
// no TTL). A reserve is not logged, so a job reserved at the crash whose latest record is its
// put is ready here and may start on disk; a buried one (its state record) starts in memory.
bool MayStartOnDisk(const JobRecord& x) {
  if (x.state != DiskState::kDelayed && x.state != DiskState::kReady) return false;
  return !x.extra.present || (x.extra.key_len == 0 && !x.extra.has_ttl);
}

}  // namespace

const Mapped* Binlog::Replay::MapOf(uint32_t seq) const {
  auto it = std::lower_bound(maps.begin(), maps.end(), seq,
                             [](const auto& m, uint32_t s) { return m->seq < s; });
  if (it == maps.end() || (*it)->seq != seq) return nullptr;
  touched.resize(maps.size());
  touched[static_cast<size_t>(it - maps.begin())] = true;
  return it->get();
}

bool Binlog::Replay::Job(uint64_t id, const Replayed& r, JobRecord* out, std::string* why) const {
  auto parse = [&](uint32_t seq, int64_t off, RecordType type, Record* rec) {
    const Mapped* m = MapOf(seq);
    size_t size = 0;
    if (!m || off < 0 || static_cast<size_t>(off) >= m->size) {
      *why = "its record is not in binlog." + std::to_string(seq);
      return false;
    }
    const auto at = static_cast<size_t>(off);
    touched_pages += 2;  // a record of a few hundred bytes: its page, maybe the next
    if (ParseRecord(m->data + at, m->size - at, rec, &size, why, m->version) != Parse::kOk ||
        rec->type != type || rec->job.id != id) {
      *why = "binlog." + std::to_string(seq) + " offset " + std::to_string(off) +
             " is not its record" + (why->empty() ? "" : " (" + *why + ")");
      return false;
    }
    return true;
  };
  Record full;
  if (!parse(r.full_seq, r.full_off, RecordType::kFull, &full)) return false;
  touched_pages += full.job.body.size() / 4096;  // a large body: its pages
  *out = full.job;
  if (r.full_latest) return true;
  Record state;
  if (!parse(r.last_seq, r.state_off, RecordType::kState, &state)) return false;
  // The key and attributes are in the kFull record only.
  *out = state.job;
  out->tube = full.job.tube;
  out->body = full.job.body;
  out->extra.key_len = full.job.extra.key_len;
  out->extra.attr_count = full.job.extra.attr_count;
  out->extra.blob = full.job.extra.blob;
  return true;
}

void Binlog::Replay::DropTouched() const {
  for (size_t i = 0; i < touched.size(); i++) {
    if (touched[i]) maps[i]->DropPages();
  }
  touched.assign(touched.size(), false);
  touched_pages = 0;
}

// Restores the replayed jobs in id order, so buried jobs keep their order and tubes are made
// in the order of their lowest live id (a start from the checkpoint merges its cold jobs
// in, RestoreCheckpointedCold). With the disk tier (both restore_cold callbacks given),
// every job it could keep on disk whose latest record is its kFull record goes straight
// into its index instead of memory: its record is parsed for its tube, priority and times,
// its body never copied. The tier's loop then reads back what is needed, as after a
// demotion: delayed jobs a lead time before they are due, each tube's first ready ones
// (docs/DISK-TIER.md).
bool Binlog::RestoreReplayed(Replay& replay, std::string* error) {
  std::unordered_map<uint32_t, Segment*> by_seq = AddReplayedSegments(replay);
  const bool to_disk = options_.disk_tier && options_.restore_cold && options_.restore_cold_ready;
  Nanos now = clock_.Now();
  int64_t wall = WallNow();
  jobs_.Reserve(replay.jobs.size());
  std::vector<uint64_t> ids;  // in id order
  ids.reserve(replay.jobs.size());
  replay.jobs.ForEach([&](uint64_t id, const Replayed&) { ids.push_back(id); });
  std::sort(ids.begin(), ids.end());
  std::string why;
  for (uint64_t id : ids) {
    // A start from the checkpoint: its cold jobs below this one first (id order).
    if (!RestoreCheckpointedCold(replay, id, now, wall, error)) return false;
    const Replayed& r = *replay.jobs.Find(id);
    // A checkpoint's tail: a job it deleted, or one it has only state records of (neither
    // the tail nor the checkpoint has its kFull record: gone, as in a replay).
    if (r.deleted || r.full_seq == 0) continue;
    JobRecord x;
    if (!replay.Job(id, r, &x, &why)) {
      *error = "cannot restore job " + std::to_string(id) + ": " + why;
      return false;
    }
    if (jobs_.Find(id)) continue;  // adopted already (cannot happen: ids differ)
    const bool whole = options_.disk_tier && r.full_latest && r.last_seq == r.full_seq &&
                       r.full_off <= int64_t{UINT32_MAX};
    if (to_disk && whole && MayStartOnDisk(x)) {
      const engine::Tube* t = engine_->RestoreCold(id, x.tube);
      if (!t) {
        *error = "cannot restore job " + std::to_string(id);
        return false;
      }
      const Nanos created = FromWall(x.created_wall, now, wall);
      if (x.state == DiskState::kDelayed) {
        options_.restore_cold({id, FromWall(x.deadline_wall, now, wall), created, t});
      } else {
        options_.restore_cold_ready({id, x.pri, created, t});
      }
      replayed_cold_++;
    } else if (!engine_->Restore(ToRestored(x, now, wall))) {
      *error = "cannot restore job " + std::to_string(id);
      return false;
    }
    Segment* seg = by_seq[r.full_seq];
    seg->live++;
    const uint32_t resv = JobReserve(x.extra.present);
    JobMeta* m = jobs_.Emplace(id, JobMeta{r.full_seq, r.full_size, resv, r.last_seq}).first;
    if (whole) m->set_full_off(static_cast<uint32_t>(r.full_off));
    reserved_ += resv;
    live_bytes_ += r.full_size;
    restored_++;
    if (replay.touched_pages >= kDropAfterPages) replay.DropTouched();
    if (restored_ % 16384 == 0 && !GoOn(error)) return false;
  }
  if (!RestoreCheckpointedCold(replay, UINT64_MAX, now, wall, error)) return false;
  replay.DropTouched();
  if (replayed_cold_ > 0) {  // (those restored from a checkpoint are logged by it)
    Log("%s: %zu jobs kept on disk from the start (the disk tier), %zu in memory",
        options_.dir.c_str(), replayed_cold_, restored_ - replayed_cold_ - restored_cold_);
  }
  RestoreTubeTries(replay, by_seq);
  return true;
}

// Gives the engine the tubes' default tries; their records keep their segments.
void Binlog::RestoreTubeTries(const Replay& replay,
                              const std::unordered_map<uint32_t, Segment*>& by_seq) {
  for (const auto& [name, t] : replay.tube_tries) {
    engine_->RestoreTubeTries(name, t.tries);
    by_seq.at(t.seq)->live++;
    tube_tries_[name] = TubeTriesMeta{t.seq, t.tries, t.size};
    live_bytes_ += t.size;
  }
}

}  // namespace stalkd::storage
