#include "store/memory_store.h"

#include <algorithm>
#include <utility>

#include "base/check.h"
#include "store/memory_session.h"

namespace stalkd::store {

MemorySession::~MemorySession() {
  AbandonPut();
  std::erase_if(store_.kicking_, [this](const MemoryStore::Kick& k) { return k.session == this; });
  std::erase_if(store_.purging_, [this](const MemoryStore::Purge& p) { return p.session == this; });
  store_.engine_.CloseSession(s_);
  store_.DeliverEvents();  // its reserved jobs may have gone to waiting sessions
}

// ---------------------------------------------------------------------------- put

command::PutSlot MemorySession::BeginPut(const command::PutArgs& a) {
  if (a.verb != Verb::kCount) store_.Count(a.verb);
  command::PutSlot slot;
  if (a.bytes > store_.max_job_size_) {
    slot.refusal = Outcome::kJobTooBig;
    return slot;
  }
  if (a.malformed) {
    slot.refusal = Outcome::kBadFormat;
    return slot;
  }
  in_job_ =
      a.options ? NewExtendedJob(a) : store_.engine_.NewJob(s_, a.pri, a.delay_s, a.ttr_s, a.bytes);
  if (!in_job_) {
    DependOnAll();  // the cap reflects every job so far
    slot.refusal = Outcome::kOutOfMemory;
    return slot;
  }
  slot.data = in_job_->data();
  slot.size = in_job_->data_size();
  return slot;
}

Result MemorySession::CommitPut() {
  STALKD_CHECK(in_job_ != nullptr);
  Job* j = std::exchange(in_job_, nullptr);
  uint64_t id = j->id;
  uint64_t existing = 0;
  switch (store_.engine_.Put(s_, j, &existing)) {
    case engine::Engine::PutResult::kDraining:
      return All(Outcome::kDraining);
    case engine::Engine::PutResult::kNotDurable:
      return All(Outcome::kOutOfMemory);
    case engine::Engine::PutResult::kExists:
      return All(Outcome::kExists, existing);
    case engine::Engine::PutResult::kInserted:
      break;
  }
  store_.DeliverEvents();  // the job may have gone to a waiting session
  return All(Outcome::kInserted, id);
}

void MemorySession::AbandonPut() {
  if (in_job_) store_.engine_.Discard(std::exchange(in_job_, nullptr));
}

// ---------------------------------------------------------------------------- reserve

Result MemorySession::Reserve(Nanos timeout) {
  store_.Count(timeout == kForever ? Verb::kReserve : Verb::kReserveWithTimeout);
  store_.WarmReady(s_);
  if (!store_.engine_.Reserve(s_, timeout)) return All(Outcome::kDeadlineSoon);
  // A reserve that completed at once is answered now; otherwise OnEngineEvent answers it.
  engine::Event ev;
  if (!store_.engine_.TakeOwnEvent(s_, &ev)) return Result::Of(Outcome::kPending);
  if (ev.kind == engine::Event::Kind::kReserved) return Shows(Outcome::kReserved, *ev.job);
  return All(Outcome::kTimedOut);
}

void MemorySession::OnEngineEvent(const engine::Event& ev) {
  switch (ev.kind) {
    case engine::Event::Kind::kReserved:
      if (s_->reserve_options().batch) return client_.OnResult(ReservedMany(ev.job));
      return client_.OnResult(Shows(Outcome::kReserved, *ev.job));
    case engine::Event::Kind::kTimedOut:
      return client_.OnResult(All(Outcome::kTimedOut));
    case engine::Event::Kind::kDeadlineSoon:
      return client_.OnResult(All(Outcome::kDeadlineSoon));
  }
}

Result MemorySession::AbandonReserve() {
  store_.engine_.CancelReserve(s_);
  return All(Outcome::kTimedOut);
}

Result MemorySession::ReserveJob(uint64_t id) {
  store_.Count(Verb::kReserveJob);
  store_.Warm(id);
  const Job* j = store_.engine_.ReserveJob(s_, id);
  return j ? Shows(Outcome::kReserved, *j) : NotFound();
}

// ---------------------------------------------------------------------------- peek

Result MemorySession::Peek(uint64_t id) {
  store_.Count(Verb::kPeek);
  store_.Warm(id);
  return Found(store_.engine_.Find(id));
}

Result MemorySession::PeekReady() {
  store_.Count(Verb::kPeekReady);
  store_.WarmReadyFirst(s_->use());
  return Found(store_.engine_.PeekReady(s_->use()));
}

Result MemorySession::PeekDelayed() {
  store_.Count(Verb::kPeekDelayed);
  const Tube* t = s_->use();
  if (store_.cold_ && store_.cold_->MayPrecede(t, store_.engine_.PeekDelayed(t))) {
    store_.WarmDelayed(t, 1);
  }
  return Found(store_.engine_.PeekDelayed(t));
}

Result MemorySession::PeekBuried() {
  store_.Count(Verb::kPeekBuried);
  store_.WarmBuried(s_->use(), 1);
  return Found(store_.engine_.PeekBuried(s_->use()));
}

// ---------------------------------------------------------------------------- job commands

Result MemorySession::Delete(uint64_t id) {
  store_.Count(Verb::kDelete);
  store_.Warm(id);
  return Done(store_.engine_.Delete(s_, id), Outcome::kDeleted);
}

Result MemorySession::Release(uint64_t id, uint32_t pri, uint32_t delay_s) {
  store_.Count(Verb::kRelease);
  engine::Engine::Changed c = store_.engine_.Release(s_, id, pri, delay_s);
  store_.DeliverEvents();  // the job may have gone to a waiting session
  return Done(c, Outcome::kReleased);
}

Result MemorySession::Bury(uint64_t id, uint32_t pri) {
  store_.Count(Verb::kBury);
  return Done(store_.engine_.Bury(s_, id, pri), Outcome::kBuried);
}

Result MemorySession::Touch(uint64_t id) {
  store_.Count(Verb::kTouch);
  return Done(store_.engine_.Touch(s_, id), Outcome::kTouched);
}

Result MemorySession::KickJob(uint64_t id) {
  store_.Count(Verb::kKickJob);
  store_.Warm(id);
  engine::Engine::Changed c = store_.engine_.KickJob(id);
  store_.DeliverEvents();
  return Done(c, Outcome::kKickedJob);
}

Result MemorySession::Kick(uint32_t count) {
  store_.Count(Verb::kKick);
  const Tube* t = s_->use();
  const size_t buried_ct = store_.BuriedCount(t);  // those on disk too
  bool buried = buried_ct > 0;
  // Never more than were there when the kick arrived: jobs re-buried between slices by
  // other clients must not be kicked again (beanstalkd does the whole kick at once).
  // Delayed jobs on disk count (each slice brings back the ones it kicks).
  size_t delayed = t->delayed.size() + (store_.cold_ ? store_.cold_->Count(t) : 0);
  auto left = static_cast<uint32_t>(std::min<size_t>(count, buried ? buried_ct : delayed));
  MemoryStore::Kick k{this, left, 0, buried, false};
  if (store_.KickStep(k)) return k.Outcome();
  store_.kicking_.push_back(k);  // the rest in later Ticks, a slice each
  return Result::Of(Outcome::kPending);
}

// ---------------------------------------------------------------------------- tubes

Result MemorySession::Use(std::string_view tube) {
  if (!command::IsValidTubeName(tube)) return Result::Of(Outcome::kBadFormat);
  store_.Count(Verb::kUse);
  store_.engine_.Use(s_, tube);
  return Using();
}

Result MemorySession::ListTubeUsed() {
  store_.Count(Verb::kListTubeUsed);
  return Using();
}

Result MemorySession::Using() {
  // The session's own state: depends on no log record.
  Result r = Result::Of(Outcome::kUsing);
  r.name = s_->use()->name();
  return r;
}

Result MemorySession::Watch(std::string_view tube) {
  if (!command::IsValidTubeName(tube)) return Result::Of(Outcome::kBadFormat);
  store_.Count(Verb::kWatch);
  return All(Outcome::kWatching, store_.engine_.Watch(s_, tube));
}

Result MemorySession::Ignore(std::string_view tube) {
  if (!command::IsValidTubeName(tube)) return Result::Of(Outcome::kBadFormat);
  store_.Count(Verb::kIgnore);
  size_t n = store_.engine_.Ignore(s_, tube);
  return n == 0 ? All(Outcome::kNotIgnored) : All(Outcome::kWatching, n);
}

Result MemorySession::TubeList(std::span<Tube* const> tubes) {
  store_.names_.clear();
  for (const Tube* t : tubes) store_.names_.push_back(t->name());
  Result r = Result::Of(Outcome::kTubeList);
  r.tubes = &store_.names_;
  DependOnAll();
  return r;
}

Result MemorySession::ListTubesWatched() {
  store_.Count(Verb::kListTubesWatched);
  return TubeList(s_->watch());
}

Result MemorySession::ListTubes() {
  store_.Count(Verb::kListTubes);
  return TubeList(store_.engine_.tubes());
}

Result MemorySession::PauseTube(std::string_view tube, uint32_t delay_s) {
  // beanstalkd counts a pause-tube before it checks the tube name.
  store_.Count(Verb::kPauseTube);
  if (!command::IsValidTubeName(tube)) return Result::Of(Outcome::kBadFormat);
  if (const Tube* t = store_.engine_.FindTube(tube)) store_.WarmReadyFirst(t);  // may unpause
  bool ok = store_.engine_.PauseTube(tube, delay_s);
  store_.DeliverEvents();  // a tube that is no longer paused may serve waiting sessions
  return Done(ok, Outcome::kPaused);
}

// ---------------------------------------------------------------------------- stats

Result MemorySession::Stats() {
  store_.Count(Verb::kStats);
  Result r = Result::Of(Outcome::kStats);
  r.stats = &store_.FillStats();
  DependOnAll();
  return r;
}

Result MemorySession::StatsJob(uint64_t id) {
  store_.Count(Verb::kStatsJob);
  store_.Warm(id);
  const Job* j = store_.engine_.Find(id);
  if (!j) return NotFound();
  Result r = Result::Of(Outcome::kJobStats);
  r.job_stats = &store_.FillJobStats(*j);
  DependOnAll();
  return r;
}

Result MemorySession::JobTube(uint64_t id) {
  store_.Warm(id);  // a job on disk has its tube too (the command that asks goes on to it)
  const Job* j = store_.engine_.Find(id);  // counts nothing, shows nothing: no mark
  if (!j) return Result::Of(Outcome::kNotFound);
  Result r = Result::Of(Outcome::kFound);
  r.name = j->tube->name();
  return r;
}

Result MemorySession::StatsTube(std::string_view tube) {
  if (!command::IsValidTubeName(tube)) return Result::Of(Outcome::kBadFormat);
  store_.Count(Verb::kStatsTube);
  const Tube* t = store_.engine_.FindTube(tube);
  if (!t) return NotFound();
  Result r = Result::Of(Outcome::kTubeStats);
  r.tube_stats = &store_.FillTubeStats(*t);
  DependOnAll();
  return r;
}

// ---------------------------------------------------------------------------- the store

MemoryStore::MemoryStore(const Clock& clock, MemoryStoreOptions options, const command::Host* host)
    : engine_(clock, options.engine), host_(host), max_job_size_(options.max_job_size) {}

MemoryStore::~MemoryStore() { STALKD_CHECK(kicking_.empty()); }

std::unique_ptr<command::Session> MemoryStore::Open(command::Client& client) {
  return std::make_unique<MemorySession>(*this, client);
}

void MemoryStore::DeliverPendingEvents() {
  // Delivering runs no command (a Client only takes the result), but a batch reserve's
  // later jobs may bring ready jobs back from the disk tier, and one may go to another
  // waiting session: a new event, delivered by the next round.
  while (engine_.has_events()) {
    events_.clear();
    engine_.TakeEvents(&events_);
    for (const engine::Event& ev : events_) ev.session->owner()->OnEngineEvent(ev);
  }
  events_.clear();
}

void MemoryStore::WarmWatched(const engine::Session* s) {
  for (const Tube* t : s->watch()) cold_->PromoteReadyFirst(t, engine_.PeekReady(t));
  DeliverEvents();
}

Result MemoryStore::Kick::Outcome() {
  if (no_room && kicked == 0) return session->Refused();
  return session->Kicked(kicked);
}

bool MemoryStore::KickStep(Kick& k) {
  engine::Tube* t = k.session->use();
  uint32_t n = std::min(k.left, kKickSlice);
  // The n due first (the n buried first) are then all in memory.
  if (k.buried) {
    WarmBuried(t, n);
  } else {
    WarmDelayed(t, n);
  }
  uint32_t done =
      k.buried ? engine_.KickBuried(t, n, &k.no_room) : engine_.KickDelayed(t, n, &k.no_room);
  k.kicked += done;
  k.left -= done;
  DeliverEvents();  // each kicked job is offered to waiting sessions at once
  return done < n || k.left == 0;
}

bool MemoryStore::KickSlices() {
  std::erase_if(kicking_, [this](Kick& k) {
    if (!KickStep(k)) return false;
    k.session->client().OnResult(k.Outcome());
    return true;
  });
  return !kicking_.empty();
}

Nanos MemoryStore::Tick() {
  Nanos cold_next = cold_ ? cold_->Tick() : kForever;
  Nanos next = std::min(engine_.Tick(), cold_next);
  timer_backlog_ = next <= engine_.clock().Now();
  DeliverEvents();
  bool more = !kicking_.empty() && KickSlices();
  if (!purging_.empty() && PurgeSlices()) more = true;
  return more ? engine_.clock().Now() : next;
}

}  // namespace stalkd::store
