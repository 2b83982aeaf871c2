// MemorySession's lifecycle extensions (docs/EXTENSIONS.md): batch reserve and delete,
// purge in slices, list-jobs, a tube's default tries.
#include <algorithm>

#include "base/check.h"
#include "store/memory_session.h"

namespace stalkd::store {

namespace {

engine::ReserveOptions EngineOptions(const command::ReserveArgs& a) {
  engine::ReserveOptions o;
  o.ttr_s = a.ttr_s;
  o.freeze_tries = a.freeze_tries;
  o.detached = a.detached;
  o.batch = true;
  o.count = std::max<uint32_t>(a.count, 1);
  return o;
}

engine::PurgeWhat PurgeWhatOf(command::StateFilter f) {
  switch (f) {
    case command::StateFilter::kReady:
      return engine::PurgeWhat::kReady;
    case command::StateFilter::kDelayed:
      return engine::PurgeWhat::kDelayed;
    case command::StateFilter::kBuried:
      return engine::PurgeWhat::kBuried;
    default:
      return engine::PurgeWhat::kAll;
  }
}

engine::JobState JobStateOf(command::StateFilter f) {
  switch (f) {
    case command::StateFilter::kDelayed:
      return engine::JobState::kDelayed;
    case command::StateFilter::kReserved:
      return engine::JobState::kReserved;
    case command::StateFilter::kBuried:
      return engine::JobState::kBuried;
    default:
      return engine::JobState::kReady;
  }
}

}  // namespace

Job* MemorySession::NewExtendedJob(const command::PutArgs& a) {
  const command::PutOptions& o = *a.options;
  STALKD_CHECK(o.attributes.size() <= command::kMaxAttributes);
  engine::JobAttribute attrs[command::kMaxAttributes];
  for (size_t i = 0; i < o.attributes.size(); i++) {
    attrs[i] = {o.attributes[i].name, o.attributes[i].value};
  }
  engine::JobOptions opts{o.tries, o.ttl_s, o.key, attrs, o.attributes.size()};
  return store_.engine_.NewJob(s_, a.pri, a.delay_s, a.ttr_s, a.bytes, opts);
}

Result MemorySession::ReserveExt(const command::ReserveArgs& a) {
  store_.Count(Verb::kReserveExt);
  store_.WarmReady(s_);
  if (!store_.engine_.Reserve(s_, a.timeout, EngineOptions(a))) return All(Outcome::kDeadlineSoon);
  engine::Event ev;
  if (!store_.engine_.TakeOwnEvent(s_, &ev)) return Result::Of(Outcome::kPending);
  if (ev.kind == engine::Event::Kind::kReserved) return ReservedMany(ev.job);
  return All(Outcome::kTimedOut);
}

Result MemorySession::ReservedMany(Job* first) {
  const engine::ReserveOptions opts = s_->reserve_options();
  std::vector<command::JobView>& jobs = store_.jobs_;
  jobs.clear();
  Result r = Shows(Outcome::kReservedMany, *first);
  jobs.push_back(r.job);
  while (jobs.size() < opts.count) {
    Job* j = store_.engine_.ReserveReady(s_, opts);
    if (!j) break;
    jobs.push_back(Shows(Outcome::kReservedMany, *j).job);
  }
  r.job = {};
  r.number = jobs.size();
  r.jobs = &jobs;
  return r;
}

Result MemorySession::DeleteMany(std::span<const uint64_t> ids) {
  store_.Count(Verb::kDeleteMany);
  uint64_t n = 0;
  for (uint64_t id : ids) {
    store_.Warm(id);
    n += store_.engine_.Delete(s_, id) ? 1 : 0;
  }
  return All(Outcome::kDeletedMany, n);
}

Result MemorySession::Purge(std::string_view tube, command::StateFilter which) {
  store_.Count(Verb::kPurge);
  if (!command::IsValidTubeName(tube) || which == command::StateFilter::kReserved) {
    return Result::Of(Outcome::kBadFormat);
  }
  if (!store_.engine_.FindTube(tube)) return NotFound();
  MemoryStore::Purge p{this, std::string(tube), PurgeWhatOf(which), 0};
  if (store_.PurgeStep(p)) return Purged(p.purged);
  store_.purging_.push_back(std::move(p));  // the rest in later Ticks, a slice each
  return Result::Of(Outcome::kPending);
}

Result MemorySession::ListJobs(std::string_view tube, command::StateFilter state, uint64_t from,
                               uint32_t count) {
  store_.Count(Verb::kListJobs);
  if (!command::IsValidTubeName(tube) || state == command::StateFilter::kAll) {
    return Result::Of(Outcome::kBadFormat);
  }
  const Tube* t = store_.engine_.FindTube(tube);
  if (!t) return NotFound();
  store_.ids_.clear();
  uint64_t next = store_.ListWithCold(t, JobStateOf(state), from, count);
  Result r = All(Outcome::kJobList, next);
  r.ids = &store_.ids_;
  return r;
}

Result MemorySession::TubeTries(std::string_view tube, uint32_t tries) {
  store_.Count(Verb::kTubeTries);
  if (!command::IsValidTubeName(tube)) return Result::Of(Outcome::kBadFormat);
  if (!store_.engine_.SetTubeTries(tube, tries)) return Refused();  // a full disk
  return All(Outcome::kTubeTries, tries);
}

Result MemorySession::Respawn(std::string_view tube, uint32_t count, uint32_t ttl_s) {
  store_.Count(Verb::kKick);
  if (!command::IsValidTubeName(tube)) return Result::Of(Outcome::kBadFormat);
  engine::Tube* t = store_.engine_.FindTube(tube);
  if (t) store_.WarmBuried(t, count);  // the oldest buried, on disk or not
  // The caller asks for a slice at a time (ApiService's respawn: 1000 jobs).
  return All(Outcome::kKicked, t ? store_.engine_.Respawn(t, count, ttl_s) : 0);
}

uint64_t MemoryStore::ListWithCold(const engine::Tube* t, engine::JobState state, uint64_t from,
                                   size_t count) {
  uint64_t next = engine_.ListJobs(t, state, from, count, &ids_);
  uint64_t lo = 0, hi = 0;
  if (!cold_ || !cold_->IdBounds(&lo, &hi)) return next;
  // The window the all-in-memory store's scan would look at, over the ids in memory and on
  // disk (of any tube: even if t has none on disk, the lowest or highest may be there):
  // from the page of the lowest live id if `from` is below it, kListScan ids, not past the
  // page of the highest. Its ids on disk are read from the tier's index without reading the
  // jobs; the answer covers up to the end of the shorter of it and the engine's window, in
  // id order, at most `count` ids.
  uint64_t top = 0;
  from = engine_.ListSpan(from, lo, hi, &top);
  if (from >= top) return 0;  // no live id from there (the engine found none either)
  uint64_t end = from + std::min<uint64_t>(engine::Engine::kListScan, top - from);
  if (next != 0) end = std::min(end, next);
  while (!ids_.empty() && ids_.back() >= end) ids_.pop_back();
  const size_t hot = ids_.size();
  cold_->ListIds(t, state, from, end, &ids_);
  std::inplace_merge(ids_.begin(), ids_.begin() + static_cast<ptrdiff_t>(hot), ids_.end());
  uint64_t next_from = end < top ? end : 0;
  if (count > 0 && ids_.size() >= count) {  // as the engine's scan: the id after the last
    ids_.resize(count);
    next_from = ids_.back() + 1 < top ? ids_.back() + 1 : 0;
  }
  if (ids_.capacity() > 4096) ids_.shrink_to_fit();  // after a window full of ids
  return next_from;
}

size_t MemoryStore::WarmForPurge(const engine::Tube* t, engine::PurgeWhat what, size_t n) {
  if (!cold_) return 0;
  const bool all = what == engine::PurgeWhat::kAll;
  size_t warmed = 0;
  if (all || what == engine::PurgeWhat::kBuried) warmed += cold_->PromoteBuried(t, n);
  if ((all || what == engine::PurgeWhat::kDelayed) && warmed < n)
    warmed += cold_->PromoteEarliest(t, n - warmed);
  if ((all || what == engine::PurgeWhat::kReady) && warmed < n) {
    warmed += cold_->PromoteReady(t, n - warmed);
  }
  return warmed;
}

bool MemoryStore::PurgeStep(Purge& p) {
  engine::Tube* t = engine_.FindTube(p.tube);
  if (!t) return true;  // its last job went, and nobody uses or watches it
  // The jobs in memory first; then as many of those on disk as the slice has room for are
  // read back and purged, so that a slice reads at most kPurgeSlice jobs.
  uint32_t n = engine_.Purge(t, p.what, kPurgeSlice);
  p.purged += n;
  if (n == kPurgeSlice) return false;
  const size_t room = kPurgeSlice - n;
  t = engine_.FindTube(p.tube);
  if (!t) return true;  // a tube with jobs on disk stays: they hold it
  const size_t warmed = WarmForPurge(t, p.what, room);
  if (warmed == 0) return true;
  DeliverEvents();  // a ready job read back may have gone to a waiting session
  t = engine_.FindTube(p.tube);
  uint32_t m = t ? engine_.Purge(t, p.what, static_cast<uint32_t>(room)) : 0;
  p.purged += m;
  return warmed < room && m < room;
}

bool MemoryStore::PurgeSlices() {
  std::erase_if(purging_, [this](Purge& p) {
    if (!PurgeStep(p)) return false;
    p.session->client().OnResult(p.session->Purged(p.purged));
    return true;
  });
  return !purging_.empty();
}

}  // namespace stalkd::store
