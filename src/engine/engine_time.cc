// The engine's timed work: TTR expiries, reserve timeouts, delayed jobs falling due,
// pause ends and the jobs of closed sessions, a budget's worth per Tick.
#include <algorithm>

#include "base/check.h"
#include "engine/engine.h"

namespace stalkd::engine {

uint32_t Engine::ExpireSession(Session* s, Nanos now, uint32_t budget) {
  // As in beanstalkd, DEADLINE_SOON is decided before expired jobs are returned.
  bool soon = s->waiting_ && DeadlineSoon(s, now);
  uint32_t moved = 0;
  while (moved < budget && !s->reserved_.empty() && s->reserved_.top()->deadline() <= now) {
    Job* j = s->reserved_.top();
    TakeOut(j);
    j->cold->counts.timeouts++;
    counters_.timeouts++;
    Return(j, 0, BuryReason::kTimeout);
    moved++;
  }
  // A returned job may have gone straight back to s (it may watch that tube), ending its wait.
  if (soon && s->waiting_) {
    StopWaiting(s);
    events_.push_back({Event::Kind::kDeadlineSoon, s, nullptr});
  } else if (s->waiting_ && s->wait_until_ <= now) {
    StopWaiting(s);
    events_.push_back({Event::Kind::kTimedOut, s, nullptr});
  }
  return moved;
}

// Each kind of work has its own budget, so a flood of one (delayed jobs falling due) never
// holds up another (TTR expiries, reserve timeouts, a closed session's jobs).
Nanos Engine::Tick() {
  Nanos now = clock_.Now();
  const uint32_t budget = options_.tick_budget;
  bool more = false;

  // Due jobs of the tubes that sessions wait on first (as many as there are waiters, at
  // most: a tube leaves awaited_ when its last waiter is served), then all in deadline
  // order. So however many jobs fall due in tubes nobody consumes, a waiting consumer gets
  // its job in this Tick.
  uint32_t promoted = 0;
  auto promote_due = [&](auto& heap) {
    while (!heap.empty() && heap.top()->delayed.top()->deadline() <= now) {
      if (promoted == budget) {
        more = true;
        return;
      }
      Promote(heap.top()->delayed.top());
      promoted++;
    }
  };
  promote_due(awaited_);
  promote_due(delay_tubes_);
  ExpireDue(now, budget, &more);
  while (!paused_.empty() && paused_.top()->unpause_at <= now) {
    Tube* t = paused_.Pop();
    t->pause_ns = 0;
    RefreshEligible(t);
  }
  ProcessQueue();

  // Reserve timeouts and TTRs after the jobs and tubes that became ready, as beanstalkd's
  // prottick: a waiting reserve whose end has come gets a job that fell due before it, even
  // when this Tick runs after both.
  uint32_t timer_budget = budget;
  while (!timers_.empty() && timers_.top()->wake_at_ <= now) {
    if (timer_budget == 0) {
      more = true;
      break;
    }
    uint32_t moved = ExpireSession(timers_.top(), now, timer_budget);
    timer_budget -= std::max<uint32_t>(1, std::min(moved, timer_budget));
  }

  ReleaseClosed(budget);
  if (more || !closing_.empty()) return now;
  // Nobody waits for these: in batches (options_.batch_wait).
  Nanos unawaited = kForever;
  if (!delay_tubes_.empty()) unawaited = delay_tubes_.top()->delayed.top()->deadline();
  if (!expiries_.empty()) unawaited = std::min(unawaited, ExpiryOrder::KeyOf(expiries_.top()));
  Nanos next = unawaited == kForever ? kForever : std::max(unawaited, now + options_.batch_wait);
  if (!awaited_.empty()) next = std::min(next, awaited_.top()->delayed.top()->deadline());
  if (!paused_.empty()) next = std::min(next, paused_.top()->unpause_at);
  if (!timers_.empty()) next = std::min(next, timers_.top()->wake_at_);
  return next;
}

void Engine::Promote(Job* j) {
  TakeOut(j);
  MakeReady(j);
  ProcessQueue();  // each promoted job is offered to waiters at once, as in beanstalkd
}

void Engine::TakeEvents(std::vector<Event>* out) {
  out->insert(out->end(), events_.begin(), events_.end());
  events_.clear();
}

}  // namespace stalkd::engine
