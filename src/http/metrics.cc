#include "http/metrics.h"

#include <algorithm>
#include <charconv>

#include "base/check.h"
#include "http/exchange.h"

namespace stalkd::http {

namespace {

using command::ServerStats;
using command::TubeStats;
using command::Verb;

constexpr const char* kGauge = "gauge";
constexpr const char* kCounter = "counter";
constexpr const char* kHistogram = "histogram";

// Negative values (none expected) are written as 0.
constexpr uint64_t NonNegative(int64_t v) { return v < 0 ? 0 : static_cast<uint64_t>(v); }

// A metric family: name (after "stalkd_"), type and help.
struct Family {
  const char* name;
  const char* type;
  const char* help;
};

// A value of `stats` and how to get it.
struct ServerValue {
  Family family;
  uint64_t (*get)(const ServerStats&);
};

// clang-format off
constexpr ServerValue kServerValues[] = {
    {{"current_jobs_urgent", kGauge, "Ready jobs with priority < 1024."},
     [](const ServerStats& s) -> uint64_t { return s.urgent; }},
    {{"current_jobs_ready", kGauge, "Jobs in the ready queues."},
     [](const ServerStats& s) -> uint64_t { return s.ready; }},
    {{"current_jobs_reserved", kGauge, "Jobs reserved by all clients."},
     [](const ServerStats& s) -> uint64_t { return s.reserved; }},
    {{"current_jobs_delayed", kGauge, "Delayed jobs."},
     [](const ServerStats& s) -> uint64_t { return s.delayed; }},
    {{"current_jobs_buried", kGauge, "Buried jobs."},
     [](const ServerStats& s) -> uint64_t { return s.buried; }},
    {{"job_timeouts_total", kCounter, "Times a job's time to run ran out."},
     [](const ServerStats& s) -> uint64_t { return s.timeouts; }},
    {{"total_jobs_total", kCounter, "Jobs created."},
     [](const ServerStats& s) -> uint64_t { return s.total_jobs; }},
    {{"max_job_size_bytes", kGauge, "The largest job body allowed."},
     [](const ServerStats& s) -> uint64_t { return s.max_job_size; }},
    {{"current_tubes", kGauge, "Tubes that exist."},
     [](const ServerStats& s) -> uint64_t { return s.tubes; }},
    {{"current_connections", kGauge, "Open connections."},
     [](const ServerStats& s) -> uint64_t { return s.connections; }},
    {{"current_producers", kGauge, "Open connections that have put a job."},
     [](const ServerStats& s) -> uint64_t { return s.producers; }},
    {{"current_workers", kGauge, "Open connections that have reserved."},
     [](const ServerStats& s) -> uint64_t { return s.workers; }},
    {{"current_waiting", kGauge, "Connections waiting in a reserve."},
     [](const ServerStats& s) -> uint64_t { return s.waiting; }},
    {{"total_connections_total", kCounter, "Connections accepted."},
     [](const ServerStats& s) -> uint64_t { return s.total_connections; }},
    {{"pid", kGauge, "The server's process id."},
     [](const ServerStats& s) { return NonNegative(s.host.pid); }},
    {{"uptime_seconds", kGauge, "Seconds since the server started."},
     [](const ServerStats& s) -> uint64_t { return s.host.uptime_s; }},
    {{"binlog_oldest_index", kGauge, "The index of the oldest binlog file."},
     [](const ServerStats& s) { return NonNegative(s.host.binlog_oldest_index); }},
    {{"binlog_current_index", kGauge, "The index of the binlog file written."},
     [](const ServerStats& s) { return NonNegative(s.host.binlog_current_index); }},
    {{"binlog_records_migrated_total", kCounter, "Binlog records moved by compaction."},
     [](const ServerStats& s) { return NonNegative(s.host.binlog_records_migrated); }},
    {{"binlog_records_written_total", kCounter, "Binlog records written."},
     [](const ServerStats& s) { return NonNegative(s.host.binlog_records_written); }},
    {{"binlog_max_size_bytes", kGauge, "The size of a binlog file."},
     [](const ServerStats& s) { return NonNegative(s.host.binlog_max_size); }},
    {{"draining", kGauge, "1 if the server takes no new jobs."},
     [](const ServerStats& s) -> uint64_t { return s.draining ? 1 : 0; }},
    {{"memory_used_bytes", kGauge, "Memory the jobs and tubes use."},
     [](const ServerStats& s) -> uint64_t { return s.memory_used; }},
    {{"memory_limit_bytes", kGauge, "The memory cap (0: none)."},
     [](const ServerStats& s) -> uint64_t { return s.memory_limit; }},
    {{"total_expired_jobs_total", kCounter, "Jobs deleted by their TTL."},
     [](const ServerStats& s) -> uint64_t { return s.expired; }},
    {{"total_tries_exhausted_total", kCounter, "Jobs buried for having no tries left."},
     [](const ServerStats& s) -> uint64_t { return s.tries_exhausted; }},
};

// The values of stats-tube, as stalkd_tube_<name>{tube="..."}; `additive` ones are summed
// under tube="_other", the rest have no sample there.
struct TubeValue {
  Family family;
  bool additive;
  uint64_t (*get)(const TubeStats&);
};

constexpr TubeValue kTubeValues[] = {
    {{"tube_current_jobs_urgent", kGauge, "Ready jobs with priority < 1024 in the tube."}, true,
     [](const TubeStats& t) -> uint64_t { return t.urgent; }},
    {{"tube_current_jobs_ready", kGauge, "Jobs in the tube's ready queue."}, true,
     [](const TubeStats& t) -> uint64_t { return t.ready; }},
    {{"tube_current_jobs_reserved", kGauge, "The tube's jobs reserved by all clients."}, true,
     [](const TubeStats& t) -> uint64_t { return t.reserved; }},
    {{"tube_current_jobs_delayed", kGauge, "The tube's delayed jobs."}, true,
     [](const TubeStats& t) -> uint64_t { return t.delayed; }},
    {{"tube_current_jobs_buried", kGauge, "The tube's buried jobs."}, true,
     [](const TubeStats& t) -> uint64_t { return t.buried; }},
    {{"tube_total_jobs_total", kCounter, "Jobs created in the tube."}, true,
     [](const TubeStats& t) -> uint64_t { return t.total_jobs; }},
    {{"tube_current_using", kGauge, "Connections using the tube."}, true,
     [](const TubeStats& t) -> uint64_t { return t.using_ct; }},
    {{"tube_current_watching", kGauge, "Connections watching the tube."}, true,
     [](const TubeStats& t) -> uint64_t { return t.watching_ct; }},
    {{"tube_current_waiting", kGauge, "Connections waiting in a reserve on the tube."}, true,
     [](const TubeStats& t) -> uint64_t { return t.waiting; }},
    {{"tube_cmd_delete_total", kCounter, "Delete commands on the tube's jobs."}, true,
     [](const TubeStats& t) -> uint64_t { return t.deletes; }},
    {{"tube_cmd_pause_tube_total", kCounter, "Pause-tube commands on the tube."}, true,
     [](const TubeStats& t) -> uint64_t { return t.pauses; }},
    {{"tube_pause_seconds", kGauge, "Seconds the tube was last paused for."}, false,
     [](const TubeStats& t) -> uint64_t { return NonNegative(t.pause_s); }},
    {{"tube_pause_time_left_seconds", kGauge, "Seconds until the tube is unpaused."}, false,
     [](const TubeStats& t) -> uint64_t { return NonNegative(t.pause_left_s); }},
    {{"tube_total_expired_jobs_total", kCounter, "The tube's jobs deleted by their TTL."}, true,
     [](const TubeStats& t) -> uint64_t { return t.expired; }},
    {{"tube_total_tries_exhausted_total", kCounter,
      "The tube's jobs buried for having no tries left."}, true,
     [](const TubeStats& t) -> uint64_t { return t.tries_exhausted; }},
    {{"tube_default_tries", kGauge, "The tube's default tries (0: unlimited)."}, false,
     [](const TubeStats& t) -> uint64_t { return t.default_tries; }},
};
// clang-format on
static_assert(std::size(kTubeValues) == MetricsWriter::kTubeValueCount);

// The families after the `stats` block, in the order written.
constexpr Family kCommandFamily = {"command_duration_seconds", kHistogram,
                                   "Time a command took in the store, by verb."};
constexpr Family kHttpRequestsFamily = {"http_requests_total", kCounter,
                                        "HTTP requests answered, by route and status code."};
constexpr Family kHttpLatencyFamily = {"http_request_duration_seconds", kHistogram,
                                       "Time an HTTP request took, by route."};
constexpr Family kBinlogSyncFamily = {"binlog_sync_duration_seconds", kHistogram,
                                      "Time a binlog sync took."};
constexpr Family kQueueLatencyFamily = {"tube_queue_latency_seconds", kHistogram,
                                        "Time a job waited from ready to reserved, by tube."};
constexpr Family kRunTimeFamily = {"tube_run_time_seconds", kHistogram,
                                   "Time a job was reserved before it was deleted, by tube."};

// By namespace (the tubes "ns/..."): the sums of the first kNamespaceValueCount values of
// kTubeValues (jobs by state, jobs created), and the registry's first reserves.
constexpr Family kNamespaceValues[] = {
    {"namespace_current_jobs_urgent", kGauge, "Urgent ready jobs in the namespace's tubes."},
    {"namespace_current_jobs_ready", kGauge, "Ready jobs in the namespace's tubes."},
    {"namespace_current_jobs_reserved", kGauge, "Reserved jobs in the namespace's tubes."},
    {"namespace_current_jobs_delayed", kGauge, "Delayed jobs in the namespace's tubes."},
    {"namespace_current_jobs_buried", kGauge, "Buried jobs in the namespace's tubes."},
    {"namespace_total_jobs_total", kCounter,
     "Jobs created (put) in the namespace's tubes that exist now."},
};
static_assert(std::size(kNamespaceValues) == MetricsWriter::kNamespaceValueCount);
constexpr Family kNamespaceReservesFamily = {
    "namespace_reserved_jobs_total", kCounter,
    "Jobs of the namespace's tubes reserved for the first time, since start."};

enum FamilyIndex : size_t {
  kServerBlock,
  kCommands,
  kHttpRequests,
  kHttpLatency,
  kBinlogSync,
  kFirstTubeValue,
  kQueueLatency = kFirstTubeValue + MetricsWriter::kTubeValueCount,
  kRunTime,
  kFirstNamespaceValue,
  kNamespaceReserves = kFirstNamespaceValue + MetricsWriter::kNamespaceValueCount,
  kFamilyCount,
};

// The namespace of a tube "ns/q": "ns"; "" for a tube of none.
std::string_view NamespaceOf(std::string_view tube) {
  size_t slash = tube.find('/');
  return slash == std::string_view::npos || slash == 0 ? std::string_view() : tube.substr(0, slash);
}

// The family written at `family` (a FamilyIndex); nullptr for the `stats` block, which
// writes its own headers.
const Family* FamilyOf(size_t family) {
  switch (family) {
    case kServerBlock:
      return nullptr;
    case kCommands:
      return &kCommandFamily;
    case kHttpRequests:
      return &kHttpRequestsFamily;
    case kHttpLatency:
      return &kHttpLatencyFamily;
    case kBinlogSync:
      return &kBinlogSyncFamily;
    case kQueueLatency:
      return &kQueueLatencyFamily;
    case kRunTime:
      return &kRunTimeFamily;
    case kNamespaceReserves:
      return &kNamespaceReservesFamily;
    default:
      if (family >= kFirstNamespaceValue) return &kNamespaceValues[family - kFirstNamespaceValue];
      return &kTubeValues[family - kFirstTubeValue].family;
  }
}

void AppendUint(std::string* out, uint64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, end);
}

// s.ns seconds as a decimal, without trailing zeros: "0.00005", "12", "1.5".
void AppendSeconds(std::string* out, uint64_t s, uint32_t ns) {
  AppendUint(out, s);
  if (ns == 0) return;
  char frac[10] = ".";
  for (int i = 9; i >= 1; i--, ns /= 10) frac[i] = static_cast<char>('0' + ns % 10);
  size_t n = 10;
  while (frac[n - 1] == '0') n--;
  out->append(frac, n);
}

// A label value in the text format: backslash, double quote and newline escaped.
void AppendLabelValue(std::string* out, std::string_view v) {
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out->push_back('\\');
      out->push_back(c);
    } else if (c == '\n') {
      out->append("\\n");
    } else {
      out->push_back(c);
    }
  }
}

