#pragma once

// RedisSession: the command::Session of RedisStore (store.h). Private to the store. Its
// calls are defined in session.cc, session_reserve.cc and session_reads.cc.
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "command/store.h"
#include "redis/store.h"

namespace stalkd::redis {

using command::Outcome;
using command::Result;
using command::Verb;

// A state filter as the Redis functions name it (purge, list_jobs):
// used by session.cc and session_reads.cc.
inline std::string_view StateWord(command::StateFilter f) {
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

class RedisSession final : public command::Session {
 public:
  RedisSession(RedisStore& store, command::Client& client, uint64_t sid);
  ~RedisSession() override;

  bool CanPipeline(Verb v) const override;
  command::PutSlot BeginPut(const command::PutArgs& args) override;
  Result CommitPut() override;
  void AbandonPut() override;
  Result Reserve(Nanos timeout) override;
  Result AbandonReserve() override;
  Result CloseReserve() override;
  Result ReserveJob(uint64_t id) override;
  Result Peek(uint64_t id) override;
  Result PeekReady() override { return PeekState("ready", Verb::kPeekReady); }
  Result PeekDelayed() override { return PeekState("delayed", Verb::kPeekDelayed); }
  Result PeekBuried() override { return PeekState("buried", Verb::kPeekBuried); }
  Result Delete(uint64_t id) override;
  Result Release(uint64_t id, uint32_t pri, uint32_t delay_s) override;
  Result Bury(uint64_t id, uint32_t pri) override;
  Result Touch(uint64_t id) override;
  Result Kick(uint32_t count) override;
  Result KickJob(uint64_t id) override;
  Result Use(std::string_view tube) override;
  Result Watch(std::string_view tube) override;
  Result Ignore(std::string_view tube) override;
  Result ListTubeUsed() override;
  Result ListTubesWatched() override;
  Result ListTubes() override;
  Result PauseTube(std::string_view tube, uint32_t delay_s) override;
  Result Stats() override;
  Result StatsJob(uint64_t id) override;
  Result StatsTube(std::string_view tube) override;
  void CountBatch(Verb v) override { store_.Count(v); }
  Result ReserveExt(const command::ReserveArgs& args) override;
  Result DeleteMany(std::span<const uint64_t> ids) override;
  Result Purge(std::string_view tube, command::StateFilter which) override;
  Result ListJobs(std::string_view tube, command::StateFilter state, uint64_t from,
                  uint32_t count) override;
  Result TubeTries(std::string_view tube, uint32_t tries) override;
  Result Respawn(std::string_view tube, uint32_t count, uint32_t ttl_s) override;

 private:
  friend class RedisStore;
  using Answer = RedisStore::Answer;
  // What a later answer needs of this session: null once it is gone.
  using Cell = std::shared_ptr<RedisSession*>;
  using Decode = std::function<Result(RedisSession&, const Answer&)>;
  // Sends a call to partition `part` whose answer becomes a pending result through `decode`.
  Result Ask(uint32_t part, std::string_view fn, std::span<const std::string_view> args,
             bool writes, Decode decode);
  Result Ask(uint32_t part, std::string_view fn, std::initializer_list<std::string_view> args,
             bool writes, Decode decode) {
    return Ask(part, fn, std::span<const std::string_view>(args.begin(), args.size()), writes,
               std::move(decode));
  }
  // Pending results are handed to the client in the order of their commands, whichever
  // master answers first: each takes a ticket, and is given its result (a function that
  // makes it, run when every earlier one has been) with Complete.
  using Make = std::function<Result(RedisSession&)>;
  uint64_t Ticket();
  void Complete(uint64_t ticket, Make make);
  // An answer kept until its turn.
  struct Owned {
    bool lost = false, oom = false;
    std::string status;
    std::vector<Reply> words;
    size_t first = 0;
    Nanos offset = 0;
    Owned() = default;
    explicit Owned(const Answer& a);
    Answer View() const;
  };
  static Result Checked(RedisSession& s, const Answer& a, const Decode& decode);
  // A result made of several calls' answers: `left` counts what is still out (from 1, the
  // caller's own hold while it sends them), `lost` any lost. The function Countdown returns
  // is called once per answer and once by the caller when all are sent; the last call
  // completes a ticket (taken now) with `make`, or with INTERNAL_ERROR if any was lost.
  struct Gathered {
    size_t left = 1;
    bool lost = false;
  };
  std::function<void()> Countdown(std::shared_ptr<Gathered> g, Make make);
  // What spans partitions on a cluster: DeleteMany, Stats, ListTubes.
  Result StatsAcross();
  Result ListTubesAcross();
  void Finish(const Result& r);
  Result PeekState(std::string_view which, Verb v);
  Result Found(const Answer& a);
  Result Using();
  Result Watching();

  // Reserve: a call over the watched tubes (a claim); waits (registered with the store) when
  // nothing is ready and the timeout allows. Pipelined plain reserves each send their claim
  // at once; a claim's answer goes to the oldest reserve not yet answered (the head).
  Result StartReserve(const command::ReserveArgs& args, Verb v);
  void Claim();
  // A reserve call in one partition over `tubes`; bound: see functions/reserve.lua.
  void ClaimIn(uint32_t part, std::span<const std::string_view> tubes, std::string_view bound,
               std::function<void(RedisSession&, const Answer&)> done);
  // Watched tubes in several partitions (a cluster): each one's best job, then a claim on
  // the best partition bounded by the others' (../shared/design/REDIS-STORE.md §2.8).
  struct Across;
  void ClaimAcross(std::vector<std::pair<uint32_t, std::vector<std::string_view>>> groups);
  void ClaimBest(const std::shared_ptr<Across>& x);
  void OnClaim(const Answer& a, uint32_t part);
  // The head reserve's time is up (no claim out): TIMED_OUT, after one last claim unless
  // the latest was made at or after its end.
  void TimeUp();
  std::string WaiterLease() const;
  static Answer NoJob();
  Result Reserved(const Answer& a);
  bool DeadlineSoon(Nanos now);
  Nanos NextDeadlineSoon() const;
  // Answers the head reserve; the next one, if any, becomes the head.
  void AnswerHead(const Result& r);
  void BecomeHead();
  void Forget(uint64_t id);
  void PurgeStep();
  void KickStep(uint32_t left, uint64_t kicked, std::string which, std::string bound);

  RedisStore& store_;
  command::Client& client_;
  uint64_t sid_;
  std::string sid_text_;
  Cell cell_;
  std::string use_ = "default";
  std::vector<std::string> watch_{"default"};
  std::deque<Make> asked_;  // results by ticket, from asked_first_; empty: not in yet
  uint64_t asked_first_ = 0;
  // Nothing may go ahead of the pending result: a kick or a purge in slices, or `stats`
  // (its answer adds this front end's counters as they are when it arrives).
  bool alone_ = false;
  Verb verb_ = Verb::kUnknown;
  Nanos started_ = 0;
  // The partitions it may hold reservations in (release_conn there when it closes).
  std::vector<uint32_t> reserved_in_;
  void ReservesIn(uint32_t part);
  // The partitions where it is listed in its front end's fs: set (a reservation of its own,
  // not detached, was answered) as of store_.enlist_epoch_ == enlisted_epoch_.
  std::vector<uint32_t> enlisted_in_;
  uint64_t enlisted_epoch_ = 0;
  bool Enlisted(uint32_t part) const;
  void Enlist(uint32_t part);
  bool worker_ = false;   // reserved, as beanstalkd's current-workers counts
  bool put_any_ = false;  // a producer
  void Worker();          // sets worker_, counted by the store
  void Producer();        // sets put_any_, counted by the store

  // A put whose body is arriving.
  std::string put_;
  command::PutArgs put_args_;
  std::string put_key_, put_attrs_;
  uint32_t tries_ = 0, ttl_ = 0;
  bool put_open_ = false;

  // The jobs this session holds reserved (not detached), with their local deadlines.
  struct Hold {
    uint64_t id;
    Nanos deadline;
  };
  std::vector<Hold> holds_;

  // Reserves not answered yet, oldest (the head) first; more than one only when pipelined.
  // The head's verb and arguments are in verb_ and wait_args_, its end in wait_until_ (its
  // timeout counts from when it became the head, as the command would have been read then).
  struct Want {
    Verb verb;
    command::ReserveArgs args;
  };
  std::deque<Want> wants_;
  size_t claims_out_ = 0;  // reserve calls whose answers are on their way
  Nanos claimed_at_ = 0;   // when the latest claim went (local clock)
  bool waiting_ = false;   // registered with the store: a reserve that may wait
  RedisStore::WaiterList::iterator waiter_at_;             // waiting_: in store_.waiters_
  std::vector<RedisStore::WaiterList::iterator> tube_at_;  // and per tube of watch_
  bool reclaim_ = false;    // a wake-up came while claiming: claim again if that finds none
  bool abandoned_ = false;  // the client went away while its reserve waited
  bool closing_ = false;    // CloseReserve: the reserves answer as if none could wait
  Nanos wait_until_ = kForever;
  command::ReserveArgs wait_args_;

  // A purge in slices.
  uint64_t purged_ = 0;
  std::string purge_tube_;
  command::StateFilter purge_what_ = command::StateFilter::kAll;

  // What results view until the next call.
  std::vector<std::string> bodies_;
  std::vector<command::JobView> jobs_;
  std::string name_, state_, reason_, key_;
  std::vector<std::string> attr_text_;
  std::vector<command::Attribute> attrs_;
  command::JobStats job_stats_;
  command::JobExtensionStats job_ext_;
  command::TubeStats tube_stats_;
  std::vector<std::string> tube_names_;
  std::vector<std::string_view> tube_views_;
  std::vector<uint64_t> ids_;
};

}  // namespace stalkd::redis
