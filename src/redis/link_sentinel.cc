// Sentinel, for a Link (link.h) of a redis-sentinel:// URL: where the master is, asked of the
// sentinels in turn (again every second while connected: a new address drops the connection),
// and a subscription to +switch-master on one of them, so that a failover is followed at once.
// What an answer means for the connection (connect there, or Down) is link.cc's state machine.
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "redis/link.h"
#include "redis/link_conn.h"
#include "redis/link_impl.h"
#include "redis/resp.h"

namespace stalkd::redis {

namespace {

bool operator==(const Endpoint& a, const Endpoint& b) {
  return a.host == b.host && a.port == b.port;
}

bool IsString(const Reply& r) {
  return r.type == Reply::Type::kString || r.type == Reply::Type::kStatus;
}

}  // namespace

void Link::Impl::Ask() {
  if (asking_) return;  // the answer on its way serves
  asking_ = true;
  ask_deadline_ = clock_.Now() + kAskTimeout;
  if (!asker_.open()) {
    std::string why;
    if (!asker_.Connect(url_.endpoints[sentinel_index_], &why)) return AskFailed(why);
  }
  asker_.Append({"SENTINEL", "get-master-addr-by-name", url_.master_name});
  asker_.Flush();
}

void Link::Impl::AskFailed(const std::string& why) {
  asking_ = false;
  ask_deadline_ = kForever;
  asker_.Close();
  sentinel_index_ = (sentinel_index_ + 1) % url_.endpoints.size();
  if (state_ != State::kDiscovering) {
    next_check_ = clock_.Now() + kCheckPeriod;  // a re-check: the next sentinel then
    return;
  }
  if (++sentinel_failures_ < url_.endpoints.size()) return Ask();
  Down("no sentinel answered for master " + url_.master_name + " (last: " + why + ")");
}

void Link::Impl::OnSentinelReply(Reply& r) {
  if (!asking_) return;
  asking_ = false;
  ask_deadline_ = kForever;
  const std::string& from = asker_.name();
  int port = 0;
  if (r.type != Reply::Type::kArray || r.elements.size() != 2 || !IsString(r.elements[0]) ||
      !IsString(r.elements[1]) || !ParseNumber(r.elements[1].str, 65535, &port)) {
    std::string what = r.type == Reply::Type::kNil ? "does not know master " + url_.master_name
                                                   : "answered " + Describe(r);
    return AskFailed("sentinel " + from + " " + what);
  }
  sentinel_failures_ = 0;
  OnMasterAddress(Endpoint{r.elements[0].str, port});
}

void Link::Impl::OnMasterAddress(const Endpoint& at) {
  next_check_ = clock_.Now() + kCheckPeriod;
  Watch();
  switch (state_) {
    case State::kDiscovering:
      return ConnectMaster(at);
    case State::kConnecting:
    case State::kSetup:
    case State::kReady:
      if (!(at == data_.peer())) {
        Down("sentinel: the master of " + url_.master_name + " is now " + at.host + ":" +
             std::to_string(at.port));
      }
      return;
    case State::kIdle:
    case State::kWaiting:
      return;
  }
}

void Link::Impl::Watch() {
  if (watcher_.open() || clock_.Now() < next_watch_) return;
  std::string why;
  if (!watcher_.Connect(url_.endpoints[sentinel_index_], &why)) {
    next_watch_ = clock_.Now() + kCheckPeriod;
    return;
  }
  watcher_.Append({"SUBSCRIBE", "+switch-master"});
}

void Link::Impl::OnWatchReply(Reply& r) {
  // ["message", "+switch-master", "<name> <old ip> <old port> <new ip> <new port>"]
  if (r.type != Reply::Type::kArray || r.elements.size() != 3 || r.elements[0].str != "message") {
    return;
  }
  std::string_view text = r.elements[2].str;
  std::vector<std::string_view> words;
  while (!text.empty()) {
    size_t space = text.find(' ');
    words.push_back(text.substr(0, space));
    text.remove_prefix(std::min(text.size(), words.back().size() + 1));
  }
  if (words.size() != 5 || words[0] != url_.master_name) return;
  int port = 0;
  bool on_it = (state_ == State::kSetup || state_ == State::kReady) &&
               ParseNumber(words[4], 65535, &port) &&
               Endpoint{std::string(words[3]), port} == data_.peer();
  if (state_ == State::kIdle || on_it) return;
  if (state_ == State::kWaiting) {
    // Between attempts (the old master is gone, say): the next one now, not after the backoff.
    backoff_ = kMinBackoff;
    next_attempt_ = clock_.Now();
    return Wake();
  }
  Down("sentinel: +switch-master " + r.elements[2].str);
  RunDeferred();
}

}  // namespace stalkd::redis
