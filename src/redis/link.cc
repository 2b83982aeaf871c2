#include "redis/link.h"

#include <arpa/inet.h>
#include <errno.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <deque>
#include <utility>

#include "base/check.h"
#include "redis/link_auth.h"
#include "redis/link_conn.h"
#include "redis/resp.h"

namespace stalkd::redis {

bool Reply::ErrorIs(std::string_view prefix) const {
  return type == Type::kError && std::string_view(str).starts_with(prefix);
}

// ---- --store URLs

namespace {

constexpr std::string_view kRedisScheme = "redis://";
constexpr std::string_view kSentinelScheme = "redis-sentinel://";
constexpr std::string_view kClusterScheme = "redis-cluster://";
constexpr int kRedisPort = 6379;
constexpr int kSentinelPort = 26379;

bool ParseNumber(std::string_view s, int max, int* out) {
  if (s.empty() || s.size() > 10) return false;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0 || v > max) return false;
  *out = static_cast<int>(v);
  return true;
}

bool ParseEndpoint(std::string_view s, int default_port, Endpoint* out, std::string* error) {
  if (s.starts_with("[")) {
    *error = "--store: '" + std::string(s) + "': IPv6 addresses are not supported";
    return false;
  }
  std::string_view host = s;
  out->port = default_port;
  if (size_t colon = s.rfind(':'); colon != std::string_view::npos) {
    host = s.substr(0, colon);
    std::string_view port = s.substr(colon + 1);
    if (!ParseNumber(port, 65535, &out->port) || out->port == 0) {
      *error = "--store: '" + std::string(port) + "' is not a port (1 to 65535)";
      return false;
    }
  }
  if (host == "localhost") {
    out->host = "127.0.0.1";
    return true;
  }
  out->host = std::string(host);
  in_addr addr;
  if (host.empty() || inet_pton(AF_INET, out->host.c_str(), &addr) != 1) {
    *error = "--store: host '" + out->host +
             "' is not a numeric IPv4 address (only localhost is resolved)";
    return false;
  }
  return true;
}

}  // namespace

bool ParseStoreUrl(std::string_view given, StoreUrl* out, std::string* error) {
  StoreUrl u;
  std::string bare;  // without credentials: what the messages show
  if (!TakeCredentials(given, &bare, &u.auth, error)) return false;
  std::string_view url = bare;
  std::string_view rest;
  if (url.starts_with(kRedisScheme)) {
    u.kind = StoreUrl::Kind::kRedis;
    rest = url.substr(kRedisScheme.size());
  } else if (url.starts_with(kSentinelScheme)) {
    u.kind = StoreUrl::Kind::kSentinel;
    rest = url.substr(kSentinelScheme.size());
  } else if (url.starts_with(kClusterScheme)) {
    u.kind = StoreUrl::Kind::kCluster;
    rest = url.substr(kClusterScheme.size());
  } else {
    *error = "--store: '" + std::string(url) +
             "' is none of redis://HOST:PORT[/DB], "
             "redis-sentinel://HOST:PORT[,HOST:PORT...]/MASTER and "
             "redis-cluster://HOST:PORT[,HOST:PORT...]";
    return false;
  }
  if (rest.find_first_of("?#") != std::string_view::npos) {
    *error = "--store: '" + std::string(url) + "': options (?...) are not supported";
    return false;
  }
  std::string_view hosts = rest.substr(0, rest.find('/'));
  std::string_view path =
      hosts.size() < rest.size() ? rest.substr(hosts.size() + 1) : std::string_view();
  if (hosts.empty()) {
    *error = "--store: '" + std::string(url) + "' names no host";
    return false;
  }
  if (u.kind == StoreUrl::Kind::kRedis) {
    if (hosts.find(',') != std::string_view::npos) {
      *error = "--store: '" + std::string(url) +
               "': a redis:// URL names one server (several are for redis-sentinel://)";
      return false;
    }
    Endpoint ep;
    if (!ParseEndpoint(hosts, kRedisPort, &ep, error)) return false;
    u.endpoints.push_back(ep);
    if (!path.empty() && !ParseNumber(path, 1 << 30, &u.db)) {
      *error = "--store: '" + std::string(path) + "' is not a database number";
      return false;
    }
  } else {
    bool cluster = u.kind == StoreUrl::Kind::kCluster;
    while (!hosts.empty()) {
      std::string_view one = hosts.substr(0, hosts.find(','));
      Endpoint ep;
      if (!ParseEndpoint(one, cluster ? kRedisPort : kSentinelPort, &ep, error)) return false;
      u.endpoints.push_back(ep);
      hosts.remove_prefix(std::min(hosts.size(), one.size() + 1));
    }
    if (cluster) {
      if (!path.empty() && path != "0") {
        *error = "--store: '" + std::string(url) +
                 "': a Redis Cluster has database 0 only (redis-cluster://HOST:PORT[,...])";
        return false;
      }
      *out = std::move(u);
      return true;
    }
    if (path.empty() || path.find_first_of(" \t\r\n/") != std::string_view::npos) {
      *error = "--store: '" + std::string(url) +
               "' names no master (redis-sentinel://HOST:PORT[,HOST:PORT...]/MASTER)";
      return false;
    }
    u.master_name = std::string(path);
  }
  *out = std::move(u);
  return true;
}