// `key="value"`, escaped.
std::string Label(std::string_view key, std::string_view value) {
  std::string s(key);
  s += "=\"";
  AppendLabelValue(&s, value);
  s.push_back('"');
  return s;
}

void AppendHeader(std::string* out, std::string_view name, const char* type, const char* help) {
  out->append("# HELP stalkd_").append(name).append(" ").append(help);
  out->append("\n# TYPE stalkd_").append(name).append(" ").append(type).append("\n");
}

// One sample, stalkd_<name><suffix>{<labels>}, without its value and newline.
void AppendSampleName(std::string* out, std::string_view name, std::string_view suffix,
                      std::string_view labels) {
  out->append("stalkd_").append(name).append(suffix);
  if (!labels.empty()) out->append("{").append(labels).append("}");
  out->push_back(' ');
}

// One sample with an integer value; returns the lines written (1).
size_t AppendValue(std::string* out, std::string_view name, std::string_view suffix,
                   std::string_view labels, uint64_t v) {
  AppendSampleName(out, name, suffix, labels);
  AppendUint(out, v);
  out->push_back('\n');
  return 1;
}

// One sample of s.ns seconds.
void AppendSecondsValue(std::string* out, std::string_view name, std::string_view suffix,
                        std::string_view labels, uint64_t s, uint32_t ns) {
  AppendSampleName(out, name, suffix, labels);
  AppendSeconds(out, s, ns);
  out->push_back('\n');
}

