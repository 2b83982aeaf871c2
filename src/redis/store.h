#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "command/store.h"
#include "net/event_loop.h"
#include "redis/cluster.h"
#include "redis/link.h"

// The Redis store (docs/SCALE-OUT.md): every job lives in Redis; this process is a stateless
// front end. Each state transition is one call of a Redis Function (functions/*.lua), so a
// crash between two calls never loses or duplicates a job. What stays here is what belongs
// to connections: the tube used and watched, the reservations a connection holds (for
// DEADLINE_SOON), waiting reserves (woken through pub/sub), timers that pump the store.
//
// On one Redis (redis://, redis-sentinel://) every job is in one partition. On a Redis Cluster
// (redis-cluster://) jobs are spread over kClusterPartitions partitions, each a hash tag and so
// a slot: a tube's partition is the CRC16 of its name (or of the text in its first `(...)`),
// a job's id is seq * P + partition. Each call touches one partition; what spans partitions
// (a reserve over their tubes, stats, list-tubes, the timers' safety net) is done per master
// or per partition and combined here (docs/SCALE-OUT.md, "Redis Cluster").
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

constexpr uint32_t kClusterPartitions = 1024;

// A reply's integer (a number as text too; 0 if none).
int64_t ToInt(const Reply& r);

// The partition of `tube` among `parts`: CRC16 of the text inside its first `(...)` when that
// is not empty, else of the whole name, mod parts (0 when parts is 1).
uint32_t TubePartition(std::string_view tube, uint32_t parts);

