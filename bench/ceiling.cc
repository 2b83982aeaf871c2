// stalkd_ceiling — the ceiling of this machine for one server thread.
//
// A minimal single-threaded epoll server that speaks enough of the beanstalk protocol for the
// benchmark scenarios and answers with fixed, plausible replies: no queues, no job table, no
// timers. put -> "INSERTED <n>", reserve -> "RESERVED <n> <len>" + the last body this
// connection put (or 100 x), delete -> "DELETED", stats -> a small fixed YAML block, ...
// Whatever a real server does on top of parsing and replying is the real server's cost.
//
// Usage: stalkd_ceiling [-l 127.0.0.1] [-p 11300]

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace {

using sv = std::string_view;

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

struct Conn {
  int fd = -1;
  std::string in;
  std::size_t in_off = 0;
  std::string out;
  std::size_t out_off = 0;
  std::string last_body = std::string(100, 'x');
  bool want_out = false;
  bool closing = false;
};

const std::string kStats =
    "---\n"
    "current-jobs-urgent: 0\n"
    "current-jobs-ready: 0\n"
    "current-jobs-reserved: 0\n"
    "current-jobs-delayed: 0\n"
    "current-jobs-buried: 0\n"
    "cmd-put: 0\n"
    "current-tubes: 1\n"
    "current-connections: 1\n"
    "pid: 1\n"
    "version: \"ceiling\"\n"
    "uptime: 0\n";

class Server {
 public:
  Server(const char* host, int port) {
    lfd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (lfd_ < 0) fail("socket");
    int one = 1;
    setsockopt(lfd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
      std::fprintf(stderr, "stalkd_ceiling: bad address %s\n", host);
      std::exit(1);
    }
    if (bind(lfd_, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) fail("bind");
    if (listen(lfd_, 4096) < 0) fail("listen");
    ep_ = epoll_create1(EPOLL_CLOEXEC);
    if (ep_ < 0) fail("epoll_create1");
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListener;
    if (epoll_ctl(ep_, EPOLL_CTL_ADD, lfd_, &ev) < 0) fail("epoll_ctl");
  }

  void run() {
    std::array<epoll_event, 256> evs{};
    while (!g_stop) {
      int n = epoll_wait(ep_, evs.data(), static_cast<int>(evs.size()), 200);
      if (n < 0) {
        if (errno == EINTR) continue;
        fail("epoll_wait");
      }
      for (int i = 0; i < n; ++i) {
        const epoll_event& e = evs[static_cast<std::size_t>(i)];
        if (e.data.u64 == kListener) {
          accept_all();
          continue;
        }
        Conn* c = conns_[e.data.u64].get();
        if (!c) continue;
        if (e.events & (EPOLLIN | EPOLLERR | EPOLLHUP)) readable(*c, e.data.u64);
        if (conns_[e.data.u64] && (e.events & EPOLLOUT)) flush(*c, e.data.u64);
      }
    }
  }

 private:
  static constexpr std::uint64_t kListener = ~std::uint64_t{0};

  [[noreturn]] static void fail(const char* what) {
    std::fprintf(stderr, "stalkd_ceiling: %s: %s\n", what, std::strerror(errno));
    std::exit(1);
  }

  void accept_all() {
    for (;;) {
      int fd = accept4(lfd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR) continue;
        return;  // EAGAIN, or EMFILE etc.: try again on the next event
      }
      std::size_t slot;
      if (!free_.empty()) {
        slot = free_.back();
        free_.pop_back();
      } else {
        slot = conns_.size();
        conns_.emplace_back();
      }
      conns_[slot] = std::make_unique<Conn>();
      conns_[slot]->fd = fd;
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = slot;
      if (epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev) < 0) {
        ::close(fd);
        conns_[slot].reset();
        free_.push_back(slot);
      }
    }
  }

  void drop(std::size_t slot) {
    Conn& c = *conns_[slot];
    epoll_ctl(ep_, EPOLL_CTL_DEL, c.fd, nullptr);
    ::close(c.fd);
    conns_[slot].reset();
    free_.push_back(slot);
  }

  void readable(Conn& c, std::size_t slot) {
    for (;;) {
      ssize_t r = ::recv(c.fd, buf_.data(), buf_.size(), 0);
      if (r > 0) {
        c.in.append(buf_.data(), static_cast<std::size_t>(r));
        if (static_cast<std::size_t>(r) == buf_.size()) continue;
        break;
      }
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      drop(slot);  // EOF or error
      return;
    }
    process(c);
    flush(c, slot);
  }

  void flush(Conn& c, std::size_t slot) {
    while (c.out_off < c.out.size()) {
      ssize_t w = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
      if (w > 0) {
        c.out_off += static_cast<std::size_t>(w);
        continue;
      }
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        set_out(c, slot, true);
        return;
      }
      drop(slot);
      return;
    }
    c.out.clear();
    c.out_off = 0;
    set_out(c, slot, false);
    if (c.closing) drop(slot);
  }

  void set_out(Conn& c, std::size_t slot, bool want) {
    if (c.want_out == want) return;
    c.want_out = want;
    epoll_event ev{};
    ev.events = EPOLLIN | (want ? EPOLLOUT : 0u);
    ev.data.u64 = slot;
    epoll_ctl(ep_, EPOLL_CTL_MOD, c.fd, &ev);
  }

  static sv word(sv line, int idx) {
    std::size_t pos = 0;
    for (int i = 0; i < idx; ++i) {
      pos = line.find(' ', pos);
      if (pos == sv::npos) return {};
      ++pos;
    }
    std::size_t end = line.find(' ', pos);
    return line.substr(pos, end == sv::npos ? sv::npos : end - pos);
  }

  void reply_num(Conn& c, sv prefix, std::uint64_t n) {
    char b[32];
    auto r = std::to_chars(b, b + sizeof b, n);
    c.out.append(prefix);
    c.out.append(b, static_cast<std::size_t>(r.ptr - b));
    c.out.append("\r\n");
  }

  void reply_job(Conn& c, sv prefix, std::uint64_t id, sv body) {
    char b[64];
    auto r = std::to_chars(b, b + sizeof b, id);
    c.out.append(prefix);
    c.out.append(b, static_cast<std::size_t>(r.ptr - b));
    c.out += ' ';
    r = std::to_chars(b, b + sizeof b, body.size());
    c.out.append(b, static_cast<std::size_t>(r.ptr - b));
    c.out.append("\r\n");
    c.out.append(body);
    c.out.append("\r\n");
  }

  void process(Conn& c) {
    for (;;) {
      sv avail(c.in.data() + c.in_off, c.in.size() - c.in_off);
      std::size_t eol = avail.find("\r\n");
      if (eol == sv::npos) {
        if (avail.size() > 224) {  // beanstalkd's line limit
          c.out.append("BAD_FORMAT\r\n");
          c.in_off = c.in.size();
        }
        break;
      }
      sv line = avail.substr(0, eol);
      sv cmd = word(line, 0);
      std::size_t used = eol + 2;
      if (cmd == "put") {
        std::uint64_t n = 0;
        sv nb = word(line, 4);
        auto r = std::from_chars(nb.data(), nb.data() + nb.size(), n);
        if (r.ec != std::errc() || nb.empty()) {
          c.out.append("BAD_FORMAT\r\n");
        } else {
          if (avail.size() < eol + 2 + n + 2) break;  // wait for the body
          c.last_body.assign(avail.substr(eol + 2, n));
          used += n + 2;
          reply_num(c, "INSERTED ", ++next_id_);
        }
      } else if (cmd == "reserve" || cmd == "reserve-with-timeout" || cmd == "reserve-job") {
        reply_job(c, "RESERVED ", next_id_ ? next_id_ : 1, c.last_body);
      } else if (cmd.substr(0, 4) == "peek") {
        reply_job(c, "FOUND ", next_id_ ? next_id_ : 1, c.last_body);
      } else if (cmd == "delete") {
        c.out.append("DELETED\r\n");
      } else if (cmd == "release") {
        c.out.append("RELEASED\r\n");
      } else if (cmd == "bury") {
        c.out.append("BURIED\r\n");
      } else if (cmd == "touch") {
        c.out.append("TOUCHED\r\n");
      } else if (cmd == "kick") {
        c.out.append("KICKED 0\r\n");
      } else if (cmd == "kick-job") {
        c.out.append("KICKED\r\n");
      } else if (cmd == "use") {
        c.out.append("USING ");
        c.out.append(word(line, 1));
        c.out.append("\r\n");
      } else if (cmd == "list-tube-used") {
        c.out.append("USING default\r\n");
      } else if (cmd == "watch" || cmd == "ignore") {
        c.out.append("WATCHING 1\r\n");
      } else if (cmd == "pause-tube") {
        c.out.append("PAUSED\r\n");
      } else if (cmd.substr(0, 5) == "stats" || cmd.substr(0, 10) == "list-tubes") {
        reply_num(c, "OK ", kStats.size());
        c.out.append(kStats);
        c.out.append("\r\n");
      } else if (cmd == "quit") {
        c.closing = true;
        c.in_off = c.in.size();
        break;
      } else {
        c.out.append("UNKNOWN_COMMAND\r\n");
      }
      c.in_off += used;
    }
    if (c.in_off == c.in.size()) {
      c.in.clear();
      c.in_off = 0;
    } else if (c.in_off > 65536) {
      c.in.erase(0, c.in_off);
      c.in_off = 0;
    }
  }

  int lfd_ = -1;
  int ep_ = -1;
  std::vector<std::unique_ptr<Conn>> conns_;
  std::vector<std::size_t> free_;
  std::array<char, 65536> buf_{};
  std::uint64_t next_id_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  const char* host = "127.0.0.1";
  int port = 11300;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-l" && i + 1 < argc) host = argv[++i];
    else if (a == "-p" && i + 1 < argc) port = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: stalkd_ceiling [-l 127.0.0.1] [-p PORT]\n");
      return a == "-h" ? 0 : 1;
    }
  }
  signal(SIGPIPE, SIG_IGN);
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  Server s(host, port);
  s.run();
  return 0;
}
