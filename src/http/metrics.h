#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/string_map.h"
#include "command/store.h"
#include "command/values.h"
#include "http/co.h"

// Prometheus metrics for GET /metrics, in the text exposition format 0.0.4
// (Content-Type: text/plain; version=0.0.4), every name under the prefix "stalkd_".
//
// Two parts: Metrics, the registry the server owns and feeds observations (latency
// histograms, HTTP request counts), and MetricsWriter, which writes one scrape: the
// registry's series plus `stats`, every tube's `stats-tube` and the binlog's numbers, in
// slices, so that 100,000 tubes never stall the event loop.
//
// Names follow the beanstalkd exporters (e.g. messagebird/beanstalkd_exporter): a stats key
// with '-' made '_' ("current-jobs-ready" -> stalkd_current_jobs_ready), a stats-tube key
// prefixed "tube_" with the tube as label tube="..." (stalkd_tube_current_jobs_ready{tube=
// "x"}); counters end in "_total" (cmd-put -> stalkd_cmd_put_total, total-jobs ->
// stalkd_total_jobs_total), and values with a unit name it in base units:
// stalkd_rusage_utime_seconds_total, stalkd_uptime_seconds, stalkd_max_job_size_bytes,
// stalkd_binlog_max_size_bytes, stalkd_memory_used_bytes, stalkd_memory_limit_bytes,
// stalkd_tube_pause_seconds, stalkd_tube_pause_time_left_seconds. `draining` is 0 or 1; the
// text keys (version, id, hostname, os, platform) are labels of stalkd_info, always 1.
//
// Histograms (all in seconds, the buckets of Histogram):
//   stalkd_command_duration_seconds{verb}        a command's time in the store, by verb
//   stalkd_http_request_duration_seconds{route}  an HTTP request's time, by route
//   stalkd_binlog_sync_duration_seconds          one binlog fsync/fdatasync
//   stalkd_tube_queue_latency_seconds{tube}      a job's time from ready to reserved
//   stalkd_tube_run_time_seconds{tube}           a job's time from reserved to deleted
// (the last two in the buckets of JobTimeHistogram, up to 7 days; the others up to 60 s)
// and the counter stalkd_http_requests_total{route,code}.
//
// Tubes: at most `max_tubes` tubes get series of their own, for the stats-tube values (in a
// scrape: the first max_tubes tubes given to AddTube) and for the two tube histograms (in
// the registry: the first max_tubes tubes observed since start; their series are never
// dropped). The rest are summed under tube="_other" (a real tube named "_other" is summed
// there too); stalkd_metrics_other_tubes counts them in a scrape. For the values that do
// not add up (pause, pause-time-left, default-tries) tube="_other" has no sample.
//
// Namespaces (lmstfy's: the tube "ns/q" is of namespace "ns"; a tube without '/' is of
// none): stalkd_namespace_current_jobs_{urgent,ready,reserved,delayed,buried} and
// stalkd_namespace_total_jobs_total{namespace}, the sums of every tube of the namespace
// (all of them, also those beyond the tube cap), and stalkd_namespace_reserved_jobs_total,
// jobs reserved for the first time since start. The same cap bounds the namespaces: the
// rest are summed under namespace="_other".
namespace stalkd::http {

// The bounds of a histogram's buckets. The server's own work (a command, an HTTP request, a
// binlog sync) in 19 buckets from 50 us to 60 s, steps of x2 and x2.5 (1-2.5-5 per decade):
// 50us 100us 250us 500us 1ms 2.5ms 5ms 10ms 25ms 50ms 100ms 250ms 500ms 1s 2.5s 5s 10s 25s
// 60s, and +Inf.
inline constexpr std::array<Nanos, 19> kLatencyBounds = {
    50'000,        100'000,        250'000,        500'000,        1'000'000,
    2'500'000,     5'000'000,      10'000'000,     25'000'000,     50'000'000,
    100'000'000,   250'000'000,    500'000'000,    1'000'000'000,  2'500'000'000,
    5'000'000'000, 10'000'000'000, 25'000'000'000, 60'000'000'000,
};
// A job's time waiting in its queue and in a worker's hands, which runs to hours and days
// for delayed or long work: the same up to 60 s, then 2m 5m 10m 30m 1h 3h 6h 12h 1d 3d 7d,
// and +Inf (30 buckets).
inline constexpr Nanos kMinute = 60 * kSecond;
inline constexpr Nanos kHour = 60 * kMinute;
inline constexpr Nanos kDay = 24 * kHour;
inline constexpr std::array<Nanos, 30> kJobTimeBounds = {
    50'000,         100'000,       250'000,       500'000,       1'000'000,      2'500'000,
    5'000'000,      10'000'000,    25'000'000,    50'000'000,    100'000'000,    250'000'000,
    500'000'000,    1'000'000'000, 2'500'000'000, 5'000'000'000, 10'000'000'000, 25'000'000'000,
    60'000'000'000, 2 * kMinute,   5 * kMinute,   10 * kMinute,  30 * kMinute,   kHour,
    3 * kHour,      6 * kHour,     12 * kHour,    kDay,          3 * kDay,       7 * kDay,
};

// Durations in the buckets of `Bounds`, and +Inf. Constant memory; Observe is O(log
// buckets). The sum is kept exactly, in whole seconds and nanoseconds, so it never
// overflows or loses precision.
template <const auto& Bounds>
class BasicHistogram {
 public:
  static constexpr size_t kBuckets = Bounds.size();  // finite bounds; +Inf is the count
  static constexpr const auto& kBounds = Bounds;

