// A ClusterLink (cluster.h): the Redis Cluster client. This file holds its frame: construction,
// the callbacks deferred to the next dispatch or Poll, the timers (Poll: the masters' Links,
// slot-map refreshes, retries, expiry, resubscribing), the state it reports, and its public
// methods. A command's way to a master is in cluster_route.cc, the slot map and the masters'
// Links in cluster_slots.cc, pub/sub in cluster_pubsub.cc, the state they share in
// cluster_impl.h.
#include "redis/cluster.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "base/check.h"
#include "redis/cluster_impl.h"
#include "redis/link_conn.h"

namespace stalkd::redis {

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
  STALKD_CHECK(url_.tls == (url_.tls_context != nullptr));
  prober_.set_tls(url_.tls_context, url_.tls_name);
  pubsub_.set_tls(url_.tls_context, url_.tls_name);
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

// ---- Timers

bool ClusterLink::Impl::NeedsRefresh() const {
  if (refresh_wanted_ || !waiting_.empty()) return true;
  return !ready();
}

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