// One series of a histogram family: the cumulative buckets, the sum and the count. `labels`
// are those besides "le" ("" for none). Returns the lines written.
template <class H>
size_t AppendHistogram(std::string* out, std::string_view name, std::string_view labels,
                       const H& h) {
  std::string le(labels);
  if (!le.empty()) le.push_back(',');
  le += "le=\"";
  const size_t le_prefix = le.size();
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= H::kBuckets; i++) {
    cumulative += h.bucket(i);
    le.resize(le_prefix);
    if (i < H::kBuckets) {
      Nanos b = H::kBounds[i];
      AppendSeconds(&le, static_cast<uint64_t>(b / kSecond), static_cast<uint32_t>(b % kSecond));
    } else {
      le += "+Inf";
    }
    le.push_back('"');
    AppendValue(out, name, "_bucket", le, cumulative);
  }
  AppendSecondsValue(out, name, "_sum", labels, h.sum_s(), h.sum_ns());
  AppendValue(out, name, "_count", labels, h.count());
  return H::kBuckets + 3;
}

}  // namespace

template <const auto& Bounds>
void BasicHistogram<Bounds>::Observe(Nanos d) {
  if (d < 0) d = 0;
  size_t i =
      static_cast<size_t>(std::lower_bound(kBounds.begin(), kBounds.end(), d) - kBounds.begin());
  buckets_[i]++;
  count_++;
  sum_s_ += static_cast<uint64_t>(d / kSecond);
  sum_ns_ += static_cast<uint32_t>(d % kSecond);
  if (sum_ns_ >= kSecond) {
    sum_ns_ -= kSecond;
    sum_s_++;
  }
}

