#include "protocol/reply.h"

#include <cinttypes>
#include <cstdarg>
#include <cstdio>

#include "base/check.h"

namespace stalkd::protocol {

namespace {

using command::Verb;

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

// Writes n in decimal at p (at most 20 bytes); returns the end.
char* PutDecimal(char* p, uint64_t n) {
  char digits[20];
  int i = 0;
  do {
    digits[i++] = static_cast<char>('0' + n % 10);
    n /= 10;
  } while (n != 0);
  while (i > 0) *p++ = digits[--i];
  return p;
}

// "WORD n\r\n", formatted without printf (hot path).
void AppendLine(std::string_view word, uint64_t n, std::string* out) {
  char tail[32];  // " " 20 digits "\r\n"
  char* p = tail;
  *p++ = ' ';
  p = PutDecimal(p, n);
  *p++ = '\r';
  *p++ = '\n';
  out->append(word);
  out->append(tail, p);
}

// "WORD id bytes\r\n" then the body and its CRLF.
void AppendJob(std::string_view word, const command::JobView& j, std::string* out) {
  char tail[48];  // " " 20 digits " " 20 digits "\r\n"
  char* p = tail;
  *p++ = ' ';
  p = PutDecimal(p, j.id);
  *p++ = ' ';
  p = PutDecimal(p, j.body.size());
  *p++ = '\r';
  *p++ = '\n';
  out->append(word);
  out->append(tail, p);
  out->append(j.body);
  out->append("\r\n");
}

void AppendYaml(const std::string& body, std::string* out) {
  AppendLine("OK", body.size(), out);
  out->append(body);
  out->append("\r\n");
}

void AppendReservedMany(std::span<const command::JobView> jobs, std::string* out) {
  AppendLine("RESERVED-MANY", jobs.size(), out);
  for (const command::JobView& j : jobs) AppendJob("RESERVED", j, out);
}

// `key: "value"`, the value YAML-quoted (backslash and double quote escaped; anything below
// 0x20 or above 0x7e as \xNN).
void AppendQuoted(std::string* s, std::string_view key, std::string_view value) {
  s->append(key).append(": \"");
  for (char c : value) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      s->push_back('\\');
      s->push_back(c);
    } else if (u < 0x20 || u > 0x7e) {
      Appendf(s, "\\x%02x", u);
    } else {
      s->push_back(c);
    }
  }
  s->append("\"\n");
}

void AppendJobExtension(const command::JobExtensionStats& e, std::string* s) {
  if (e.limited) Appendf(s, "tries-left: %u\n", e.tries_left);
  if (!e.bury_reason.empty()) s->append("bury-reason: ").append(e.bury_reason).append("\n");
  if (e.has_ttl) Appendf(s, "ttl-left: %" PRId64 "\n", e.ttl_left_s);
  if (!e.key.empty()) AppendQuoted(s, "key", e.key);
  for (const command::Attribute& a : e.attributes) {
    AppendQuoted(s, std::string("attr.").append(a.name), a.value);
  }
}

}  // namespace

