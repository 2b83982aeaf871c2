#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "net/event_loop.h"

// The Redis client of the Redis store (docs/SCALE-OUT.md): RESP over non-blocking sockets on
// stalkd's own event loop, pipelined, no thread. hiredis (Debian's libhiredis-dev 0.14) is
// used only for its reply parser (redisReader); connecting, writing, reconnecting and
// Sentinel discovery are ours.
namespace stalkd::redis {

// One reply, owned (copied out of hiredis' reader).
struct Reply {
  enum class Type : uint8_t {
    kNil,
    kStatus,   // +OK
    kError,    // -ERR ...: str holds the message
    kInteger,  // :n
    kString,   // $bulk
    kArray,    // *n
    // Not from Redis: the link lost the connection (or gave up reconnecting) before this
    // command's reply arrived. If the command was written, its fate is unknown.
    kLost,
  };
  Type type = Type::kNil;
  int64_t integer = 0;
  std::string str;              // kStatus, kError, kString, kLost (why)
  std::vector<Reply> elements;  // kArray

  bool error() const { return type == Type::kError || type == Type::kLost; }
  // An error reply whose message starts with `prefix` ("READONLY", "OOM", "NOREPLICAS").
  bool ErrorIs(std::string_view prefix) const;
};

using Callback = std::function<void(const Reply&)>;

struct Endpoint {
  std::string host;
  int port = 0;
};

// Who a connection is to Redis (Redis 6 ACL users; `default` when user is empty). With a
// password, AUTH [user] password is the first command of every connection (link_auth.cc).
struct Credentials {
  std::string user;
  std::string password;
};

// --store: redis://[USER:PASSWORD@]HOST:PORT[/DB],
// redis-sentinel://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]/MASTERNAME or
// redis-cluster://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...][/0] (cluster/ClusterLink; a cluster
// has db 0 only).
struct StoreUrl {
  enum class Kind : uint8_t { kRedis, kSentinel, kCluster };
  Kind kind = Kind::kRedis;
  // kRedis: exactly one; kSentinel: the sentinels; kCluster: the seed nodes
  std::vector<Endpoint> endpoints;
  int db = 0;               // kRedis only (Sentinel-managed masters use db 0)
  std::string master_name;  // kSentinel
  // The data nodes' (master, cluster nodes): the URL's USER:PASSWORD@ (percent-decoded).
  Credentials auth;
  // kSentinel: the sentinels' own (not in the URL: --store-sentinel-password-file...).
  Credentials sentinel_auth;
};
// false with *error set ("--store: ...") for anything malformed. A port left out is 6379
// (26379 for a sentinel). Hosts are numeric IPv4 addresses or "localhost" (127.0.0.1): no name
// is resolved, so that connecting never blocks the loop on DNS; nor IPv6, TLS, nor ?options.
// Credentials are USER:PASSWORD@, :PASSWORD@ (the default user) or USER@ (the password given
// elsewhere), %XX-decoded; an error never repeats the password.
bool ParseStoreUrl(std::string_view url, StoreUrl* out, std::string* error);
// The URL with its password replaced by "***", for logs.
std::string RedactStoreUrl(std::string_view url);
// Whether a link's why_not_ready() (or a Conn's failure) is Redis refusing our credentials
// (AUTH answered WRONGPASS or another error, or a command answered NOAUTH) or what they may
// do (NOPERM: an ACL user lacking a command, a key or the channel): not transient.
bool IsAccessRefused(std::string_view why);

// A connection to the current Redis master, kept up: it connects (for kSentinel, after
// asking the sentinels in turn for the master's address), checks `ROLE` is master, selects
// the db, and then lets its Listener set up (FUNCTION LOAD, config checks) before serving
// commands. It reconnects (with backoff up to 1 s) when the connection drops, and rediscovers
// the master on Sentinel's +switch-master, on a READONLY reply, or when ROLE says replica.
//
// Commands sent while the link is not ready wait, unsent, each for up to `retry_window` from
// its Send; then its callback gets kLost "not connected: <why>". Commands written when the
// connection drops get kLost too (fate unknown). A command written (setup ones too) that has
// no answer `retry_window` after it was sent drops the connection: a master that stopped
// answering (stopped process, paused VM, black-holed network) is left and connected to again,
// its commands in flight getting kLost "connection lost, fate unknown: ... no answer within".
// Callbacks run in the order the commands were sent. Callbacks and Listener calls run only from
// inside Poll() or the loop's event dispatch, never from inside any other method of Link (Send,
// SendSetup, Flush, SetReady, Reset, Subscribe, Start): what those decide (a kLost, OnLost) is
// delivered by the next dispatch or Poll, and the link wakes its loop for it (an eventfd). Commands
// sent from callbacks are written when the dispatch or Poll that ran them ends. Destroying the Link
// (never from one of its callbacks) drops the callbacks still pending without calling them.
//
// A second connection to the same master carries pub/sub: Subscribe()d channels are
// (re)subscribed whenever the link is (re)established, and OnConnected waits until Redis has
// confirmed them, so a message published after OnConnected reaches OnMessage. That
// connection failing fails the link (OnLost: messages may have been missed). Subscribe
// before Start for that guarantee; a channel added later is subscribed at once, but messages
// published before Redis confirms it are missed.
//
// Connections use TCP_NODELAY and keepalive (a vanished peer is noticed in about 10 s).
// Connecting, ROLE, SELECT and the SUBSCRIBE confirmations must complete within 2 s, else the
// attempt counts as failed. Backoff between attempts: 10 ms doubling to 1 s, back to 10 ms
// once ready.
class Link {
 public:
  class Listener {
   public:
    // Connected to a verified master. Send setup commands with SendSetup, then call
    // SetReady() (or Reset(why) to drop the connection and try again later).
    virtual void OnConnected() = 0;
    // The link stopped being ready (connection lost, master changed, Reset): commands in
    // flight have received kLost. Called once for each OnConnected, after it.
    virtual void OnLost(std::string_view why) = 0;
    // A pub/sub message on a subscribed channel.
    virtual void OnMessage(std::string_view channel, std::string_view message) = 0;