template class BasicHistogram<kLatencyBounds>;
template class BasicHistogram<kJobTimeBounds>;

void Metrics::ObserveCommand(command::Verb verb, Nanos latency) {
  commands_[static_cast<size_t>(verb)].Observe(latency);
}

void Metrics::ObserveHttp(std::string_view route, int status, Nanos latency) {
  Route& r = routes_.Get(route);
  r.latency.Observe(latency);
  auto code = std::find_if(r.codes.begin(), r.codes.end(),
                           [status](const auto& c) { return c.first == status; });
  if (code == r.codes.end()) {
    r.codes.emplace_back(status, 1);
  } else {
    code->second++;
  }
}

void Metrics::ObserveBinlogSync(Nanos latency) { binlog_sync_.Observe(latency); }

void Metrics::ObserveQueueLatency(std::string_view tube, Nanos ready_to_reserved) {
  tubes_.Get(tube).queue_latency.Observe(ready_to_reserved);
  if (std::string_view ns = NamespaceOf(tube); !ns.empty()) namespace_reserves_.Get(ns)++;
}

void Metrics::ObserveRunTime(std::string_view tube, Nanos reserved_to_deleted) {
  tubes_.Get(tube).run_time.Observe(reserved_to_deleted);
}

MetricsWriter::MetricsWriter(const Metrics* metrics)
    : metrics_(metrics), tubes_(metrics->max_tubes()), namespaces_(metrics->max_tubes()) {}