void AppendReply(const command::Result& r, std::string* out, bool extended) {
  using command::Outcome;
  switch (r.outcome) {
    case Outcome::kInserted:
      return AppendLine("INSERTED", r.number, out);
    case Outcome::kReserved:
      return AppendJob("RESERVED", r.job, out);
    case Outcome::kFound:
      return AppendJob("FOUND", r.job, out);
    case Outcome::kDeleted:
      out->append("DELETED\r\n");
      return;
    case Outcome::kReleased:
      out->append("RELEASED\r\n");
      return;
    case Outcome::kBuried:
      out->append("BURIED\r\n");
      return;
    case Outcome::kTouched:
      out->append("TOUCHED\r\n");
      return;
    case Outcome::kKicked:
      return AppendLine("KICKED", r.number, out);
    case Outcome::kKickedJob:
      out->append("KICKED\r\n");
      return;
    case Outcome::kUsing:
      out->append("USING ").append(r.name).append("\r\n");
      return;
    case Outcome::kWatching:
      return AppendLine("WATCHING", r.number, out);
    case Outcome::kPaused:
      out->append("PAUSED\r\n");
      return;
    case Outcome::kStats:
      return AppendYaml(FormatStats(*r.stats, extended), out);
    case Outcome::kTubeStats:
      return AppendYaml(FormatTubeStats(*r.tube_stats, extended), out);
    case Outcome::kJobStats:
      return AppendYaml(FormatJobStats(*r.job_stats, extended), out);
    case Outcome::kTubeList:
      return AppendYaml(FormatTubeList(*r.tubes), out);
    case Outcome::kExists:
      return AppendLine("EXISTS", r.number, out);
    case Outcome::kReservedMany:
      return AppendReservedMany(*r.jobs, out);
    case Outcome::kDeletedMany:
      return AppendLine("DELETED-MANY", r.number, out);
    case Outcome::kPurged:
      return AppendLine("PURGED", r.number, out);
    case Outcome::kJobList:
      return AppendYaml(FormatJobList(*r.ids, r.number), out);
    case Outcome::kTubeTries:
      return AppendLine("TUBE-TRIES", r.number, out);
    case Outcome::kNotFound:
      out->append("NOT_FOUND\r\n");
      return;
    case Outcome::kNotIgnored:
      out->append("NOT_IGNORED\r\n");
      return;
    case Outcome::kTimedOut:
      out->append("TIMED_OUT\r\n");
      return;
    case Outcome::kDeadlineSoon:
      out->append("DEADLINE_SOON\r\n");
      return;
    case Outcome::kDraining:
      out->append("DRAINING\r\n");
      return;
    case Outcome::kOutOfMemory:
      out->append("OUT_OF_MEMORY\r\n");
      return;
    case Outcome::kJobTooBig:
      out->append("JOB_TOO_BIG\r\n");
      return;
    case Outcome::kBadFormat:
      out->append("BAD_FORMAT\r\n");
      return;
    case Outcome::kInternalError:
      out->append("INTERNAL_ERROR\r\n");
      return;
    case Outcome::kExpectedCrlf:
      out->append("EXPECTED_CRLF\r\n");
      return;
    case Outcome::kUnknownCommand:
      out->append("UNKNOWN_COMMAND\r\n");
      return;
    case Outcome::kAuthenticated:
      out->append("AUTHENTICATED\r\n");
      return;
    case Outcome::kUnauthorized:
      out->append("UNAUTHORIZED\r\n");
      return;
    case Outcome::kForbidden:
      out->append("FORBIDDEN\r\n");
      return;
    case Outcome::kRateLimited:
      out->append("RATE_LIMITED\r\n");
      return;
    case Outcome::kPending:
      break;
  }
  STALKD_CHECK(false && "a pending result has no reply");
}

// One cmd-* line of stats.
void AppendCmd(Verb v, const command::ServerStats& c, std::string* s) {
  std::string_view name = command::VerbName(v);
  Appendf(s, "cmd-%.*s: %" PRIu64 "\n", static_cast<int>(name.size()), name.data(),
          c.cmds[static_cast<size_t>(v)]);
}

