#include "protocol/reply.h"

#include <cinttypes>
#include <cstdarg>
#include <cstdio>

namespace stalkd::protocol {

namespace {

using engine::Op;

// Appends printf-formatted text to *out.
void Appendf(std::string* out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void Appendf(std::string* out, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if (static_cast<size_t>(n) < sizeof buf) {
    out->append(buf, static_cast<size_t>(n));
    return;
  }
  std::string big(static_cast<size_t>(n) + 1, '\0');
  va_start(ap, fmt);
  vsnprintf(big.data(), big.size(), fmt, ap);
  va_end(ap);
  big.pop_back();
  out->append(big);
}

uint64_t OpCount(const engine::Engine& e, Op op) { return e.counters().ops[static_cast<int>(op)]; }

// Whole seconds of a nanosecond span, truncated toward zero as beanstalkd's C division.
int64_t Secs(Nanos d) { return d / kSecond; }

}  // namespace

std::string FormatStats(const engine::Engine& e, const HostStats& h) {
  const engine::GlobalCounters& c = e.counters();
  std::string s;
  s.reserve(1100);
  Appendf(&s,
          "---\n"
          "current-jobs-urgent: %" PRIu64
          "\n"
          "current-jobs-ready: %" PRIu64
          "\n"
          "current-jobs-reserved: %" PRIu64
          "\n"
          "current-jobs-delayed: %" PRIu64
          "\n"
          "current-jobs-buried: %" PRIu64 "\n",
          c.urgent, c.ready, c.reserved, c.delayed, c.buried);
  static constexpr struct {
    const char* key;
    Op op;
  } kOps[] = {
      {"cmd-put", Op::kPut},
      {"cmd-peek", Op::kPeek},
      {"cmd-peek-ready", Op::kPeekReady},
      {"cmd-peek-delayed", Op::kPeekDelayed},
      {"cmd-peek-buried", Op::kPeekBuried},
      {"cmd-reserve", Op::kReserve},
      {"cmd-reserve-with-timeout", Op::kReserveWithTimeout},
      {"cmd-delete", Op::kDelete},
      {"cmd-release", Op::kRelease},
      {"cmd-use", Op::kUse},
      {"cmd-watch", Op::kWatch},
      {"cmd-ignore", Op::kIgnore},
      {"cmd-bury", Op::kBury},
      {"cmd-kick", Op::kKick},
      {"cmd-touch", Op::kTouch},
      {"cmd-stats", Op::kStats},
      {"cmd-stats-job", Op::kStatsJob},
      {"cmd-stats-tube", Op::kStatsTube},
      {"cmd-list-tubes", Op::kListTubes},
      {"cmd-list-tube-used", Op::kListTubeUsed},
      {"cmd-list-tubes-watched", Op::kListTubesWatched},
      {"cmd-pause-tube", Op::kPauseTube},
  };
  for (const auto& o : kOps) Appendf(&s, "%s: %" PRIu64 "\n", o.key, OpCount(e, o.op));
  Appendf(&s,
          "job-timeouts: %" PRIu64
          "\n"
          "total-jobs: %" PRIu64
          "\n"
          "max-job-size: %zu\n"
          "current-tubes: %zu\n"
          "current-connections: %" PRIu64
          "\n"
          "current-producers: %" PRIu64
          "\n"
          "current-workers: %" PRIu64
          "\n"
          "current-waiting: %" PRIu64
          "\n"
          "total-connections: %" PRIu64 "\n",
          c.timeouts, c.total_jobs, e.max_job_size(), e.tubes().size(), c.sessions, c.producers,
          c.workers, c.waiting, c.total_sessions);
  Appendf(&s,
          "pid: %ld\n"
          "version: \"%s\"\n"
          "rusage-utime: %" PRId64 ".%06" PRId64
          "\n"
          "rusage-stime: %" PRId64 ".%06" PRId64
          "\n"
          "uptime: %" PRIu64
          "\n"
          "binlog-oldest-index: %d\n"
          "binlog-current-index: %d\n"
          "binlog-records-migrated: %" PRId64
          "\n"
          "binlog-records-written: %" PRId64
          "\n"
          "binlog-max-size: %" PRId64
          "\n"
          "draining: %s\n"
          "id: %s\n"
          "hostname: \"%s\"\n"
          "os: \"%s\"\n"
          "platform: \"%s\"\n"
          // stalkd's own keys, after all of beanstalkd's.
          "memory-used: %zu\n"
          "memory-limit: %zu\n",
          h.pid, h.version.c_str(), h.utime_us / 1000000, h.utime_us % 1000000,
          h.stime_us / 1000000, h.stime_us % 1000000, h.uptime_s, h.binlog_oldest_index,
          h.binlog_current_index, h.binlog_records_migrated, h.binlog_records_written,
          h.binlog_max_size, e.draining() ? "true" : "false", h.id.c_str(), h.hostname.c_str(),
          h.os.c_str(), h.platform.c_str(), e.memory_used(), e.max_memory());
  return s;
}

std::string FormatTubeStats(const engine::Engine& e, const engine::Tube& t) {
  int64_t pause_left = t.paused() ? Secs(t.unpause_at - e.clock().Now()) : 0;
  std::string s;
  Appendf(&s,
          "---\n"
          "name: \"%s\"\n"
          "current-jobs-urgent: %" PRIu64
          "\n"
          "current-jobs-ready: %zu\n"
          "current-jobs-reserved: %" PRIu64
          "\n"
          "current-jobs-delayed: %zu\n"
          "current-jobs-buried: %zu\n"
          "total-jobs: %" PRIu64
          "\n"
          "current-using: %u\n"
          "current-watching: %u\n"
          "current-waiting: %zu\n"
          "cmd-delete: %" PRIu64
          "\n"
          "cmd-pause-tube: %" PRIu64
          "\n"
          "pause: %" PRId64
          "\n"
          "pause-time-left: %" PRId64 "\n",
          t.name().c_str(), t.stat.urgent, t.ready.size(), t.stat.reserved, t.delayed.size(),
          t.buried.size(), t.stat.total_jobs, t.stat.using_ct, t.stat.watching_ct, t.waiters.size(),
          t.stat.deletes, t.stat.pauses, Secs(t.pause_ns), pause_left);
  return s;
}

std::string FormatJobStats(const engine::Engine& e, const engine::Job& j) {
  Nanos now = e.clock().Now();
  engine::JobState state = j.state();
  bool timed = state == engine::JobState::kReserved || state == engine::JobState::kDelayed;
  int64_t time_left = timed ? Secs(j.deadline() - now) : 0;
  std::string s;
  Appendf(&s,
          "---\n"
          "id: %" PRIu64
          "\n"
          "tube: \"%s\"\n"
          "state: %s\n"
          "pri: %u\n"
          "age: %" PRId64
          "\n"
          "delay: %u\n"
          "ttr: %u\n"
          "time-left: %" PRId64
          "\n"
          "file: %u\n"
          "reserves: %u\n"
          "timeouts: %u\n"
          "releases: %u\n"
          "buries: %u\n"
          "kicks: %u\n",
          j.id, j.tube->name().c_str(), engine::JobStateName(state), j.pri, Secs(now - j.created()),
          j.delay_s(), j.ttr_s, time_left, e.LogFile(j), j.reserves(), j.timeouts(), j.releases(),
          j.buries(), j.kicks());
  return s;
}

std::string FormatTubeList(std::span<engine::Tube* const> tubes) {
  std::string s = "---\n";
  for (const engine::Tube* t : tubes) {
    s += "- ";
    s += t->name();
    s += '\n';
  }
  return s;
}

}  // namespace stalkd::protocol