  // A negative duration counts as 0.
  void Observe(Nanos d);
  uint64_t count() const { return count_; }
  // Observations in bucket i alone: those > kBounds[i-1] and <= kBounds[i]; i == kBuckets:
  // those above the last bound. Prometheus's buckets are the running sums of these.
  uint64_t bucket(size_t i) const { return buckets_[i]; }
  uint64_t sum_s() const { return sum_s_; }    // whole seconds of the sum
  uint32_t sum_ns() const { return sum_ns_; }  // and its nanoseconds, < 1e9

 private:
  uint64_t buckets_[kBuckets + 1] = {};
  uint64_t count_ = 0;
  uint64_t sum_s_ = 0;
  uint32_t sum_ns_ = 0;
};
using Histogram = BasicHistogram<kLatencyBounds>;
using JobTimeHistogram = BasicHistogram<kJobTimeBounds>;

// Series of T by label value: at most `cap` labels get one of their own, every other label
// (and kOther itself) shares the series labelled kOther. Series are only added, in order,
// never removed, so an index stays valid and names the same series while more are added
// (a writer can go through them across event-loop iterations).
template <typename T>
class CappedSeries {
 public:
  static constexpr std::string_view kOther = "_other";
  enum class Slot : uint8_t { kNew, kOwn, kOther };  // what Get returned

  explicit CappedSeries(size_t cap) : cap_(cap) {}

  T& Get(std::string_view label, Slot* slot = nullptr) {
    Slot s = Slot::kOwn;
    auto it = index_.find(label);
    if (it == index_.end() && (label == kOther || own_ == cap_)) {
      label = kOther;
      it = index_.find(label);
    }
    if (label == kOther) s = Slot::kOther;
    if (it == index_.end()) {
      if (s != Slot::kOther) {
        s = Slot::kNew;
        own_++;
      }
      it = index_.emplace(std::string(label), series_.size()).first;
      series_.emplace_back(it->first, T{});
    }
    if (slot) *slot = s;
    return series_[it->second].second;
  }
  size_t size() const { return series_.size(); }
  const std::string& label(size_t i) const { return series_[i].first; }
  const T& value(size_t i) const { return series_[i].second; }

 private:
  size_t cap_;
  size_t own_ = 0;
  std::vector<std::pair<std::string, T>> series_;
  StringMap<size_t> index_;
};

// The registry: what the server observes between scrapes. Every Observe is O(1) but for a
// string hash (route, tube) and O(log buckets).
class Metrics {
 public:
  static constexpr size_t kDefaultMaxTubes = 1000;
  // HTTP routes are a small fixed set; this only bounds a mistake.
  static constexpr size_t kMaxRoutes = 100;

