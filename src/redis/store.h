#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "command/store.h"
#include "net/event_loop.h"
#include "redis/link.h"

// The Redis store (docs/SCALE-OUT.md): every job lives in Redis; this process is a stateless
// front end. Each state transition is one call of a Redis Function (functions.lua), so a
// crash between two calls never loses or duplicates a job. What stays here is what belongs
// to connections: the tube used and watched, the reservations a connection holds (for
// DEADLINE_SOON), waiting reserves (woken through pub/sub), timers that pump the store.
namespace stalkd::redis {

struct StoreOptions {
  StoreUrl url;
  std::string prefix = "stalkd";
  int wait_replicas = 1;  // WAIT n before a change's reply; 0: none
  Nanos wait_timeout = 2 * kSecond;
  Nanos lease = 5 * kSecond;  // a front end's lease (its crash gives jobs back after it)
  Nanos retry = 5 * kSecond;  // how long a command waits for a lost Redis
  uint32_t max_job_size = 65535;
};

// The Lua library, embedded at build time (src/redis/embed_lua.cmake).
extern const std::string_view kFunctionsLua;
extern const std::string_view kFunctionsVersion;  // a hash of it

class RedisSession;

class RedisStore final : public command::Store, private Link::Listener {
 public:
  RedisStore(net::EventLoop& loop, const Clock& clock, StoreOptions options, command::Host* host);
  ~RedisStore() override;
  RedisStore(const RedisStore&) = delete;
  RedisStore& operator=(const RedisStore&) = delete;

  // Connects, checks Redis' settings, loads the functions and takes a front-end id, running
  // the loop until done: start-up only. false with *error when Redis cannot be used.
  bool Start(std::string* error);
  // Gives back this front end's reservations and references (a clean stop), waiting up to
  // a second for Redis to confirm.
  void Stop();

  std::unique_ptr<command::Session> Open(command::Client& client) override;
  Nanos Tick() override;
  bool Busy() const override { return false; }
  // Replies are released only once Redis (and WAIT) answered: nothing is held after that.
  bool Covers(int64_t) const override { return true; }
  void SetDraining(bool on) override { draining_ = on; }
  void SetObserver(command::Observer* o) override { observer_ = o; }

  bool ready() const { return link_.ready(); }

 private:
  friend class RedisSession;
  // A function's answer: status and the words after it. `lost`: Redis could not say (the
  // connection dropped, WAIT timed out); `oom`: Redis refused the call for memory.
  struct Answer {
    bool lost = false;
    bool oom = false;
    std::string status;
    const std::vector<Reply>* words = nullptr;  // after the status
    size_t first = 0;
    size_t size() const { return words ? words->size() - first : 0; }
    std::string_view Word(size_t i) const;
    uint64_t Number(size_t i) const;
    int64_t Signed(size_t i) const;
  };
  using Handler = std::function<void(const Answer&)>;

  // FCALL stalkd_<fn> 1 <tag> args...; `writes`: the reply waits for WAIT.
  void Call(std::string_view fn, std::span<const std::string_view> args, bool writes, Handler done);
  void Call(std::string_view fn, std::initializer_list<std::string_view> args, bool writes,
            Handler done) {
    Call(fn, std::span<const std::string_view>(args.begin(), args.size()), writes, std::move(done));
  }
  void Deliver(const Reply& reply, const Handler& done);
  // One WAIT after the changes sent since the last; none while one is out: Redis runs
  // nothing behind a blocked WAIT on the connection, so the calls sent meanwhile wait
  // there anyway, and the next WAIT, sent when this one answers, covers them all.
  void SendWait();

  // Setup found Redis unusable: start-up fails with `why`; later, it is logged and the link
  // tries again.
  void SetupFailed(std::string why);

  // Link::Listener
  void OnConnected() override;
  void OnLost(std::string_view why) override;
  void OnMessage(std::string_view channel, std::string_view message) override;
  void Setup();

  void Pump();
  void RenewLease();
  void RefreshWaiterLease();
  void Wake(std::string_view tube);
  void ReleaseConnection(const std::string& sid);
  void AddWaiter(RedisSession* s);
  // A waiter's call came back empty: it waits for a wake-up, its timeout or DEADLINE_SOON.
  void Parked(const RedisSession& s);
  // Ends the waits whose timeout or DEADLINE_SOON has come; notes when the next one does.
  void CheckWaiters(Nanos now);
  void RemoveWaiter(RedisSession* s);
  uint64_t Waiting() const;
  void Ref(std::string_view tube, int using_delta, int watching_delta);
  void Count(command::Verb v) { cmds_[static_cast<size_t>(v)]++; }
  // `stats`: the job counters from Redis, this front end's own counters and the others'.
  command::Result FillStats(const Answer& a);
  // Redis' clock (ms) to ours, and back.
  Nanos LocalTime(int64_t redis_ms) const { return redis_ms * 1'000'000 - offset_; }
  void Learn(int64_t redis_now_ms, int64_t next_due_ms);

  net::EventLoop& loop_;
  const Clock& clock_;
  StoreOptions opt_;
  command::Host* host_;
  Link link_;
  std::string tag_;      // the partition's hash tag key: <prefix>:{0}
  std::string channel_;  // <prefix>:{0}:w
  std::string fid_ = "0";
  uint64_t next_conn_ = 0;
  bool draining_ = false;
  bool started_ = false;
  bool setup_failed_ = false;
  std::string setup_error_;

  Nanos offset_ = 0;  // redis ms * 1e6 - local
  Nanos next_pump_ = 0;
  Nanos next_due_ = kForever;  // the store's next timer, in local time
  Nanos next_lease_ = 0;
  Nanos next_waiter_lease_ = 0;
  Nanos next_waiter_check_ = kForever;  // the earliest timeout or DEADLINE_SOON of a waiter
  bool pumping_ = false;
  bool need_wait_ = false;
  bool wait_out_ = false;  // a WAIT has been sent and not answered
  struct Held {
    Reply reply;
    Handler done;
    bool waits;  // a change: lost if the WAIT does not confirm it
  };
  // Answers waiting for the WAIT sent after them: the changes', and every answer that
  // arrives behind one of those (reads, errors), so that all are delivered in the order
  // they were called (a connection's pipelined commands are answered in that order).
  std::vector<Held> held_;
  // Bumped whenever this front end's sessions may have been dropped from its fs: set (a
  // new connection to Redis, a lease found reaped): RedisSession::enlisted_ is then stale.
  uint64_t enlist_epoch_ = 1;

  // Waiters in the order they began to wait: all of them (timeouts, claims again after an
  // outage) and per watched tube (wake-ups, stats-tube, the waiters' lease), so that a
  // wake-up walks only its tube's waiters and a waiter comes and goes in O(its tubes). A
  // waiter keeps its places (RedisSession::waiter_at_, tube_at_): its watch list does not
  // change while it waits.
  using WaiterList = std::list<RedisSession*>;
  WaiterList waiters_;
  std::unordered_map<std::string, WaiterList> tube_waiters_;
  std::vector<std::string> orphans_;  // closed sessions whose release_conn was lost
  uint64_t sessions_ = 0, producers_ = 0, workers_ = 0;  // current ones (`stats`)
  uint64_t cmds_[command::kVerbCount] = {};
  uint64_t total_connections_ = 0;
  command::ServerStats stats_;
};

}  // namespace stalkd::redis
