#include "engine/engine.h"

#include <algorithm>

#include "base/check.h"

namespace stalkd::engine {

const char* JobStateName(JobState s) {
  switch (s) {
    case JobState::kReady:
      return "ready";
    case JobState::kDelayed:
      return "delayed";
    case JobState::kReserved:
      return "reserved";
    case JobState::kBuried:
      return "buried";
    case JobState::kNew:
      break;
  }
  return "invalid";
}

Engine::Engine(const Clock& clock, EngineOptions options) : clock_(clock), options_(options) {
  default_tube_ = FindOrMakeTube("default");
  Ref(default_tube_);  // "default" exists for the server's whole life
  detached_ = new Session(nullptr, &heap_bytes_);
}

Engine::~Engine() {
  auto free_session = [](Session* s) {
    while (Job* j = s->reserved_order_.front()) {
      s->reserved_order_.Remove(j);
      s->reserved_.Remove(j);
      Job::Free(j);
    }
    delete s;
  };
  while (Session* s = sessions_.front()) {
    sessions_.Remove(s);
    free_session(s);
  }
  while (Session* s = closing_.front()) {
    closing_.Remove(s);
    free_session(s);
  }
  free_session(detached_);
  for (Tube* t : tube_list_) {
    while (Job* j = t->ready.Pop()) Job::Free(j);
    while (Job* j = t->delayed.Pop()) Job::Free(j);
    while (Job* j = t->buried.front()) {
      t->buried.Remove(j);
      Job::Free(j);
    }
  }
}

// ---------------------------------------------------------------------------- job states

void Engine::MakeReady(Job* j) {
  Tube* t = j->tube;
  j->set_state(JobState::kReady);
  t->ready.Push(j);
  counters_.ready++;
  if (IsUrgent(j)) {
    counters_.urgent++;
    t->stat.urgent++;
  }
  RefreshEligible(t);
}

void Engine::MakeDelayed(Job* j, Nanos deadline) {
  Tube* t = j->tube;
  j->set_state(JobState::kDelayed);
  ColdOf(j).deadline = deadline;
  t->delayed.Push(j);
  counters_.delayed++;
  RefreshDelayed(t);
}

void Engine::MakeBuried(Job* j) {
  ColdOf(j);
  j->set_state(JobState::kBuried);
  j->cold->deadline = static_cast<Nanos>(++bury_seq_);  // BurySeq
  j->tube->buried.PushBack(j);
  counters_.buried++;
}

void Engine::TakeOut(Job* j) {
  Tube* t = j->tube;
  switch (j->state()) {
    case JobState::kReady:
      t->ready.Remove(j);
      if (cold_) ReadyLeft(t);
      counters_.ready--;
      if (IsUrgent(j)) {
        counters_.urgent--;
        t->stat.urgent--;
      }
      RefreshEligible(t);
      break;
    case JobState::kDelayed:
      t->delayed.Remove(j);
      counters_.delayed--;
      RefreshDelayed(t);
      break;
    case JobState::kReserved: {
      Session* s = j->cold->reserver;
      s->reserved_.Remove(j);
      s->reserved_order_.Remove(j);
      counters_.reserved--;
      t->stat.reserved--;
      j->cold->reserver = nullptr;
      RefreshTimer(s);
      break;
    }
    case JobState::kBuried:
      t->buried.Remove(j);
      if (cold_) BuriedLeft(t);
      counters_.buried--;
      break;
    case JobState::kNew:
      break;
  }
  j->set_state(JobState::kNew);
}

void Engine::ReserveFor(Session* s, Job* j, const ReserveOptions& opts) {
  Session* holder = opts.detached ? detached_ : s;
  if (observer_) {
    // A job never reserved, kicked or released became ready when its delay ended.
    JobCounts n = j->counts();
    if (n.reserves == 0 && n.kicks == 0 && n.releases == 0) {
      Nanos ready_at = j->created() + Seconds(j->delay_s());
      observer_->OnFirstReserve(*j->tube, std::max<Nanos>(0, clock_.Now() - ready_at));
    }
  }
  if (opts.ttr_s != 0 && !j->has_extra()) GrowExtra(j, 0);
  JobCold& c = ColdOf(j);
  uint32_t ttr_s = j->ttr_s;
  if (JobExtra* x = j->extra()) {
    x->reserve_ttr_s = opts.ttr_s;
    if (opts.ttr_s != 0) ttr_s = opts.ttr_s;
    // Not logged either: a crash gives back the try of a reservation in progress.
    if (x->limited && !opts.freeze_tries && x->tries_left > 0) x->tries_left--;
    x->bury_reason = BuryReason::kNone;
  }
  j->set_state(JobState::kReserved);
  c.reserver = holder;
  c.deadline = clock_.Now() + Seconds(ttr_s);
  c.counts.reserves++;  // not logged (see JobLog): written with the job's next record
  holder->reserved_.Push(j);
  holder->reserved_order_.PushBack(j);
  counters_.reserved++;
  j->tube->stat.reserved++;
  RefreshTimer(holder);
}

JobCold& Engine::ColdOf(Job* j) {
  if (!j->cold) {
    Job::AddCold(j);
    memory_used_ += sizeof(JobCold);
  }
  return *j->cold;
}

void Engine::FreeJob(Job* j) {
  if (j->has_extra()) Untrack(j);
  jobs_.Erase(j->id);
  Tube* t = j->tube;
  memory_used_ -= j->footprint();
  Job::Free(j);
  Unref(t);
}

Job* Engine::OwnReserved(Session* s, uint64_t id) const {
  Job* j = jobs_.Find(id);
  if (!j || j->state() != JobState::kReserved) return nullptr;
  Session* holder = j->cold->reserver;
  return holder == s || holder == detached_ ? j : nullptr;
}

// ---------------------------------------------------------------------------- put

Job* Engine::NewJob(Session* s, uint32_t pri, uint32_t delay_s, uint32_t ttr_s, uint32_t body_size,
                    const JobOptions& opts) {
  if (!s->producer_) {
    s->producer_ = true;
    counters_.producers++;
  }
  // A delayed job needs its cold part from the start (for delay_s and the deadline), and
  // the put may grow the heap the job goes into by a chunk and the id table by a page. (If
  // the job goes straight to a waiting session, what its reserve adds, as any reserve's, is
  // not refused.)
  const Tube* t = s->use_;
  const uint32_t tries = opts.tries != 0 ? opts.tries : t->default_tries;
  size_t heap = delay_s > 0 ? t->delayed.push_growth() : t->ready.push_growth();
  size_t index = heap + jobs_.insert_growth(next_id_);
  const bool extended = opts.Extended(tries);
  const size_t blob = extended ? JobExtra::BlobSize(opts.key, opts.attrs, opts.attr_count) : 0;
  size_t cost = Job::Footprint(body_size, delay_s > 0);
  if (extended) cost += ExtraCost(opts, blob, delay_s);
  if (memory_used() + cost + index > options_.max_memory) return nullptr;
  Job* j = Job::Allocate(body_size);
  if (!j) return nullptr;
  memory_used_ += j->footprint();
  j->id = next_id_++;
  j->tube = s->use_;
  Ref(j->tube);
  j->pri = pri;
  if (extended) FillExtra(j, opts, blob, tries);
  if (delay_s > 0) ColdOf(j).delay_s = delay_s;
  j->ttr_s = ttr_s == 0 ? 1 : ttr_s;
  j->set_created(clock_.Now());
  return j;
}

void Engine::Discard(Job* j) {
  STALKD_DCHECK(j->state() == JobState::kNew);
  Tube* t = j->tube;
  memory_used_ -= j->footprint();
  Job::Free(j);
  Unref(t);
}

Engine::PutResult Engine::Put(Session* s, Job* j, uint64_t* existing) {
  (void)s;
  if (draining_) {
    Discard(j);
    return PutResult::kDraining;
  }
  if (const JobExtra* x = j->extra(); x && x->key_len > 0) {
    auto it = j->tube->keys.find(x->key());
    if (it != j->tube->keys.end()) {
      if (existing) *existing = it->second->id;
      Discard(j);
      return PutResult::kExists;
    }
  }
  if (log_ && !log_->Admit(*j)) {
    Discard(j);
    return PutResult::kNotDurable;
  }
  jobs_.Insert(j);
  if (j->has_extra()) Track(j);
  counters_.total_jobs++;
  j->tube->stat.total_jobs++;
  if (j->delay_s() > 0) {
    MakeDelayed(j, clock_.Now() + Seconds(j->delay_s()));
  } else {
    MakeReady(j);
  }
  if (log_) log_->Put(*j);
  ProcessQueue();
  return PutResult::kInserted;
}

bool Engine::Restore(const RestoredJob& r) {
  if (r.id == 0 || jobs_.Find(r.id) || !jobs_.Fits(r.id)) return false;
  Job* j = Job::Allocate(static_cast<uint32_t>(r.body.size()));
  STALKD_CHECK(j != nullptr);
  memory_used_ += j->footprint();
  j->id = r.id;
  j->tube = FindOrMakeTube(r.tube);
  Ref(j->tube);
  j->pri = r.pri;
  j->ttr_s = r.ttr_s == 0 ? 1 : r.ttr_s;
  j->set_created(r.created);
  if (r.has_extra) {
    JobExtra* x = GrowExtra(j, static_cast<uint32_t>(r.blob.size()));
    x->limited = r.limited;
    x->tries_left = r.tries_left;
    x->expires_at = r.expires_at;
    x->bury_reason = r.bury_reason;
    x->key_len = r.key_len;
    x->attr_count = r.attr_count;
    std::copy(r.blob.begin(), r.blob.end(), x->blob());
  }
  if (r.delay_s != 0 || r.counts.any()) {
    JobCold& c = ColdOf(j);
    c.delay_s = r.delay_s;
    c.counts = r.counts;
  }
  std::copy(r.body.begin(), r.body.end(), j->data());
  j->data()[r.body.size()] = '\r';
  j->data()[r.body.size() + 1] = '\n';
  jobs_.Insert(j);
  if (j->has_extra()) Track(j);
  counters_.total_jobs++;
  j->tube->stat.total_jobs++;
  next_id_ = std::max(next_id_, r.id + 1);
  switch (r.state) {
    case JobState::kDelayed:
      MakeDelayed(j, r.deadline);
      break;
    case JobState::kBuried:
      MakeBuried(j);
      break;
    default:
      MakeReady(j);
      break;
  }
  return true;
}

// ---------------------------------------------------------------------------- reserve

bool Engine::DeadlineSoon(const Session* s, Nanos now) const {
  const Job* j = s->reserved_.top();
  return j && now >= j->deadline() - kSecond;
}

void Engine::MarkWorker(Session* s) {
  if (s->worker_) return;
  s->worker_ = true;
  counters_.workers++;
}

bool Engine::Reserve(Session* s, Nanos timeout, const ReserveOptions& opts) {
  MarkWorker(s);
  s->reserve_opts_ = opts;
  Nanos now = clock_.Now();
  if (DeadlineSoon(s, now)) {
    bool any_ready = std::any_of(s->watch_.begin(), s->watch_.end(),
                                 [](const Tube* t) { return !t->ready.empty(); });
    if (!any_ready) return false;
  }
  StartWaiting(s, timeout);
  ProcessQueue();
  if (s->waiting_ && timeout <= 0) {
    StopWaiting(s);
    events_.push_back({Event::Kind::kTimedOut, s, nullptr});
  }
  return true;
}

Job* Engine::ReserveJob(Session* s, uint64_t id) {
  Job* j = jobs_.Find(id);
  if (!j) return nullptr;
  JobState state = j->state();
  if (state != JobState::kReady && state != JobState::kDelayed && state != JobState::kBuried) {
    return nullptr;
  }
  TakeOut(j);
  MarkWorker(s);
  ReserveFor(s, j, ReserveOptions{});
  return j;
}

Job* Engine::ReserveReady(Session* s, const ReserveOptions& opts) {
  Job* j = BestReady(s);
  if (!j) return nullptr;
  TakeOut(j);
  ReserveFor(s, j, opts);
  NextReadyFromDisk(j->tube);
  return j;
}

void Engine::StartWaiting(Session* s, Nanos timeout) {
  STALKD_DCHECK(!s->waiting_);
  s->waiting_ = true;
  counters_.waiting++;
  s->wait_until_ = timeout == kForever ? kForever : clock_.Now() + timeout;
  if (s->wait_capacity_ < s->watch_.size()) {
    s->wait_nodes_ = std::make_unique<WaitNode[]>(s->watch_.size());
    s->wait_capacity_ = static_cast<uint32_t>(s->watch_.size());
  }
  for (size_t i = 0; i < s->watch_.size(); i++) {
    WaitNode& n = s->wait_nodes_[i];
    n.session = s;
    n.tube = s->watch_[i];
    n.tube->waiters.PushBack(&n);
    RefreshEligible(n.tube);
  }
  RefreshTimer(s);
}

void Engine::StopWaiting(Session* s) {
  STALKD_DCHECK(s->waiting_);
  // The watch list cannot change while the session waits: its nodes are the first
  // watch_.size() (engine_invariants.cc checks it).
  for (size_t i = 0; i < s->watch_.size(); i++) {
    WaitNode& n = s->wait_nodes_[i];
    n.tube->waiters.Remove(&n);
    RefreshEligible(n.tube);
  }
  s->waiting_ = false;
  counters_.waiting--;
  s->wait_until_ = kForever;
  RefreshTimer(s);
}

// Hands ready jobs to waiting sessions: always the best job (lowest pri, then lowest id)
// among the tubes that have both, to the longest-waiting session of that tube.
void Engine::ProcessQueue() {
  if (in_queue_) return;  // the loop below goes on
  in_queue_ = true;
  while (Tube* t = eligible_.top()) {
    Job* j = t->ready.top();
    if (cold_) {
      // The tube's first may have left the heap since the tier last looked (a TTL expiry in
      // the Tick that ends its pause): a job on disk that comes before j is read back first.
      NextReadyFromDisk(t);
      if (eligible_.top() != t || t->ready.top() != j) continue;
    }
    Session* s = t->waiters.front()->session;
    TakeOut(j);
    StopWaiting(s);
    ReserveFor(s, j, s->reserve_opts_);
    events_.push_back({Event::Kind::kReserved, s, j});
    NextReadyFromDisk(t);
  }
  in_queue_ = false;
}

namespace {

// x belongs in `heap` or not (`want`); if it stays, its key may have changed.
template <typename Heap, typename T>
void Keep(Heap& heap, T* x, bool want) {
  bool in = heap.Contains(x);
  if (want && !in) {
    heap.Push(x);
  } else if (!want && in) {
    heap.Remove(x);
  } else if (want) {
    heap.Update(x);
  }
}

}  // namespace

void Engine::RefreshEligible(Tube* t) {
  Keep(eligible_, t, !t->waiters.empty() && !t->ready.empty() && !t->paused());
  RefreshAwaited(t);  // its waiters or its pause changed, or its jobs
}

void Engine::RefreshDelayed(Tube* t) {
  Keep(delay_tubes_, t, !t->delayed.empty());
  RefreshAwaited(t);
}

void Engine::RefreshAwaited(Tube* t) {
  Keep(awaited_, t, !t->delayed.empty() && !t->waiters.empty() && !t->paused());
}

// A session's timer fires at its soonest TTR expiry, or, while it waits in reserve, one
// second before that expiry (DEADLINE_SOON) or at its reserve timeout, whichever is first.
void Engine::RefreshTimer(Session* s) {
  Nanos wake = kForever;
  if (const Job* j = s->reserved_.top()) {
    wake = s->waiting_ ? j->deadline() - kSecond : j->deadline();
  }
  if (s->waiting_) wake = std::min(wake, s->wait_until_);
  s->wake_at_ = wake;
  Keep(timers_, s, wake != kForever && !s->closed_);
}

// ---------------------------------------------------------------------------- job commands

bool Engine::Delete(Session* s, uint64_t id) {
  Job* j = jobs_.Find(id);
  if (!j) return false;
  if (j->state() == JobState::kReserved && j->cold->reserver != s &&
      j->cold->reserver != detached_) {
    return false;
  }
  if (observer_ && j->state() == JobState::kReserved) {
    const JobExtra* x = j->extra();
    uint32_t ttr_s = x && x->reserve_ttr_s != 0 ? x->reserve_ttr_s : j->ttr_s;
    Nanos reserved_at = j->cold->deadline - Seconds(ttr_s);
    observer_->OnRunDone(*j->tube, std::max<Nanos>(0, clock_.Now() - reserved_at));
  }
  TakeOut(j);
  j->tube->stat.deletes++;
  if (log_) log_->Delete(*j);
  FreeJob(j);
  return true;
}

Engine::Changed Engine::Release(Session* s, uint64_t id, uint32_t pri, uint32_t delay_s) {
  Job* j = OwnReserved(s, id);
  if (!j) return {Changed::kNotFound};
  if (!Recordable(*j)) return {Changed::kNoRoom};
  TakeOut(j);
  j->pri = pri;
  JobCold& c = ColdOf(j);  // it has one: it was reserved
  c.delay_s = delay_s;
  c.counts.releases++;
  Return(j, delay_s, BuryReason::kRelease);
  return {Changed::kDone};
}

Engine::Changed Engine::Bury(Session* s, uint64_t id, uint32_t pri) {
  Job* j = OwnReserved(s, id);
  if (!j) return {Changed::kNotFound};
  if (!Recordable(*j)) return {Changed::kNoRoom};
  TakeOut(j);
  j->pri = pri;
  ColdOf(j).counts.buries++;
  if (ExpireIfPending(j)) return {Changed::kDone};
  MakeBuried(j);
  if (JobExtra* x = j->extra()) x->bury_reason = BuryReason::kCommand;
  Logged(j);
  return {Changed::kDone};
}

bool Engine::Touch(Session* s, uint64_t id) {
  Job* j = OwnReserved(s, id);
  if (!j) return false;
  const JobExtra* x = j->extra();
  uint32_t ttr_s = x && x->reserve_ttr_s != 0 ? x->reserve_ttr_s : j->ttr_s;
  j->cold->deadline = clock_.Now() + Seconds(ttr_s);
  Session* holder = j->cold->reserver;
  holder->reserved_.Update(j);
  RefreshTimer(holder);
  return true;
}

Engine::Changed Engine::KickJob(uint64_t id) {
  Job* j = jobs_.Find(id);
  if (!j || (j->state() != JobState::kBuried && j->state() != JobState::kDelayed)) {
    return {Changed::kNotFound};
  }
  return {Kick(j) ? Changed::kDone : Changed::kNoRoom};
}

bool Engine::Kick(Job* j) {
  if (!Recordable(*j)) return false;
  TakeOut(j);
  ColdOf(j).counts.kicks++;
  if (JobExtra* x = j->extra()) {
    if (x->limited && x->tries_left == 0) x->tries_left = 1;  // a respawn gives one more try
    x->bury_reason = BuryReason::kNone;
  }
  MakeReady(j);
  Logged(j);
  ProcessQueue();  // as beanstalkd: each kicked job is offered to waiters at once
  return true;
}

uint32_t Engine::KickBuried(Tube* t, uint32_t n, bool* no_room) {
  uint32_t i = 0;
  for (; i < n && !t->buried.empty(); i++) {
    if (!Kick(t->buried.front())) {
      if (no_room) *no_room = true;
      break;
    }
  }
  return i;
}

uint32_t Engine::KickDelayed(Tube* t, uint32_t n, bool* no_room) {
  uint32_t i = 0;
  for (; i < n && !t->delayed.empty(); i++) {
    if (!Kick(t->delayed.top())) {
      if (no_room) *no_room = true;
      break;
    }
  }
  return i;
}

}  // namespace stalkd::engine
