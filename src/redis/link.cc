#include "redis/link.h"

// A first, compiling skeleton so that the Redis store can build against link.h; the client
// itself (connections, pipelining, Sentinel, pub/sub) follows in the next commits. Until
// then every command answers kLost.

#include <deque>
#include <utility>

namespace stalkd::redis {

bool Reply::ErrorIs(std::string_view prefix) const {
  return type == Type::kError && std::string_view(str).starts_with(prefix);
}

bool ParseStoreUrl(std::string_view url, StoreUrl* out, std::string* error) {
  (void)url;
  (void)out;
  *error = "--store: the Redis store is not built yet";
  return false;
}

class Link::Impl {
 public:
  std::deque<Callback> waiting;
};

Link::Link(net::EventLoop& loop, const Clock& clock, StoreUrl url, Listener& listener,
           Nanos retry_window)
    : impl_(std::make_unique<Impl>()) {
  (void)loop;
  (void)clock;
  (void)url;
  (void)listener;
  (void)retry_window;
}
Link::~Link() = default;
void Link::Start() {}
void Link::SendSetup(std::initializer_list<std::string_view> argv, Callback cb) {
  SendSetup(std::span<const std::string_view>(argv.begin(), argv.size()), std::move(cb));
}
void Link::SendSetup(std::span<const std::string_view>, Callback cb) {
  impl_->waiting.push_back(std::move(cb));
}
void Link::SetReady() {}
void Link::Reset(std::string_view) {}
void Link::Send(std::initializer_list<std::string_view> argv, Callback cb) {
  Send(std::span<const std::string_view>(argv.begin(), argv.size()), std::move(cb));
}
void Link::Send(std::span<const std::string_view>, Callback cb) {
  impl_->waiting.push_back(std::move(cb));
}
void Link::Flush() {}
void Link::Subscribe(std::string_view) {}
Nanos Link::Poll() {
  std::deque<Callback> lost;
  lost.swap(impl_->waiting);
  for (Callback& cb : lost) cb(Reply{Reply::Type::kLost, 0, "not connected: not built yet", {}});
  return kForever;
}
bool Link::ready() const { return false; }
size_t Link::in_flight() const { return impl_->waiting.size(); }
std::string Link::master() const { return ""; }

}  // namespace stalkd::redis
