#include "server/startup_report.h"

#include <unistd.h>

#include <cstdio>

#include "net/listener.h"
#include "redis/link.h"
#include "server/version.h"

namespace stalkd::server {

namespace {

std::string Jobs(size_t n) { return std::to_string(n) + (n == 1 ? " job" : " jobs"); }

// Where the jobs are kept.
std::string Store(const Options& o) {
  if (!o.store_url.empty()) {
    return "jobs in Redis at " + redis::RedactStoreUrl(o.store_url) + " (key prefix " +
           o.store_prefix + ")";
  }
  if (!o.binlog_dir.empty()) return "jobs in memory, logged to the binlog in " + o.binlog_dir;
  return "jobs in memory only (no -b: they are lost when stalkd stops)";
}

}  // namespace

void RecoveryReport::Print(const std::string& dir, size_t jobs, size_t skipped) const {
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string line = "stalkd: binlog " + dir + ": ";
  if (jobs == 0 && skipped == 0) {
    line += "no jobs to recover";
  } else {
    char took[32];
    snprintf(took, sizeof took, "%.2f", secs);
    line += Jobs(jobs) + " recovered in " + took + " s";
    if (skipped) line += ", " + std::to_string(skipped) + " damaged records skipped";
  }
  printf("%s\n", line.c_str());
}

std::vector<std::string> StartedLines(const Options& opts, const std::vector<Listening>& fds) {
  std::vector<std::string> out;
  out.push_back("stalkd " + std::string(kVersion) + ": pid " + std::to_string(getpid()) + ", " +
                Store(opts));
  for (const Listening& l : fds) {
    if (l.fd >= 0) out.push_back("stalkd: " + l.what + " on " + net::DescribeListener(l.fd));
  }
  return out;
}

void PrintStarted(const Options& opts, const std::vector<Listening>& fds) {
  for (const std::string& line : StartedLines(opts, fds)) printf("%s\n", line.c_str());
  if (opts.verbosity > 0 && !fds.empty()) {  // beanstalkd's -V lines
    printf("pid %d\n", static_cast<int>(getpid()));
    printf("bind %d %s\n", fds[0].fd, net::DescribeListener(fds[0].fd).c_str());
  }
  fflush(stdout);
}

}  // namespace stalkd::server
