#include "server/connection.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/tls.h"
#include "server/server.h"

namespace stalkd::server {

struct Connection::TlsState {
  std::unique_ptr<net::TlsStream> stream;
  Nanos started = 0;
  // What the last step waits for beyond what the connection itself wants: the handshake's
  // next step wants EPOLLOUT, a read wants the socket writable, a write wants it readable.
  bool handshake_wants_write = false;
  bool read_wants_write = false;
  bool write_wants_read = false;
  // A read stopped with decrypted input left in the stream, which no poll announces.
  bool more = false;
};

Connection::Connection(Server& server, int fd) : fd_(fd), server_(server) {}

Connection::~Connection() {
  if (tls_) tls_->stream->Shutdown();  // close_notify, if the socket takes it now
  server_.loop().Remove(fd_);
  close(fd_);
}

void Connection::StartTls(std::unique_ptr<net::TlsStream> stream, Nanos now) {
  tls_ = std::make_unique<TlsState>();
  tls_->stream = std::move(stream);
  tls_->started = now;
}

bool Connection::handshaking() const { return tls_ && !tls_->stream->established(); }

Nanos Connection::tls_waiting_since() const {
  if (!tls_) return 0;
  // A partial record only counts while the connection reads: the rest may wait in the
  // socket while the server does not (input or output at its bound).
  return tls_->stream->established() && !(interest_ & EPOLLIN) ? 0 : tls_->started;
}

void Connection::ReadTlsPending() {
  if (!dead_ && tls_ && tls_->more) OnEvents(EPOLLIN);
}

std::string_view Connection::tls_identity() const {
  return tls_ ? std::string_view(tls_->stream->peer_subject()) : std::string_view();
}

std::string Connection::TlsDescription() const {
  return tls_ && tls_->stream->established() ? tls_->stream->Description() : std::string();
}

void Connection::Handshake() {
  net::TlsStream& s = *tls_->stream;
  switch (s.Handshake()) {
    case net::TlsStream::Io::kOk:
      tls_->started = 0;  // from now on: when a partial record began to wait
      server_.OnTlsHandshake(this, nullptr);
      break;
    case net::TlsStream::Io::kWantRead:
      tls_->handshake_wants_write = false;
      break;
    case net::TlsStream::Io::kWantWrite:
      tls_->handshake_wants_write = true;
      break;
    case net::TlsStream::Io::kClosed:
      server_.OnTlsHandshake(this, "the client closed the connection");
      return Kill();
    case net::TlsStream::Io::kError:
      server_.OnTlsHandshake(this, s.error().c_str());
      return Kill();
  }
  UpdateInterest();
}

ssize_t Connection::Receive(char* buf, size_t len) {
  if (!tls_) return read(fd_, buf, len);
  tls_->read_wants_write = false;
  size_t total = 0;
  while (total < len) {
    size_t n = 0;
    net::TlsStream::Io io = tls_->stream->Read(buf + total, len - total, &n);
    if (io == net::TlsStream::Io::kOk) {
      total += n;
      tls_->started = 0;  // a whole record came
      // Nothing left in the stream: the socket waits for the next poll, as a plain read's
      // does, rather than a read() now that would only say EAGAIN.
      if (!tls_->stream->pending()) break;
      continue;
    }
    if (total > 0) break;  // what came before the stop is the client's; the stop recurs
    if (io == net::TlsStream::Io::kWantRead && tls_->started == 0 && tls_->stream->pending()) {
      // Part of a record waits for its rest, holding the stream's record buffer: the client
      // has --tls-handshake-timeout to complete it (Server::CheckHandshakes).
      tls_->started = server_.clock().Now();
      server_.WatchTls(this);
    }
    if (io == net::TlsStream::Io::kClosed) return 0;
    if (io == net::TlsStream::Io::kError) {
      server_.OnTlsError(this, tls_->stream->error());
      errno = ECONNRESET;
      return -1;
    }
    tls_->read_wants_write = io == net::TlsStream::Io::kWantWrite;
    errno = EAGAIN;
    return -1;
  }
  return static_cast<ssize_t>(total);
}

ssize_t Connection::Send(const char* buf, size_t len) {
  if (!tls_) return send(fd_, buf, len, MSG_NOSIGNAL);
  tls_->write_wants_read = false;
  size_t total = 0;
  while (total < len) {  // a record at a time
    size_t n = 0;
    net::TlsStream::Io io = tls_->stream->Write(buf + total, len - total, &n);
    if (io == net::TlsStream::Io::kOk) {
      total += n;
      continue;
    }
    if (total > 0) break;
    if (io == net::TlsStream::Io::kWantRead || io == net::TlsStream::Io::kWantWrite) {
      tls_->write_wants_read = io == net::TlsStream::Io::kWantRead;
      errno = EAGAIN;
      return -1;
    }
    if (io == net::TlsStream::Io::kError) server_.OnTlsError(this, tls_->stream->error());
    errno = EPIPE;
    return -1;
  }
  return static_cast<ssize_t>(total);
}

void Connection::Kill() {
  if (dead_) return;
  dead_ = true;
  // A dead connection must stop waiting at once, or the engine could hand it a job that
  // nobody will ever read before the connection is destroyed (Server::Reap).
  front_end_->OnInputClosed();
  server_.MarkClosed(this);
}

void Connection::OnResult(const command::Result& r) {
  front_end_->OnResult(r);
  server_.MarkDirty(this);
  if (front_end_->runnable()) server_.MarkRunnable(this);
}

void Connection::OnEvents(uint32_t events) {
  if (dead_) return;
  if (events & EPOLLERR) return Kill();
  if (tls_) {
    if (!tls_->stream->established()) {
      Handshake();
      if (dead_ || !tls_->stream->established()) return;
      events |= EPOLLIN;  // what the client sent after its handshake may be waiting
    }
    // A read that waits for the socket to be writable, or a write for it to be readable.
    if ((events & EPOLLOUT) && tls_->read_wants_write) events |= EPOLLIN;
    if ((events & EPOLLIN) && tls_->write_wants_read) events |= EPOLLOUT;
  }
  if (events & EPOLLIN) Read();
  if ((events & (EPOLLRDHUP | EPOLLHUP)) && front_end_->waiting_for_client()) {
    front_end_->OnInputClosed();
    server_.MarkDirty(this);
  }
  if ((events & EPOLLHUP) && !(events & EPOLLIN)) {
    // The peer is gone for both directions: nothing we write can arrive.
    return Kill();
  }
  if (events & EPOLLOUT) server_.MarkDirty(this);
}

void Connection::Read() {
  char buf[kReadChunk];
  if (tls_) tls_->more = false;
  size_t got = 0;
  for (;;) {
    ssize_t n = Receive(buf, sizeof buf);
    if (lingering) {
      if (n > 0) front_end_->Discarded(static_cast<size_t>(n));
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) ||
          (n > 0 && front_end_->linger_bytes() == 0)) {
        return Kill();
      }
      if (n < 0) return;
    } else if (n > 0) {
      char* p = front_end_->PrepareInput(static_cast<size_t>(n));
      std::copy(buf, buf + n, p);
      front_end_->CommitInput(static_cast<size_t>(n));
      server_.MarkRunnable(this);
    } else if (n == 0) {
      front_end_->OnInputClosed();
      // A peer gone with nothing left to answer ends now, before this iteration's commands
      // run: another client's `stats` no longer counts it, as in beanstalkd, which closes a
      // connection when it reads its EOF.
      if (front_end_->output().empty() && !front_end_->runnable() && !front_end_->waiting()) {
        return Kill();
      }
      server_.MarkRunnable(this);
      server_.MarkDirty(this);
      return;
    } else {
      if (errno != EAGAIN && errno != EINTR) Kill();
      return;
    }
    // TLS: bytes already taken from the socket may wait inside the stream, and no poll
    // would say so. They are read now, up to a budget per event and the input bound; what
    // is left is read later without an event (UpdateInterest lists the connection).
    if (!tls_ || !tls_->stream->pending()) return;
    got += static_cast<size_t>(n);
    if (got >= kMaxBufferedInput ||
        (!lingering && front_end_->buffered_input() >= kMaxBufferedInput)) {
      tls_->more = true;
      return UpdateInterest();
    }
  }
}

