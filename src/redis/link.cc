// A Link (link.h): one Redis master kept connected. This file holds the connection's life: a
// state machine from idle through (Sentinel discovery,) connecting and verifying (ROLE, SELECT,
// the pub/sub connection's SUBSCRIBE confirmations) to setup and ready, and back through Down
// (what was written gets kLost, the listener OnLost) to a backoff and the next attempt; the
// pub/sub connection; the timers (Poll); and Link's public methods. Commands and their answers
// are in link_send.cc, the sentinels in link_sentinel.cc, the state they share in link_impl.h.
#include "redis/link.h"

#include <algorithm>
#include <utility>

#include "base/check.h"
#include "redis/link_conn.h"
#include "redis/link_impl.h"
#include "redis/resp.h"

namespace stalkd::redis {

Link::Impl::Impl(net::EventLoop& loop, const Clock& clock, StoreUrl url, Listener& listener,
                 Nanos retry_window)
    : clock_(clock),
      url_(std::move(url)),
      listener_(listener),
      retry_window_(retry_window),
      data_(loop, *this),
      pubsub_(loop, *this),
      waker_(loop, [this] { Poll(); }),
      asker_(loop, *this),
      watcher_(loop, *this) {
  STALKD_CHECK(!url_.endpoints.empty());
  STALKD_CHECK(url_.kind != StoreUrl::Kind::kCluster);  // that is ClusterLink's
  data_.set_auth(url_.auth);
  pubsub_.set_auth(url_.auth);
  asker_.set_auth(url_.sentinel_auth);
  watcher_.set_auth(url_.sentinel_auth);
  // rediss-sentinel://: the sentinels' connections are TLS as well as the master's.
  STALKD_CHECK(url_.tls == (url_.tls_context != nullptr));
  for (Conn* c : {&data_, &pubsub_, &asker_, &watcher_})
    c->set_tls(url_.tls_context, url_.tls_name);
}

Link::Impl::~Impl() {
  data_.Close();
  pubsub_.Close();
  asker_.Close();
  watcher_.Close();
}

void Link::Impl::RunDeferred() {
  if (running_deferred_) return;  // a callback called Poll
  running_deferred_ = true;
  while (!lost_.empty()) {
    Lost l = std::move(lost_.front());
    lost_.pop_front();
    l.cb(Reply{Reply::Type::kLost, 0, std::move(l.why), {}});
  }
  if (notify_lost_) {
    notify_lost_ = false;
    listener_.OnLost(lost_why_);
  }
  running_deferred_ = false;
}

// ---- Connecting

void Link::Impl::Start() {
  if (state_ != State::kIdle) return;
  why_ = "connecting";
  Attempt();
}

void Link::Impl::Attempt() {
  next_attempt_ = kForever;
  if (!sentinel()) return ConnectMaster(url_.endpoints[0]);
  state_ = State::kDiscovering;  // why_ keeps the last failure, if any
  sentinel_failures_ = 0;
  Ask();
}

void Link::Impl::ConnectMaster(const Endpoint& at) {
  state_ = State::kConnecting;
  connect_deadline_ = clock_.Now() + kConnectTimeout;
  pubsub_.Close();
  std::string why;
  if (!data_.Connect(at, &why)) return Down(why);
  data_.Append({"ROLE"});
  written_.push_back({Written::Kind::kRole, nullptr, clock_.Now()});
  handshake_left_ = 1;
  if (url_.db != 0) {
    std::string db = std::to_string(url_.db);
    data_.Append({"SELECT", db});
    written_.push_back({Written::Kind::kSelect, nullptr, clock_.Now()});
    handshake_left_++;
  }
  confirms_left_ = 0;
}

void Link::Impl::OnOpen(Conn& c) {
  // Connected: what was appended meanwhile (ROLE, SUBSCRIBE, a query) is written by the Conn.
  (void)c;
}

void Link::Impl::HandshakeStep() {
  if (--handshake_left_ > 0) return;
  if (!channels_.empty()) {
    std::string why;
    if (!pubsub_.Connect(data_.peer(), &why)) return Down(why);
    SubscribeAll();
    confirms_left_ = channels_.size();
  }
  MaybeConnected();
}

void Link::Impl::SubscribeAll() {
  std::vector<std::string_view> argv = {"SUBSCRIBE"};
  argv.insert(argv.end(), channels_.begin(), channels_.end());
  pubsub_.Append(argv);
}

void Link::Impl::MaybeConnected() {
  if (state_ != State::kConnecting || handshake_left_ > 0 || confirms_left_ > 0) return;
  state_ = State::kSetup;
  connect_deadline_ = kForever;
  why_ = "setting up " + data_.name();
  if (sentinel()) next_check_ = std::min(next_check_, clock_.Now() + kCheckPeriod);
  listener_.OnConnected();
}

void Link::Impl::SetReady() {
  if (state_ != State::kSetup) return;
  state_ = State::kReady;
  why_.clear();
  backoff_ = kMinBackoff;
  Nanos now = clock_.Now();
  while (!queued_.empty()) {
    Queued q = std::move(queued_.front());
    queued_.pop_front();
    data_.AppendEncoded(q.command);
    written_.push_back({Written::Kind::kUser, std::move(q.cb), now});
    user_written_++;
  }
  data_.Flush();
}

void Link::Impl::Reset(std::string_view why) {
  if (state_ == State::kIdle || state_ == State::kWaiting) return;
  Down("reset: " + std::string(why));
}

void Link::Impl::Down(const std::string& why) {
  bool told = state_ == State::kSetup || state_ == State::kReady;
  data_.Close();
  pubsub_.Close();
  for (Written& w : written_) {
    if (w.kind == Written::Kind::kUser)
      lost_.push_back({std::move(w.cb), "connection lost, fate unknown: " + why});
  }
  written_.clear();
  user_written_ = 0;
  handshake_left_ = 0;
  confirms_left_ = 0;
  if (told) {
    notify_lost_ = true;
    lost_why_ = why;
  }
  why_ = why;
  state_ = State::kWaiting;
  connect_deadline_ = kForever;
  next_check_ = kForever;
  next_attempt_ = clock_.Now() + backoff_;
  backoff_ = std::min(2 * backoff_, kMaxBackoff);
  if (!lost_.empty() || notify_lost_) Wake();
}

void Link::Impl::Subscribe(std::string_view channel) {
  if (std::find(channels_.begin(), channels_.end(), channel) != channels_.end()) return;
  channels_.emplace_back(channel);
  if (pubsub_.open()) {
    std::string_view argv[] = {"SUBSCRIBE", channel};
    pubsub_.Append(argv);
    pubsub_.Flush();
    if (state_ == State::kConnecting) confirms_left_++;
  } else if (state_ == State::kSetup || state_ == State::kReady) {
    std::string why;
    if (!pubsub_.Connect(data_.peer(), &why)) return Down(why);
    SubscribeAll();
  }
}

// ---- What the connections report

void Link::Impl::OnReply(Conn& c, Reply& r) {
  if (&c == &data_) return OnMasterReply(r);
  if (&c == &pubsub_) return OnPubSubReply(r);
  if (&c == &asker_) return OnSentinelReply(r);
  OnWatchReply(r);
}

void Link::Impl::OnPubSubReply(Reply& r) {
  // SUBSCRIBE refused (NOPERM: an ACL user without the channel): no wake-ups would come.
  if (r.type == Reply::Type::kError) return Down(pubsub_.name() + ": SUBSCRIBE: " + r.str);
  if (r.type != Reply::Type::kArray || r.elements.size() < 3) return;
  const std::string& kind = r.elements[0].str;
  if (kind == "message") {
    listener_.OnMessage(r.elements[1].str, r.elements[2].str);
  } else if (kind == "subscribe" && confirms_left_ > 0) {
    confirms_left_--;
    MaybeConnected();
  }
}

void Link::Impl::OnDown(Conn& c, const std::string& why) {
  if (&c == &data_ || &c == &pubsub_) {
    Down(why);
  } else if (&c == &asker_) {
    if (asking_) AskFailed(why);
  } else {
    next_watch_ = clock_.Now() + kCheckPeriod;
  }
  RunDeferred();
}

// ---- Timers

Nanos Link::Impl::Poll() {
  RunDeferred();
  for (Conn* c : {&data_, &pubsub_, &asker_, &watcher_}) c->FailIfBroken();
  RunDeferred();
  Nanos now = clock_.Now();
  if (state_ == State::kWaiting && now >= next_attempt_) Attempt();
  if (state_ == State::kConnecting && now >= connect_deadline_) {
    // A TLS handshake never answered: most likely a plain Redis port, which waits for the end
    // of a line that a ClientHello does not have.
    Down(data_.name() +
         (data_.handshaking() ? ": TLS handshake not answered (a port without TLS?) within "
                              : ": not connected and verified within ") +
         std::to_string(kConnectTimeout / 1'000'000) + " ms");
  }
  // A master that stopped answering (SIGSTOP, a paused VM, a black-holed network, a command
  // stuck for long): what is written waits for ever, as TCP keepalive does not notice a peer
  // whose kernel still acknowledges. Dropped after the retry window; what was written gets
  // kLost (fate unknown), and the link connects again (through Sentinel, to whichever master
  // it names then).
  if ((state_ == State::kSetup || state_ == State::kReady) && !written_.empty() &&
      now >= written_.front().at + retry_window_) {
    Down(data_.name() + ": no answer within " + std::to_string(retry_window_ / 1'000'000) + " ms");
  }
  if (asking_ && now >= ask_deadline_) {
    AskFailed("sentinel " + asker_.name() + " did not answer within " +
              std::to_string(kAskTimeout / 1'000'000) + " ms");
  }
  if (sentinel() && !asking_ && now >= next_check_ &&
      (state_ == State::kSetup || state_ == State::kReady)) {
    next_check_ = kForever;
    Ask();
  }
  RunDeferred();
  // Commands that waited their retry window (only while not ready: then they are written).
  while (!queued_.empty() && queued_.front().deadline <= now && state_ != State::kReady) {
    Queued q = std::move(queued_.front());
    queued_.pop_front();
    q.cb(Reply{Reply::Type::kLost, 0, "not connected: " + why_, {}});
  }
  RunDeferred();
  Flush();  // what the callbacks sent

  if (!lost_.empty() || notify_lost_) return now;
  Nanos next = kForever;
  if (state_ == State::kWaiting) next = std::min(next, next_attempt_);
  if (state_ == State::kConnecting) next = std::min(next, connect_deadline_);
  if ((state_ == State::kSetup || state_ == State::kReady) && !written_.empty()) {
    next = std::min(next, written_.front().at + retry_window_);
  }
  if (asking_) next = std::min(next, ask_deadline_);
  if (sentinel() && (state_ == State::kSetup || state_ == State::kReady)) {
    next = std::min(next, next_check_);
  }
  if (!queued_.empty() && state_ != State::kReady) next = std::min(next, queued_.front().deadline);
  return next;
}

// ---- Link

Link::Link(net::EventLoop& loop, const Clock& clock, StoreUrl url, Listener& listener,
           Nanos retry_window)
    : impl_(std::make_unique<Impl>(loop, clock, std::move(url), listener, retry_window)) {}
Link::~Link() = default;
void Link::Start() { impl_->Start(); }
void Link::SendSetup(std::initializer_list<std::string_view> argv, Callback cb) {
  impl_->SendSetup(std::span<const std::string_view>(argv.begin(), argv.size()), std::move(cb));
}

void Link::SendSetup(std::span<const std::string_view> argv, Callback cb) {
  impl_->SendSetup(argv, std::move(cb));
}

void Link::SetReady() { impl_->SetReady(); }
void Link::Reset(std::string_view why) { impl_->Reset(why); }
void Link::Send(std::initializer_list<std::string_view> argv, Callback cb) {
  impl_->Send(std::span<const std::string_view>(argv.begin(), argv.size()), std::move(cb));
}

void Link::Send(std::span<const std::string_view> argv, Callback cb) {
  impl_->Send(argv, std::move(cb));
}

void Link::SendEncoded(std::string_view command, Callback cb) {
  impl_->SendEncoded(command, std::move(cb));
}

void Link::Flush() { impl_->Flush(); }
void Link::Subscribe(std::string_view channel) { impl_->Subscribe(channel); }
Nanos Link::Poll() { return impl_->Poll(); }
bool Link::ready() const { return impl_->ready(); }
size_t Link::in_flight() const { return impl_->in_flight(); }
std::string Link::master() const { return impl_->master(); }
std::string Link::why_not_ready() const { return impl_->why_not_ready(); }

}  // namespace stalkd::redis
