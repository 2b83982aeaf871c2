// RedisSession: one connection's commands as calls of the Redis functions.
#include "redis/session.h"

#include <algorithm>
#include <charconv>
#include <utility>

#include "base/check.h"

namespace stalkd::redis {

namespace {

constexpr Nanos kMs = 1'000'000;
constexpr Nanos kSafetyMargin = kSecond;  // DEADLINE_SOON, as beanstalkd's SAFETY_MARGIN
constexpr uint32_t kPurgeSlice = 1000;
constexpr size_t kMaxPipelined = 1024;  // calls or reserves of one connection in flight

std::string_view StateWord(command::StateFilter f) {
  switch (f) {
    case command::StateFilter::kReady:
      return "ready";
    case command::StateFilter::kDelayed:
      return "delayed";
    case command::StateFilter::kReserved:
      return "reserved";
    case command::StateFilter::kBuried:
      return "buried";
    case command::StateFilter::kAll:
      break;
  }
  return "all";
}

// A job's attributes as functions.lua keeps them: per attribute a byte of name length, the
// name, a byte of value length, the value.
std::string EncodeAttributes(std::span<const command::Attribute> attrs) {
  std::string out;
  for (const command::Attribute& a : attrs) {
    out.push_back(static_cast<char>(a.name.size()));
    out.append(a.name);
    out.push_back(static_cast<char>(a.value.size()));
    out.append(a.value);
  }
  return out;
}

}  // namespace

RedisSession::RedisSession(RedisStore& store, command::Client& client, uint64_t sid)
    : store_(store),
      client_(client),
      sid_(sid),
      sid_text_(std::to_string(sid)),
      cell_(std::make_shared<RedisSession*>(this)) {
  store_.sessions_++;
  store_.Ref("default", 1, 1);
}

RedisSession::~RedisSession() {
  *cell_ = nullptr;
  AbandonPut();  // a put cut off mid-body took its id, as in beanstalkd
  if (waiting_) store_.RemoveWaiter(this);
  store_.sessions_--;
  store_.producers_ -= put_any_;
  store_.workers_ -= worker_;
  // Reservations go back; a reserve still on its way is answered before this arrives.
  for (uint32_t p : reserved_in_) store_.ReleaseConnection(sid_text_, p);
  // The engine's order (beanstalkd's ms_clear: the first watched tube, the others from the
  // back, then the used one), so that tubes vanishing together leave list-tubes as there.
  for (size_t k = 0; k < watch_.size(); k++) {
    store_.Ref(watch_[k == 0 ? 0 : watch_.size() - k], 0, -1);
  }
  store_.Ref(use_, -1, 0);
}

// What may go ahead of pending results: a single call (or a command answered from the
// session's own state) behind single calls (Redis answers a connection's calls in order),
// a plain reserve behind plain reserves (OnClaim hands each answer to the oldest). Never
// across the two, so that nothing is done ahead of a reserve that may wait, nor a reserve
// ahead of the calls before it; never behind alone_.
bool RedisSession::CanPipeline(Verb v) const {
  // A client that pipelines faster than Redis answers waits, as for a full input buffer.
  if (alone_ || asked_.size() + wants_.size() >= kMaxPipelined) return false;
  switch (v) {
    case Verb::kReserve:
    case Verb::kReserveWithTimeout:
      return asked_.empty() && (wants_.empty() || verb_ != Verb::kReserveExt);
    case Verb::kPut:
    case Verb::kDelete:
    case Verb::kRelease:
    case Verb::kBury:
    case Verb::kTouch:
    case Verb::kPeek:
    case Verb::kPeekReady:
    case Verb::kPeekDelayed:
    case Verb::kPeekBuried:
    case Verb::kKickJob:
    case Verb::kStatsJob:
    // Answered at once from the session's own state, which the calls behind them then see
    // (a put after a use goes to the new tube); not behind a reserve, whose watch list the
    // store holds while it may wait.
    case Verb::kUse:
    case Verb::kWatch:
    case Verb::kIgnore:
    case Verb::kListTubeUsed:
    case Verb::kListTubesWatched:
      return wants_.empty();
    default:
      return false;
  }
}

void RedisSession::Worker() {
  if (!std::exchange(worker_, true)) store_.workers_++;
}

void RedisSession::Producer() {
  if (!std::exchange(put_any_, true)) store_.producers_++;
}

void RedisSession::ReservesIn(uint32_t part) {
  if (std::find(reserved_in_.begin(), reserved_in_.end(), part) == reserved_in_.end()) {
    reserved_in_.push_back(part);
    store_.Touched(part);  // a clean stop gives back what this front end holds there
  }
}

bool RedisSession::Enlisted(uint32_t part) const {
  return enlisted_epoch_ == store_.enlist_epoch_ &&
         std::find(enlisted_in_.begin(), enlisted_in_.end(), part) != enlisted_in_.end();
}

void RedisSession::Enlist(uint32_t part) {
  if (enlisted_epoch_ != store_.enlist_epoch_) {
    enlisted_in_.clear();
    enlisted_epoch_ = store_.enlist_epoch_;
  }
  if (!Enlisted(part)) enlisted_in_.push_back(part);
}

RedisSession::Owned::Owned(const Answer& a)
    : lost(a.lost), oom(a.oom), status(a.status), offset(a.offset) {
  if (a.words) {
    words = *a.words;
    first = a.first;
  }
}

RedisStore::Answer RedisSession::Owned::View() const {
  Answer a;
  a.lost = lost;
  a.oom = oom;
  a.status = status;
  a.words = &words;
  a.first = first;
  a.offset = offset;
  return a;
}

uint64_t RedisSession::Ticket() {
  asked_.emplace_back();
  return asked_first_ + asked_.size() - 1;
}

void RedisSession::Complete(uint64_t ticket, Make make) {
  asked_[ticket - asked_first_] = std::move(make);
  while (!asked_.empty() && asked_.front()) {
    Make m = std::move(asked_.front());
    asked_.pop_front();
    asked_first_++;
    Finish(m(*this));
  }
}

Result RedisSession::Checked(RedisSession& s, const Answer& a, const Decode& decode) {
  if (a.lost) return Result::Of(Outcome::kInternalError);
  if (a.oom) return Result::Of(Outcome::kOutOfMemory);
  return decode(s, a);
}

Result RedisSession::Ask(uint32_t part, std::string_view fn, std::span<const std::string_view> args,
                         bool writes, Decode decode) {
  uint64_t t = Ticket();
  store_.Call(
      part, fn, args, writes, [cell = cell_, t, decode = std::move(decode)](const Answer& a) {
        RedisSession* s = *cell;
        if (!s) return;
        if (t == s->asked_first_) {
          // Its turn: decoded now, from the answer as it is.
          return s->Complete(t, [&a, &decode](RedisSession& me) { return Checked(me, a, decode); });
        }
        s->Complete(
            t, [o = Owned(a), decode](RedisSession& me) { return Checked(me, o.View(), decode); });
      });
  return Result::Of(Outcome::kPending);
}

std::function<void()> RedisSession::Countdown(std::shared_ptr<Gathered> g, Make make) {
  return [cell = cell_, g, t = Ticket(), make = std::move(make)]() {
    if (--g->left > 0) return;
    RedisSession* s = *cell;
    if (!s) return;
    s->Complete(t, [g, make](RedisSession& me) {
      if (g->lost) return Result::Of(Outcome::kInternalError);
      return make(me);
    });
  };
}

void RedisSession::Finish(const Result& r) {
  alone_ = false;
  client_.OnResult(r);
}

// ---------------------------------------------------------------------------- put

command::PutSlot RedisSession::BeginPut(const command::PutArgs& a) {
  if (a.verb != Verb::kCount) store_.Count(a.verb);
  command::PutSlot slot;
  if (a.bytes > store_.opt_.max_job_size) {
    slot.refusal = Outcome::kJobTooBig;
    return slot;
  }
  if (a.malformed) {
    slot.refusal = Outcome::kBadFormat;
    return slot;
  }
  put_args_ = a;
  put_args_.options = nullptr;
  put_key_.clear();
  put_attrs_.clear();
  if (a.options) {
    put_key_ = a.options->key;
    put_attrs_ = EncodeAttributes(a.options->attributes);
    tries_ = a.options->tries;
    ttl_ = a.options->ttl_s;
  } else {
    tries_ = ttl_ = 0;
  }
  put_.resize(size_t{a.bytes} + 2);
  put_open_ = true;
  Producer();
  slot.data = put_.data();
  slot.size = put_.size();
  return slot;
}

Result RedisSession::CommitPut() {
  put_open_ = false;
  if (store_.draining_) return Result::Of(Outcome::kDraining);
  std::string pri = std::to_string(put_args_.pri), delay = std::to_string(put_args_.delay_s),
              ttr = std::to_string(std::max<uint32_t>(put_args_.ttr_s, 1)),
              limited = tries_ > 0 ? "1" : "0", tries = std::to_string(tries_),
              ttl = std::to_string(ttl_);
  std::string_view body(put_.data(), put_args_.bytes);
  uint32_t part = store_.PartitionOf(use_);
  std::string floor = store_.SeqFloor(part);
  Result r = Ask(
      part, "put",
      {sid_text_, pri, delay, ttr, use_, body, limited, tries, ttl, put_key_, put_attrs_, floor},
      true, [](RedisSession& s, const Answer& a) {
        s.store_.SawId(a.Number(0));
        if (a.status == "EXISTS") return Result::Of(Outcome::kExists, a.Number(0));
        return Result::Of(Outcome::kInserted, a.Number(0));
      });
  put_.clear();
  put_.shrink_to_fit();
  return r;
}

void RedisSession::AbandonPut() {
  // beanstalkd gave the put its id when its line arrived: the next job's id skips it.
  if (put_open_) {
    uint32_t part = store_.PartitionOf(use_);
    store_.Call(part, "skip_id", {store_.SeqFloor(part)}, false, [](const RedisStore::Answer&) {});
  }
  put_open_ = false;
  put_.clear();
  put_.shrink_to_fit();
}

// ---------------------------------------------------------------------------- reserve

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

// ---------------------------------------------------------------------------- peek

Result RedisSession::Found(const Answer& a) {
  if (a.status != "FOUND") return Result::Of(Outcome::kNotFound);
  store_.SawId(a.Number(0));
  bodies_.assign(1, std::string(a.Word(1)));
  Result r = Result::Of(Outcome::kFound);
  r.job = {a.Number(0), bodies_[0]};
  return r;
}

Result RedisSession::Peek(uint64_t id) {
  store_.Count(Verb::kPeek);
  std::string ids = std::to_string(id);
  return Ask(store_.PartitionOfId(id), "peek", {ids}, false,
             [](RedisSession& s, const Answer& a) { return s.Found(a); });
}

Result RedisSession::PeekState(std::string_view which, Verb v) {
  store_.Count(v);
  return Ask(store_.PartitionOf(use_), "peek_state", {use_, which}, false,
             [](RedisSession& s, const Answer& a) { return s.Found(a); });
}

// ---------------------------------------------------------------------------- changes

Result RedisSession::Delete(uint64_t id) {
  store_.Count(Verb::kDelete);
  std::string ids = std::to_string(id);
  return Ask(store_.PartitionOfId(id), "delete", {sid_text_, ids}, true,
             [id](RedisSession& s, const Answer& a) {
               if (a.Number(0) == 0) return Result::Of(Outcome::kNotFound);
               s.Forget(id);
               return Result::Of(Outcome::kDeleted);
             });
}

Result RedisSession::DeleteMany(std::span<const uint64_t> ids) {
  store_.Count(Verb::kDeleteMany);
  // One call per partition of the ids (one on one Redis); the result when all are in.
  std::vector<std::pair<uint32_t, std::string>> text;
  text.reserve(ids.size());
  for (uint64_t id : ids) text.emplace_back(store_.PartitionOfId(id), std::to_string(id));
  std::stable_sort(text.begin(), text.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  struct Sum : Gathered {
    uint64_t deleted = 0;
  };
  auto sum = std::make_shared<Sum>();
  std::vector<uint64_t> copy(ids.begin(), ids.end());
  auto finish = Countdown(sum, [sum, copy = std::move(copy)](RedisSession& me) {
    for (uint64_t id : copy) me.Forget(id);
    return Result::Of(Outcome::kDeletedMany, sum->deleted);
  });
  for (size_t i = 0; i < text.size();) {
    uint32_t p = text[i].first;
    std::vector<std::string_view> args{sid_text_};
    for (; i < text.size() && text[i].first == p; i++) args.push_back(text[i].second);
    sum->left++;
    store_.Call(p, "delete", std::span<const std::string_view>(args), true,
                [sum, finish](const Answer& a) {
                  if (a.lost || a.oom) sum->lost = true;
                  sum->deleted += a.Number(0);
                  finish();
                });
  }
  finish();  // the first `left`, held while the calls were sent
  return Result::Of(Outcome::kPending);
}

Result RedisSession::Release(uint64_t id, uint32_t pri, uint32_t delay_s) {
  store_.Count(Verb::kRelease);
  std::string ids = std::to_string(id), p = std::to_string(pri), d = std::to_string(delay_s);
  return Ask(store_.PartitionOfId(id), "release", {sid_text_, ids, p, d}, true,
             [id](RedisSession& s, const Answer& a) {
               if (a.status != "RELEASED") return Result::Of(Outcome::kNotFound);
               s.Forget(id);
               return Result::Of(Outcome::kReleased);
             });
}

Result RedisSession::Bury(uint64_t id, uint32_t pri) {
  store_.Count(Verb::kBury);
  std::string ids = std::to_string(id), p = std::to_string(pri);
  return Ask(store_.PartitionOfId(id), "bury", {sid_text_, ids, p}, true,
             [id](RedisSession& s, const Answer& a) {
               if (a.status != "BURIED") return Result::Of(Outcome::kNotFound);
               s.Forget(id);
               return Result::Of(Outcome::kBuried);
             });
}

Result RedisSession::Touch(uint64_t id) {
  store_.Count(Verb::kTouch);
  std::string ids = std::to_string(id);
  return Ask(store_.PartitionOfId(id), "touch", {sid_text_, ids}, true,
             [id](RedisSession& s, const Answer& a) {
               if (a.status != "TOUCHED") return Result::Of(Outcome::kNotFound);
               for (Hold& h : s.holds_) {
                 if (h.id == id) h.deadline = a.Local(a.Signed(0));
               }
               return Result::Of(Outcome::kTouched);
             });
}

Result RedisSession::Kick(uint32_t count) {
  store_.Count(Verb::kKick);
  alone_ = true;
  KickStep(count, 0, "", "");
  return Result::Of(Outcome::kPending);
}

// A kick goes in calls of up to 1000 jobs, each from the set (buried or delayed) the first
// one chose.
void RedisSession::KickStep(uint32_t left, uint64_t kicked, std::string which, std::string bound) {
  std::string n = std::to_string(left);
  store_.Call(store_.PartitionOf(use_), "kick", {use_, n, which, bound}, true,
              [cell = cell_, left, kicked](const Answer& a) {
                RedisSession* s = *cell;
                if (!s) return;
                if (a.lost) return s->Finish(Result::Of(Outcome::kInternalError));
                uint64_t got = a.Number(0);
                if (got == 1000 && left > 1000) {
                  return s->KickStep(left - 1000, kicked + got, std::string(a.Word(1)),
                                     std::string(a.Word(2)));
                }
                s->Finish(Result::Of(Outcome::kKicked, kicked + got));
              });
}

Result RedisSession::KickJob(uint64_t id) {
  store_.Count(Verb::kKickJob);
  std::string ids = std::to_string(id);
  return Ask(store_.PartitionOfId(id), "kick_job", {ids}, true, [](RedisSession&, const Answer& a) {
    return Result::Of(a.status == "KICKED" ? Outcome::kKickedJob : Outcome::kNotFound);
  });
}

Result RedisSession::Respawn(std::string_view tube, uint32_t count, uint32_t ttl_s) {
  store_.Count(Verb::kKick);
  if (!command::IsValidTubeName(tube)) return Result::Of(Outcome::kBadFormat);
  std::string n = std::to_string(count), ttl = std::to_string(ttl_s);
  return Ask(
      store_.PartitionOf(tube), "respawn", {tube, n, ttl}, true,
      [](RedisSession&, const Answer& a) { return Result::Of(Outcome::kKicked, a.Number(0)); });
}

Result RedisSession::PauseTube(std::string_view tube, uint32_t delay_s) {
  store_.Count(Verb::kPauseTube);
  if (!command::IsValidTubeName(tube)) return Result::Of(Outcome::kBadFormat);
  std::string d = std::to_string(delay_s);
  return Ask(store_.PartitionOf(tube), "pause", {tube, d}, true,
             [](RedisSession&, const Answer& a) {
               return Result::Of(a.status == "PAUSED" ? Outcome::kPaused : Outcome::kNotFound);
             });
}

Result RedisSession::TubeTries(std::string_view tube, uint32_t tries) {
  store_.Count(Verb::kTubeTries);
  if (!command::IsValidTubeName(tube)) return Result::Of(Outcome::kBadFormat);
  std::string n = std::to_string(tries);
  return Ask(
      store_.PartitionOf(tube), "tube_tries", {tube, n}, true,
      [tries](RedisSession&, const Answer&) { return Result::Of(Outcome::kTubeTries, tries); });
}

Result RedisSession::Purge(std::string_view tube, command::StateFilter which) {
  store_.Count(Verb::kPurge);
  if (!command::IsValidTubeName(tube) || which == command::StateFilter::kReserved) {
    return Result::Of(Outcome::kBadFormat);
  }
  purged_ = 0;
  purge_tube_ = tube;
  purge_what_ = which;
  alone_ = true;
  PurgeStep();
  return Result::Of(Outcome::kPending);
}

// A purge goes in slices of kPurgeSlice jobs, one call each, so Redis serves others between.
void RedisSession::PurgeStep() {
  std::string n = std::to_string(kPurgeSlice);
  store_.Call(store_.PartitionOf(purge_tube_), "purge", {purge_tube_, StateWord(purge_what_), n},
              true, [cell = cell_](const Answer& a) {
                RedisSession* s = *cell;
                if (!s) return;
                if (a.lost) return s->Finish(Result::Of(Outcome::kInternalError));
                if (a.status == "NOT_FOUND") return s->Finish(Result::Of(Outcome::kNotFound));
                s->purged_ += a.Number(0);
                if (a.Number(1) == 1) return s->PurgeStep();
                s->Finish(Result::Of(Outcome::kPurged, s->purged_));
              });
}

// ---------------------------------------------------------------------------- tubes

Result RedisSession::Using() {
  Result r = Result::Of(Outcome::kUsing);
  r.name = use_;
  return r;
}

Result RedisSession::Use(std::string_view tube) {
  if (!command::IsValidTubeName(tube)) return Result::Of(Outcome::kBadFormat);
  store_.Count(Verb::kUse);
  if (tube != use_) {
    store_.Ref(tube, 1, 0);
    store_.Ref(use_, -1, 0);
    use_ = tube;
  }
  return Using();
}

Result RedisSession::ListTubeUsed() {
  store_.Count(Verb::kListTubeUsed);
  return Using();
}

Result RedisSession::Watch(std::string_view tube) {
  if (!command::IsValidTubeName(tube)) return Result::Of(Outcome::kBadFormat);
  store_.Count(Verb::kWatch);
  STALKD_DCHECK(!waiting_);  // the store keeps a waiter's places by its watch list
  if (std::find(watch_.begin(), watch_.end(), tube) == watch_.end()) {
    watch_.emplace_back(tube);
    store_.Ref(tube, 0, 1);
  }
  return Result::Of(Outcome::kWatching, watch_.size());
}

Result RedisSession::Ignore(std::string_view tube) {
  if (!command::IsValidTubeName(tube)) return Result::Of(Outcome::kBadFormat);
  store_.Count(Verb::kIgnore);
  STALKD_DCHECK(!waiting_);
  auto it = std::find(watch_.begin(), watch_.end(), tube);
  if (it == watch_.end()) return Result::Of(Outcome::kWatching, watch_.size());
  if (watch_.size() == 1) return Result::Of(Outcome::kNotIgnored);
  // beanstalkd's order: the last tube takes the ignored one's place.
  std::swap(*it, watch_.back());
  watch_.pop_back();
  store_.Ref(tube, 0, -1);
  return Result::Of(Outcome::kWatching, watch_.size());
}

Result RedisSession::ListTubesWatched() {
  store_.Count(Verb::kListTubesWatched);
  tube_views_.assign(watch_.begin(), watch_.end());
  Result r = Result::Of(Outcome::kTubeList);
  r.tubes = &tube_views_;
  return r;
}

Result RedisSession::ListTubes() {
  store_.Count(Verb::kListTubes);
  if (store_.partitions() > 1) return ListTubesAcross();
  return Ask(0, "list_tubes", {}, false, [](RedisSession& s, const Answer& a) {
    s.tube_names_.clear();
    for (size_t i = 0; i < a.size(); i++) s.tube_names_.emplace_back(a.Word(i));
    s.tube_views_.assign(s.tube_names_.begin(), s.tube_names_.end());
    Result r = Result::Of(Outcome::kTubeList);
    r.tubes = &s.tube_views_;
    return r;
  });
}

// A cluster's list-tubes: "default", then each partition's tubes in the order they were made,
// partitions in order. Per master one read over its partitions; a partition it does not hold
// wholly now (migrating) is asked alone.
Result RedisSession::ListTubesAcross() {
  struct Gather : Gathered {
    std::vector<std::vector<std::string>> lists;
  };
  auto g = std::make_shared<Gather>();
  g->lists.resize(store_.partitions());
  auto finish = Countdown(g, [g](RedisSession& me) {
    me.tube_names_.assign(1, "default");
    for (auto& l : g->lists) {
      for (auto& name : l) me.tube_names_.push_back(std::move(name));
    }
    me.tube_views_.assign(me.tube_names_.begin(), me.tube_names_.end());
    Result r = Result::Of(Outcome::kTubeList);
    r.tubes = &me.tube_views_;
    return r;
  });
  // A partition alone: routed, retried through a migration.
  auto alone = [st = &store_, g, finish](uint32_t p) {
    g->left++;
    st->Call(p, "list_tubes", {}, false, [g, finish, p](const Answer& a) {
      if (a.lost || a.oom) g->lost = true;
      g->lists[p].clear();
      for (size_t i = 0; i < a.size(); i++) {
        if (a.Word(i) != "default") g->lists[p].emplace_back(a.Word(i));
      }
      finish();
    });
  };
  g->left += store_
                 .ReadPerMaster("tubes_node", {}, alone,
                                [g, finish, alone](const std::string&, const Reply& r,
                                                   const std::vector<uint32_t>& parts) {
                                  if (r.type != Reply::Type::kArray) {
                                    for (uint32_t p : parts) alone(p);
                                    return finish();
                                  }
                                  // Per partition: a count (-1: not here), then as many names.
                                  size_t i = 0;
                                  for (uint32_t p : parts) {
                                    if (i >= r.elements.size()) break;
                                    int64_t n = 0;
                                    const std::string& c = r.elements[i++].str;
                                    std::from_chars(c.data(), c.data() + c.size(), n);
                                    if (n < 0) {
                                      alone(p);
                                      continue;
                                    }
                                    for (int64_t k = 0; k < n && i < r.elements.size(); k++) {
                                      g->lists[p].push_back(r.elements[i++].str);
                                    }
                                  }
                                  finish();
                                })
                 .size();
  finish();  // the first `left`, held while the calls were sent
  return Result::Of(Outcome::kPending);
}

// ---------------------------------------------------------------------------- stats

Result RedisSession::Stats() {
  store_.Count(Verb::kStats);
  alone_ = true;
  if (store_.partitions() > 1) return StatsAcross();
  return Ask(0, "stats", {store_.fid_}, false,
             [](RedisSession& s, const Answer& a) { return s.store_.FillStats(a, nullptr); });
}

// A cluster's stats: the front ends' counters from the global partition, the job counters
// summed per master over its partitions (a partition it does not hold wholly now is asked
// alone).
Result RedisSession::StatsAcross() {
  struct Gather : Gathered {
    uint64_t sums[10] = {};
    Owned global;
    void Add(const Answer& a) {
      for (size_t i = 0; i < 10; i++) sums[i] += a.Number(i);
    }
  };
  auto g = std::make_shared<Gather>();
  auto finish = Countdown(
      g, [g](RedisSession& me) { return me.store_.FillStats(g->global.View(), g->sums); });
  auto alone = [st = &store_, g, finish](uint32_t p) {
    g->left++;
    st->Call(p, "stats", {""}, false, [g, finish](const Answer& a) {
      if (a.lost || a.oom) g->lost = true;
      g->Add(a);
      finish();
    });
  };
  g->left++;
  store_.Call(store_.Global(), "stats", {store_.fid_}, false, [g, finish](const Answer& a) {
    if (a.lost || a.oom) g->lost = true;
    g->global = Owned(a);
    finish();
  });
  g->left += store_
                 .ReadPerMaster("sum_node", {}, alone,
                                [g, finish, alone](const std::string&, const Reply& r,
                                                   const std::vector<uint32_t>& parts) {
                                  if (r.type != Reply::Type::kArray || r.elements.size() < 10) {
                                    for (uint32_t p : parts) alone(p);
                                    return finish();
                                  }
                                  for (size_t i = 0; i < r.elements.size(); i++) {
                                    int64_t v = 0;
                                    const std::string& c = r.elements[i].str;
                                    std::from_chars(c.data(), c.data() + c.size(), v);
                                    if (i < 10) {
                                      g->sums[i] += static_cast<uint64_t>(std::max<int64_t>(v, 0));
                                    } else if (v >= 1 && static_cast<size_t>(v) <= parts.size()) {
                                      alone(parts[v - 1]);  // not wholly on that master now
                                    }
                                  }
                                  finish();
                                })
                 .size();
  finish();
  return Result::Of(Outcome::kPending);
}

Result RedisSession::StatsJob(uint64_t id) {
  store_.Count(Verb::kStatsJob);
  std::string ids = std::to_string(id);
  return Ask(store_.PartitionOfId(id), "stats_job", {ids}, false,
             [id](RedisSession& s, const Answer& a) {
               if (a.status != "OK") return Result::Of(Outcome::kNotFound);
               // tube state pri age_ms delay ttr time_left_ms reserves timeouts releases buries
               // kicks limited tries reason ttl_left_ms ext key attrs detached
               s.name_ = a.Word(0);
               s.state_ = a.Word(1);
               command::JobStats& j = s.job_stats_;
               j = {};
               j.id = id;
               j.tube = s.name_;
               j.state = s.state_;
               j.pri = static_cast<uint32_t>(a.Number(2));
               j.age_ms = a.Signed(3);
               j.age_s = j.age_ms / 1000;
               j.delay_s = static_cast<uint32_t>(a.Number(4));
               j.ttr_s = static_cast<uint32_t>(a.Number(5));
               j.time_left_s = a.Signed(6) / 1000;
               j.reserves = static_cast<uint32_t>(a.Number(7));
               j.timeouts = static_cast<uint32_t>(a.Number(8));
               j.releases = static_cast<uint32_t>(a.Number(9));
               j.buries = static_cast<uint32_t>(a.Number(10));
               j.kicks = static_cast<uint32_t>(a.Number(11));
               j.detached = a.Number(19) == 1;
               bool limited = a.Number(12) == 1;
               int64_t ttl_left = a.Signed(15);
               bool ext = a.Number(16) == 1;
               if (limited || ttl_left >= 0 || ext) {
                 command::JobExtensionStats& e = s.job_ext_;
                 e = {};
                 e.limited = limited;
                 e.tries_left = static_cast<uint32_t>(a.Number(13));
                 s.reason_ = a.Word(14);
                 e.bury_reason = s.reason_;
                 e.has_ttl = ttl_left >= 0;
                 e.ttl_left_s = std::max<int64_t>(0, ttl_left / 1000);
                 e.ttl_left_ms = std::max<int64_t>(0, ttl_left);
                 s.key_ = a.Word(17);
                 e.key = s.key_;
                 std::string_view blob = a.Word(18);
                 s.attr_text_.clear();
                 while (blob.size() >= 2) {
                   size_t nl = static_cast<unsigned char>(blob[0]);
                   if (blob.size() < 2 + nl) break;
                   size_t vl = static_cast<unsigned char>(blob[1 + nl]);
                   if (blob.size() < 2 + nl + vl) break;
                   s.attr_text_.emplace_back(blob.substr(1, nl));
                   s.attr_text_.emplace_back(blob.substr(2 + nl, vl));
                   blob.remove_prefix(2 + nl + vl);
                 }
                 s.attrs_.clear();
                 for (size_t i = 0; i + 1 < s.attr_text_.size(); i += 2) {
                   s.attrs_.push_back({s.attr_text_[i], s.attr_text_[i + 1]});
                 }
                 e.attributes = s.attrs_;
                 j.extension = &e;
               }
               Result r = Result::Of(Outcome::kJobStats);
               r.job_stats = &j;
               return r;
             });
}

Result RedisSession::StatsTube(std::string_view tube) {
  if (!command::IsValidTubeName(tube)) return Result::Of(Outcome::kBadFormat);
  store_.Count(Verb::kStatsTube);
  std::string name(tube);
  return Ask(store_.PartitionOf(tube), "stats_tube", {tube}, false,
             [name](RedisSession& s, const Answer& a) {
               if (a.status != "OK") return Result::Of(Outcome::kNotFound);
               // ready urgent reserved delayed buried total using watching deletes pauses pause_s
               // pause_left_ms expired exhausted default_tries
               s.name_ = name;
               command::TubeStats& t = s.tube_stats_;
               t = {};
               t.name = s.name_;
               t.ready = a.Number(0);
               t.urgent = a.Number(1);
               t.reserved = a.Number(2);
               t.delayed = a.Number(3);
               t.buried = a.Number(4);
               t.total_jobs = a.Number(5);
               t.using_ct = static_cast<uint32_t>(a.Number(6));
               t.watching_ct = static_cast<uint32_t>(a.Number(7));
               t.deletes = a.Number(8);
               t.pauses = a.Number(9);
               t.pause_s = a.Signed(10);
               t.pause_left_s = a.Signed(11) / 1000;
               t.expired = a.Number(12);
               t.tries_exhausted = a.Number(13);
               t.default_tries = static_cast<uint32_t>(a.Number(14));
               auto w = s.store_.tube_waiters_.find(name);
               if (w != s.store_.tube_waiters_.end()) t.waiting = w->second.size();
               Result r = Result::Of(Outcome::kTubeStats);
               r.tube_stats = &t;
               return r;
             });
}

Result RedisSession::ListJobs(std::string_view tube, command::StateFilter state, uint64_t from,
                              uint32_t count) {
  store_.Count(Verb::kListJobs);
  if (!command::IsValidTubeName(tube) || state == command::StateFilter::kAll) {
    return Result::Of(Outcome::kBadFormat);
  }
  std::string f = std::to_string(from), n = std::to_string(count);
  return Ask(store_.PartitionOf(tube), "list_jobs", {tube, StateWord(state), f, n}, false,
             [](RedisSession& s, const Answer& a) {
               if (a.status != "OK") return Result::Of(Outcome::kNotFound);
               s.ids_.clear();
               for (size_t i = 1; i < a.size(); i++) s.ids_.push_back(a.Number(i));
               Result r = Result::Of(Outcome::kJobList, a.Number(0));
               r.ids = &s.ids_;
               return r;
             });
}

}  // namespace stalkd::redis