void MetricsWriter::Begin(const command::ServerStats& stats, const BinlogMetrics& binlog) {
  stats_ = stats;
  binlog_ = binlog;
  tubes_ = CappedSeries<TubeRow>(metrics_->max_tubes());
  namespaces_ = CappedSeries<NamespaceRow>(metrics_->max_tubes());
  other_tubes_ = 0;
  family_ = 0;
  item_ = 0;
  writing_ = false;
}

void MetricsWriter::AddTube(const command::TubeStats& tube) {
  STALKD_CHECK(!writing_);
  CappedSeries<TubeRow>::Slot slot;
  TubeRow& row = tubes_.Get(tube.name, &slot);
  if (slot == CappedSeries<TubeRow>::Slot::kOwn) return;  // given before
  if (slot == CappedSeries<TubeRow>::Slot::kOther) other_tubes_++;
  if (std::string_view ns = NamespaceOf(tube.name); !ns.empty()) {
    NamespaceRow& n = namespaces_.Get(ns);
    for (size_t i = 0; i < kNamespaceValueCount; i++) n.values[i] += kTubeValues[i].get(tube);
  }
  for (size_t i = 0; i < kTubeValueCount; i++) {
    const TubeValue& v = kTubeValues[i];
    if (slot == CappedSeries<TubeRow>::Slot::kNew) {
      row.values[i] = v.get(tube);
    } else if (v.additive) {
      row.values[i] += v.get(tube);
    }
  }
}

bool MetricsWriter::WriteSome(std::string* out, size_t budget_lines) {
  writing_ = true;
  size_t lines = 0;
  while (family_ < kFamilyCount && lines < budget_lines) {
    if (item_ == 0) {
      if (const Family* f = FamilyOf(family_)) {
        AppendHeader(out, f->name, f->type, f->help);
        lines += 2;
      }
    }
    if (item_ < Items(family_)) {
      lines += WriteItem(family_, item_, out);
      item_++;
    } else {
      family_++;
      item_ = 0;
    }
  }
  return family_ < kFamilyCount;
}

