#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "base/clock.h"
#include "command/values.h"

// The command interface: every front end (the text protocol, HTTP) calls a store through
// it, and every store (the in-memory engine with its binlog; Redis next) implements it.
//
// A call returns its Result at once, or Outcome::kPending: then the result arrives later,
// exactly once, through the session's Client (a waiting reserve, a kick done in slices, a
// store's round trip). A session runs one command at a time: its front end makes no other
// call on it (but the abandon calls) until a pending result has arrived, which keeps a
// connection's pipelined replies in order; unless the session allows the next call to go
// ahead (Session::CanPipeline), and then answers in order itself.
//
// Durability: a store may answer before what the answer reflects is durable. Each result
// raises the session's need_mark(); a front end's replies may leave the process only once
// Store::Covers(need_mark()) (the server holds the connection's output until then).
namespace stalkd::command {

// Whoever asked: receives the results that arrive later. OnResult may be called from
// inside another session's call or from Store::Tick, so it only takes the result (encodes
// it, schedules a write): it must not call the store or destroy a session.
class Client {
 public:
  virtual void OnResult(const Result& r) = 0;

 protected:
  ~Client() = default;
};

// One client's state in a store: the tube it uses, the tubes it watches, the jobs it has
// reserved. Destroying it abandons a put in progress and a waiting reserve, and gives its
// reserved jobs back.
class Session {
 public:
  virtual ~Session() = default;

  // put, in two steps: the job's room is taken (and its id assigned) first, a front end
  // writes the body into the slot, then commits (or abandons) it.
  virtual PutSlot BeginPut(const PutArgs& args) = 0;
  virtual Result CommitPut() = 0;  // kInserted, kDraining, kOutOfMemory
  virtual void AbandonPut() = 0;

  // Pipelining: whether a front end may make a call with this verb while earlier calls'
  // results are still pending (asked only then). A session that allows it delivers the
  // pending results through its Client in the order the calls were made; the results of
  // calls it answers at once follow the pending ones in the front end's replies; behind a
  // reserve it allows only reserves (AbandonReserve ends them all). Stores that
  // answer at once but for a waiting reserve have no use for it (the default: never).
  virtual bool CanPipeline(Verb) const { return false; }

  // timeout: kForever for `reserve`. kReserved, kTimedOut, kDeadlineSoon or kPending.
  virtual Result Reserve(Nanos timeout) = 0;
  // The client went away while its reserve waited: kTimedOut; no result arrives later.
  virtual Result AbandonReserve() = 0;
  // The client will send nothing more while a reserve of its is pending (a half-close). As
  // AbandonReserve, unless the reserve is not waiting yet, only on its way (a store across
  // a network): then kPending, and the pending reserves are answered as if none could wait
  // (a job, or kTimedOut), in order, until one answers kTimedOut; the others then get
  // nothing. beanstalkd answers a reserve before it notices the end of the input.
  virtual Result CloseReserve() { return AbandonReserve(); }
  virtual Result ReserveJob(uint64_t id) = 0;

  virtual Result Peek(uint64_t id) = 0;
  virtual Result PeekReady() = 0;
  virtual Result PeekDelayed() = 0;
  virtual Result PeekBuried() = 0;

  virtual Result Delete(uint64_t id) = 0;
  virtual Result Release(uint64_t id, uint32_t pri, uint32_t delay_s) = 0;
  virtual Result Bury(uint64_t id, uint32_t pri) = 0;
  virtual Result Touch(uint64_t id) = 0;
  // Kicks up to `count` buried jobs of the used tube or, if it has none, delayed ones.
  virtual Result Kick(uint32_t count) = 0;
  virtual Result KickJob(uint64_t id) = 0;

  virtual Result Use(std::string_view tube) = 0;
  virtual Result Watch(std::string_view tube) = 0;
  virtual Result Ignore(std::string_view tube) = 0;
  virtual Result ListTubeUsed() = 0;
  virtual Result ListTubesWatched() = 0;
  virtual Result ListTubes() = 0;
  virtual Result PauseTube(std::string_view tube, uint32_t delay_s) = 0;