std::string FormatStats(const command::ServerStats& c, bool extended) {
  const command::HostStats& h = c.host;
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
  for (size_t v = 0; v < command::kShownVerbCount; v++) AppendCmd(static_cast<Verb>(v), c, &s);
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
          c.timeouts, c.total_jobs, c.max_job_size, c.tubes, c.connections, c.producers, c.workers,
          c.waiting, c.total_connections);
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
          "platform: \"%s\"\n",
          h.pid, h.version.c_str(), h.utime_us / 1000000, h.utime_us % 1000000,
          h.stime_us / 1000000, h.stime_us % 1000000, h.uptime_s, h.binlog_oldest_index,
          h.binlog_current_index, h.binlog_records_migrated, h.binlog_records_written,
          h.binlog_max_size, c.draining ? "true" : "false", h.id.c_str(), h.hostname.c_str(),
          h.os.c_str(), h.platform.c_str());
  if (!extended) return s;
  // stalkd's own keys (stats-ext), after all of beanstalkd's.
  Appendf(&s, "memory-used: %zu\nmemory-limit: %zu\n", c.memory_used, c.memory_limit);
  Appendf(&s, "total-expired-jobs: %" PRIu64 "\ntotal-tries-exhausted: %" PRIu64 "\n", c.expired,
          c.tries_exhausted);
  for (size_t v = command::kFirstExtensionVerb; v < command::kEndExtensionVerb; v++) {
    AppendCmd(static_cast<Verb>(v), c, &s);
  }
  if (c.disk.on) {  // docs/DISK-TIER.md
    const command::ServerStats::DiskTier& d = c.disk;
    Appendf(&s,
            "disk-tier-hot-jobs: %" PRIu64 "\ndisk-tier-cold-jobs: %" PRIu64
            "\ndisk-tier-index-bytes: %" PRIu64 "\ndisk-tier-index-bytes-per-cold-job: %" PRIu64
            "\ndisk-tier-budget: %" PRIu64 "\ndisk-tier-promotions: %" PRIu64
            "\ndisk-tier-demotions: %" PRIu64 "\ndisk-tier-waited-reads: %" PRIu64
            "\ndisk-tier-read-errors: %" PRIu64 "\ndisk-tier-rewrites: %" PRIu64 "\n",
            d.hot_jobs, d.cold_jobs, d.index_bytes, d.cold_jobs ? d.index_bytes / d.cold_jobs : 0,
            d.budget, d.promotions, d.demotions, d.waited_reads, d.read_errors, d.rewrites);
  }
  return s;
}

std::string FormatTubeStats(const command::TubeStats& t, bool extended) {
  std::string s;
  Appendf(&s,
          "---\n"
          "name: \"%.*s\"\n"
          "current-jobs-urgent: %" PRIu64
          "\n"
          "current-jobs-ready: %" PRIu64
          "\n"
          "current-jobs-reserved: %" PRIu64
          "\n"
          "current-jobs-delayed: %" PRIu64
          "\n"
          "current-jobs-buried: %" PRIu64
          "\n"
          "total-jobs: %" PRIu64
          "\n"
          "current-using: %u\n"
          "current-watching: %u\n"
          "current-waiting: %" PRIu64
          "\n"
          "cmd-delete: %" PRIu64
          "\n"
          "cmd-pause-tube: %" PRIu64
          "\n"
          "pause: %" PRId64
          "\n"
          "pause-time-left: %" PRId64 "\n",
          static_cast<int>(t.name.size()), t.name.data(), t.urgent, t.ready, t.reserved, t.delayed,
          t.buried, t.total_jobs, t.using_ct, t.watching_ct, t.waiting, t.deletes, t.pauses,
          t.pause_s, t.pause_left_s);
  if (!extended) return s;
  // stalkd's own keys (stats-tube-ext), after all of beanstalkd's.
  Appendf(&s,
          "total-expired-jobs: %" PRIu64 "\ntotal-tries-exhausted: %" PRIu64
          "\ndefault-tries: %u\n",
          t.expired, t.tries_exhausted, t.default_tries);
  return s;
}

std::string FormatJobStats(const command::JobStats& j, bool extended) {
  std::string s;
  Appendf(&s,
          "---\n"
          "id: %" PRIu64
          "\n"
          "tube: \"%.*s\"\n"
          "state: %.*s\n"
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
          j.id, static_cast<int>(j.tube.size()), j.tube.data(), static_cast<int>(j.state.size()),
          j.state.data(), j.pri, j.age_s, j.delay_s, j.ttr_s, j.time_left_s, j.file, j.reserves,
          j.timeouts, j.releases, j.buries, j.kicks);
  if (extended && j.extension) AppendJobExtension(*j.extension, &s);  // stats-job-ext
  return s;
}

std::string FormatJobList(std::span<const uint64_t> ids, uint64_t next) {
  std::string s;
  Appendf(&s, "---\nnext: %" PRIu64 "\nids:%s\n", next, ids.empty() ? " []" : "");
  for (uint64_t id : ids) Appendf(&s, "- %" PRIu64 "\n", id);
  return s;
}

std::string FormatTubeList(std::span<const std::string_view> tubes) {
  std::string s = "---\n";
  for (std::string_view t : tubes) {
    s += "- ";
    s += t;
    s += '\n';
  }
  return s;
}

}  // namespace stalkd::protocol