// ---- The link

namespace {

// Reconnect backoff: from the first failure, doubling up to the maximum; back to the minimum
// once the link is ready.
constexpr Nanos kMinBackoff = 10'000'000;
constexpr Nanos kMaxBackoff = kSecond;
// From starting to connect to the master to OnConnected (TCP, ROLE, SELECT, SUBSCRIBE).
constexpr Nanos kConnectTimeout = 2 * kSecond;
// A sentinel's answer to get-master-addr-by-name, connecting included.
constexpr Nanos kAskTimeout = kSecond;
// How often a sentinel is asked again where the master is, while connected.
constexpr Nanos kCheckPeriod = kSecond;
// Send writes once this much is buffered.
constexpr size_t kSendFlushSize = 64 * 1024;

bool operator==(const Endpoint& a, const Endpoint& b) {
  return a.host == b.host && a.port == b.port;
}

bool IsString(const Reply& r) {
  return r.type == Reply::Type::kString || r.type == Reply::Type::kStatus;
}

}  // namespace

class Link::Impl final : public Conn::Owner {
 public:
  Impl(net::EventLoop& loop, const Clock& clock, StoreUrl url, Listener& listener,
       Nanos retry_window);
  ~Impl();

  void Start();
  void SendSetup(std::span<const std::string_view> argv, Callback cb);
  void SetReady();
  void Reset(std::string_view why);
  void Send(std::span<const std::string_view> argv, Callback cb);
  void SendEncoded(std::string_view command, Callback cb);
  void Flush();
  void Subscribe(std::string_view channel);
  Nanos Poll();

  bool ready() const { return state_ == State::kReady; }
  size_t in_flight() const { return queued_.size() + user_written_ + lost_.size(); }
  const std::string& why_not_ready() const { return why_; }
  std::string master() const {
    return state_ == State::kSetup || state_ == State::kReady ? data_.name() : std::string();
  }

  void OnOpen(Conn& c) override;
  void OnReply(Conn& c, Reply& r) override;
  void OnDown(Conn& c, const std::string& why) override;
  void AfterEvents() override { Flush(); }

 private:
  enum class State : uint8_t {
    kIdle,         // not started
    kWaiting,      // until next_attempt_ (backoff)
    kDiscovering,  // asking the sentinels where the master is
    kConnecting,   // to the master: TCP, ROLE, SELECT, the pub/sub connection's SUBSCRIBE
    kSetup,        // OnConnected called; until SetReady
    kReady,
  };
  // A command written to the master, awaiting its reply: the user's, or the handshake's.
  struct Written {
    enum class Kind : uint8_t { kUser, kRole, kSelect } kind;
    Callback cb;
    Nanos at;  // when it was sent: its answer is due within the retry window
  };
  // A command sent while not ready: encoded, unsent.
  struct Queued {
    std::string command;
    Callback cb;
    Nanos deadline;
  };
  struct Lost {
    Callback cb;
    std::string why;
  };

  // A user command appended to data_: awaits its reply; written at 64 KiB.
  void Sent(Callback cb);
  void Attempt();
  void ConnectMaster(const Endpoint& at);
  void HandshakeStep();
  void MaybeConnected();
  // Drops the master's connections: commands written get kLost (from RunDeferred), the
  // listener OnLost if it was told OnConnected; the next attempt after the backoff.
  void Down(const std::string& why);
  void OnMasterReply(Reply& r);
  void OnPubSubReply(Reply& r);
  // Sentinel discovery and watching.
  void Ask();
  void AskFailed(const std::string& why);
  void OnSentinelReply(Reply& r);
  void OnMasterAddress(const Endpoint& at);
  void Watch();
  void OnWatchReply(Reply& r);
  // Runs the kLost callbacks and the OnLost notice that Down left.
  void RunDeferred();
  void Wake() { waker_.Wake(); }
  void SubscribeAll();
  bool sentinel() const { return url_.kind == StoreUrl::Kind::kSentinel; }

  const Clock& clock_;
  const StoreUrl url_;
  Listener& listener_;
  const Nanos retry_window_;

