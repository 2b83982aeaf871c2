#include "server/connection.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/server.h"

namespace stalkd::server {

Connection::Connection(Server& server, int fd) : fd_(fd), server_(server) {}

Connection::~Connection() {
  server_.loop().Remove(fd_);
  close(fd_);
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
  ssize_t n = read(fd_, buf, sizeof buf);
  if (lingering) {
    if (n > 0) front_end_->Discarded(static_cast<size_t>(n));
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) ||
        (n > 0 && front_end_->linger_bytes() == 0)) {
      Kill();
    }
    return;
  }
  if (n > 0) {
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
  } else if (errno != EAGAIN && errno != EINTR) {
    Kill();
  }
}

bool Connection::Flush() {
  std::string& out = front_end_->output();
  if (!out.empty()) {
    ssize_t n = send(fd_, out.data(), out.size(), MSG_NOSIGNAL);
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
  if (shutdown(fd_, SHUT_WR) != 0) return false;
  lingering = true;
  UpdateInterest();
  return true;
}

void Connection::UpdateInterest() {
  uint32_t want = 0;
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
  static_assert((EPOLLIN | EPOLLOUT | EPOLLRDHUP) <= UINT16_MAX);
  if (want == interest_) return;
  interest_ = static_cast<uint16_t>(want);
  server_.loop().Modify(fd_, want, this);
}

}  // namespace stalkd::server
