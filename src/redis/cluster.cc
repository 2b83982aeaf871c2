#include "redis/cluster.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <deque>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "base/check.h"
#include "redis/link_conn.h"
#include "redis/resp.h"

namespace stalkd::redis {

// ---- Hash slots

namespace {

constexpr std::array<uint16_t, 256> MakeCrc16Table() {
  std::array<uint16_t, 256> table{};
  for (int i = 0; i < 256; i++) {
    uint16_t crc = static_cast<uint16_t>(i << 8);
    for (int bit = 0; bit < 8; bit++) {
      crc = static_cast<uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    table[static_cast<size_t>(i)] = crc;
  }
  return table;
}

constexpr std::array<uint16_t, 256> kCrc16Table = MakeCrc16Table();

}  // namespace

uint16_t Crc16(std::string_view data) {
  uint16_t crc = 0;
  for (unsigned char c : data) {
    crc = static_cast<uint16_t>((crc << 8) ^ kCrc16Table[((crc >> 8) ^ c) & 0xff]);
  }
  return crc;
}

int KeySlot(std::string_view key) {
  if (size_t open = key.find('{'); open != std::string_view::npos) {
    size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return Crc16(key) & (kClusterSlots - 1);
}

// ---- The cluster link

namespace {

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

bool SameEndpoint(const Endpoint& a, const Endpoint& b) {
  return a.host == b.host && a.port == b.port;
}

std::string NameOf(const Endpoint& e) { return e.host + ":" + std::to_string(e.port); }

// "host:port" (the host may be empty: then `fallback_host`).
bool ParseHostPort(std::string_view s, const std::string& fallback_host, Endpoint* out) {
  size_t colon = s.rfind(':');
  if (colon == std::string_view::npos) return false;
  int port = 0;
  std::string_view p = s.substr(colon + 1);
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
  if (ec != std::errc() || end != p.data() + p.size() || port <= 0 || port > 65535) return false;
  out->host = colon == 0 ? fallback_host : std::string(s.substr(0, colon));
  out->port = port;
  return true;
}

}  // namespace

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
  void Reset(const std::string& master, std::string_view why);
  void Flush();
  void Subscribe(std::string_view channel);
  Nanos Poll();

  bool ready() const;
  std::string why_not_ready() const;
  std::vector<std::string> masters() const;
  std::string master_of(int slot) const;
  bool ready(int slot) const;
  size_t in_flight() const;
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

ClusterLink::Impl::Impl(net::EventLoop& loop, const Clock& clock, StoreUrl url, Listener& listener,
                        Nanos retry_window)
    : loop_(loop),
      clock_(clock),
      url_(std::move(url)),
      listener_(listener),
      retry_window_(retry_window),
      prober_(loop, *this),
      pubsub_(loop, *this),
      waker_(loop, [this] { Poll(); }) {
  STALKD_CHECK(url_.kind == StoreUrl::Kind::kCluster && !url_.endpoints.empty());
  prober_.set_auth(url_.auth);
  pubsub_.set_auth(url_.auth);
  for (const Endpoint& e : url_.endpoints) Learn(e);
}

ClusterLink::Impl::~Impl() {
  nodes_.clear();
  prober_.Close();
  pubsub_.Close();
}

void ClusterLink::Impl::Defer(Callback cb, Reply r) {
  deferred_.push_back({std::move(cb), std::move(r)});
  Wake();
}

void ClusterLink::Impl::RunDeferred() {
  while (!deferred_.empty()) {
    Deferred d = std::move(deferred_.front());
    deferred_.pop_front();
    AsCallback([&] { d.cb(d.reply); });
  }
}

void ClusterLink::Impl::Start() {
  if (started_) return;
  started_ = true;
  WantRefresh();
  if (!channels_.empty()) next_subscribe_ = clock_.Now();
  Wake();
}

// ---- Nodes

void ClusterLink::Impl::Learn(const Endpoint& at) {
  for (const Endpoint& e : candidates_) {
    if (SameEndpoint(e, at)) return;
  }
  candidates_.push_back(at);
}

ClusterLink::Impl::Node& ClusterLink::Impl::NodeAt(const Endpoint& at) {
  for (auto& n : nodes_) {
    if (SameEndpoint(n->at, at)) return *n;
  }
  Learn(at);
  auto n = std::make_unique<Node>();
  n->at = at;
  n->name = NameOf(at);
  n->listener = std::make_unique<NodeListener>(*this, *n);
  StoreUrl one;
  one.kind = StoreUrl::Kind::kRedis;
  one.endpoints = {at};
  one.auth = url_.auth;
  n->link = std::make_unique<Link>(loop_, clock_, one, *n->listener, retry_window_);
  n->link->Start();
  nodes_.push_back(std::move(n));
  return *nodes_.back();
}

ClusterLink::Impl::Node* ClusterLink::Impl::FindNode(std::string_view name) const {
  for (const auto& n : nodes_) {
    if (n->name == name) return n.get();
  }
  return nullptr;
}

void ClusterLink::Impl::MarkDirty(Node& n) {
  n.dirty = true;
  if (depth_ > 0) Wake();  // written when the loop comes back to us
}

void ClusterLink::Impl::Flush() {
  for (auto& n : nodes_) {
    if (n->dirty) {
      n->dirty = false;
      n->link->Flush();
    }
  }
}

void ClusterLink::Impl::OnNodeConnected(Node& n) {
  AsCallback([&] { listener_.OnMasterConnected(n.name); });
}

void ClusterLink::Impl::OnNodeLost(Node& n, std::string_view why) {
  WantRefresh();  // a failover may be under way
  AsCallback([&] { listener_.OnMasterLost(n.name, why); });
}

void ClusterLink::Impl::SendSetup(const std::string& master, std::span<const std::string_view> argv,
                                  Callback cb) {
  Node* n = FindNode(master);
  if (n == nullptr) {
    return Defer(std::move(cb), Reply{Reply::Type::kLost, 0, master + ": not a known master", {}});
  }
  n->link->SendSetup(argv, Ours(std::move(cb)));
}

void ClusterLink::Impl::SetReady(const std::string& master) {
  Node* n = FindNode(master);
  if (n == nullptr) return;
  n->link->SetReady();
  if (n->link->ready() && !waiting_.empty()) DispatchWaiting();
}

void ClusterLink::Impl::Reset(const std::string& master, std::string_view why) {
  if (Node* n = FindNode(master)) n->link->Reset(why);
}

// ---- Commands

void ClusterLink::Impl::Send(std::string_view key, std::span<const std::string_view> argv,
                             Callback cb) {
  std::string command;
  AppendCommand(command, argv);
  SendEncoded(key, std::move(command), std::move(cb));
}

void ClusterLink::Impl::SendEncoded(std::string_view key, std::string command, Callback cb) {
  auto c = std::make_shared<Command>();
  c->slot = KeySlot(key);
  c->seq = ++seq_;
  c->command = std::move(command);
  c->cb = std::move(cb);
  c->deadline = clock_.Now() + retry_window_;
  Dispatch(c);
}

void ClusterLink::Impl::Park(const CommandPtr& c) {
  std::deque<CommandPtr>& q = parked_[c->slot];
  auto at = q.end();
  while (at != q.begin() && (*(at - 1))->seq > c->seq) --at;
  q.insert(at, c);
  parked_count_++;
}

void ClusterLink::Impl::Wait(const CommandPtr& c) {
  auto at = waiting_.end();
  while (at != waiting_.begin() && (*(at - 1))->seq > c->seq) --at;
  waiting_.insert(at, c);
  waiting_slots_[c->slot]++;
  waiting_deadline_ = std::min(waiting_deadline_, c->deadline);
  if (depth_ > 0) Wake();
}

void ClusterLink::Impl::Dispatch(const CommandPtr& c) {
  if (parked_.contains(c->slot)) return Park(c);  // behind the slot's earlier commands
  if (waiting_slots_.contains(c->slot)) return Wait(c);
  Node* n = slots_[static_cast<size_t>(c->slot)];
  if (n == nullptr || !n->link->ready()) {
    if (n == nullptr) {
      WantRefresh();
      c->last_error = "no master known for slot " + std::to_string(c->slot);
    } else {
      c->last_error = n->link->why_not_ready();
    }
    return Wait(c);
  }
  Flight& f = flights_[c->slot];
  if (f.n > 0 && f.node != n) return Park(c);  // earlier ones still out on the old owner
  f.node = n;
  f.n++;
  written_++;
  c->impl = this;
  c->to = n;
  n->link->SendEncoded(c->command, [c](const Reply& r) {
    Impl& impl = *c->impl;
    impl.written_--;
    impl.AsCallback([&] {
      auto out = impl.flights_.find(c->slot);
      if (out != impl.flights_.end() && --out->second.n == 0) impl.flights_.erase(out);
      impl.OnCommandReply(c, *c->to, r);
      impl.Landed(c->slot);
    });
  });
  MarkDirty(*n);
}

void ClusterLink::Impl::Landed(int slot) {
  if (flights_.contains(slot) || backoff_.contains(slot)) return;
  auto p = parked_.find(slot);
  if (p == parked_.end()) return;
  std::deque<CommandPtr> again = std::move(p->second);
  parked_.erase(p);
  parked_count_ -= again.size();
  for (const CommandPtr& c : again) Dispatch(c);  // in order
}

void ClusterLink::Impl::OnCommandReply(const CommandPtr& c, Node& from, const Reply& r) {
  if (r.ErrorIs("MOVED ")) {
    // "MOVED <slot> <host>:<port>"
    std::string_view text = r.str;
    size_t space = text.rfind(' ');
    Endpoint to;
    if (++c->redirections <= kMaxRedirections && space != std::string_view::npos &&
        ParseHostPort(text.substr(space + 1), from.at.host, &to)) {
      counters_.moved++;
      WantRefresh();
      rotate_probe_ = true;
      Node* owner = &NodeAt(to);
      if (slots_[static_cast<size_t>(c->slot)] != owner) {
        slots_[static_cast<size_t>(c->slot)] = owner;
        Recount();
      }
      return Dispatch(c);
    }
    return Complete(c, r);
  }
  if (r.ErrorIs("ASK ") || r.ErrorIs("TRYAGAIN")) return Retry(c, from, r);
  if (r.ErrorIs("CLUSTERDOWN")) {
    WantRefresh();
    return Retry(c, from, r);
  }
  if (r.type == Reply::Type::kLost) WantRefresh();
  Complete(c, r);
}

void ClusterLink::Impl::Retry(const CommandPtr& c, const Node& from, const Reply& r) {
  Nanos now = clock_.Now();
  if (now + c->backoff > c->deadline) return Complete(c, r);
  counters_.retried++;
  c->last_error = from.name + ": " + r.str;
  Park(c);
  if (!backoff_.insert(c->slot).second) return;  // goes again with the slot's first one
  retries_.emplace(now + c->backoff, c->slot);
  c->backoff = std::min(2 * c->backoff, kMaxRetry);
  Wake();  // Poll returns the retry's time
}

void ClusterLink::Impl::Complete(const CommandPtr& c, const Reply& r) {
  Callback cb = std::move(c->cb);
  const std::string* outer = answered_by_;
  answered_by_ = r.type == Reply::Type::kLost ? nullptr : &c->to->name;
  AsCallback([&] { cb(r); });
  answered_by_ = outer;
}

void ClusterLink::Impl::DispatchWaiting() {
  std::deque<CommandPtr> waiting;
  waiting.swap(waiting_);
  waiting_slots_.clear();
  waiting_deadline_ = kForever;
  for (const CommandPtr& c : waiting) Dispatch(c);
}

void ClusterLink::Impl::Expire(Nanos now) {
  if (now < waiting_deadline_) return;
  waiting_deadline_ = kForever;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if ((*it)->deadline > now) {
      waiting_deadline_ = std::min(waiting_deadline_, (*it)->deadline);
      ++it;
      continue;
    }
    CommandPtr c = std::move(*it);
    it = waiting_.erase(it);
    if (auto w = waiting_slots_.find(c->slot); w != waiting_slots_.end() && --w->second == 0) {
      waiting_slots_.erase(w);
    }
    Defer(std::move(c->cb), Reply{Reply::Type::kLost, 0, "not connected: " + c->last_error, {}});
  }
}

void ClusterLink::Impl::SendTo(const std::string& master, std::span<const std::string_view> argv,
                               Callback cb) {
  Node* n = FindNode(master);
  if (n == nullptr || !n->link->ready()) {
    std::string why = n == nullptr ? master + " is not a known master" : n->link->why_not_ready();
    return Defer(std::move(cb), Reply{Reply::Type::kLost, 0, "not connected: " + why, {}});
  }
  n->link->Send(argv, Ours(std::move(cb)));
  MarkDirty(*n);
}

void ClusterLink::Impl::SendAll(std::span<const std::string_view> argv,
                                std::function<void(const std::string&, const Reply&)> cb) {
  auto shared =
      std::make_shared<std::function<void(const std::string&, const Reply&)>>(std::move(cb));
  for (const std::string& m : masters()) {
    SendTo(m, argv, [shared, m](const Reply& r) { (*shared)(m, r); });
  }
}

// ---- The slot map

bool ClusterLink::Impl::NeedsRefresh() const {
  if (refresh_wanted_ || !waiting_.empty()) return true;
  return !ready();
}

void ClusterLink::Impl::Probe() {
  refresh_wanted_ = false;
  probing_ = true;
  probe_deadline_ = clock_.Now() + kAskTimeout;
  next_refresh_ = clock_.Now() + kRefreshInterval;
  if (rotate_probe_) {
    rotate_probe_ = false;
    prober_.Close();
    probe_index_++;
  }
  if (!prober_.open()) {
    std::string why;
    if (!prober_.Connect(candidates_[probe_index_ % candidates_.size()], &why)) {
      return ProbeFailed(why);
    }
  }
  prober_.Append({"CLUSTER", "SLOTS"});
  prober_.Flush();
}

void ClusterLink::Impl::ProbeFailed(const std::string& why) {
  probe_error_ = why;
  probing_ = false;
  probe_deadline_ = kForever;
  prober_.Close();
  // The next node: at once, unless every one has just failed.
  probe_index_++;
  next_refresh_ = clock_.Now() + (probe_index_ % candidates_.size() == 0 ? kRefreshInterval : 0);
  refresh_wanted_ = true;
  Wake();
}

void ClusterLink::Impl::ApplySlots(const Reply& r) {
  // [[start, end, [host, port, id, ...], [replica host, port, id, ...]...], ...]
  std::array<Node*, kClusterSlots> slots{};
  const std::string& fallback = prober_.peer().host;
  for (const Reply& range : r.elements) {
    if (range.type != Reply::Type::kArray || range.elements.size() < 3) continue;
    int64_t start = range.elements[0].integer;
    int64_t end = range.elements[1].integer;
    if (start < 0 || end >= kClusterSlots || start > end) continue;
    Node* master = nullptr;
    for (size_t i = 2; i < range.elements.size(); i++) {
      const Reply& node = range.elements[i];
      if (node.type != Reply::Type::kArray || node.elements.size() < 2) continue;
      Endpoint at{node.elements[0].str.empty() || node.elements[0].str == "?"
                      ? fallback
                      : node.elements[0].str,
                  static_cast<int>(node.elements[1].integer)};
      if (at.port <= 0 || at.port > 65535) continue;
      if (i == 2) {
        master = &NodeAt(at);
      } else {
        Learn(at);
      }
    }
    for (int64_t s = start; s <= end; s++) slots[static_cast<size_t>(s)] = master;
  }
  slots_ = slots;
  counters_.refreshes++;
  Recount();
  DispatchWaiting();
}

void ClusterLink::Impl::Recount() {
  unmapped_ = 0;
  for (auto& n : nodes_) n->serving = false;
  for (Node* n : slots_) {
    if (n == nullptr) {
      unmapped_++;
    } else {
      n->serving = true;
    }
  }
  collect_ = true;
}

void ClusterLink::Impl::CollectNodes() {
  if (!collect_ || depth_ > 0) return;
  collect_ = false;
  for (size_t i = 0; i < nodes_.size();) {
    Node& n = *nodes_[i];
    if (n.serving) {
      i++;
    } else if (n.link->in_flight() > 0) {
      collect_ = true;  // later, once answered
      i++;
    } else {
      // The pairing of OnMasterConnected and OnMasterLost holds for a master dropped too.
      std::string name = n.name;
      bool told = !n.link->master().empty();
      nodes_.erase(nodes_.begin() + static_cast<std::ptrdiff_t>(i));
      if (told) AsCallback([&] { listener_.OnMasterLost(name, "it serves no slot any more"); });
    }
  }
}

// ---- Replies of the prober and the pub/sub connection

void ClusterLink::Impl::OnReply(Conn& c, Reply& r) {
  if (&c == &pubsub_) return OnPubSubReply(r);
  if (!probing_) return;
  probing_ = false;
  probe_deadline_ = kForever;
  if (r.type != Reply::Type::kArray || r.elements.empty()) {
    return ProbeFailed(prober_.name() + ": CLUSTER SLOTS: " + Describe(r));
  }
  probe_error_.clear();
  ApplySlots(r);
  background_refresh_ = clock_.Now() + kBackgroundRefresh;
}

void ClusterLink::Impl::OnDown(Conn& c, const std::string& why) {
  if (&c == &pubsub_) return SubscribeFailed(why);
  if (probing_) ProbeFailed(why);
}

// ---- Pub/sub

void ClusterLink::Impl::Subscribe(std::string_view channel) {
  if (std::find(channels_.begin(), channels_.end(), channel) != channels_.end()) return;
  channels_.emplace_back(channel);
  if (!started_) return;
  if (pubsub_.open()) {
    std::string_view argv[] = {"SUBSCRIBE", channel};
    pubsub_.Append(argv);
    pubsub_.Flush();
    if (!subscribed_) confirms_left_++;
  } else if (next_subscribe_ == kForever) {
    next_subscribe_ = clock_.Now();
    Wake();
  }
}

void ClusterLink::Impl::SubscribeOn() {
  next_subscribe_ = kForever;
  sub_deadline_ = clock_.Now() + kAskTimeout;
  std::string why;
  if (!pubsub_.Connect(candidates_[sub_index_ % candidates_.size()], &why)) {
    return SubscribeFailed(why);
  }
  std::vector<std::string_view> argv = {"SUBSCRIBE"};
  argv.insert(argv.end(), channels_.begin(), channels_.end());
  pubsub_.Append(argv);
  confirms_left_ = channels_.size();
}

void ClusterLink::Impl::SubscribeFailed(const std::string& why) {
  pubsub_.Close();
  sub_index_++;
  sub_deadline_ = kForever;
  next_subscribe_ = clock_.Now() + kResubscribeDelay;
  if (subscribed_) {
    subscribed_ = false;
    AsCallback([&] { listener_.OnSubscriptionLost(why); });
  }
}

void ClusterLink::Impl::OnPubSubReply(const Reply& r) {
  if (r.type != Reply::Type::kArray || r.elements.size() < 3) return;
  const std::string& kind = r.elements[0].str;
  if (kind == "message") {
    AsCallback([&] { listener_.OnMessage(r.elements[1].str, r.elements[2].str); });
  } else if (kind == "subscribe" && confirms_left_ > 0 && --confirms_left_ == 0 && !subscribed_) {
    subscribed_ = true;
    sub_deadline_ = kForever;
    counters_.subscribes++;
    AsCallback([&] { listener_.OnSubscribed(pubsub_.name()); });
  }
}

// ---- Timers

Nanos ClusterLink::Impl::Poll() {
  Nanos next = kForever;
  // The links' own timers and callbacks (the vector may grow meanwhile: by index).
  for (size_t i = 0; i < nodes_.size(); i++) next = std::min(next, nodes_[i]->link->Poll());
  prober_.FailIfBroken();
  pubsub_.FailIfBroken();
  RunDeferred();
  if (!started_) return next;
  Nanos now = clock_.Now();
  if (probing_ && now >= probe_deadline_) {
    ProbeFailed(prober_.name() + ": CLUSTER SLOTS not answered in time");
  }
  if (!probing_ && now >= background_refresh_) refresh_wanted_ = true;
  if (!probing_ && NeedsRefresh() && now >= next_refresh_) Probe();
  if (!channels_.empty()) {
    if (!subscribed_ && pubsub_.open() && now >= sub_deadline_) {
      SubscribeFailed(pubsub_.name() + ": SUBSCRIBE not confirmed in time");
    }
    if (!pubsub_.open() && now >= next_subscribe_) SubscribeOn();
  }
  // Retries that are due; what waits for a master is sent when one is ready (SetReady, a new
  // slot map) or expires.
  while (!retries_.empty() && retries_.begin()->first <= now) {
    int slot = retries_.begin()->second;
    retries_.erase(retries_.begin());
    backoff_.erase(slot);
    auto p = parked_.find(slot);
    if (p == parked_.end()) continue;
    std::deque<CommandPtr> again = std::move(p->second);
    parked_.erase(p);
    parked_count_ -= again.size();
    for (const CommandPtr& c : again) Dispatch(c);  // in order, on one connection
  }
  Expire(now);
  RunDeferred();
  CollectNodes();
  Flush();

  if (!deferred_.empty()) return now;
  if (probing_) next = std::min(next, probe_deadline_);
  if (!probing_ && NeedsRefresh()) next = std::min(next, std::max(now, next_refresh_));
  next = std::min(next, background_refresh_);
  if (!channels_.empty()) {
    next = std::min(next, pubsub_.open() && !subscribed_ ? sub_deadline_ : next_subscribe_);
  }
  if (!retries_.empty()) next = std::min(next, retries_.begin()->first);
  return std::min(next, waiting_deadline_);
}

// ---- State

bool ClusterLink::Impl::ready() const {
  if (unmapped_ > 0) return false;
  for (const auto& n : nodes_) {
    if (n->serving && !n->link->ready()) return false;
  }
  return true;
}

std::string ClusterLink::Impl::why_not_ready() const {
  if (!started_) return "not started";
  for (const auto& n : nodes_) {
    if (n->serving && !n->link->ready()) return n->link->why_not_ready();
  }
  if (unmapped_ > 0) {
    return "no master known for " + std::to_string(unmapped_) + " slots" +
           (probe_error_.empty() ? "" : " (" + probe_error_ + ")");
  }
  return "";
}

std::vector<std::string> ClusterLink::Impl::masters() const {
  std::vector<std::string> out;
  for (const auto& n : nodes_) {
    if (n->serving) out.push_back(n->name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string ClusterLink::Impl::master_of(int slot) const {
  if (slot < 0 || slot >= kClusterSlots) return "";
  Node* n = slots_[static_cast<size_t>(slot)];
  return n == nullptr ? "" : n->name;
}

bool ClusterLink::Impl::ready(int slot) const {
  if (slot < 0 || slot >= kClusterSlots) return false;
  Node* n = slots_[static_cast<size_t>(slot)];
  return n != nullptr && n->link->ready();
}

size_t ClusterLink::Impl::in_flight() const {
  return written_ + waiting_.size() + parked_count_ + deferred_.size();
}

// ---- ClusterLink

ClusterLink::ClusterLink(net::EventLoop& loop, const Clock& clock, StoreUrl url, Listener& listener,
                         Nanos retry_window)
    : impl_(std::make_unique<Impl>(loop, clock, std::move(url), listener, retry_window)) {}
ClusterLink::~ClusterLink() = default;
void ClusterLink::Start() { impl_->Start(); }
void ClusterLink::Send(std::string_view key, std::initializer_list<std::string_view> argv,
                       Callback cb) {
  impl_->Send(key, std::span<const std::string_view>(argv.begin(), argv.size()), std::move(cb));
}
void ClusterLink::Send(std::string_view key, std::span<const std::string_view> argv, Callback cb) {
  impl_->Send(key, argv, std::move(cb));
}
void ClusterLink::SendEncoded(std::string_view key, std::string_view command, Callback cb) {
  impl_->SendEncoded(key, std::string(command), std::move(cb));
}
void ClusterLink::SendTo(const std::string& master, std::span<const std::string_view> argv,
                         Callback cb) {
  impl_->SendTo(master, argv, std::move(cb));
}
void ClusterLink::SendAll(std::span<const std::string_view> argv,
                          std::function<void(const std::string& master, const Reply&)> cb) {
  impl_->SendAll(argv, std::move(cb));
}
void ClusterLink::SendSetup(const std::string& master, std::span<const std::string_view> argv,
                            Callback cb) {
  impl_->SendSetup(master, argv, std::move(cb));
}
void ClusterLink::SetReady(const std::string& master) { impl_->SetReady(master); }
void ClusterLink::Reset(const std::string& master, std::string_view why) {
  impl_->Reset(master, why);
}
void ClusterLink::Flush() { impl_->Flush(); }
void ClusterLink::Subscribe(std::string_view channel) { impl_->Subscribe(channel); }
Nanos ClusterLink::Poll() { return impl_->Poll(); }
bool ClusterLink::ready() const { return impl_->ready(); }
std::string ClusterLink::why_not_ready() const { return impl_->why_not_ready(); }
std::vector<std::string> ClusterLink::masters() const { return impl_->masters(); }
std::string ClusterLink::master_of(int slot) const { return impl_->master_of(slot); }
bool ClusterLink::ready(int slot) const { return impl_->ready(slot); }
size_t ClusterLink::in_flight() const { return impl_->in_flight(); }
const ClusterLink::Counters& ClusterLink::counters() const { return impl_->counters(); }
std::string ClusterLink::answered_by() const { return impl_->answered_by(); }

}  // namespace stalkd::redis
