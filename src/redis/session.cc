// RedisSession: one connection's commands as calls of the Redis functions. This file holds
// the session's bookkeeping (tickets that keep results in order, calls and answers), put,
// peek, the single calls that change a job or a tube, and use/watch/ignore. Its siblings:
// session_reserve.cc (reserve: waiting, claims across partitions, DEADLINE_SOON, time-up)
// and session_reads.cc (list-tubes, stats, stats-job, stats-tube, list-jobs; what fans out
// over a cluster's partitions).
#include "redis/session.h"

#include <algorithm>
#include <utility>

#include "base/check.h"

namespace stalkd::redis {

namespace {

constexpr uint32_t kPurgeSlice = 1000;
constexpr size_t kMaxPipelined = 1024;  // calls or reserves of one connection in flight

// A job's attributes as the Redis functions keep them: per attribute a byte of name length, the
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
    if (!store_.CanRef(tube)) return Result::Of(Outcome::kOutOfMemory);
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
    if (!store_.CanRef(tube)) return Result::Of(Outcome::kOutOfMemory);
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

}  // namespace stalkd::redis
