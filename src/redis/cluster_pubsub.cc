// Pub/sub of a ClusterLink (cluster.h): classic SUBSCRIBE on one node of the cluster (any
// node, in turn: a PUBLISH on any node reaches the subscribers of every node), the channels
// subscribed again on the next node when that one fails (OnSubscriptionLost, then
// OnSubscribed). The subscribing connection's replies and failures come through OnReply and
// OnDown (cluster_slots.cc); Poll (cluster.cc) times the confirmations and the next attempt.
#include <algorithm>
#include <string>
#include <vector>

#include "redis/cluster.h"
#include "redis/cluster_impl.h"
#include "redis/link_conn.h"

namespace stalkd::redis {

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

}  // namespace stalkd::redis
