// The engine's sessions and tubes: opening and closing a session (a closed one's reserved
// jobs are returned a budget's worth at a time, ReleaseClosed), the tubes a session uses and
// watches, which exist while something refers to them, and pausing a tube. The jobs' states
// and the commands on them are in engine.cc; timed work in engine_time.cc.
#include <algorithm>

#include "base/check.h"
#include "engine/engine.h"

namespace stalkd::engine {

// ---------------------------------------------------------------------------- sessions

Session* Engine::OpenSession(SessionOwner* owner) {
  auto* s = new Session(owner, &heap_bytes_);
  sessions_.PushBack(s);
  counters_.sessions++;
  counters_.total_sessions++;
  Use(s, "default");
  Watch(s, "default");
  return s;
}

void Engine::CloseSession(Session* s) {
  STALKD_CHECK(!s->closed_);
  if (s->waiting_) StopWaiting(s);
  counters_.sessions--;
  if (s->producer_) counters_.producers--;
  if (s->worker_) counters_.workers--;
  // Drop the watch list as beanstalkd's ms_clear does (the first, then from the back), so
  // that tubes vanishing together leave list-tubes in beanstalkd's order.
  for (size_t k = 0; k < s->watch_.size(); k++) {
    Tube* t = s->watch_[k == 0 ? 0 : s->watch_.size() - k];
    t->stat.watching_ct--;
    Unref(t);
  }
  s->watch_.clear();
  s->use_->stat.using_ct--;
  Unref(s->use_);
  s->use_ = nullptr;

  sessions_.Remove(s);
  s->closed_ = true;
  if (timers_.Contains(s)) timers_.Remove(s);
  // No event may outlive its session (one can be pending if s was handed a job after its
  // client went away but before this call).
  std::erase_if(events_, [s](const Event& e) { return e.session == s; });
  if (s->reserved_.size() <= kImmediateRelease) {
    // The usual case: a few jobs, returned at once (each offered to waiters, as beanstalkd).
    while (Job* j = s->reserved_order_.front()) {
      TakeOut(j);
      Return(j, 0, BuryReason::kRelease);
    }
    delete s;
    return;
  }
  closing_.PushBack(s);  // many jobs: returned by Tick, a budget's worth per call
}

uint32_t Engine::ReleaseClosed(uint32_t budget) {
  uint32_t moved = 0;
  while (moved < budget && !closing_.empty()) {
    Session* s = closing_.front();
    // As beanstalkd: in reservation order, each offered to waiting sessions at once.
    while (moved < budget && !s->reserved_.empty()) {
      Job* j = s->reserved_order_.front();
      TakeOut(j);
      Return(j, 0, BuryReason::kRelease);
      moved++;
    }
    if (s->reserved_.empty()) {
      closing_.Remove(s);
      delete s;
    }
  }
  return moved;
}

// ---------------------------------------------------------------------------- tubes

Tube* Engine::FindTube(std::string_view name) const {
  auto it = tubes_.find(name);
  return it == tubes_.end() ? nullptr : it->second.get();
}

Tube* Engine::FindOrMakeTube(std::string_view name) {
  if (Tube* t = FindTube(name)) return t;
  auto owned = std::make_unique<Tube>(std::string(name), &heap_bytes_);
  Tube* t = owned.get();
  if (!tube_tries_.empty()) t->default_tries = TubeTries(name);
  t->list_pos = static_cast<uint32_t>(tube_list_.size());
  tube_list_.push_back(t);
  tubes_.emplace(t->name(), std::move(owned));
  return t;
}

void Engine::Unref(Tube* t) {
  STALKD_DCHECK(t->refs > 0);
  if (--t->refs > 0) return;
  STALKD_DCHECK(t->job_count() == 0 && t->waiters.empty());
  if (paused_.Contains(t)) paused_.Remove(t);
  Tube* last = tube_list_.back();
  tube_list_[t->list_pos] = last;
  last->list_pos = t->list_pos;
  tube_list_.pop_back();
  tubes_.erase(tubes_.find(t->name()));
}

void Engine::Use(Session* s, std::string_view name) {
  Tube* t = FindOrMakeTube(name);
  Ref(t);
  t->stat.using_ct++;
  if (Tube* old = s->use_) {
    old->stat.using_ct--;
    Unref(old);
  }
  s->use_ = t;
}

size_t Engine::Watch(Session* s, std::string_view name) {
  STALKD_DCHECK(!s->waiting_);  // its wait nodes match the watch list (StopWaiting)
  Tube* t = FindOrMakeTube(name);
  if (std::find(s->watch_.begin(), s->watch_.end(), t) == s->watch_.end()) {
    s->watch_.push_back(t);
    t->stat.watching_ct++;
    Ref(t);
  }
  return s->watch_.size();
}

size_t Engine::Ignore(Session* s, std::string_view name) {
  STALKD_DCHECK(!s->waiting_);
  auto it = std::find_if(s->watch_.begin(), s->watch_.end(),
                         [name](const Tube* t) { return t->name() == name; });
  if (it == s->watch_.end()) return s->watch_.size();
  if (s->watch_.size() < 2) return 0;
  Tube* t = *it;
  *it = s->watch_.back();
  s->watch_.pop_back();
  t->stat.watching_ct--;
  Unref(t);
  return s->watch_.size();
}

bool Engine::PauseTube(std::string_view name, uint32_t delay_s) {
  Tube* t = FindTube(name);
  if (!t) return false;
  t->stat.pauses++;
  if (delay_s == 0) {
    t->pause_ns = 0;
    if (paused_.Contains(t)) paused_.Remove(t);
  } else {
    t->pause_ns = Seconds(delay_s);
    t->unpause_at = clock_.Now() + t->pause_ns;
    if (paused_.Contains(t)) {
      paused_.Update(t);
    } else {
      paused_.Push(t);
    }
  }
  RefreshEligible(t);
  ProcessQueue();
  return true;
}

}  // namespace stalkd::engine