class RedisStore final : public command::Store,
                         private Link::Listener,
                         private ClusterLink::Listener {
 public:
  RedisStore(net::EventLoop& loop, const Clock& clock, StoreOptions options, command::Host* host);
  ~RedisStore() override;
  RedisStore(const RedisStore&) = delete;
  RedisStore& operator=(const RedisStore&) = delete;

  // Starts connecting, without waiting: Tick then checks Redis' settings, loads the functions
  // and takes a front-end id, trying again (with the link's backoff) for as long as it takes.
  // Sessions may be opened at once: their calls are held until the front-end id is known, each
  // for up to --store-retry (then answered as lost).
  void Start();
  // Not empty once the store found Redis unusable before it ever served: a setting it
  // requires is missing (appendonly, noeviction, min-replicas-to-write). The front end stops
  // with this message (exit 1); later the same finding is logged and tried again.
  const std::string& fatal() const { return fatal_; }
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

  bool ready() const { return cluster_ ? cluster_->ready() : link_->ready(); }
  // Why the store cannot serve now, for /readyz ("starting", the link's reason: no master,
  // connecting, setting up; "replicas behind: ..."); empty when it can.
  std::string why_not_ready() const;

  // Partitions (1 on one Redis) and where tubes and ids live.
  uint32_t partitions() const { return parts_; }
  uint32_t PartitionOf(std::string_view tube) const { return TubePartition(tube, parts_); }
  uint32_t PartitionOfId(uint64_t id) const { return static_cast<uint32_t>(id % parts_); }
  // Whether calls to the partition go out now (on a cluster, its master may be failing over
  // or setting up: its calls wait until it is back).
  bool Serving(uint32_t part) const { return !cluster_ || cluster_->ready(slots_[part]); }

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
    // Its master's clock (ms * 1e6) minus ours when it arrived: deadlines it carries are
    // made local with it (masters' clocks may differ).
    Nanos offset = 0;
    Nanos Local(int64_t redis_ms) const { return redis_ms * 1'000'000 - offset; }
    size_t size() const { return words ? words->size() - first : 0; }
    std::string_view Word(size_t i) const;
    uint64_t Number(size_t i) const;
    int64_t Signed(size_t i) const;
  };
  using Handler = std::function<void(const Answer&)>;

  // FCALL stalkd_<fn> 1 <tag of partition `part`> args...; `writes`: the reply waits for WAIT.
  // Global() is the partition of what is not a tube's (front ends' leases): on one Redis the
  // one partition, on a cluster the {g} tag.
  uint32_t Global() const { return cluster_ ? parts_ : 0; }
  void Call(uint32_t part, std::string_view fn, std::span<const std::string_view> args, bool writes,
            Handler done);
  void Call(uint32_t part, std::string_view fn, std::initializer_list<std::string_view> args,
            bool writes, Handler done) {
    Call(part, fn, std::span<const std::string_view>(args.begin(), args.size()), writes,
         std::move(done));
  }
  // Sends an encoded call (`again`: its second try, after the functions were loaded again).
  void SendCall(uint32_t part, std::shared_ptr<const std::string> command, bool wait, Handler done,
                bool again);
  // FUNCTION LOAD REPLACE on `master` ("" on one Redis), unless one is out there already.
  void ReloadFunctions(const std::string& master);
  // On a cluster: FCALL_RO stalkd_<fn> 0 args... on one master (the per-node reads); `done`
  // gets the raw reply.
  void CallNode(const std::string& master, std::string_view fn,
                std::span<const std::string_view> args, Callback done);
  // On a cluster: `fn` to each master with `lead`, then the tags of the partitions it serves
  // (`read` gets its reply and those partitions, later); the partitions no master serves now
  // go to `alone` at once. Returns the masters it was sent to.
  using Read = std::function<void(const std::string& master, const Reply&,
                                  const std::vector<uint32_t>& parts)>;
  // `skip`: masters to leave out this time (their partitions go to `alone`).
  std::vector<std::string> ReadPerMaster(
      std::string_view fn, std::span<const std::string_view> lead,
      const std::function<void(uint32_t)>& alone, const Read& read,
      const std::function<bool(const std::string&)>& skip = nullptr);
  // The partitions each master serves now, by the slot map (on a cluster).
  std::vector<std::pair<std::string, std::vector<uint32_t>>> PartitionsByMaster() const;
  void Deliver(uint32_t part, const Reply& reply, const Handler& done);
  // Runs `f` in the next Tick, not before the caller returns.
  void Later(std::function<void()> f) { later_.push_back(std::move(f)); }
  // WAIT per master: one out at a time, sent after the changes it must cover (see store.cc).
  struct Master;
  Master& MasterNamed(const std::string& name);
  void Answered(const Reply& r, const Handler& done, uint32_t part, bool wait, Master* predicted,
                uint64_t mark);
  void SendWaits();
  void SendWait(Master& m);

  // Setup found Redis unusable (`fatal`: a setting it requires is missing): before the store
  // ever started, a fatal finding stops the front end (fatal()); anything else is logged and
  // the link (`master`'s on a cluster; "": the front-end id, asked again by Tick) tries again.
  void SetupFailed(const std::string& master, std::string why, bool fatal);
  // Logs the store's state (why it cannot serve; "" ready) when it changed.
  void LogState(const std::string& why);
  // The front-end id is known for the first time: sessions opened before take their ids, and
  // what they asked meanwhile goes out.
  void Born();
  // Before that: a call is held (it would name a provisional session id); expired after
  // --store-retry as lost. ExpireHeld returns the next expiry.
  void Hold(uint32_t part, std::string_view fn, std::span<const std::string_view> args, bool writes,
            Handler done);
  Nanos ExpireHeld(Nanos now);

  // Link::Listener
  void OnConnected() override;
  void OnLost(std::string_view why) override;
  void OnMessage(std::string_view channel, std::string_view message) override;
  // ClusterLink::Listener
  void OnMasterConnected(const std::string& master) override;
  void OnMasterLost(const std::string& master, std::string_view why) override;
  void OnSubscribed(const std::string& node) override;
  void OnSubscriptionLost(std::string_view why) override;
  // The checks and FUNCTION LOAD a master gets before use; then `ready`.
  void CheckMaster(const std::string& name,
                   std::function<void(std::span<const std::string_view>, Callback)> send,
                   std::function<void()> ready);
  void Setup();
  void Started();

  // Runs the link's (or cluster's) timers; writes what is buffered.
  Nanos PollLinks();
  void FlushLinks();

  // One partition's timers, when its last answer said they are due, and each second as the
  // safety net for timers no live front end knows of: on one Redis, its one partition (whose
  // pump also reaps dead front ends); on a cluster, the sweep: every master says which of its
  // partitions have timers due or hold a dead front end's sessions.
  // `dead`: the front ends to reap there (on {g}: only those no partition holds anything of).
  void Pump(uint32_t part, const std::vector<std::string>& dead);
  void Sweep();
  void LearnDue(uint32_t part, Nanos due);
  // `sweep`: then the sweep (a cluster), with the dead front ends this renewal lists, so that
  // it does not reap one that renewed its lease since an older list named it.
  void RenewLease(bool sweep = false);
  void RefreshWaiterLease();
  void Wake(std::string_view tube);
  void ReleaseConnection(const std::string& sid, uint32_t part);
  void AddWaiter(RedisSession* s);
  // A waiter's call came back empty: it waits for a wake-up, its timeout or DEADLINE_SOON.
  void Parked(const RedisSession& s);
  // Ends the waits whose timeout or DEADLINE_SOON has come; notes when the next one does.
  void CheckWaiters(Nanos now);
  void RemoveWaiter(RedisSession* s);
  uint64_t Waiting() const;
  void Ref(std::string_view tube, int using_delta, int watching_delta);
  // Before the front-end id is known, the tube references wait here (Born sends them), one
  // entry per tube with a reference outstanding, at most kMaxPendingTubes: false when `tube`
  // would be one more past that (the `use` or `watch` is refused OUT_OF_MEMORY, counted).
  bool CanRef(std::string_view tube);
  static constexpr size_t kMaxPendingTubes = 10000;
  void Touched(uint32_t part) { touched_[part] = 1; }
  void Count(command::Verb v) { cmds_[static_cast<size_t>(v)]++; }
  // `stats`: the job counters from Redis (the global call's, plus per master sums on a
  // cluster: `more`, or null), this front end's own counters and the others'.
  command::Result FillStats(const Answer& a, const uint64_t* more);
  // Redis' clock (ms) to ours, and back.
  Nanos LocalTime(int64_t redis_ms) const { return redis_ms * 1'000'000 - offset_; }
  void Learn(uint32_t part, int64_t redis_now_ms, int64_t next_due_ms);
  // A job id from Redis' answers: the highest sequence number seen per partition (id / parts,
  // ids being seq * parts + partition) goes with each put and pump there as the numbering's
  // floor, so a Redis that was wiped goes on above the ids this front end handed out.
  void SawId(uint64_t id) {
    uint64_t& seen = seen_seq_[id % parts_];
    seen = std::max(seen, id / parts_);
  }
  std::string SeqFloor(uint32_t part) const {
    return std::to_string(part < parts_ ? seen_seq_[part] : 0);
  }

  net::EventLoop& loop_;
  const Clock& clock_;
  StoreOptions opt_;
  command::Host* host_;
  std::unique_ptr<Link> link_;            // one Redis (redis://, redis-sentinel://)
  std::unique_ptr<ClusterLink> cluster_;  // or a cluster
  uint32_t parts_ = 1;
  std::string base_;  // <prefix>[@db]: (pub/sub ignores the db: it is in every name)
  // Each partition's hash tag key (<base>{0} on one Redis, <base>{p/P} on a cluster), then on
  // a cluster the global one, <base>{g}; and each one's slot (cluster).
  std::vector<std::string> tags_;
  std::vector<int> slots_;
  std::string channel_;        // <base>w
  std::vector<char> touched_;  // partitions this front end referenced tubes or reserved in
  std::string fid_ = "0";
  uint64_t next_conn_ = 0;
  bool draining_ = false;
  bool started_ = false;  // a front-end id is known: calls go out
  std::string fatal_;
  Nanos created_ = 0;        // Start()
  std::string logged_;       // the state last logged ("": ready)
  bool asking_fid_ = false;  // a cluster's front-end id: asked, not answered
  Nanos next_fid_ask_ = 0;
  // Before the front-end id is known: sessions opened (by the address of their session id's
  // text, which their calls name first), calls held, tube references summed.
  struct Unborn {
    uint32_t part;
    std::string fn;
    std::vector<std::string> args;
    bool writes;
    Handler done;
    std::shared_ptr<RedisSession*> owner;  // the session whose id args[0] is; null: none
    bool names_fid;                        // args[0] is the front-end id (`stats`), not known yet
    Nanos deadline;
  };
  std::unordered_map<const char*, std::shared_ptr<RedisSession*>> unborn_;
  std::deque<Unborn> held_;
  std::vector<std::string> reloading_;  // masters a FUNCTION LOAD is out to
  // Tube references made before Born, summed per tube in the order the tubes were first
  // named (Born sends them in that order, so tubes are made in the order clients named them).
  // A tube whose references came back to none is dropped (its slot left empty, the vector
  // compacted when half are), so a client naming ever new tubes holds nothing here.
  std::vector<std::pair<std::string, std::pair<int, int>>> pending_refs_;
  std::unordered_map<std::string, size_t> pending_ref_at_;  // tube -> its pending_refs_ slot
  uint64_t pending_refs_refused_ = 0;  // CanRef's refusals (logged once per outage)

  Nanos offset_ = 0;  // redis ms * 1e6 - local, as the last answer (of any master) said
  Nanos next_pump_ = 0;
  // Each partition's next timer (local time) as the last answer from it said, in order;
  // partitions being pumped; (a cluster) the front ends found dead (reaped by the sweep).
  std::vector<Nanos> due_;
  std::vector<uint64_t> seen_seq_;  // SawId
  std::set<std::pair<Nanos, uint32_t>> timers_;
  std::vector<char> pumping_part_;
  std::vector<std::string> dead_;
  std::vector<std::string> scanning_;  // masters whose sweep read has not answered yet
  Nanos next_lease_ = 0;
  Nanos next_waiter_lease_ = 0;
  Nanos next_waiter_check_ = kForever;  // the earliest timeout or DEADLINE_SOON of a waiter
  struct Held {
    Reply reply;
    Handler done;
    uint32_t part;
    bool waits;      // a change: lost if its WAIT does not confirm it
    uint64_t needs;  // the WAIT (by number, on its master) that covers it; 0: none
    // Its WAIT answered without confirming it while it was held behind one that needs a
    // later WAIT: only that later one can still confirm it.
    bool failed = false;
  };
  // Per master ("" on one Redis): WAITs sent and answered, and the answers held for one: the
  // changes', and every answer that arrives behind one of those (reads, errors), so that a
  // master's answers are delivered in the order it gave them.
  struct Master {
    std::string name;
    bool need_wait = false;
    uint64_t waits_sent = 0, waits_answered = 0;
    // Set while its replicas are behind: its last WAIT did not confirm them, or it refused a
    // write (NOREPLICAS); cleared by a WAIT that confirms (--store-wait 0: a call answered).
    std::string behind;
    std::deque<Held> held;
  };
  std::vector<std::unique_ptr<Master>> masters_;
  std::vector<std::function<void()>> later_;
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
  // Closed sessions (and partitions) whose release_conn was lost.
  std::vector<std::pair<std::string, uint32_t>> orphans_;
  uint64_t sessions_ = 0, producers_ = 0, workers_ = 0;  // current ones (`stats`)
  uint64_t cmds_[command::kVerbCount] = {};
  uint64_t total_connections_ = 0;
  command::ServerStats stats_;
};

}  // namespace stalkd::redis
