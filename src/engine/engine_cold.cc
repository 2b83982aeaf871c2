// The engine's side of the disk tier (docs/DISK-TIER.md): a delayed or ready job leaves
// memory and comes back, with nothing reported to the log (its record already holds it).

#include <algorithm>

#include "base/check.h"
#include "engine/cold_hooks.h"
#include "engine/engine.h"

namespace stalkd::engine {

bool Engine::Evictable(const Job& j) {
  if (j.state() != JobState::kDelayed && j.state() != JobState::kReady &&
      j.state() != JobState::kBuried) {
    return false;
  }
  const JobExtra* x = j.extra();
  // A key is indexed by its tube and a TTL by the expiry heap: such jobs stay in memory.
  return !x || (x->key_len == 0 && !x->has_ttl() && !x->expire_pending);
}

void Engine::Evict(Job* j) {
  STALKD_CHECK(Evictable(*j));
  TakeOut(j);
  jobs_.Erase(j->id);
  memory_used_ -= j->footprint();
  Job::Free(j);  // the tube's reference stays with the job on disk
}

bool Engine::Readmit(const RestoredJob& r) {
  Tube* t = FindTube(r.tube);
  if (!Restore(r)) return false;
  // Restore counted a new job and took a reference; the job on disk had both.
  counters_.total_jobs--;
  Job* j = jobs_.Find(r.id);
  j->tube->stat.total_jobs--;
  STALKD_CHECK(t == j->tube);  // the reference kept the tube alive
  Unref(j->tube);
  if (j->state() == JobState::kReady) ProcessQueue();  // a session may wait for it
  return true;
}

bool Engine::ReadmitBuried(const RestoredJob& r, uint64_t seq, const Job* before) {
  STALKD_CHECK(r.state == JobState::kBuried);
  if (!Readmit(r)) return false;
  Job* j = jobs_.Find(r.id);
  j->tube->buried.Remove(j);  // Readmit put it at the end, with a new number
  j->cold->deadline = static_cast<Nanos>(seq);
  j->tube->buried.InsertBefore(j, before);
  return true;
}

const Tube* Engine::RestoreCold(uint64_t id, std::string_view tube) {
  if (id == 0 || jobs_.Find(id)) return nullptr;
  Tube* t = FindOrMakeTube(tube);
  Ref(t);
  counters_.total_jobs++;
  t->stat.total_jobs++;
  next_id_ = std::max(next_id_, id + 1);
  return t;
}

void Engine::ForgetCold(const Tube* t) {
  Tube* tube = FindTube(t->name());
  STALKD_CHECK(tube == t);  // the lost job's reference kept it alive
  Unref(tube);
}

void Engine::NextReadyFromDisk(Tube* t) {
  if (cold_) cold_->PromoteReadyFirst(t, t->ready.top());
}

void Engine::ReadyLeft(Tube* t) { cold_->ReadyLeft(t); }

void Engine::BuriedLeft(Tube* t) { cold_->BuriedLeft(t); }

}  // namespace stalkd::engine
