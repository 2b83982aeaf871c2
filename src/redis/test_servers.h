#pragma once

// Test helpers shared by the Redis client's unit tests (link_test.cc, cluster_test.cc): real
// redis-server and redis-sentinel child processes on free loopback ports, started from C++
// and killed by their PIDs, and a blocking one-command client. Included by *_test.cc only.

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "base/clock.h"
#include "net/event_loop.h"
#include "redis/link.h"
#include "redis/resp.h"

extern char** environ;

namespace stalkd::redis::test {

constexpr Nanos kMs = 1'000'000;

// True if nothing listens on loopback port `port` (it can be bound now).
inline bool PortFree(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

// A loopback port nothing listens on, and never the same one twice in this process (servers
// are made before they start listening). With `bus`, port + 10000 is free too (a cluster
// node's bus port).
inline int FreePort(bool bus = false) {
  static std::set<int> given;
  for (;;) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    socklen_t len = sizeof addr;
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    close(fd);
    int port = ntohs(addr.sin_port);
    if (bus && (port + 10000 > 65535 || !PortFree(port + 10000))) continue;
    if (given.insert(port).second) return port;
  }
}

inline void Sleep(Nanos d) {
  timespec ts{static_cast<time_t>(d / kSecond), static_cast<long>(d % kSecond)};
  nanosleep(&ts, nullptr);
}

// One blocking command, for the tests' own use (waiting for a server, REPLICAOF, FAILOVER),
// in database `db`: kLost if the server could not be reached or did not answer within a second.
inline Reply Call(int port, std::vector<std::string> args, int db = 0) {
  Reply lost{Reply::Type::kLost, 0, "no answer", {}};
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return lost;
  }
  std::vector<std::string_view> argv(args.begin(), args.end());
  std::string out;
  std::string db_text = std::to_string(db);
  if (db != 0) AppendCommand(out, std::vector<std::string_view>{"SELECT", db_text});
  AppendCommand(out, argv);
  if (send(fd, out.data(), out.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(out.size())) {
    close(fd);
    return lost;
  }
  ReplyReader reader;
  Reply r;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    reader.Feed(buf, static_cast<size_t>(n));
    if (db != 0 && reader.Next(&r) == 1) db = 0;  // SELECT's OK
    if (db == 0 && reader.Next(&r) == 1) {
      close(fd);
      return r;
    }
  }
  close(fd);
  return lost;
}

inline bool WaitUntil(const std::function<bool()>& done, Nanos timeout = 5 * kSecond) {
  SystemClock clock;
  Nanos end = clock.Now() + timeout;
  while (!done()) {
    if (clock.Now() >= end) return false;
    Sleep(10 * kMs);
  }
  return true;
}

// A redis-server or redis-sentinel child process on a loopback port, in its own temporary
// directory; killed (SIGKILL) by its PID.
class Server {
 public:
  // `cluster`: a cluster node (its bus port, port + 10000, free too; `extra` says the rest).
  explicit Server(std::vector<std::string> extra = {}, bool sentinel = false, bool cluster = false)
      : port_(FreePort(cluster)), extra_(std::move(extra)), sentinel_(sentinel) {
    char tmpl[] = "/tmp/stalkd-link-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  ~Server() {
    Kill();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  // Starts it and waits until it answers.
  void Start() {
    std::vector<std::string> args;
    if (sentinel_) {
      std::string conf = dir_ + "/sentinel.conf";
      std::ofstream f(conf);
      f << "port " << port_ << "\nbind 127.0.0.1\ndir " << dir_ << "\nlogfile " << dir_ << "/log\n";
      for (const std::string& line : extra_) f << line << "\n";
      f.close();
      args = {"redis-sentinel", conf};
    } else {
      args = {"redis-server",
              "--port",
              std::to_string(port_),
              "--bind",
              "127.0.0.1",
              "--save",
              "",
              "--appendonly",
              "no",
              "--daemonize",
              "no",
              "--dir",
              dir_,
              "--repl-diskless-sync-delay",
              "0"};
      args.insert(args.end(), extra_.begin(), extra_.end());
    }
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    std::string log = dir_ + "/log";
    posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT, 0644);
    ASSERT_EQ(posix_spawnp(&pid_, argv[0], &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    // Our process answers there (not another test's server that took the port meanwhile).
    std::string mine = "process_id:" + std::to_string(pid_) + "\r\n";
    ASSERT_TRUE(WaitUntil([&] {
      return Call(port_, {"INFO", "server"}).str.find(mine) != std::string::npos;
    })) << args[0]
        << " did not answer on port " << port_;
  }
  // What it logged (redis-server: its stderr; redis-sentinel: its log file), for failures.
  std::string Log() const {
    std::ifstream f(dir_ + "/log");
    return std::string(std::istreambuf_iterator<char>(f), {});
  }
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  int port_;
  std::vector<std::string> extra_;
  bool sentinel_;
  std::string dir_;
  pid_t pid_ = -1;
};

// The tests' driver of a link (Link or ClusterLink, with its test listener, which has a
// `link` member): the loop, a clock, Open(url) and running the loop until a condition holds.
template <typename L, typename Listener>
class LinkFixture : public ::testing::Test {
 protected:
  void Open(const std::string& url, Nanos retry_window = 5 * kSecond,
            std::initializer_list<std::string_view> channels = {}) {
    StoreUrl parsed;
    std::string error;
    ASSERT_TRUE(ParseStoreUrl(url, &parsed, &error)) << error;
    link_ = std::make_unique<L>(loop_, clock_, parsed, listener_, retry_window);
    listener_.link = link_.get();
    for (std::string_view c : channels) link_->Subscribe(c);
    link_->Start();
  }
  // Drives the link on the loop (sleeping as long as Poll says) until `done`.
  bool RunUntil(const std::function<bool()>& done, Nanos timeout = 5 * kSecond) {
    Nanos end = clock_.Now() + timeout;
    while (!done()) {
      Nanos next = link_->Poll();
      if (done()) break;
      Nanos now = clock_.Now();
      if (now >= end) return false;
      loop_.Poll(std::max<Nanos>(0, std::min(next, end) - now));
    }
    return true;
  }
  void RunFor(Nanos d) {
    RunUntil([] { return false; }, d);
  }

  net::EventLoop loop_;
  SystemClock clock_;
  Listener listener_;
  std::unique_ptr<L> link_;
};

}  // namespace stalkd::redis::test
