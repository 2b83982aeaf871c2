#include "cli/conn.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "cli/errors.h"
#include "net/tls.h"

namespace stalkd::cli {

std::string_view Reply::Word() const {
  std::string_view l = line;
  return l.substr(0, l.find(' '));
}

uint64_t Reply::Number(size_t i) const {
  std::string_view l = line;
  for (size_t k = 0; k < i; k++) {
    size_t sp = l.find(' ');
    if (sp == std::string_view::npos) return 0;
    l.remove_prefix(sp + 1);
  }
  l = l.substr(0, l.find(' '));
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(l.data(), l.data() + l.size(), v);
  return ec == std::errc() && p == l.data() + l.size() ? v : 0;
}

Address ParseAddress(std::string_view text) {
  Address a;
  if (text.substr(0, 5) == "unix:") {
    a.path = std::string(text.substr(5));
    if (a.path.empty() || a.path.size() >= sizeof(sockaddr_un{}.sun_path)) {
      throw Failure(kExitUsage,
                    "bad unix socket path in server address \"" + std::string(text) + "\"");
    }
    return a;
  }
  std::string_view host = text, port = "11300";
  if (!text.empty() && text[0] == '[') {  // [IPv6]:PORT or [IPv6]
    size_t close = text.find(']');
    if (close == std::string_view::npos) {
      throw Failure(kExitUsage, "bad server address \"" + std::string(text) + "\"");
    }
    host = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') {
        throw Failure(kExitUsage, "bad server address \"" + std::string(text) + "\"");
      }
      port = rest.substr(1);
    }
  } else if (size_t colon = text.rfind(':');
             colon != std::string_view::npos && text.find(':') == colon) {  // HOST:PORT
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }  // else: a host name, an IPv4 address, or an IPv6 address without a port
  unsigned n = 0;
  auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), n);
  if (host.empty() || port.empty() || ec != std::errc() || p != port.data() + port.size() ||
      n == 0 || n > 65535) {
    throw Failure(kExitUsage, "bad server address \"" + std::string(text) +
                                  "\" (HOST:PORT, [IPv6]:PORT or unix:PATH)");
  }
  a.host = std::string(host);
  a.port = std::string(port);
  return a;
}

namespace {

int ConnectUnix(const std::string& path, int* err) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *err = errno;
    return -1;
  }
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  memcpy(sa.sun_path, path.data(), path.size());
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    *err = errno;
    close(fd);
    return -1;
  }
  return fd;
}

int ConnectTcp(const std::string& host, const std::string& port, std::string* why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    *why = gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      *why = strerror(errno);
      continue;
    }
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
    *why = strerror(errno);
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd >= 0) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return fd;
}

}  // namespace

Conn::Conn(const std::string& address, const TlsOptions& tls) : address_(address) {
  Address a = ParseAddress(address);
  std::string why;
  if (!a.path.empty()) {
    int err = 0;
    fd_ = ConnectUnix(a.path, &err);
    if (fd_ < 0) why = strerror(err);
  } else {
    fd_ = ConnectTcp(a.host, a.port, &why);
  }
  if (fd_ < 0) throw Failure(kExitConnection, "cannot connect to " + address + ": " + why);
  if (tls.on || !tls.ca.empty() || !tls.cert.empty() || !tls.key.empty()) {
    try {
      StartTls(tls, a.host);
    } catch (...) {
      close(fd_);
      throw;
    }
  }
}

Conn::~Conn() {
  if (tls_) tls_->Shutdown();
  tls_.reset();
  if (fd_ >= 0) close(fd_);
}

void Conn::Await(short events) {
  pollfd p{fd_, events, 0};
  while (poll(&p, 1, -1) < 0) {
    if (errno != EINTR) Broken("waiting for", errno);
  }
}

void Conn::StartTls(const TlsOptions& tls, const std::string& host) {
  signal(SIGPIPE, SIG_IGN);  // a TLS write to a closed connection fails instead
  net::TlsConfig config;
  config.ca_file = tls.ca;
  config.cert_file = tls.cert;
  config.key_file = tls.key;
  config.verify_peer = true;
  std::string error;
  auto ctx = net::TlsContext::Create(net::TlsContext::Role::kClient, config, &error);
  if (!ctx) throw Failure(kExitUsage, "TLS: " + error);
  fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
  tls_ = net::TlsStream::Create(*ctx, fd_, &error, host);
  if (!tls_) throw Failure(kExitUsage, "TLS: " + error);
  for (;;) {
    switch (tls_->Handshake()) {
      case net::TlsStream::Io::kOk:
        return;
      case net::TlsStream::Io::kWantRead:
        Await(POLLIN);
        break;
      case net::TlsStream::Io::kWantWrite:
        Await(POLLOUT);
        break;
      case net::TlsStream::Io::kClosed:
        throw Failure(kExitConnection, "TLS handshake with " + address_ +
                                           ": the server closed the connection (is it TLS?)");
      case net::TlsStream::Io::kError:
        throw Failure(kExitConnection, "TLS handshake with " + address_ + ": " + tls_->error());
    }
  }
}