bool Connection::Flush() {
  std::string& out = front_end_->output();
  if (!out.empty()) {
    ssize_t n = Send(out.data(), out.size());
    if (n < 0) {
      if (errno != EAGAIN && errno != EINTR) return false;
    } else {
      out.erase(0, static_cast<size_t>(n));
    }
    // The stall clock runs while the buffer is at or above the high-water mark and restarts
    // whenever the peer takes some of it. A partial send that leaves the buffer above the
    // mark must start it too: if the peer then reads nothing, no EPOLLOUT and no EAGAIN
    // ever come, and the client would hold its buffer forever.
    if (out.size() < command::FrontEnd::kOutputHighWater) {
      blocked_since_ = 0;
    } else if (n > 0 || blocked_since_ == 0) {
      blocked_since_ = server_.clock().Now();
      server_.MarkBlocked(this);
    }
  }
  bool runnable = front_end_->runnable();
  if (out.empty()) {
    if (front_end_->closing()) return Linger();
    // The peer sent its last byte and every complete command in it has been answered
    // (a trailing partial command can never complete).
    if (front_end_->input_closed() && !runnable && !front_end_->waiting()) return false;
    if (out.capacity() > front_end_->output_keep()) std::string().swap(out);
  }
  if (runnable && out.size() < command::FrontEnd::kOutputHighWater) {
    server_.MarkRunnable(this);
  }
  UpdateInterest();
  return true;
}

