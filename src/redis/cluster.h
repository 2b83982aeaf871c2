#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "net/event_loop.h"
#include "redis/link.h"

// The Redis Cluster client (issue 17; ../shared/design/REDIS-STORE.md §2.2-2.8, §2.14): the
// cluster counterpart of Link, on the same event loop, with the same conventions.
namespace stalkd::redis {

constexpr int kClusterSlots = 16384;

// CRC16-XMODEM (polynomial 0x1021, initial 0), the checksum of Redis Cluster's key hashing.
uint16_t Crc16(std::string_view data);
// The hash slot of `key`: CRC16 of its hash tag (the text between the first `{` and the next
// `}`, when not empty), else of the whole key, modulo 16384. Agrees with CLUSTER KEYSLOT.
int KeySlot(std::string_view key);

// A connection per master of a Redis Cluster, found from seed nodes (a redis-cluster:// URL):
// it learns which master serves which of the 16384 hash slots from `CLUSTER SLOTS` (asked of
// the seeds and the nodes learned from them, in turn), keeps one Link (link.h: ROLE checked,
// pipelined, reconnecting) per master that serves slots, and routes each command by the slot
// of the key it names.
//
// Redirections (every one is answered by Redis before it runs anything, so resending is safe):
// - MOVED: the slot map is updated for that slot (and a full refresh is asked for) and the
//   command is resent to the new owner; after 5 redirections of one command its callback gets
//   the MOVED error.
// - ASK and TRYAGAIN: NOT followed. The command is retried on the slot's current owner (the
//   migration's source) after a backoff of 1 ms doubling to 50 ms, until the migration ends
//   (the source then answers MOVED) or the command's retry window runs out (its callback then
//   gets the last error). Why: stalkd's functions declare one key, the bare partition tag
//   `{p}`, which never exists, so a migrating slot's source answers ASK before running them;
//   following ASK would run the function on the target while part of the partition's keys are
//   still on the source: a partial run that Redis does not roll back (§2.6 rules 1-2). A
//   migrating partition pauses instead; nothing else does.
// - CLUSTERDOWN (the node does not serve the slot now, e.g. during a failover): retried like
//   TRYAGAIN, with a refresh of the slot map.
//
// Commands for a slot whose master is unknown or not ready (connecting, setting up, dead and
// waiting for a replica's promotion) wait, unsent, each for up to `retry_window` from its
// Send, while the slot map is refreshed every 100 ms; then their callback gets kLost "not
// connected: <why>". The other masters' slots keep being served. A command written to a
// master whose connection drops gets kLost (its fate is unknown), and the map is refreshed.
// Callbacks of one master's commands run in the order they were written to it; across masters
// there is no order. One slot's commands run in the order they were sent (Send order, by a
// sequence number): those retried after ASK, TRYAGAIN or CLUSTERDOWN go again together, in
// order, and later ones for that slot wait behind them; while a slot's commands are still out
// on a node, a later one routed to another node (the map changed: MOVED) waits until they
// have answered, so that a redirected one goes first; commands waiting for a master keep
// their order too.
//
// Per-master setup: when a master's connection is verified, Listener::OnMasterConnected(m)
// runs; the owner sends setup commands (FUNCTION LOAD, config checks) with SendSetup(m, ...)
// and calls SetReady(m) (or Reset(m, why)). Commands go to a master only once it is ready.
//
// Pub/sub: classic SUBSCRIBE on one node (any node of the cluster, in turn), not sharded
// SSUBSCRIBE. A PUBLISH on any node of a cluster reaches the subscribers of every node (over
// the cluster bus), so one connection and one subscription serve, whatever the slot map does
// and whichever master a function publishes from. The cost is that each PUBLISH is
// broadcast to every node; the store publishes only when a tube has waiting reserves, where
// SSUBSCRIBE would need a subscription per shard and a resubscribe on every slot move. When
// the subscribed node fails, the channels are subscribed again on the next node that answers;
// messages published in between are missed (OnSubscriptionLost, then OnSubscribed).
//
// Callbacks and Listener calls run only from inside Poll() or the loop's event dispatch, never
// from inside another method (Send, SendTo, SendSetup, SetReady, Reset, Flush, Subscribe,
// Start). Commands sent outside callbacks are written by Flush() (or once 64 KiB are buffered
// for a master); commands sent from callbacks are written by the end of the dispatch that ran
// them if they go to the same master, else when the loop next comes back to the ClusterLink
// (it wakes its loop for that: one eventfd write per batch). Destroying the ClusterLink (never
// from one of its callbacks) drops the callbacks still pending without calling them.
class ClusterLink {
 public:
  class Listener {
   public:
    // Master `master` ("host:port") is connected and verified. Send its setup with
    // SendSetup(master, ...), then SetReady(master) (or Reset(master, why)).
    virtual void OnMasterConnected(const std::string& master) = 0;
    // That master's connection was lost, or the master was dropped because it serves no slot
    // any more: its commands in flight have received kLost. Once for each OnMasterConnected,
    // after it.
    virtual void OnMasterLost(const std::string& master, std::string_view why) = 0;
    // A pub/sub message on a subscribed channel.
    virtual void OnMessage(std::string_view channel, std::string_view message) = 0;
    // Every channel is subscribed on `node`: messages published from now on are delivered.
    virtual void OnSubscribed(const std::string& node) = 0;
    // The subscribing connection failed: messages are missed until the next OnSubscribed.
    virtual void OnSubscriptionLost(std::string_view why) = 0;

