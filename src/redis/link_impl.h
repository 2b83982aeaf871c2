#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "net/event_loop.h"
#include "redis/link.h"
#include "redis/link_conn.h"

// The inside of a Link (link.h), shared by the files that implement it: link.cc (the
// connection's life: connecting, verifying, setup, Down and reconnecting, pub/sub, the timers
// of Poll, and Link's public methods), link_send.cc (commands: sending, pipelining, queueing
// while not ready, the answers) and link_sentinel.cc (asking the sentinels where the master is,
// watching +switch-master). Internal to src/redis/.
namespace stalkd::redis {

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
  // Writes what is buffered. Defined here, inline: it runs after every dispatch and every
  // Poll, which are in other files.
  void Flush() {
    if (state_ == State::kSetup || state_ == State::kReady) data_.Flush();
  }
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

}  // namespace stalkd::redis
