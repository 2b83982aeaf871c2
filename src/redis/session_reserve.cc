// RedisSession's reserve machinery: reserves (pipelined ones wait behind the head),
// claims in one partition or across several, waiting and wake-ups with the store, TTR
// holds and DEADLINE_SOON, time-up, and reserve-job. The session's other calls are in
// session.cc; its reads (stats, listings) in session_reads.cc.
#include <algorithm>
#include <utility>

#include "redis/session.h"

namespace stalkd::redis {

namespace {

constexpr Nanos kMs = 1'000'000;
constexpr Nanos kSafetyMargin = kSecond;  // DEADLINE_SOON, as beanstalkd's SAFETY_MARGIN

}  // namespace

Result RedisSession::Reserve(Nanos timeout) {
  command::ReserveArgs args;
  args.timeout = timeout;
  return StartReserve(args, timeout == kForever ? Verb::kReserve : Verb::kReserveWithTimeout);
}

Result RedisSession::ReserveExt(const command::ReserveArgs& args) {
  return StartReserve(args, Verb::kReserveExt);
}

Result RedisSession::StartReserve(const command::ReserveArgs& args, Verb v) {
  store_.Count(v);
  Worker();
  abandoned_ = false;
  wants_.push_back({v, args});
  wants_.back().args.count = std::max<uint32_t>(args.count, 1);
  if (wants_.size() == 1) {
    BecomeHead();
  } else if (args.timeout > 0 && !waiting_ && !closing_) {
    waiting_ = true;
    store_.AddWaiter(this);
  }
  Claim();
  return Result::Of(Outcome::kPending);
}

void RedisSession::BecomeHead() {
  const Want& w = wants_.front();
  verb_ = w.verb;
  wait_args_ = w.args;
  Nanos now = store_.clock_.Now();
  Nanos t = closing_ ? 0 : w.args.timeout;
  wait_until_ = t == kForever || t > kForever - now ? kForever : now + t;
  // A reserve that may wait is a waiter from now on, so a wake-up that arrives before its
  // first call's answer makes it claim again.
  if (wait_until_ > now && !waiting_) {
    waiting_ = true;
    store_.AddWaiter(this);
  }
}

void RedisSession::Claim() {
  claims_out_++;
  claimed_at_ = store_.clock_.Now();
  // The watched tubes by partition, leaving out partitions whose master is not serving now
  // (a failover in progress on a cluster): a reserve takes what the others have, or waits
  // (the claim goes again when that master is back), rather than waiting for that master.
  std::vector<std::pair<uint32_t, std::vector<std::string_view>>> groups;
  for (const std::string& tube : watch_) {
    uint32_t p = store_.PartitionOf(tube);
    if (!store_.Serving(p)) continue;
    auto it =
        std::find_if(groups.begin(), groups.end(), [p](const auto& g) { return g.first == p; });
    if (it == groups.end()) it = groups.insert(groups.end(), {p, {}});
    it->second.push_back(tube);
  }
  if (groups.empty()) {
    return store_.Later([cell = cell_] {
      if (RedisSession* s = *cell) s->OnClaim(NoJob(), 0);
    });
  }
  if (groups.size() == 1) {
    // One partition (always, on one Redis): one call, exact.
    uint32_t part = groups[0].first;
    return ClaimIn(part, groups[0].second, "",
                   [part](RedisSession& s, const Answer& a) { s.OnClaim(a, part); });
  }
  ClaimAcross(std::move(groups));
}

// Nothing ready and a reserve that may wait: a claim leases its tubes to waiters (ms), so a
// job that becomes ready in one is published on the wake channel.
std::string RedisSession::WaiterLease() const {
  return waiting_ ? std::to_string(store_.opt_.lease / kMs) : "0";
}

// A claim that found nothing, as Redis would say it.
RedisStore::Answer RedisSession::NoJob() {
  Answer none;
  none.status = "NONE";
  return none;
}

void RedisSession::ClaimIn(uint32_t part, std::span<const std::string_view> tubes,
                           std::string_view bound,
                           std::function<void(RedisSession&, const Answer&)> done) {
  ReservesIn(part);
  std::string count = std::to_string(wait_args_.count), ttr = std::to_string(wait_args_.ttr_s);
  std::string lease = WaiterLease();
  std::vector<std::string_view> args{sid_text_,
                                     count,
                                     ttr,
                                     wait_args_.freeze_tries ? "1" : "0",
                                     wait_args_.detached ? "1" : "0",
                                     lease,
                                     Enlisted(part) ? "1" : "0",
                                     bound};
  args.insert(args.end(), tubes.begin(), tubes.end());
  store_.Call(part, "reserve", std::span<const std::string_view>(args), true,
              [cell = cell_, done = std::move(done)](const Answer& a) {
                if (RedisSession* s = *cell) done(*s, a);
              });
}

// A claim across partitions. Each partition's best job (pri, created, id) as last seen;
// the claim goes to the best one, bounded by the next best: it reserves only a job before
// that, else answers its own new best, and the claim goes again. After 3 bounded tries, an
// unbounded one: a failed try means another client took a job meanwhile, so it ends.
struct RedisSession::Across {
  struct Head {
    bool has = false;
    uint64_t pri = 0, created = 0, id = 0;
    // From a `head` answer's words, or a bounded reserve's that found its best behind the bound.
    static Head Of(const Answer& a) { return {true, a.Number(0), a.Number(1), a.Number(2)}; }
    bool Before(const Head& o) const {
      if (pri != o.pri) return pri < o.pri;
      if (created != o.created) return created < o.created;
      return id < o.id;
    }
  };
  std::vector<uint32_t> parts;
  std::vector<std::vector<std::string>> tubes;
  std::vector<Head> heads;
  size_t left = 0;
  size_t answered = 0;  // partitions that answered (not lost)
  int tries = 0;
};

void RedisSession::ClaimAcross(
    std::vector<std::pair<uint32_t, std::vector<std::string_view>>> groups) {
  auto x = std::make_shared<Across>();
  for (auto& [p, tubes] : groups) {
    x->parts.push_back(p);
    x->tubes.emplace_back(tubes.begin(), tubes.end());
  }
  x->heads.resize(groups.size());
  x->left = groups.size();
  std::string lease = WaiterLease();
  for (size_t g = 0; g < groups.size(); g++) {
    ReservesIn(groups[g].first);
    std::vector<std::string_view> args{lease};
    args.insert(args.end(), groups[g].second.begin(), groups[g].second.end());
    store_.Call(groups[g].first, "head", std::span<const std::string_view>(args), false,
                [cell = cell_, x, g](const Answer& a) {
                  if (!a.lost && !a.oom) {
                    x->answered++;
                    if (a.status == "HEAD") x->heads[g] = Across::Head::Of(a);
                  }
                  if (--x->left > 0) return;
                  RedisSession* s = *cell;
                  if (!s) return;
                  if (x->answered == 0) {
                    // No partition answered: as a lost reserve call.
                    Answer lost;
                    lost.lost = true;
                    return s->OnClaim(lost, 0);
                  }
                  s->ClaimBest(x);
                });
  }
}

void RedisSession::ClaimBest(const std::shared_ptr<Across>& x) {
  size_t best = x->heads.size(), next = x->heads.size();
  for (size_t g = 0; g < x->heads.size(); g++) {
    if (!x->heads[g].has) continue;
    if (best == x->heads.size() || x->heads[g].Before(x->heads[best])) {
      next = best;
      best = g;
    } else if (next == x->heads.size() || x->heads[g].Before(x->heads[next])) {
      next = g;
    }
  }
  if (best == x->heads.size()) return OnClaim(NoJob(), 0);
  std::string bound;
  if (next < x->heads.size() && x->tries < 3) {
    const Across::Head& h = x->heads[next];
    bound = std::to_string(h.pri) + " " + std::to_string(h.created) + " " + std::to_string(h.id);
  }
  x->tries++;
  std::vector<std::string_view> tubes(x->tubes[best].begin(), x->tubes[best].end());
  uint32_t part = x->parts[best];
  ClaimIn(part, tubes, bound, [x, best, part](RedisSession& s, const Answer& a) {
    if (a.status == "RESERVED") return s.OnClaim(a, part);
    if (a.lost || a.oom) {
      x->heads[best].has = false;  // unreachable now: the others may serve
    } else if (a.size() >= 3) {
      x->heads[best] = Across::Head::Of(a);  // behind the bound
    } else {
      x->heads[best].has = false;  // taken meanwhile
    }
    s.ClaimBest(x);
  });
}

void RedisSession::OnClaim(const Answer& a, uint32_t part) {
  claims_out_--;
  // Gone or abandoned: what it reserved comes back by release_conn when the session closes.
  if (abandoned_ || wants_.empty()) return;
  Nanos now = store_.clock_.Now();
  if (a.lost || a.oom) {
    if (claims_out_ > 0) return;  // a later claim's answer decides
    // The next wake-up or re-claim tries again.
    if (waiting_ && now < wait_until_) return store_.Parked(*this);
    return AnswerHead(Result::Of(Outcome::kInternalError));
  }
  // A job goes to the head, whichever reserve's claim found it: a reserve behind the head
  // was read after it, so the head, waiting, would have had it.
  if (a.status == "RESERVED") {
    if (!wait_args_.detached) Enlist(part);  // a detached job has no owner: nothing listed
    return AnswerHead(Reserved(a));
  }
  if (claims_out_ == 0 && std::exchange(reclaim_, false)) return Claim();
  if (DeadlineSoon(now)) return AnswerHead(Result::Of(Outcome::kDeadlineSoon));
  if (now >= wait_until_) {
    if (claims_out_ > 0) return;  // a later claim's answer decides
    return TimeUp();
  }
  if (claims_out_ == 0) store_.Parked(*this);  // else a later claim may bring one
}

void RedisSession::TimeUp() {
  // The claim that ends it is made once its time is up: a job that fell due before (by the
  // master's clock: every call applies the timers that are due first) is still its own, as
  // beanstalkd makes due jobs ready before it times a reserve out. The pump and the wake-up
  // that would bring it otherwise come a few ms after the job's due time.
  if (!closing_ && claimed_at_ < wait_until_) return Claim();
  AnswerHead(Result::Of(Outcome::kTimedOut));
}

void RedisSession::AnswerHead(const Result& r) {
  wants_.pop_front();
  // Half-closed: beanstalkd, its reserve waiting, answers it and reads nothing more.
  if (closing_ && r.outcome == Outcome::kTimedOut) {
    wants_.clear();
    abandoned_ = true;
  }
  if (wants_.empty() && waiting_) {
    waiting_ = false;
    reclaim_ = false;
    store_.RemoveWaiter(this);
  }
  Finish(r);
  if (wants_.empty()) return;
  BecomeHead();
  if (claims_out_ == 0) Claim();
}

Result RedisSession::Reserved(const Answer& a) {
  // id body deadline created, per job.
  bodies_.clear();
  jobs_.clear();
  size_t n = a.size() / 4;
  bodies_.reserve(n);
  for (size_t i = 0; i < n; i++) {
    uint64_t id = a.Number(4 * i);
    store_.SawId(id);
    bodies_.emplace_back(a.Word(4 * i + 1));
    if (!wait_args_.detached) {
      Forget(id);
      holds_.push_back({id, a.Local(a.Signed(4 * i + 2))});
    }
  }
  for (size_t i = 0; i < n; i++) jobs_.push_back({a.Number(4 * i), bodies_[i]});
  if (verb_ == Verb::kReserveExt) {
    Result r = Result::Of(Outcome::kReservedMany);
    r.jobs = &jobs_;
    return r;
  }
  Result r = Result::Of(Outcome::kReserved);
  if (!jobs_.empty()) r.job = jobs_[0];
  return r;
}

bool RedisSession::DeadlineSoon(Nanos now) {
  std::erase_if(holds_, [now](const Hold& h) { return h.deadline <= now; });
  return std::any_of(holds_.begin(), holds_.end(),
                     [now](const Hold& h) { return h.deadline <= now + kSafetyMargin; });
}

Nanos RedisSession::NextDeadlineSoon() const {
  Nanos next = kForever;
  for (const Hold& h : holds_) next = std::min(next, h.deadline - kSafetyMargin);
  return next;
}

void RedisSession::Forget(uint64_t id) {
  std::erase_if(holds_, [id](const Hold& h) { return h.id == id; });
}

Result RedisSession::AbandonReserve() {
  if (waiting_) {
    waiting_ = false;
    store_.RemoveWaiter(this);
  }
  wants_.clear();
  reclaim_ = false;
  abandoned_ = true;
  return Result::Of(Outcome::kTimedOut);
}

Result RedisSession::CloseReserve() {
  if (abandoned_ || wants_.empty() || claims_out_ == 0) return AbandonReserve();
  // Its claim is on its way: it answers, and so do the reserves behind it, none waiting.
  closing_ = true;
  wait_until_ = store_.clock_.Now();
  if (waiting_) {
    waiting_ = false;
    reclaim_ = false;
    store_.RemoveWaiter(this);
  }
  return Result::Of(Outcome::kPending);
}

Result RedisSession::ReserveJob(uint64_t id) {
  store_.Count(Verb::kReserveJob);
  uint32_t part = store_.PartitionOfId(id);
  ReservesIn(part);
  verb_ = Verb::kReserveJob;
  wait_args_ = {};
  std::string ids = std::to_string(id);
  return Ask(part, "reserve_job", {sid_text_, ids, Enlisted(part) ? "1" : "0"}, true,
             [part](RedisSession& s, const Answer& a) {
               if (a.status != "RESERVED") return Result::Of(Outcome::kNotFound);
               s.Enlist(part);
               s.Worker();
               return s.Reserved(a);
             });
}

}  // namespace stalkd::redis