bool Connection::Linger() {
  if (lingering) return true;
  if (front_end_->input_closed() || front_end_->linger_bytes() == 0) return false;
  // TLS: close_notify goes before the FIN, or the client sees its stream cut short.
  if (tls_) tls_->stream->Shutdown();
  if (shutdown(fd_, SHUT_WR) != 0) return false;
  lingering = true;
  UpdateInterest();
  return true;
}

void Connection::UpdateInterest() {
  uint32_t want = 0;
  if (tls_ && !tls_->stream->established()) {
    want = tls_->handshake_wants_write ? EPOLLOUT : EPOLLIN;
  } else {
    WantedEvents(&want);
    if (tls_ && tls_->read_wants_write) want |= EPOLLOUT;
    if (tls_ && tls_->write_wants_read) want |= EPOLLIN;
  }
  if (tls_ && (want & EPOLLIN)) {
    // Decrypted input left in the stream is read once the connection reads again.
    if (tls_->more) server_.MarkTlsReadable(this);
    // A partial record's clock starts again when reading does (tls_waiting_since).
    if (tls_->started != 0 && tls_->stream->established() && !(interest_ & EPOLLIN)) {
      tls_->started = server_.clock().Now();
      server_.WatchTls(this);
    }
  }
  static_assert((EPOLLIN | EPOLLOUT | EPOLLRDHUP) <= UINT16_MAX);
  if (want == interest_) return;
  interest_ = static_cast<uint16_t>(want);
  server_.loop().Modify(fd_, want, this);
}

void Connection::WantedEvents(uint32_t* events) const {
  uint32_t& want = *events;
  const command::FrontEnd& c = *front_end_;
  // Input is read ahead while a reserve waits and while held (-f 0: the replies wait for
  // a sync, and nothing runs until then), up to the input bound: the commands wait behind,
  // and a connection going from served to waiting or held and back costs no epoll_ctl. A
  // hang-up is watched for whenever input is read, and while waiting even when it is not
  // (a waiting reserve ends when its client goes away); never while neither, or a
  // half-closed peer would wake the loop on every poll. A held connection's output waits
  // for the sync.
  if (!c.closing() && !c.input_closed()) {
    if (c.buffered_input() < kMaxBufferedInput &&
        front_end_->output().size() < command::FrontEnd::kOutputHighWater) {
      want |= EPOLLIN | EPOLLRDHUP;
    } else if (c.waiting_for_client() && !on_held) {
      want |= EPOLLRDHUP;
    }
  }
  if (!front_end_->output().empty() && !on_held) want |= EPOLLOUT;
  if (lingering) want = EPOLLIN | EPOLLRDHUP;
}

}  // namespace stalkd::server