  explicit Metrics(size_t max_tubes = kDefaultMaxTubes)
      : max_tubes_(max_tubes), tubes_(max_tubes), namespace_reserves_(max_tubes) {}
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  void ObserveCommand(command::Verb verb, Nanos latency);
  // `route` names the handler, not the path ("publish", not "/api/ns/q"); `status` is the
  // HTTP status code answered.
  void ObserveHttp(std::string_view route, int status, Nanos latency);
  void ObserveBinlogSync(Nanos latency);
  void ObserveQueueLatency(std::string_view tube, Nanos ready_to_reserved);
  void ObserveRunTime(std::string_view tube, Nanos reserved_to_deleted);

  size_t max_tubes() const { return max_tubes_; }
  const Histogram& binlog_sync() const { return binlog_sync_; }

 private:
  friend class MetricsWriter;
  struct Route {
    Histogram latency;
    std::vector<std::pair<int, uint64_t>> codes;  // status -> requests, in order first seen
  };
  struct Tube {
    JobTimeHistogram queue_latency;
    JobTimeHistogram run_time;
  };

  size_t max_tubes_;
  Histogram commands_[command::kVerbCount];
  CappedSeries<Route> routes_{kMaxRoutes};
  Histogram binlog_sync_;
  CappedSeries<Tube> tubes_;
  CappedSeries<uint64_t> namespace_reserves_;  // first reserves, by namespace
};

// The binlog's numbers for a scrape, filled by the server (zeros without a binlog).
struct BinlogMetrics {
  int64_t live_bytes = 0;       // bytes of the records that still matter (living jobs, tries)
  int64_t dead_bytes = 0;       // bytes of the segment files that do not: compaction's work
  uint64_t segments = 0;        // segment files on disk (Binlog::Stats::segments)
  int64_t dropped_updates = 0;  // Binlog::Stats::dropped_updates, a counter
  bool failed = false;          // Binlog::Stats::failed: a write or sync failed
};

// Writes one scrape. Begin, then AddTube for every tube (in slices if there are many; each
// call copies what it needs, O(1)), then WriteSome until it returns false, across as many
// event-loop iterations as wanted; all AddTube calls come before the first WriteSome.
// `metrics` must outlive the writer; observations made between slices show in the
// families not yet written. Each metric family is written whole and contiguous, as
// Prometheus requires; a writer can be used again after Begin.
class MetricsWriter {
 public:
  explicit MetricsWriter(const Metrics* metrics);

  void Begin(const command::ServerStats& stats, const BinlogMetrics& binlog);
  // A tube given twice (a tube list that changed between slices) counts once, unless it is
  // one summed under "_other".
  void AddTube(const command::TubeStats& tube);
  // Appends about `budget_lines` lines to *out (a whole group at least: the `stats` block,
  // one histogram series, one route's counters, so maybe a little more); false once all is
  // written.
  bool WriteSome(std::string* out, size_t budget_lines);

  // How many values of stats-tube a tube has: one family each.
  static constexpr size_t kTubeValueCount = 16;
  // The first of them that are summed by namespace too (jobs by state, jobs created).
  static constexpr size_t kNamespaceValueCount = 6;

 private:
  struct TubeRow {
    std::array<uint64_t, kTubeValueCount> values{};
  };
  size_t WriteItem(size_t family, size_t item, std::string* out) const;
  size_t Items(size_t family) const;
  size_t WriteServer(std::string* out) const;

  const Metrics* metrics_;
  command::ServerStats stats_;
  BinlogMetrics binlog_;
  struct NamespaceRow {
    std::array<uint64_t, kNamespaceValueCount> values{};
  };
  CappedSeries<TubeRow> tubes_;
  CappedSeries<NamespaceRow> namespaces_;
  size_t other_tubes_ = 0;
  size_t family_ = 0;
  size_t item_ = 0;
  bool writing_ = false;
};

// GET /metrics: the server's stats, then every tube's (`tubes_per_step` stats-tube calls per
// step), then the text (about `lines_per_step` lines per step), into *resp.
struct Response;
Co<> Scrape(command::Session& s, const Metrics& m, BinlogMetrics binlog, Response* resp,
            size_t tubes_per_step, size_t lines_per_step);

}  // namespace stalkd::http