void Conn::TlsFill(bool wait) {
  char buf[65536];
  for (;;) {
    size_t n = 0;
    switch (tls_->Read(buf, sizeof buf, &n)) {
      case net::TlsStream::Io::kOk:
        in_.append(buf, n);
        return;
      case net::TlsStream::Io::kWantRead:
        if (!wait) return;  // the socket had only TLS's own records (session tickets)
        Await(POLLIN);
        break;
      case net::TlsStream::Io::kWantWrite:
        if (!wait) return;
        Await(POLLOUT);
        break;
      case net::TlsStream::Io::kClosed:
        Broken("reading from", 0);
      case net::TlsStream::Io::kError:
        throw Failure(kExitConnection, "reading from " + address_ + ": " + tls_->error());
    }
  }
}

size_t Conn::TlsSend(const char* data, size_t len) {
  size_t n = 0;
  switch (tls_->Write(data, len, &n)) {
    case net::TlsStream::Io::kOk:
    case net::TlsStream::Io::kWantRead:
    case net::TlsStream::Io::kWantWrite:
      return n;  // Flush polls and comes back
    case net::TlsStream::Io::kClosed:
      Broken("writing to", 0);
    case net::TlsStream::Io::kError:
      break;
  }
  throw Failure(kExitConnection, "writing to " + address_ + ": " + tls_->error());
}

void Conn::SendLine(std::string_view line) {
  out_.append(line);
  out_.append("\r\n");
}

void Conn::Broken(const char* what, int err) {
  throw Failure(kExitConnection, std::string(what) + " " + address_ + ": " +
                                     (err ? strerror(err) : "connection closed by the server"));
}

void Conn::Fill() {
  if (in_pos_ > 0 && (in_pos_ == in_.size() || in_pos_ >= (1u << 20))) {
    in_.erase(0, in_pos_);  // what was read is dropped before the buffer grows
    in_pos_ = 0;
  }
  if (tls_) return TlsFill(true);
  char buf[65536];
  for (;;) {
    ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n > 0) {
      in_.append(buf, static_cast<size_t>(n));
      return;
    }
    if (n == 0) Broken("reading from", 0);
    if (errno != EINTR) Broken("reading from", errno);
  }
}

void Conn::Flush() {
  size_t done = 0;
  while (done < out_.size()) {
    pollfd p{fd_, POLLOUT | POLLIN, 0};
    if (poll(&p, 1, -1) < 0) {
      if (errno == EINTR) continue;
      Broken("waiting for", errno);
    }
    if (p.revents & POLLIN) {  // replies to earlier commands: keep them
      if (tls_) {
        TlsFill(false);
      } else {
        Fill();
      }
    }
    if (tls_ && (p.revents & (POLLOUT | POLLERR | POLLHUP))) {
      done += TlsSend(out_.data() + done, out_.size() - done);
    } else if (p.revents & (POLLOUT | POLLERR | POLLHUP)) {
      ssize_t n = send(fd_, out_.data() + done, out_.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        done += static_cast<size_t>(n);
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        Broken("writing to", errno);
      }
    }
  }
  out_.clear();
}

std::string Conn::ReadLine() {
  for (;;) {
    size_t eol = in_.find("\r\n", in_pos_);
    if (eol != std::string::npos) {
      std::string line = in_.substr(in_pos_, eol - in_pos_);
      in_pos_ = eol + 2;
      return line;
    }
    Fill();
  }
}

Reply Conn::Read() {
  if (!out_.empty()) Flush();
  Reply r;
  r.line = ReadLine();
  std::string_view w = r.Word();
  size_t size_word = w == "OK" ? 1 : (w == "RESERVED" || w == "FOUND") ? 2 : 0;
  if (size_word) {
    uint64_t n = r.Number(size_word);
    while (in_.size() - in_pos_ < n + 2) Fill();
    r.body = in_.substr(in_pos_, n);
    in_pos_ += n + 2;
  }
  return r;
}

Reply Conn::Call(std::string_view line) {
  SendLine(line);
  return Read();
}

bool Conn::WaitReadable(int ms) {
  if (in_pos_ < in_.size() || (tls_ && tls_->pending())) return true;
  pollfd p{fd_, POLLIN, 0};
  int n = poll(&p, 1, ms);
  return n > 0;
}

}  // namespace stalkd::cli