  virtual Result Stats() = 0;
  virtual Result StatsJob(uint64_t id) = 0;
  virtual Result StatsTube(std::string_view tube) = 0;
  // The tube of job `id`, for a front end that limits a client to some tubes: kFound with
  // `name`, kJobStats (a store that asks StatsJob, the default, which counts a stats-job),
  // or kNotFound.
  virtual Result JobTube(uint64_t id) { return StatsJob(id); }

  // The lifecycle extensions (docs/EXTENSIONS.md).
  // Counts a command that a front end carries out through other calls (put-many's puts,
  // whose PutArgs count nothing).
  virtual void CountBatch(Verb v) = 0;
  // kReservedMany (jobs), kTimedOut, kDeadlineSoon or kPending; AbandonReserve ends a wait.
  virtual Result ReserveExt(const ReserveArgs& args) = 0;
  virtual Result DeleteMany(std::span<const uint64_t> ids) = 0;  // kDeletedMany
  // kPurged (kPending while a large purge runs in slices), kNotFound, kBadFormat.
  virtual Result Purge(std::string_view tube, StateFilter which) = 0;
  // kJobList, kNotFound, kBadFormat.
  virtual Result ListJobs(std::string_view tube, StateFilter state, uint64_t from,
                          uint32_t count) = 0;
  virtual Result TubeTries(std::string_view tube, uint32_t tries) = 0;  // kTubeTries
  // lmstfy's dead-letter respawn: kicks up to `count` buried jobs of `tube`, each with one
  // try and a TTL of ttl_s from now (0: none). kKicked (how many), kBadFormat.
  virtual Result Respawn(std::string_view tube, uint32_t count, uint32_t ttl_s) = 0;

  // How far the store must be durable before this session's replies so far may be sent
  // (see Store::Covers). It only grows.
  int64_t need_mark() const { return need_mark_; }

 protected:
  void NeedMark(int64_t mark) {
    if (mark > need_mark_) need_mark_ = mark;
  }

 private:
  int64_t need_mark_ = 0;
};

// Receives what front ends and stores measure, for /metrics. Set on a store by the server
// (only when something reads it); front ends take it from the store they are opened on.
class Observer {
 public:
  virtual Nanos Now() const = 0;
  // A command's latency, from its request to its reply (a reserve's includes its wait).
  virtual void OnCommand(Verb v, Nanos latency) = 0;
  // A job's first reservation: how long it had been ready (queue latency).
  virtual void OnFirstReserve(std::string_view tube, Nanos waited) = 0;
  // A reserved job was deleted: how long since it was reserved (or last touched).
  virtual void OnRunDone(std::string_view tube, Nanos ran) = 0;

 protected:
  ~Observer() = default;
};

// What a store asks of the process it runs in.
class Host {
 public:
  virtual HostStats CurrentStats() const = 0;

 protected:
  ~Host() = default;
};

class Store {
 public:
  virtual ~Store() = default;
  // A new session, whose late results go to `client`; `client` must outlive it.
  virtual std::unique_ptr<Session> Open(Client& client) = 0;
  // Does timer work (delays, TTRs, pauses, reserve timeouts) and the next slice of long
  // work (kicks, a closed session's jobs), delivering the results this completes. Returns
  // when it next has work: now if some is left, kForever if none.
  virtual Nanos Tick() = 0;
  // Long work is in progress (a kick between slices): the loop should poll without
  // sleeping, as for a connection with input to run, and is not idle.
  virtual bool Busy() const = 0;
  // Whether everything up to `mark` is durable (see Session::need_mark).
  virtual bool Covers(int64_t mark) const = 0;
  // Drain mode: puts answer kDraining.
  virtual void SetDraining(bool on) = 0;
  // Metrics: null (the default) measures nothing.
  virtual void SetObserver(Observer* o) = 0;
  Observer* observer() const { return observer_; }

 protected:
  Observer* observer_ = nullptr;
};

}  // namespace stalkd::command