   protected:
    ~Listener() = default;
  };

  // What the cluster client did, for stats and tests.
  struct Counters {
    uint64_t moved = 0;       // MOVED replies followed
    uint64_t retried = 0;     // ASK, TRYAGAIN and CLUSTERDOWN replies retried after a backoff
    uint64_t refreshes = 0;   // slot maps learned
    uint64_t subscribes = 0;  // pub/sub (re)subscriptions completed
  };

  // `url` is a kCluster StoreUrl: its endpoints are the seeds.
  ClusterLink(net::EventLoop& loop, const Clock& clock, StoreUrl url, Listener& listener,
              Nanos retry_window = 5 * kSecond);
  ~ClusterLink();
  ClusterLink(const ClusterLink&) = delete;
  ClusterLink& operator=(const ClusterLink&) = delete;

  // Starts learning the slot map (non-blocking), and subscribing if channels are named.
  void Start();

  // A command routed by the hash slot of `key` (which should be one of the keys it names; for
  // stalkd's functions, the bare partition tag "{p}"). Buffered; see the class comment.
  void Send(std::string_view key, std::initializer_list<std::string_view> argv, Callback cb);
  void Send(std::string_view key, std::span<const std::string_view> argv, Callback cb);
  // The same, for a command already encoded by AppendCommand (resp.h).
  void SendEncoded(std::string_view key, std::string_view command, Callback cb);
  // A command for one master ("host:port", as masters() names them), e.g. a per-node read or
  // WAIT: if that master is not ready (or not known), the callback gets kLost "not connected".
  // No redirection is followed.
  void SendTo(const std::string& master, std::span<const std::string_view> argv, Callback cb);
  // The command to every master serving slots now; `cb` gets each one's reply with its name
  // (no call at all while no master is known: check masters() first).
  void SendAll(std::span<const std::string_view> argv,
               std::function<void(const std::string& master, const Reply&)> cb);
  // Setup, between OnMasterConnected(master) and SetReady(master), as Link::SendSetup.
  void SendSetup(const std::string& master, std::span<const std::string_view> argv, Callback cb);
  void SetReady(const std::string& master);
  void Reset(const std::string& master, std::string_view why);
  // Writes what is buffered for every master.
  void Flush();

  // Kept across node failures (see the class comment).
  void Subscribe(std::string_view channel);

  // Timers: the links' (reconnects, setup timeouts), slot-map refreshes, retries after ASK,
  // TRYAGAIN and CLUSTERDOWN, retry-window expiry of waiting commands, resubscribing. Runs
  // the callbacks that are due. Returns when it next needs to be polled, as an absolute time
  // on the Clock (now if work is left, kForever if nothing is due but events). Call it every
  // loop iteration.
  Nanos Poll();

  // Every slot is served by a master that is ready.
  bool ready() const;
  // Why not, for messages ("127.0.0.1:7001: connect: Connection refused", "no master known
  // for 5461 slots", "not started"); empty when ready.
  std::string why_not_ready() const;
  // The masters serving slots now ("host:port"), sorted.
  std::vector<std::string> masters() const;
  // The master serving `slot` per the slot map ("" if none).
  std::string master_of(int slot) const;
  // The slot map names a master for `slot` and that master is ready: a command for the slot
  // goes out now rather than waiting (a failover in progress, a master setting up).
  bool ready(int slot) const;
  // Commands sent and not yet answered (written, waiting or being retried).
  size_t in_flight() const;
  const Counters& counters() const;
  // Inside the callback of a Send: the master ("host:port") whose reply it got, the one to
  // WAIT on for that write (after redirections, not necessarily master_of(slot) at Send).
  // Empty for kLost and the expiry of a waiting command, and outside such a callback.
  std::string answered_by() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace stalkd::redis
