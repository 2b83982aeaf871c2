#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "server/options.h"

// What stalkd says on stdout when it starts (stalkd(8), "START-UP"): where it listens, where
// its jobs are, and what the binlog brought back. Printed at every verbosity, a few lines
// once, so a service's journal shows where it is; with -V also beanstalkd's own -V lines
// ("pid N", "bind FD ADDR:PORT"), for whoever reads those.
namespace stalkd::server {

// Times a binlog recovery, from its construction to Print.
class RecoveryReport {
 public:
  RecoveryReport() : start_(std::chrono::steady_clock::now()) {}
  // "stalkd: binlog DIR: N jobs recovered in S s" (and the damaged records skipped), or
  // "...: no jobs to recover".
  void Print(const std::string& dir, size_t jobs, size_t skipped) const;

 private:
  std::chrono::steady_clock::time_point start_;
};

// A listening socket and what it serves ("beanstalkd protocol", ...).
struct Listening {
  std::string what;
  int fd;
};

// The lines once every listener is open: stalkd's version, pid and store, then one line per
// listener with its address as the socket has it (an inherited socket's too).
std::vector<std::string> StartedLines(const Options& opts, const std::vector<Listening>& fds);
void PrintStarted(const Options& opts, const std::vector<Listening>& fds);

}  // namespace stalkd::server
