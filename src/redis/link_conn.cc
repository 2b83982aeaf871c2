#include "redis/link_conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "base/check.h"

namespace stalkd::redis {

namespace {

// Reads per wake-up: a reply of a gigabyte does not hold the loop for the whole of it.
constexpr size_t kReadSize = 64 * 1024;
constexpr int kReadsPerEvent = 16;
// The slices fed to hiredis' reader (see ReplyReader::Feed).
constexpr size_t kFeedSlice = 8 * 1024;
// An output buffer left this large when empty is given back.
constexpr size_t kKeepOutput = 1024 * 1024;

std::string ErrnoText(const char* what, int err) {
  return std::string(what) + ": " + strerror(err);
}

void SetOption(int fd, int level, int name, int value) {
  setsockopt(fd, level, name, &value, sizeof value);
}

}  // namespace

bool Conn::Connect(const Endpoint& to, std::string* why) {
  Close();
  peer_ = to;
  name_ = to.host + ":" + std::to_string(to.port);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(to.port));
  if (inet_pton(AF_INET, to.host.c_str(), &addr.sin_addr) != 1) {
    *why = name_ + ": not a numeric IPv4 address";
    return false;
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *why = name_ + ": " + ErrnoText("socket", errno);
    return false;
  }
  SetOption(fd, IPPROTO_TCP, TCP_NODELAY, 1);
  // A peer that vanished (a partitioned master) is noticed in about 8 s when the connection
  // is idle, and 10 s after the oldest unacknowledged write otherwise.
  SetOption(fd, SOL_SOCKET, SO_KEEPALIVE, 1);
  SetOption(fd, IPPROTO_TCP, TCP_KEEPIDLE, 5);
  SetOption(fd, IPPROTO_TCP, TCP_KEEPINTVL, 1);
  SetOption(fd, IPPROTO_TCP, TCP_KEEPCNT, 3);
  SetOption(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, 10'000);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 && errno != EINPROGRESS) {
    *why = name_ + ": " + ErrnoText("connect", errno);
    close(fd);
    return false;
  }
  // Connected or not, the first writable event says so (OnEvents checks).
  interest_ = EPOLLIN | EPOLLOUT | EPOLLRDHUP;
  if (!loop_.Add(fd, interest_, this)) {
    *why = name_ + ": " + ErrnoText("epoll_ctl", errno);
    close(fd);
    return false;
  }
  fd_ = fd;
  connecting_ = true;
  AppendAuth();
  return true;
}

void Conn::Close() {
  if (fd_ < 0) return;
  CloseTls();
  loop_.Remove(fd_);
  close(fd_);
  fd_ = -1;
  connecting_ = false;
  generation_++;
  out_.clear();
  if (out_.capacity() > kKeepOutput) std::string().swap(out_);
  out_pos_ = 0;
  broken_.clear();
  reader_.Clear();
  auth_pending_ = false;
}

void Conn::Fail(const std::string& why) {
  Close();
  owner_.OnDown(*this, why);
}

void Conn::FailIfBroken() {
  if (fd_ >= 0 && !broken_.empty()) Fail(std::string(broken_));
}

void Conn::Flush() {
  if (fd_ < 0 || connecting_ || !broken_.empty()) return;
  Write();
}