size_t MetricsWriter::Items(size_t family) const {
  switch (family) {
    case kServerBlock:
    case kBinlogSync:
      return 1;
    case kCommands:
      return command::kVerbCount;
    case kHttpRequests:
    case kHttpLatency:
      return metrics_->routes_.size();
    case kQueueLatency:
    case kRunTime:
      return metrics_->tubes_.size();
    case kNamespaceReserves:
      return metrics_->namespace_reserves_.size();
    default:
      return family >= kFirstNamespaceValue ? namespaces_.size() : tubes_.size();
  }
}

size_t MetricsWriter::WriteItem(size_t family, size_t item, std::string* out) const {
  const Family* f = FamilyOf(family);
  switch (family) {
    case kServerBlock:
      return WriteServer(out);
    case kCommands: {
      const Histogram& h = metrics_->commands_[item];
      return h.count() == 0
                 ? 0
                 : AppendHistogram(
                       out, f->name,
                       Label("verb", command::VerbName(static_cast<command::Verb>(item))), h);
    }
    case kHttpRequests: {
      const std::string route = Label("route", metrics_->routes_.label(item));
      const Metrics::Route& r = metrics_->routes_.value(item);
      for (const auto& [status, n] : r.codes) {
        AppendValue(out, f->name, "", route + "," + Label("code", std::to_string(status)), n);
      }
      return r.codes.size();
    }
    case kHttpLatency:
      return AppendHistogram(out, f->name, Label("route", metrics_->routes_.label(item)),
                             metrics_->routes_.value(item).latency);
    case kBinlogSync:
      return AppendHistogram(out, f->name, "", metrics_->binlog_sync_);
    case kQueueLatency:
    case kRunTime: {
      const Metrics::Tube& t = metrics_->tubes_.value(item);
      return AppendHistogram(out, f->name, Label("tube", metrics_->tubes_.label(item)),
                             family == kQueueLatency ? t.queue_latency : t.run_time);
    }
    case kNamespaceReserves:
      return AppendValue(out, f->name, "",
                         Label("namespace", metrics_->namespace_reserves_.label(item)),
                         metrics_->namespace_reserves_.value(item));
    default: {
      if (family >= kFirstNamespaceValue) {
        return AppendValue(out, f->name, "", Label("namespace", namespaces_.label(item)),
                           namespaces_.value(item).values[family - kFirstNamespaceValue]);
      }
      const TubeValue& v = kTubeValues[family - kFirstTubeValue];
      const std::string& name = tubes_.label(item);
      if (!v.additive && name == CappedSeries<TubeRow>::kOther) return 0;
      return AppendValue(out, f->name, "", Label("tube", name),
                         tubes_.value(item).values[family - kFirstTubeValue]);
    }
  }
}

