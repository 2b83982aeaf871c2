#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "net/event_loop.h"
#include "redis/cluster.h"
#include "redis/link.h"
#include "redis/link_conn.h"

// The inside of a ClusterLink (cluster.h), shared by the files that implement it:
// cluster.cc (construction, the deferred callbacks, the timers of Poll, the state it reports,
// and ClusterLink's public methods), cluster_route.cc (a command's way: hash slot, master,
// per-slot order, MOVED/ASK/TRYAGAIN/CLUSTERDOWN, waiting for a master; and commands addressed
// to masters), cluster_slots.cc (the slot map: CLUSTER SLOTS asked of the nodes in turn, a Link
// per master that serves slots, its setup, dropping masters that serve none) and
// cluster_pubsub.cc (the one subscribing connection). Internal to src/redis/.
namespace stalkd::redis {

// Redirections followed for one command before its callback gets the MOVED error.
constexpr int kMaxRedirections = 5;
// Retry backoff after ASK, TRYAGAIN or CLUSTERDOWN: doubling from the first to the last.
constexpr Nanos kMinRetry = 1'000'000;
constexpr Nanos kMaxRetry = 50'000'000;
// Slot-map refreshes: at most this often; this often while something waits for one.
constexpr Nanos kRefreshInterval = 100'000'000;
// And this often regardless (a MOVED says so sooner).
constexpr Nanos kBackgroundRefresh = 10 * kSecond;
// A node's answer to CLUSTER SLOTS, connecting included; the pub/sub connection's SUBSCRIBE
// confirmations likewise.
constexpr Nanos kAskTimeout = kSecond;
// Between subscribing attempts after a failure.
constexpr Nanos kResubscribeDelay = 100'000'000;

class ClusterLink::Impl final : public Conn::Owner {
 public:
  Impl(net::EventLoop& loop, const Clock& clock, StoreUrl url, Listener& listener,
       Nanos retry_window);
  ~Impl();

  void Start();
  void Send(std::string_view key, std::span<const std::string_view> argv, Callback cb);
  void SendEncoded(std::string_view key, std::string command, Callback cb);
  void SendTo(const std::string& master, std::span<const std::string_view> argv, Callback cb);
  void SendAll(std::span<const std::string_view> argv,
               std::function<void(const std::string&, const Reply&)> cb);
  void SendSetup(const std::string& master, std::span<const std::string_view> argv, Callback cb);
  void SetReady(const std::string& master);
  void Reset(const std::string& master, std::string_view why) {
    if (Node* n = FindNode(master)) n->link->Reset(why);
  }
  // Writes what is buffered for every master. Defined here, inline: it runs after every
  // dispatch and every Poll, which are in other files.
  void Flush() {
    for (auto& n : nodes_) {
      if (n->dirty) {
        n->dirty = false;
        n->link->Flush();
      }
    }
  }
  void Subscribe(std::string_view channel);
  Nanos Poll();

  bool ready() const;
  std::string why_not_ready() const;
  std::vector<std::string> masters() const;
  std::string master_of(int slot) const;
  bool ready(int slot) const;
  size_t in_flight() const { return written_ + waiting_.size() + parked_count_ + deferred_.size(); }
  const Counters& counters() const { return counters_; }
  std::string answered_by() const { return answered_by_ ? *answered_by_ : std::string(); }

  // Conn::Owner: the slot-map prober and the pub/sub connection.
  void OnOpen(Conn&) override {}
  void OnReply(Conn& c, Reply& r) override;
  void OnDown(Conn& c, const std::string& why) override;
  void AfterEvents() override { Flush(); }

 private:
  struct Node;
  // Forwards one master's Link events to the Impl.
  class NodeListener final : public Link::Listener {
   public:
    NodeListener(Impl& impl, Node& node) : impl_(impl), node_(node) {}
    void OnConnected() override { impl_.OnNodeConnected(node_); }
    void OnLost(std::string_view why) override { impl_.OnNodeLost(node_, why); }
    void OnMessage(std::string_view, std::string_view) override {}

   private:
    Impl& impl_;
    Node& node_;
  };
  struct Node {
    Endpoint at;
    std::string name;
    std::unique_ptr<NodeListener> listener;
    std::unique_ptr<Link> link;
    bool dirty = false;    // sent to since the last flush
    bool serving = false;  // the slot map names it for a slot
  };
  // A command routed by slot: kept until answered, for resending.
  struct Command {
    int slot;
    uint64_t seq = 0;     // order of Send: a slot's commands are written in this order
    std::string command;  // encoded (AppendCommand)
    Callback cb;
    Nanos deadline;
    int redirections = 0;
    Nanos backoff = kMinRetry;
    std::string last_error;  // why it waits or was retried
    // Where it was written last: the Link callback captures only the Command (a shared_ptr,
    // small enough for std::function's inline storage: no allocation per command).
    Impl* impl = nullptr;
    Node* to = nullptr;
  };
  using CommandPtr = std::shared_ptr<Command>;
  struct Deferred {
    Callback cb;
    Reply reply;
  };