Conn::Io Conn::SendSome(const char* data, size_t len, size_t* n, std::string* why) {
  if (tls_ != nullptr) return TlsSend(data, len, n, why);
  for (;;) {
    ssize_t r = send(fd_, data, len, MSG_NOSIGNAL);
    if (r > 0) {
      *n = static_cast<size_t>(r);
      return Io::kOk;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Io::kAgain;
    *why = ErrnoText("send", r < 0 ? errno : EIO);
    return Io::kError;
  }
}

Conn::Io Conn::ReadSome(char* buf, size_t len, size_t* n, std::string* why) {
  if (tls_ != nullptr) return TlsRead(buf, len, n, why);
  for (;;) {
    ssize_t r = read(fd_, buf, len);
    if (r > 0) {
      *n = static_cast<size_t>(r);
      return Io::kOk;
    }
    if (r == 0) return Io::kClosed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Io::kAgain;
    *why = ErrnoText("read", errno);
    return Io::kError;
  }
}

void Conn::Write() {
  while (out_pos_ < out_.size()) {
    size_t n = 0;
    std::string why;
    Io io = SendSome(out_.data() + out_pos_, out_.size() - out_pos_, &n, &why);
    if (io == Io::kOk) {
      out_pos_ += n;
      continue;
    }
    if (io == Io::kAgain) break;
    broken_ = name_ + ": " + (io == Io::kClosed ? "send: connection closed" : why);
    // The socket now polls readable (end of file), so the loop comes to OnEvents.
    shutdown(fd_, SHUT_RDWR);
    break;
  }
  if (out_pos_ == out_.size()) {
    out_.clear();
    out_pos_ = 0;
    if (out_.capacity() > kKeepOutput) std::string().swap(out_);
  } else if (out_pos_ >= kKeepOutput && out_pos_ >= out_.size() / 2) {
    out_.erase(0, out_pos_);
    out_pos_ = 0;
  }
  UpdateInterest();
}

void Conn::UpdateInterest() {
  if (fd_ < 0) return;
  uint32_t want = EPOLLIN | EPOLLRDHUP;
  // While connecting: TCP's connect ends writable; a TLS handshake says what it waits for.
  bool tcp_connecting = connecting_ && tls_ == nullptr;
  bool output = !connecting_ && out_pos_ < out_.size() && broken_.empty();
  if (tcp_connecting || output || tls_wants_write_ || tls_pending_) want |= EPOLLOUT;
  if (want == interest_) return;
  interest_ = want;
  loop_.Modify(fd_, want, this);
}

void Conn::OnEvents(uint32_t events) {
  // The flags are hints only: an event may be stale, queued for an earlier socket that had
  // the same number in the same epoll batch. So each step asks the socket itself.
  (void)events;
  if (fd_ < 0) return;
  Handle();
  owner_.AfterEvents();
}

void Conn::Handle() {
  uint64_t generation = generation_;
  tls_wants_write_ = false;
  tls_pending_ = false;
  if (connecting_) {
    if (tls_ == nullptr) {  // TCP's connect (a TLS stream starts once it is done)
      int err = 0;
      socklen_t len = sizeof err;
      if (getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      if (err != 0) return Fail(name_ + ": " + ErrnoText("connect", err));
      sockaddr_storage ss;
      socklen_t sslen = sizeof ss;
      if (getpeername(fd_, reinterpret_cast<sockaddr*>(&ss), &sslen) != 0) return;  // not yet
    }
    if (!TlsEstablished()) return;
    connecting_ = false;
    owner_.OnOpen(*this);
    if (generation != generation_) return;
  }
  if (!broken_.empty()) return Fail(std::string(broken_));
  if (out_pos_ < out_.size()) {
    Write();
    if (!broken_.empty()) return Fail(std::string(broken_));
  } else {
    UpdateInterest();
  }
  Read(generation);
}

bool Conn::Read(uint64_t generation) {
  char buf[kReadSize];
  for (int i = 0; i < kReadsPerEvent; i++) {
    size_t n = 0;
    std::string why;
    Io io = ReadSome(buf, sizeof buf, &n, &why);
    if (io == Io::kClosed) {
      Fail(name_ + ": connection closed by the server");
      return false;
    }
    if (io == Io::kError) {
      Fail(name_ + ": " + why);
      return false;
    }
    if (io == Io::kAgain) {
      UpdateInterest();  // a TLS read may wait for the socket to be writable
      return true;
    }
    for (size_t at = 0; at < n;) {
      size_t slice = std::min(kFeedSlice, n - at);
      reader_.Feed(buf + at, slice);
      at += slice;
      for (;;) {
        Reply reply;
        int got = reader_.Next(&reply);
        if (got < 0) {
          Fail(name_ + ": protocol error: " + reader_.error());
          return false;
        }
        if (got == 0) break;
        if (!Authenticated(reply)) {
          if (generation != generation_) return false;
          continue;
        }
        owner_.OnReply(*this, reply);
        if (generation != generation_) return false;
      }
    }
    // In clear a short read emptied the socket; TLS reads a record at a time, until kAgain.
    if (tls_ == nullptr && n < sizeof buf) return true;
  }
  if (tls_ != nullptr && tls_->pending() > 0) {
    tls_pending_ = true;
    UpdateInterest();
  }
  return true;
}

Waker::Waker(net::EventLoop& loop, std::function<void()> on_wake)
    : loop_(loop), on_wake_(std::move(on_wake)) {
  fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  STALKD_CHECK(fd_ >= 0);
  STALKD_CHECK(loop_.Add(fd_, EPOLLIN, this));
}

Waker::~Waker() {
  loop_.Remove(fd_);
  close(fd_);
}

void Waker::Wake() {
  if (woken_) return;
  woken_ = true;
  uint64_t one = 1;
  ssize_t n = write(fd_, &one, sizeof one);
  (void)n;  // EAGAIN: the counter is already non-zero
}

void Waker::OnEvents(uint32_t) {
  uint64_t count;
  ssize_t n = read(fd_, &count, sizeof count);
  (void)n;
  woken_ = false;
  on_wake_();
}

}  // namespace stalkd::redis