  State state_ = State::kIdle;
  std::string why_ = "not started";  // why the link is not ready
  Nanos backoff_ = kMinBackoff;
  Nanos next_attempt_ = kForever;      // kWaiting
  Nanos connect_deadline_ = kForever;  // kConnecting

  Conn data_;    // the master: commands
  Conn pubsub_;  // the master: SUBSCRIBE
  std::deque<Written> written_;
  size_t user_written_ = 0;
  std::deque<Queued> queued_;
  int handshake_left_ = 0;    // ROLE and SELECT replies awaited
  size_t confirms_left_ = 0;  // SUBSCRIBE confirmations awaited before OnConnected
  std::vector<std::string> channels_;

  std::deque<Lost> lost_;
  bool notify_lost_ = false;
  std::string lost_why_;
  Waker waker_;  // calls Poll
  bool running_deferred_ = false;

  // Sentinel: `asker_` asks the sentinel at `sentinel_index_` where the master is;
  // `watcher_` is SUBSCRIBEd to +switch-master on one of them.
  Conn asker_;
  Conn watcher_;
  size_t sentinel_index_ = 0;
  size_t sentinel_failures_ = 0;  // in a row, during discovery
  bool asking_ = false;
  Nanos ask_deadline_ = kForever;
  Nanos next_check_ = kForever;
  Nanos next_watch_ = 0;
};

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

// ---- Commands

void Link::Impl::SendSetup(std::span<const std::string_view> argv, Callback cb) {
  if (state_ != State::kSetup && state_ != State::kReady) {
    lost_.push_back({std::move(cb), "not connected: " + why_});
    Wake();
    return;
  }
  data_.Append(argv);
  written_.push_back({Written::Kind::kUser, std::move(cb), clock_.Now()});
  user_written_++;
  data_.Flush();
}

void Link::Impl::Send(std::span<const std::string_view> argv, Callback cb) {
  if (state_ != State::kReady) {
    std::string command;
    AppendCommand(command, argv);
    queued_.push_back({std::move(command), std::move(cb), clock_.Now() + retry_window_});
    return;
  }
  data_.Append(argv);
  Sent(std::move(cb));
}

void Link::Impl::SendEncoded(std::string_view command, Callback cb) {
  if (state_ != State::kReady) {
    queued_.push_back({std::string(command), std::move(cb), clock_.Now() + retry_window_});
    return;
  }
  data_.AppendEncoded(command);
  Sent(std::move(cb));
}

void Link::Impl::Sent(Callback cb) {
  written_.push_back({Written::Kind::kUser, std::move(cb), clock_.Now()});
  user_written_++;
  if (data_.unwritten() >= kSendFlushSize) data_.Flush();
}

void Link::Impl::Flush() {
  if (state_ == State::kSetup || state_ == State::kReady) data_.Flush();
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

// ---- Replies

void Link::Impl::OnReply(Conn& c, Reply& r) {
  if (&c == &data_) return OnMasterReply(r);
  if (&c == &pubsub_) return OnPubSubReply(r);
  if (&c == &asker_) return OnSentinelReply(r);
  OnWatchReply(r);
}

void Link::Impl::OnMasterReply(Reply& r) {
  if (written_.empty()) return Down(data_.name() + ": a reply to no command");
  Written w = std::move(written_.front());
  written_.pop_front();
  switch (w.kind) {
    case Written::Kind::kRole:
      if (r.type == Reply::Type::kArray && !r.elements.empty() && r.elements[0].str == "master") {
        return HandshakeStep();
      }
      return Down(data_.name() + " is not a master (ROLE: " + Describe(r) + ")");
    case Written::Kind::kSelect:
      if (r.error())
        return Down(data_.name() + ": SELECT " + std::to_string(url_.db) + ": " + r.str);
      return HandshakeStep();
    case Written::Kind::kUser:
      break;
  }
  user_written_--;
  uint64_t generation = data_.generation();
  w.cb(r);
  // A master demoted to a replica (by Sentinel, or by hand) refuses writes.
  if (r.ErrorIs("READONLY") && data_.generation() == generation) {
    Down(data_.name() + " is read-only now: " + r.str);
  }
  RunDeferred();
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

// ---- Sentinel

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

// ---- Timers

Nanos Link::Impl::Poll() {
  RunDeferred();
  for (Conn* c : {&data_, &pubsub_, &asker_, &watcher_}) c->FailIfBroken();
  RunDeferred();
  Nanos now = clock_.Now();
  if (state_ == State::kWaiting && now >= next_attempt_) Attempt();
  if (state_ == State::kConnecting && now >= connect_deadline_) {
    Down(data_.name() + ": not connected and verified within " +
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
