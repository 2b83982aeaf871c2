// Engine::CheckInvariants: for tests and fuzzers.
#include <algorithm>

#include "base/check.h"
#include "engine/engine.h"

namespace stalkd::engine {

void Engine::CheckInvariants() const {
  uint64_t ready = 0, urgent = 0, delayed = 0, buried = 0, reserved = 0, waiting = 0;
  size_t heap_bytes = 0;  // what heap_bytes_ must be
  uint64_t with_ttl = 0;
  auto check_job = [this, &with_ttl](const Job* j, JobState state, const Tube* t) {
    STALKD_CHECK(j->state() == state && j->tube == t && jobs_.Find(j->id) == j);
    if (const JobExtra* x = j->extra()) {
      // A job with a TTL waits in the expiry heap until it is due; a reserved job whose TTL
      // passed waits for its reservation to end instead.
      STALKD_CHECK(!x->expire_pending || state == JobState::kReserved);
      bool pending = x->has_ttl() && !x->expire_pending;
      STALKD_CHECK(expiries_.Contains(j) == pending);
      if (pending) with_ttl++;
      if (x->key_len > 0) {
        auto it = t->keys.find(x->key());
        STALKD_CHECK(it != t->keys.end() && it->second->tube == t);
      }
      STALKD_CHECK(x->bury_reason == BuryReason::kNone || state == JobState::kBuried);
    }
    // Only a ready job may lack the cold part (deadline, list node, reserver).
    STALKD_CHECK(j->cold != nullptr || state == JobState::kReady);
    if (const JobCold* c = j->cold) {
      STALKD_CHECK(c->job == j);
      STALKD_CHECK((c->reserver != nullptr) == (state == JobState::kReserved));
      STALKD_CHECK(c->linked() == (state == JobState::kReserved || state == JobState::kBuried));
    }
  };
  STALKD_CHECK(tube_list_.size() == tubes_.size());
  for (size_t i = 0; i < tube_list_.size(); i++) {
    const Tube* t = tube_list_[i];
    STALKD_CHECK(t->list_pos == i);
    STALKD_CHECK(FindTube(t->name()) == t);
    STALKD_CHECK(t->ready.IsHeap() && t->delayed.IsHeap());
    uint64_t tube_urgent = 0;
    for (size_t k = 0; k < t->ready.size(); k++) {
      const Job* j = t->ready.at(k);
      check_job(j, JobState::kReady, t);
      if (IsUrgent(j)) tube_urgent++;
    }
    for (size_t k = 0; k < t->delayed.size(); k++)
      check_job(t->delayed.at(k), JobState::kDelayed, t);
    uint64_t last_seq = 0;
    for (const Job* j : t->buried) {
      check_job(j, JobState::kBuried, t);
      STALKD_CHECK(BurySeq(*j) > last_seq);  // in bury order
      last_seq = BurySeq(*j);
    }
    STALKD_CHECK(tube_urgent == t->stat.urgent);
    for (const auto& [key, j] : t->keys) {
      STALKD_CHECK(jobs_.Find(j->id) == j && j->tube == t && j->extra()->key() == key);
    }
    STALKD_CHECK(t->default_tries == TubeTries(t->name()));
    bool want_eligible = !t->waiters.empty() && !t->ready.empty() && !t->paused();
    STALKD_CHECK(eligible_.Contains(t) == want_eligible);
    STALKD_CHECK(delay_tubes_.Contains(t) == !t->delayed.empty());
    STALKD_CHECK(awaited_.Contains(t) ==
                 (!t->delayed.empty() && !t->waiters.empty() && !t->paused()));
    STALKD_CHECK(paused_.Contains(t) == t->paused());
    STALKD_CHECK(t->refs > 0);
    ready += t->ready.size();
    urgent += tube_urgent;
    delayed += t->delayed.size();
    buried += t->buried.size();
    heap_bytes += t->ready.bytes() + t->delayed.bytes();
  }
  STALKD_CHECK(eligible_.IsHeap() && delay_tubes_.IsHeap() && paused_.IsHeap());
  STALKD_CHECK(awaited_.IsHeap());
  STALKD_CHECK(timers_.IsHeap() && expiries_.IsHeap());
  // No ready job may sit while a session waits for it.
  STALKD_CHECK(eligible_.empty());

  auto check_session = [&](const Session* s) {
    STALKD_CHECK(s->reserved_.IsHeap());
    for (size_t k = 0; k < s->reserved_.size(); k++) {
      const Job* j = s->reserved_.at(k);
      check_job(j, JobState::kReserved, j->tube);
      STALKD_CHECK(j->cold->reserver == s);
    }
    reserved += s->reserved_.size();
    heap_bytes += s->reserved_.bytes();
    if (s->waiting_) {
      waiting++;
      STALKD_CHECK(s->wait_capacity_ >= s->watch_.size());
      for (size_t i = 0; i < s->watch_.size(); i++) {
        STALKD_CHECK(s->wait_nodes_[i].tube == s->watch_[i]);
        STALKD_CHECK(s->wait_nodes_[i].session == s);
      }
    }
  };
  uint64_t open = 0;
  for (const Session* s : sessions_) {
    check_session(s);
    open++;
    STALKD_CHECK(!s->closed_ && s->use_ != nullptr && !s->watch_.empty());
  }
  for (const Session* s : closing_) {
    check_session(s);
    STALKD_CHECK(s->closed_ && !s->waiting_);
  }
  check_session(detached_);
  STALKD_CHECK(!detached_->waiting_ && detached_->watch_.empty());
  STALKD_CHECK(with_ttl == expiries_.size());
  heap_bytes += expiries_.bytes();
  STALKD_CHECK(open == counters_.sessions);
  STALKD_CHECK(ready == counters_.ready && urgent == counters_.urgent);
  STALKD_CHECK(delayed == counters_.delayed && buried == counters_.buried);
  STALKD_CHECK(reserved == counters_.reserved && waiting == counters_.waiting);
  STALKD_CHECK(jobs_.size() == ready + delayed + buried + reserved);
  STALKD_CHECK(heap_bytes == heap_bytes_);
}

}  // namespace stalkd::engine
