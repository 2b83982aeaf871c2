// The slot map of a ClusterLink (cluster.h): which master serves each of the 16384 hash slots,
// learned from CLUSTER SLOTS asked of the seeds and the nodes learned from them, in turn (the
// prober), and a Link per master that serves slots (ROLE checked, pipelined, reconnecting),
// with the owner's per-master setup (OnMasterConnected ... SetReady); a master that serves no
// slot any more is dropped once its commands have answered. MOVED (cluster_route.cc) updates
// one slot and asks for a refresh; Poll (cluster.cc) decides when the map is asked again.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "redis/cluster.h"
#include "redis/cluster_impl.h"
#include "redis/link_conn.h"
#include "redis/resp.h"

namespace stalkd::redis {

namespace {

bool SameEndpoint(const Endpoint& a, const Endpoint& b) {
  return a.host == b.host && a.port == b.port;
}

std::string NameOf(const Endpoint& e) { return e.host + ":" + std::to_string(e.port); }

}  // namespace

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
  one.tls = url_.tls;
  one.tls_context = url_.tls_context;
  one.tls_name = url_.tls_name;
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

// ---- Asking for the slot map

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

}  // namespace stalkd::redis