   protected:
    ~Listener() = default;
  };

  Link(net::EventLoop& loop, const Clock& clock, StoreUrl url, Listener& listener,
       Nanos retry_window = 5 * kSecond);
  ~Link();
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  // Starts connecting (non-blocking).
  void Start();

  // Setup phase (between OnConnected and SetReady; also allowed when ready): written at once,
  // ahead of queued commands. Outside those, the callback gets kLost (from the next Poll).
  void SendSetup(std::initializer_list<std::string_view> argv, Callback cb);
  void SendSetup(std::span<const std::string_view> argv, Callback cb);
  void SetReady();
  // Drops the connection (e.g. a setup check failed) and reconnects after a backoff. The
  // kLost callbacks and OnLost follow from the dispatch or Poll. Ignored before Start and
  // while waiting to reconnect.
  void Reset(std::string_view why);

  // A command: buffered and written on Flush() (or once 64 KiB are buffered); waits
  // unsent while the link is not ready.
  void Send(std::initializer_list<std::string_view> argv, Callback cb);
  void Send(std::span<const std::string_view> argv, Callback cb);
  // The same, for a command already encoded by AppendCommand (resp.h), e.g. kept for resending.
  void SendEncoded(std::string_view command, Callback cb);
  // Writes what is buffered (as much as the socket takes; the rest when it is writable).
  void Flush();

  // Kept across reconnects (see the class comment for when messages are guaranteed).
  void Subscribe(std::string_view channel);

  // Timers: reconnect backoff, retry-window expiry of queued commands, Sentinel re-checks
  // (every 1 s a sentinel is asked again; a new address drops the connection). Runs the
  // callbacks that are due. Returns when it next needs to be polled, as an absolute time on
  // the link's Clock (the convention of command::Store::Tick): now if work is left, kForever
  // if nothing is due but events. Call it every loop iteration (it is cheap).
  Nanos Poll();

  bool ready() const;
  // Commands sent and not yet answered (written or waiting).
  size_t in_flight() const;
  // The master's address while connected, from OnConnected on ("host:port"), for logs and
  // stats; empty otherwise.
  std::string master() const;
  // Why the link is not ready, for messages ("127.0.0.1:6379: connect: Connection refused",
  // "setting up 127.0.0.1:6379", "not started"); empty when ready.
  std::string why_not_ready() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace stalkd::redis
