#include "net/listener.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>

namespace stalkd::net {

namespace {

constexpr int kBacklog = 1024;

int ListenUnix(const std::string& path, int mode, std::string* error) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    *error = "unix socket path too long: " + path;
    return -1;
  }
  memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      *error = "file exists and is not a socket: " + path;
      return -1;
    }
    unlink(path.c_str());
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket(): ") + strerror(errno);
    return -1;
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0) {
    *error = "bind " + path + ": " + strerror(errno);
    close(fd);
    return -1;
  }
  // Permissions are set before listen(), so no client connects under the umask's.
  if (mode >= 0 && chmod(path.c_str(), static_cast<mode_t>(mode)) < 0) {
    *error = "chmod " + path + ": " + strerror(errno);
    close(fd);
    return -1;
  }
  if (listen(fd, kBacklog) < 0) {
    *error = "listen " + path + ": " + strerror(errno);
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

int Listen(const std::string& address, const std::string& port, std::string* error, int unix_mode) {
  if (address.rfind("unix:", 0) == 0) return ListenUnix(address.substr(5), unix_mode, error);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  int r = getaddrinfo(address.empty() ? nullptr : address.c_str(), port.c_str(), &hints, &res);
  if (r != 0) {
    *error = std::string("getaddrinfo(): ") + gai_strerror(r);
    return -1;
  }
  int fd = -1;
  std::string last = "no address";
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last = std::string("socket(): ") + strerror(errno);
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, kBacklog) == 0) break;
    last = std::string("bind(): ") + strerror(errno);
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd < 0) *error = last;
  return fd;
}

int InheritedListener(std::string* warning) {
  const char* pid = getenv("LISTEN_PID");
  const char* fds = getenv("LISTEN_FDS");
  if (!pid || !fds || atol(pid) != static_cast<long>(getpid())) return -1;
  long n = atol(fds);
  if (n <= 0) return -1;
  if (n > 1) warning->assign("inherited more than one listen socket; ignoring all but the first");
  const int fd = 3;  // SD_LISTEN_FDS_START
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0) return -1;
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  unsetenv("LISTEN_PID");
  unsetenv("LISTEN_FDS");
  return fd;
}

namespace {

std::string DescribeAddress(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (ss.ss_family == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(ntohs(a->sin_port));
  }
  if (ss.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(a->sin6_port));
  }
  if (ss.ss_family == AF_UNIX) {
    return std::string("unix:") + reinterpret_cast<const sockaddr_un*>(&ss)->sun_path;
  }
  return "?";
}

}  // namespace

std::string DescribeListener(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) < 0) return "?";
  return DescribeAddress(ss);
}

std::string DescribePeer(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) < 0) return "?";
  return DescribeAddress(ss);
}

}  // namespace stalkd::net
