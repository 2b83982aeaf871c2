// The lifecycle extensions of docs/EXTENSIONS.md: tries and dead letters, TTL expiry, unique
// keys, attributes, purge, browsing and a tube's default tries.
#include <algorithm>

#include "base/check.h"
#include "engine/engine.h"

namespace stalkd::engine {

namespace {

// What an entry of a tube's key index costs: a hash node (next pointer, the key's view, the
// job pointer, the cached hash) and its share of the bucket array.
constexpr size_t kKeyIndexEntry =
    sizeof(void*) + sizeof(std::string_view) + sizeof(Job*) + sizeof(size_t) + sizeof(void*);

}  // namespace

const char* BuryReasonName(BuryReason r) {
  switch (r) {
    case BuryReason::kCommand:
      return "bury";
    case BuryReason::kTimeout:
      return "timeout";
    case BuryReason::kRelease:
      return "release";
    case BuryReason::kNone:
      break;
  }
  return "none";
}

size_t JobExtra::BlobSize(std::string_view key, const JobAttribute* attrs, size_t n) {
  size_t size = key.size();
  for (size_t i = 0; i < n; i++) size += 2 + attrs[i].name.size() + attrs[i].value.size();
  return size;
}

void JobExtra::WriteBlob(char* out, std::string_view key, const JobAttribute* attrs, size_t n) {
  out = std::copy(key.begin(), key.end(), out);
  for (size_t i = 0; i < n; i++) {
    *out++ = static_cast<char>(attrs[i].name.size());
    *out++ = static_cast<char>(attrs[i].value.size());
    out = std::copy(attrs[i].name.begin(), attrs[i].name.end(), out);
    out = std::copy(attrs[i].value.begin(), attrs[i].value.end(), out);
  }
}

// ---------------------------------------------------------------------------- job extras

JobExtra* Engine::GrowExtra(Job* j, uint32_t blob_size) {
  memory_used_ -= j->footprint();
  JobExtra* x = Job::AddExtra(j, blob_size);
  memory_used_ += j->footprint();
  return x;
}

size_t Engine::ExtraCost(const JobOptions& o, size_t blob, uint32_t delay_s) const {
  size_t cost = sizeof(JobExtra) + blob;
  if (delay_s > 0) cost -= sizeof(JobCold);  // replaces the cold part Footprint counted
  if (!o.key.empty()) cost += kKeyIndexEntry;
  if (o.ttl_s != 0) cost += expiries_.push_growth();
  return cost;
}

void Engine::FillExtra(Job* j, const JobOptions& o, size_t blob, uint32_t tries) {
  STALKD_DCHECK(o.key.size() <= kMaxJobKey && o.attr_count <= kMaxAttributes);
  JobExtra* x = GrowExtra(j, static_cast<uint32_t>(blob));
  x->limited = tries != 0;
  x->tries_left = tries;
  if (o.ttl_s != 0) x->expires_at = clock_.Now() + Seconds(o.ttl_s);
  x->key_len = static_cast<uint16_t>(o.key.size());
  x->attr_count = static_cast<uint8_t>(o.attr_count);
  JobExtra::WriteBlob(x->blob(), o.key, o.attrs, o.attr_count);
}

void Engine::Track(Job* j) {
  const JobExtra* x = j->extra();
  STALKD_DCHECK(x != nullptr);
  if (x->key_len > 0 && j->tube->keys.emplace(x->key(), j).second) {
    memory_used_ += kKeyIndexEntry;
  }
  if (x->has_ttl()) expiries_.Push(j);
}

void Engine::Untrack(Job* j) {
  const JobExtra* x = j->extra();
  STALKD_DCHECK(x != nullptr);
  if (x->key_len > 0) {
    auto it = j->tube->keys.find(x->key());
    if (it != j->tube->keys.end() && it->second == j) {
      j->tube->keys.erase(it);
      memory_used_ -= kKeyIndexEntry;
    }
  }
  if (expiries_.Contains(j)) expiries_.Remove(j);
}

// ---------------------------------------------------------------------------- tries, TTL

void Engine::Return(Job* j, uint32_t delay_s, BuryReason dead) {
  if (ExpireIfPending(j)) return;
  JobExtra* x = j->extra();
  if (x && x->limited && x->tries_left == 0) {
    MakeBuried(j);
    x->bury_reason = dead;
    counters_.tries_exhausted++;
    j->tube->stat.tries_exhausted++;
  } else if (delay_s > 0) {
    MakeDelayed(j, clock_.Now() + Seconds(delay_s));
  } else {
    MakeReady(j);
  }
  Logged(j);
  ProcessQueue();
}

void Engine::Expire(Job* j) {
  counters_.expired++;
  j->tube->stat.expired++;
  if (log_) log_->Delete(*j);
  FreeJob(j);
}

bool Engine::ExpireIfPending(Job* j) {
  const JobExtra* x = j->extra();
  if (!x || !x->expire_pending) return false;
  Expire(j);
  return true;
}

void Engine::ExpireDue(Nanos now, uint32_t budget, bool* more) {
  uint32_t n = 0;
  while (!expiries_.empty() && ExpiryOrder::KeyOf(expiries_.top()) <= now) {
    if (n == budget) {
      *more = true;
      break;
    }
    Job* j = expiries_.Pop();
    n++;
    if (j->state() == JobState::kReserved) {
      // Not taken from its worker: it goes when the reservation ends.
      j->extra()->expire_pending = true;
      continue;
    }
    TakeOut(j);
    Expire(j);
  }
}

uint32_t Engine::Respawn(Tube* t, uint32_t n, uint32_t ttl_s) {
  uint32_t i = 0;
  for (; i < n && !t->buried.empty(); i++) {
    Job* j = t->buried.front();
    if (!Recordable(*j)) break;
    TakeOut(j);
    JobExtra* x = j->extra();
    if (x) {
      Untrack(j);
    } else {
      x = GrowExtra(j, 0);
    }
    x->limited = true;
    x->tries_left = 1;
    x->bury_reason = BuryReason::kNone;
    x->expires_at = ttl_s != 0 ? clock_.Now() + Seconds(ttl_s) : kForever;
    Track(j);
    ColdOf(j).counts.kicks++;
    MakeReady(j);
    Logged(j);
    ProcessQueue();
  }
  return i;
}

// ---------------------------------------------------------------------------- batch reserve

Job* Engine::BestReady(const Session* s) const {
  Job* best = nullptr;
  for (const Tube* t : s->watch_) {
    Job* j = t->ready.top();
    if (j && !t->paused() && (!best || ReadyOrder::Less(j, best))) best = j;
  }
  return best;
}

// ---------------------------------------------------------------------------- purge, browse

uint32_t Engine::Purge(Tube* t, PurgeWhat what, uint32_t budget) {
  Ref(t);  // the tube outlives its last job here
  uint32_t n = 0;
  auto next = [t, what]() -> Job* {
    bool all = what == PurgeWhat::kAll;
    if ((all || what == PurgeWhat::kBuried) && !t->buried.empty()) return t->buried.front();
    if ((all || what == PurgeWhat::kDelayed) && !t->delayed.empty()) return t->delayed.top();
    if ((all || what == PurgeWhat::kReady) && !t->ready.empty()) return t->ready.top();
    return nullptr;
  };
  while (n < budget) {
    Job* j = next();
    if (!j) break;
    TakeOut(j);
    if (log_) log_->Delete(*j);
    FreeJob(j);
    n++;
  }
  Unref(t);
  return n;
}

uint64_t Engine::ListJobs(const Tube* t, JobState state, uint64_t from, size_t count,
                          std::vector<uint64_t>* out) const {
  size_t found = 0;
  uint64_t next = jobs_.Scan(from, kListScan, [&](const Job* j) {
    if (j->tube == t && j->state() == state) {
      out->push_back(j->id);
      found++;
    }
    return found < count;
  });
  return next;
}

uint64_t Engine::ListSpan(uint64_t from, uint64_t lo, uint64_t hi, uint64_t* end) const {
  const uint64_t page = JobTable::page_ids();
  uint64_t begin = lo - lo % page;
  *end = hi - hi % page > UINT64_MAX - page ? UINT64_MAX : hi - hi % page + page;
  if (jobs_.size() > 0) {
    begin = std::min(begin, jobs_.span_begin());
    *end = std::max(*end, jobs_.span_end());
  }
  return std::max(from, begin);
}

// ---------------------------------------------------------------------------- tube tries

void Engine::RestoreTubeTries(std::string_view tube, uint32_t tries) {
  if (tries == 0) {
    if (auto it = tube_tries_.find(tube); it != tube_tries_.end()) tube_tries_.erase(it);
  } else {
    tube_tries_.insert_or_assign(std::string(tube), tries);
  }
  if (Tube* t = FindTube(tube)) t->default_tries = tries;
}

bool Engine::SetTubeTries(std::string_view tube, uint32_t tries) {
  if (log_ && !log_->CanRecordTubeTries(tube, tries)) return false;
  RestoreTubeTries(tube, tries);
  if (log_) log_->TubeTries(tube, tries);
  return true;
}

uint32_t Engine::TubeTries(std::string_view tube) const {
  auto it = tube_tries_.find(tube);
  return it == tube_tries_.end() ? 0 : it->second;
}

}  // namespace stalkd::engine
