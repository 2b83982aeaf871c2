#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string_view>

#include "base/intrusive_list.h"
#include "command/front_end.h"
#include "net/event_loop.h"

namespace stalkd::net {
class TlsStream;
}

namespace stalkd::server {

class Server;
struct ConnectionTag;

// One client socket, whatever protocol it speaks: reads into its FrontEnd, writes what the
// front end produces, and is the Client its store session hands late results to. Flags
// record which of the server's work lists it is on, so it is never listed twice. A
// listener makes ConnectionOf<FrontEnd> (below) for its protocol.
class Connection : public net::EventLoop::Handler,
                   public ListNode<ConnectionTag>,
                   public command::Client {
 public:
  ~Connection() override;  // closes the fd (the front end has closed its session)
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void OnEvents(uint32_t events) override;
  // A result that arrived later: the front end encodes it, and it is written out.
  void OnResult(const command::Result& r) override;
  // Writes pending output. Returns false if the connection is finished (error, or closing
  // with nothing left to send).
  bool Flush();
  // Re-computes which epoll events this connection wants.
  void UpdateInterest();

  command::FrontEnd& front_end() { return *front_end_; }
  bool dead() const { return dead_; }
  void Kill();  // marks the connection for closing (Server::Reap)

  bool on_runnable : 1 = false;
  bool on_dirty : 1 = false;
  bool on_closed : 1 = false;
  bool on_blocked : 1 = false;
  // -f 0: replies wait in the output buffer until the store is durable as far as they
  // depend on (command::Session::need_mark); meanwhile the connection runs no commands and
  // does not write.
  bool on_held : 1 = false;
  // Half-closed after the last output, reading and discarding what the peer still sends
  // (FrontEnd::linger_bytes) until its EOF or the bound.
  bool lingering : 1 = false;
  // On the server's list of TLS connections on a clock: a handshake under way, or a partial
  // record held (tls_waiting_since).
  bool on_handshaking : 1 = false;
  // On the server's list of TLS connections to read without an epoll event: decrypted input
  // waits in the stream (a read stopped at its per-event budget or at the input bound).
  bool on_tls_readable : 1 = false;
  // While the output buffer is at/above the high-water mark: when it got there or the peer
  // last took any of it, whichever is later; 0 while it is below the mark.
  Nanos blocked_since() const { return blocked_since_; }

  // TLS (a tls:// listener): the stream the connection speaks through from now on, its
  // handshake begun at `now`.
  void StartTls(std::unique_ptr<net::TlsStream> stream, Nanos now);
  bool tls() const { return tls_ != nullptr; }
  bool handshaking() const;
  // When the handshake began or, once established, when the partial TLS record the stream
  // holds began to wait for its rest (0: none): what the TLS timeout bounds.
  Nanos tls_waiting_since() const;
  // Reads the decrypted input a read left in the stream (Server::MarkTlsReadable).
  void ReadTlsPending();
  // The connection's identity: the subject of the client certificate its TLS handshake
  // verified ("CN=worker-1,O=Example"); empty without TLS or without a client certificate.
  std::string_view tls_identity() const;
  // The TLS protocol and cipher ("TLSv1.3 TLS_AES_256_GCM_SHA384"); empty without TLS.
  std::string TlsDescription() const;
  int fd() const { return fd_; }

  // Bytes read per read() call.
  static constexpr size_t kReadChunk = 64 * 1024;
  // Input kept buffered before reading pauses (the front end consumes it first).
  static constexpr size_t kMaxBufferedInput = 256 * 1024;

 protected:
  Connection(Server& server, int fd);
  // The derived class's front end, set once it is constructed.
  void Attach(command::FrontEnd* f) { front_end_ = f; }

 private:
  struct TlsState;
  void Read();
  // Closing with output written: starts or continues a lingering close; false: close now.
  bool Linger();
  // read() and send(), or their TLS counterparts: bytes moved, 0 at the peer's end of stream
  // (Receive), or -1 with errno (EAGAIN: try again once the socket is ready).
  ssize_t Receive(char* buf, size_t len);
  ssize_t Send(const char* buf, size_t len);
  void Handshake();
  // The events the front end's state asks for (UpdateInterest adds what TLS waits for).
  void WantedEvents(uint32_t* events) const;

  // One per open connection: ordered to minimise padding (the flags above, dead_,
  // interest_ and fd_ share one word).
  bool dead_ : 1 = false;
  uint16_t interest_ = 0;  // epoll events: EPOLLIN, EPOLLOUT, EPOLLRDHUP all fit
  int fd_;
  Server& server_;
  Nanos blocked_since_ = 0;
  command::FrontEnd* front_end_ = nullptr;
  std::unique_ptr<TlsState> tls_;  // null on a plain connection
};

// A connection speaking protocol P (a command::FrontEnd constructed from `args`, e.g. the
// store, then the Client its session reports to), in one allocation with it.
template <class P>
class ConnectionOf final : public Connection {
 public:
  template <class... Args>
  ConnectionOf(Server& server, int fd, Args&... args)
      : Connection(server, fd), front_end_(args..., *this) {
    Attach(&front_end_);
  }

 private:
  P front_end_;
};

}  // namespace stalkd::server