  void Dispatch(const CommandPtr& c);
  // Keeps a slot's commands in Send order: parked (by seq) behind the slot's earlier ones;
  // waiting (by seq) for a master.
  void Park(const CommandPtr& c);
  void Wait(const CommandPtr& c);
  // A slot's commands written to a node have all answered: what was parked behind them (not
  // for a backoff) goes now.
  void Landed(int slot);
  void OnCommandReply(const CommandPtr& c, Node& from, const Reply& r);
  // ASK, TRYAGAIN, CLUSTERDOWN: again after the backoff, or `r` once the window is over.
  void Retry(const CommandPtr& c, const Node& from, const Reply& r);
  void Complete(const CommandPtr& c, const Reply& r);
  void DispatchWaiting();
  void Expire(Nanos now);
  Node& NodeAt(const Endpoint& at);
  Node* FindNode(std::string_view name) const;
  void MarkDirty(Node& n);
  void OnNodeConnected(Node& n);
  void OnNodeLost(Node& n, std::string_view why);
  void Defer(Callback cb, Reply r);
  void RunDeferred();
  void Wake() { waker_.Wake(); }
  // Slot map.
  void WantRefresh() {
    refresh_wanted_ = true;
    if (started_) Wake();
  }
  bool NeedsRefresh() const;
  void Probe();
  void ProbeFailed(const std::string& why);
  void ApplySlots(const Reply& r);
  void Learn(const Endpoint& at);
  void CollectNodes();
  // Recounts unmapped_ and the nodes' serving flags from slots_.
  void Recount();
  // Wraps a callback given to a Link so that it runs as ours (see AsCallback).
  Callback Ours(Callback cb) {
    return [this, cb = std::move(cb)](const Reply& r) { AsCallback([&] { cb(r); }); };
  }
  bool rotate_probe_ = false;
  std::string probe_error_;  // the last failure to learn the slot map  // ask another node next
                             // time (the last map was stale)
  // Pub/sub.
  void SubscribeOn();
  void SubscribeFailed(const std::string& why);
  void OnPubSubReply(const Reply& r);
  // Runs `f` as a callback (so that sends from it wake the loop).
  template <typename F>
  void AsCallback(F&& f) {
    depth_++;
    f();
    depth_--;
  }

  net::EventLoop& loop_;
  const Clock& clock_;
  const StoreUrl url_;
  Listener& listener_;
  const Nanos retry_window_;
  bool started_ = false;

  std::vector<std::unique_ptr<Node>> nodes_;
  std::array<Node*, kClusterSlots> slots_{};
  std::vector<Endpoint> candidates_;   // nodes to ask CLUSTER SLOTS (seeds, then learned)
  std::deque<CommandPtr> waiting_;     // unsent: no ready master for their slot
  Nanos waiting_deadline_ = kForever;  // the earliest of theirs
  // Commands retried after ASK, TRYAGAIN or CLUSTERDOWN, per slot in the order their replies
  // came (a connection's order), and when each slot's go again (after its first one's
  // backoff). While a slot has commands here, later ones for it (new, or MOVED) queue behind:
  // a command sent later must not run before one sent earlier (a connection's pipelined puts
  // into one tube get increasing ids).
  std::unordered_map<int, std::deque<CommandPtr>> parked_;
  size_t parked_count_ = 0;
  std::multimap<Nanos, int> retries_;
  std::unordered_set<int> backoff_;  // slots whose parked commands wait for a retry time
  // Per slot, commands written and not answered, and the node they went to: a later command
  // for the slot routed to another node (the map changed under them: MOVED) is parked until
  // they have answered, and a redirected one goes again before it (by seq).
  struct Flight {
    Node* node = nullptr;
    size_t n = 0;
  };
  std::unordered_map<int, Flight> flights_;
  std::unordered_map<int, size_t> waiting_slots_;  // commands in waiting_ per slot
  uint64_t seq_ = 0;
  size_t written_ = 0;  // routed commands written to a link, unanswered
  std::deque<Deferred> deferred_;
  Counters counters_;
  bool collect_ = false;          // some node may serve no slot any more
  int unmapped_ = kClusterSlots;  // slots the map names no master for

  // The prober: CLUSTER SLOTS of candidates_[probe_index_].
  Conn prober_;
  size_t probe_index_ = 0;
  bool probing_ = false;
  bool refresh_wanted_ = false;
  Nanos probe_deadline_ = kForever;
  Nanos next_refresh_ = 0;  // not before
  Nanos background_refresh_ = kForever;

  // Pub/sub: SUBSCRIBE on candidates_[sub_index_].
  Conn pubsub_;
  std::vector<std::string> channels_;
  size_t sub_index_ = 0;
  size_t confirms_left_ = 0;
  bool subscribed_ = false;
  Nanos sub_deadline_ = kForever;
  Nanos next_subscribe_ = kForever;

  const std::string* answered_by_ = nullptr;  // during a Send callback: its master's name
  int depth_ = 0;  // > 0 while one of our callbacks or Listener calls runs
  Waker waker_;    // calls Poll
};

}  // namespace stalkd::redis
