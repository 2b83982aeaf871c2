#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "net/event_loop.h"
#include "net/tls.h"
#include "redis/link.h"
#include "redis/resp.h"

// One TCP connection of the Redis client (link.cc): to the master, the master's pub/sub, or a
// sentinel; in clear or over TLS (rediss..., link_tls.cc). Internal to src/redis/.
namespace stalkd::redis {

class Conn final : public net::EventLoop::Handler {
 public:
  // Called from the loop's dispatch (OnEvents) only; each may close or reconnect the Conn.
  class Owner {
   public:
    // The connection is established, TLS included (what was appended before is being
    // written).
    virtual void OnOpen(Conn& c) = 0;
    virtual void OnReply(Conn& c, Reply& r) = 0;
    // The connection failed or was closed by the peer; it is closed already.
    virtual void OnDown(Conn& c, const std::string& why) = 0;
    // At the end of every OnEvents, whatever it called: the owner writes what the callbacks
    // it ran have sent, in one go.
    virtual void AfterEvents() = 0;

   protected:
    ~Owner() = default;
  };

  Conn(net::EventLoop& loop, Owner& owner) : loop_(loop), owner_(owner) {}
  ~Conn() override { Close(); }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  // Closes any connection and starts a non-blocking one (TCP_NODELAY, keepalive). false,
  // with *why set and the Conn closed, if that failed at once; nothing is called back.
  bool Connect(const Endpoint& to, std::string* why);
  // Closes at once, calling nothing back; what was unwritten or unanswered is forgotten.
  void Close();
  // The credentials of every later Connect: with a password, AUTH is its first command, its
  // +OK kept from the owner; a refusal (or NOAUTH to anything) fails the Conn with a reason
  // IsAccessRefused recognizes (link_auth.cc).
  void set_auth(Credentials auth) { auth_ = std::move(auth); }
  // TLS on every later Connect (null: none): once TCP is connected, the handshake, and only
  // then is what was appended (AUTH first) written; connected() is false until it is done.
  // The server's certificate must name `server_name`, or when that is empty the address
  // connected to. A handshake that fails for TLS' reasons (a certificate not verified, not
  // naming the server, a client certificate the server wants, a peer not speaking TLS), or
  // a TLS alert from the server later, fails the Conn with a reason IsAccessRefused
  // recognizes (link_tls.cc).
  void set_tls(std::shared_ptr<const net::TlsContext> context, std::string server_name) {
    tls_context_ = std::move(context);
    tls_name_ = std::move(server_name);
  }

  // Appends a command to the output (allowed while connecting: written once connected).
  void Append(std::span<const std::string_view> argv) { AppendCommand(out_, argv); }
  void Append(std::initializer_list<std::string_view> argv) {
    Append(std::span<const std::string_view>(argv.begin(), argv.size()));
  }
  void AppendEncoded(std::string_view command) { out_.append(command); }
  // Writes what the socket takes now; the rest when it is writable. Calls nothing back: a
  // write error shuts the socket down, so that the loop reports it to OnEvents (or to the
  // owner's Poll, through TakeBroken).
  void Flush();

  bool open() const { return fd_ >= 0; }
  bool connected() const { return fd_ >= 0 && !connecting_; }
  // TCP is connected and the TLS handshake under way.
  bool handshaking() const { return connecting_ && tls_ != nullptr; }
  // Bumped by every Close: a caller that called out compares it to learn whether the
  // connection it was serving is gone.
  uint64_t generation() const { return generation_; }
  const Endpoint& peer() const { return peer_; }
  // "host:port", for messages.
  const std::string& name() const { return name_; }
  size_t unwritten() const { return out_.size() - out_pos_; }
  // A write error seen outside the loop's dispatch: fails the Conn now (calling OnDown).
  void FailIfBroken();

  void OnEvents(uint32_t events) override;

 private:
  void Handle();
  void Fail(const std::string& why);
  // Writes until EAGAIN; on an error records it in broken_ and shuts the socket down.
  void Write();
  // Reads and parses; false if the Conn was failed or closed meanwhile.
  bool Read(uint64_t generation);
  void UpdateInterest();
  // What one send or read did, in clear or through TLS: kOk (*n > 0), kAgain (wait for the
  // socket: UpdateInterest knows which way), kClosed (the peer's end of stream), kError
  // (*why set, the Conn's name not in it).
  enum class Io : uint8_t { kOk, kAgain, kClosed, kError };
  Io SendSome(const char* data, size_t len, size_t* n, std::string* why);
  Io ReadSome(char* buf, size_t len, size_t* n, std::string* why);
  // link_tls.cc: TCP is connected; with TLS, starts or goes on with the handshake. true once
  // the Conn is open; false while the handshake waits for the socket, or when the Conn was
  // failed.
  bool TlsEstablished();
  Io FromTls(net::TlsStream::Io io);
  Io TlsSend(const char* data, size_t len, size_t* n, std::string* why);
  Io TlsRead(char* buf, size_t len, size_t* n, std::string* why);
  // Closes the TLS stream (close_notify if the socket takes it now).
  void CloseTls();
  // link_auth.cc: appends AUTH after Connect; whether `r` is the owner's (false: AUTH's +OK,
  // or the Conn failed for refused credentials).
  void AppendAuth();
  bool Authenticated(const Reply& r);

  net::EventLoop& loop_;
  Owner& owner_;
  int fd_ = -1;
  bool connecting_ = false;
  uint32_t interest_ = 0;
  uint64_t generation_ = 0;
  Endpoint peer_;
  std::string name_;
  std::string out_;
  size_t out_pos_ = 0;
  std::string broken_;  // a write error not yet reported
  ReplyReader reader_;
  Credentials auth_;
  bool auth_pending_ = false;                           // AUTH's reply is the next one
  std::shared_ptr<const net::TlsContext> tls_context_;  // set_tls
  std::string tls_name_;
  std::unique_ptr<net::TlsStream> tls_;  // from TCP connected to Close, with TLS
  // The stream waits for the socket to be writable (a handshake step, or a read or write
  // that must send first); or it holds decrypted bytes a read left (a poll of the socket
  // does not announce those: the writable socket brings the loop back for them).
  bool tls_wants_write_ = false;
  bool tls_pending_ = false;
};

// An eventfd on the loop that calls `on_wake` from the loop's dispatch after Wake(): how the
// links deliver what a method decided (a kLost, a retry) from outside that method.
class Waker final : public net::EventLoop::Handler {
 public:
  Waker(net::EventLoop& loop, std::function<void()> on_wake);
  ~Waker() override;
  Waker(const Waker&) = delete;
  Waker& operator=(const Waker&) = delete;

  // Once per dispatch however often it is called.
  void Wake();
  void OnEvents(uint32_t events) override;

 private:
  net::EventLoop& loop_;
  std::function<void()> on_wake_;
  int fd_ = -1;
  bool woken_ = false;
};

}  // namespace stalkd::redis