size_t MetricsWriter::WriteServer(std::string* out) const {
  size_t lines = 0;
  auto scalar = [&](std::string_view name, const char* type, const char* help, uint64_t v) {
    AppendHeader(out, name, type, help);
    lines += 2 + AppendValue(out, name, "", "", v);
  };
  for (const ServerValue& v : kServerValues) {
    scalar(v.family.name, v.family.type, v.family.help, v.get(stats_));
  }
  if (const command::ServerStats::DiskTier& d = stats_.disk; d.on) {  // docs/DISK-TIER.md
    scalar("disk_tier_hot_jobs", kGauge, "Jobs in memory.", d.hot_jobs);
    scalar("disk_tier_cold_jobs", kGauge, "Jobs kept in the binlog only.", d.cold_jobs);
    scalar("disk_tier_index_bytes", kGauge, "Memory of the indexes of cold jobs.", d.index_bytes);
    scalar("disk_tier_budget_bytes", kGauge, "The memory budget for jobs (--hot-memory).",
           d.budget);
    scalar("disk_tier_promotions_total", kCounter, "Jobs read back into memory.", d.promotions);
    scalar("disk_tier_demotions_total", kCounter, "Jobs that left memory.", d.demotions);
    scalar("disk_tier_waited_reads_total", kCounter, "Reads of cold jobs a command waited for.",
           d.waited_reads);
    scalar("disk_tier_read_errors_total", kCounter, "Cold jobs that could not be read back.",
           d.read_errors);
    scalar("disk_tier_rewrites_total", kCounter,
           "Records of changed jobs written whole again so that they could leave memory.",
           d.rewrites);
  }
  // cmd-* in the order and with the keys of `stats`: beanstalkd's, then the extensions'.
  for (size_t i = 0; i < command::kEndExtensionVerb; i++) {
    if (i >= command::kShownVerbCount && i < command::kFirstExtensionVerb) continue;
    std::string name =
        "cmd_" + std::string(command::VerbName(static_cast<command::Verb>(i))) + "_total";
    std::replace(name.begin(), name.end(), '-', '_');
    std::string help =
        std::string(command::VerbName(static_cast<command::Verb>(i))) + " commands received.";
    scalar(name, kCounter, help.c_str(), stats_.cmds[i]);
  }
  const command::HostStats& h = stats_.host;
  const struct {
    const char* name;
    const char* help;
    int64_t us;
  } kCpu[] = {{"rusage_utime_seconds_total", "User CPU time of the server.", h.utime_us},
              {"rusage_stime_seconds_total", "System CPU time of the server.", h.stime_us}};
  for (const auto& c : kCpu) {
    AppendHeader(out, c.name, kCounter, c.help);
    uint64_t us = NonNegative(c.us);
    AppendSecondsValue(out, c.name, "", "", us / 1'000'000,
                       static_cast<uint32_t>(us % 1'000'000 * 1000));
    lines += 3;
  }
  AppendHeader(out, "info", kGauge, "The server's version, id, hostname, os and platform.");
  AppendValue(out, "info", "",
              Label("version", h.version) + "," + Label("id", h.id) + "," +
                  Label("hostname", h.hostname) + "," + Label("os", h.os) + "," +
                  Label("platform", h.platform),
              1);
  scalar("binlog_live_bytes", kGauge, "Binlog bytes of records that still matter.",
         NonNegative(binlog_.live_bytes));
  scalar("binlog_dead_bytes", kGauge, "Binlog bytes compaction can free.",
         NonNegative(binlog_.dead_bytes));
  scalar("binlog_segments", kGauge, "Binlog files on disk.", binlog_.segments);
  scalar("binlog_dropped_updates_total", kCounter,
         "Binlog state changes not written for lack of space.",
         NonNegative(binlog_.dropped_updates));
  scalar("binlog_failed", kGauge, "1 if a binlog write or sync failed (puts are refused).",
         binlog_.failed ? 1 : 0);
  scalar("metrics_other_tubes", kGauge,
         "Tubes beyond the cap whose stats-tube values are summed under tube=\"_other\".",
         other_tubes_);
  return lines + 3;
}

Co<> Scrape(command::Session& s, const Metrics& m, BinlogMetrics binlog, Response* resp,
            size_t tubes_per_step, size_t lines_per_step) {
  MetricsWriter writer(&m);
  command::Result st = co_await Ask(s.Stats());
  if (st.outcome == command::Outcome::kStats) writer.Begin(*st.stats, binlog);
  std::vector<std::string> tubes;
  command::Result list = co_await Ask(s.ListTubes());
  if (list.outcome == command::Outcome::kTubeList) {
    tubes.assign(list.tubes->begin(), list.tubes->end());
  }
  co_await Slice();
  for (size_t next = 0; next < tubes.size();) {
    size_t end = std::min(tubes.size(), next + tubes_per_step);
    for (; next < end; next++) {
      command::Result r = co_await Ask(s.StatsTube(tubes[next]));
      if (r.outcome == command::Outcome::kTubeStats) writer.AddTube(*r.tube_stats);
    }
    co_await Slice();
  }
  std::vector<std::string>().swap(tubes);
  for (;;) {
    bool more = writer.WriteSome(&resp->body, lines_per_step);
    if (!more) break;
    co_await Slice();
  }
  resp->status = 200;
  resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
}

}  // namespace stalkd::http
