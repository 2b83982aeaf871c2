#include "http/metrics.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

namespace stalkd::http {
namespace {

constexpr Nanos kMicro = 1000;
constexpr Nanos kMilli = 1000'000;

std::string WriteAll(MetricsWriter* w, size_t budget = 1'000'000) {
  std::string out;
  while (w->WriteSome(&out, budget)) {
  }
  return out;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The value of the sample whose name and labels are `series` exactly, or "" if none.
std::string Sample(const std::string& text, const std::string& series) {
  for (const std::string& line : Lines(text)) {
    if (line.starts_with(series + " ")) return line.substr(series.size() + 1);
  }
  return "";
}

command::TubeStats Tube(std::string_view name, uint64_t ready) {
  command::TubeStats t;
  t.name = name;
  t.ready = ready;
  t.total_jobs = ready * 10;
  t.pause_s = 5;
  t.default_tries = 3;
  return t;
}

// A small server: a few values of every kind, two tubes, some observations.
class MetricsTest : public ::testing::Test {
 protected:
  MetricsTest() : metrics_(3), writer_(&metrics_) {
    stats_.ready = 7;
    stats_.urgent = 2;
    stats_.cmds[static_cast<size_t>(command::Verb::kPut)] = 11;
    stats_.cmds[static_cast<size_t>(command::Verb::kTubeTries)] = 4;
    stats_.total_jobs = 12;
    stats_.draining = true;
    stats_.memory_used = 1 << 20;
    stats_.memory_limit = 1 << 30;
    stats_.host.pid = 4242;
    stats_.host.version = "1.13-stalkd";
    stats_.host.hostname = "host \"with\" \\quotes\\\nand a newline";
    stats_.host.utime_us = 1'500'000;
    stats_.host.stime_us = 250;
    binlog_.live_bytes = 1000;
    binlog_.dead_bytes = 24;
    binlog_.segments = 2;
    metrics_.ObserveCommand(command::Verb::kPut, 70 * kMicro);
    metrics_.ObserveCommand(command::Verb::kReserveWithTimeout, 3 * kSecond);
    metrics_.ObserveHttp("publish", 201, 2 * kMilli);
    metrics_.ObserveHttp("publish", 201, 3 * kMilli);
    metrics_.ObserveHttp("publish", 429, 1 * kMilli);
    metrics_.ObserveHttp("consume", 404, 10 * kSecond);
    metrics_.ObserveBinlogSync(4 * kMilli);
    metrics_.ObserveQueueLatency("ns/q", 5 * kMilli);
    metrics_.ObserveRunTime("ns/q", 120 * kSecond);
  }
  std::string Write() {
    writer_.Begin(stats_, binlog_);
    writer_.AddTube(Tube("default", 1));
    writer_.AddTube(Tube("ns/q", 2));
    return WriteAll(&writer_);
  }

  command::ServerStats stats_;
  BinlogMetrics binlog_;
  Metrics metrics_;
  MetricsWriter writer_;
};

TEST(HistogramTest, BucketsAreInclusiveUpperBounds) {
  Histogram h;
  h.Observe(50 * kMicro);      // the first bound itself
  h.Observe(50 * kMicro + 1);  // just above it
  h.Observe(-5);               // counted as 0
  h.Observe(60 * kSecond);
  h.Observe(61 * kSecond);  // +Inf
  EXPECT_EQ(h.count(), 5u);
  EXPECT_EQ(h.bucket(0), 2u);
  EXPECT_EQ(h.bucket(1), 1u);
  EXPECT_EQ(h.bucket(Histogram::kBuckets - 1), 1u);
  EXPECT_EQ(h.bucket(Histogram::kBuckets), 1u);
  EXPECT_EQ(h.sum_s(), 121u);
  EXPECT_EQ(h.sum_ns(), 100'001u);
}

TEST(HistogramTest, TheSumIsExact) {
  Histogram h;
  for (int i = 0; i < 3; i++) h.Observe(kSecond - 1);
  EXPECT_EQ(h.sum_s(), 2u);
  EXPECT_EQ(h.sum_ns(), 999'999'997u);
  for (int i = 0; i < 1000; i++) h.Observe(1);
  EXPECT_EQ(h.sum_s(), 3u);
  EXPECT_EQ(h.sum_ns(), 997u);
}

TEST(HistogramTest, BoundsGrowByTwoOrTwoAndAHalf) {
  for (size_t i = 1; i < Histogram::kBuckets; i++) {
    double step =
        static_cast<double>(Histogram::kBounds[i]) / static_cast<double>(Histogram::kBounds[i - 1]);
    EXPECT_GE(step, 2.0);
    EXPECT_LE(step, 2.5);
  }
  EXPECT_EQ(Histogram::kBounds.front(), 50 * kMicro);
  EXPECT_EQ(Histogram::kBounds.back(), 60 * kSecond);
}

TEST(HistogramTest, JobTimesReachDays) {
  // The same fine buckets up to a minute, then minutes, hours and days.
  for (size_t i = 0; i < Histogram::kBuckets; i++) {
    EXPECT_EQ(JobTimeHistogram::kBounds[i], Histogram::kBounds[i]);
  }
  for (size_t i = 1; i < JobTimeHistogram::kBuckets; i++) {
    EXPECT_GT(JobTimeHistogram::kBounds[i], JobTimeHistogram::kBounds[i - 1]);
  }
  EXPECT_EQ(JobTimeHistogram::kBounds.back(), 7 * kDay);
  JobTimeHistogram h;
  h.Observe(90 * kSecond);  // 2m
  h.Observe(2 * kHour);     // 3h
  h.Observe(kDay);          // 1d, inclusive
  h.Observe(8 * kDay);      // +Inf
  auto index = [](Nanos bound) {
    return static_cast<size_t>(
        std::find(JobTimeHistogram::kBounds.begin(), JobTimeHistogram::kBounds.end(), bound) -
        JobTimeHistogram::kBounds.begin());
  };
  EXPECT_EQ(h.bucket(index(2 * kMinute)), 1u);
  EXPECT_EQ(h.bucket(index(3 * kHour)), 1u);
  EXPECT_EQ(h.bucket(index(kDay)), 1u);
  EXPECT_EQ(h.bucket(JobTimeHistogram::kBuckets), 1u);
  EXPECT_EQ(h.count(), 4u);
}

TEST_F(MetricsTest, HistogramBucketsAreCumulative) {
  std::string text = Write();
  const std::string p = "stalkd_http_request_duration_seconds_bucket{route=\"publish\",le=\"";
  EXPECT_EQ(Sample(text, p + "0.0005\"}"), "0");
  EXPECT_EQ(Sample(text, p + "0.001\"}"), "1");
  EXPECT_EQ(Sample(text, p + "0.0025\"}"), "2");
  EXPECT_EQ(Sample(text, p + "0.005\"}"), "3");
  EXPECT_EQ(Sample(text, p + "60\"}"), "3");
  EXPECT_EQ(Sample(text, p + "+Inf\"}"), "3");
  EXPECT_EQ(Sample(text, "stalkd_http_request_duration_seconds_sum{route=\"publish\"}"), "0.006");
  EXPECT_EQ(Sample(text, "stalkd_http_request_duration_seconds_count{route=\"publish\"}"), "3");
  EXPECT_EQ(Sample(text, "stalkd_command_duration_seconds_bucket{verb=\"put\",le=\"5e-05\"}"), "");
  EXPECT_EQ(Sample(text, "stalkd_command_duration_seconds_bucket{verb=\"put\",le=\"0.00005\"}"),
            "0");
  EXPECT_EQ(Sample(text, "stalkd_command_duration_seconds_bucket{verb=\"put\",le=\"0.0001\"}"),
            "1");
  EXPECT_EQ(Sample(text, "stalkd_command_duration_seconds_count{verb=\"reserve-with-timeout\"}"),
            "1");
  EXPECT_EQ(Sample(text, "stalkd_command_duration_seconds_count{verb=\"delete\"}"), "");
  EXPECT_EQ(Sample(text, "stalkd_tube_run_time_seconds_bucket{tube=\"ns/q\",le=\"+Inf\"}"), "1");
  EXPECT_EQ(Sample(text, "stalkd_tube_run_time_seconds_bucket{tube=\"ns/q\",le=\"60\"}"), "0");
  // A job's times have buckets up to days: 120 s is not lumped into +Inf.
  EXPECT_EQ(Sample(text, "stalkd_tube_run_time_seconds_bucket{tube=\"ns/q\",le=\"120\"}"), "1");
  EXPECT_EQ(Sample(text, "stalkd_tube_queue_latency_seconds_bucket{tube=\"ns/q\",le=\"3600\"}"),
            "1");
  EXPECT_EQ(Sample(text, "stalkd_tube_queue_latency_seconds_bucket{tube=\"ns/q\",le=\"604800\"}"),
            "1");
  // The server's own durations stay in buckets up to a minute.
  EXPECT_EQ(
      Sample(text, "stalkd_http_request_duration_seconds_bucket{route=\"publish\",le=\"120\"}"),
      "");
  EXPECT_EQ(Sample(text, "stalkd_binlog_sync_duration_seconds_count"), "1");
  // Every histogram series: non-decreasing buckets ending in the count.
  uint64_t last = 0;
  for (const std::string& line : Lines(text)) {
    if (line.starts_with("#")) continue;
    uint64_t v = std::stoull(line.substr(line.rfind(' ') + 1));
    if (line.find("_bucket{") == std::string::npos) continue;
    if (line.find("le=\"0.00005\"") != std::string::npos) last = 0;
    EXPECT_GE(v, last) << line;
    last = v;
  }
}

TEST_F(MetricsTest, EveryStatsValueIsWritten) {
  std::string text = Write();
  EXPECT_EQ(Sample(text, "stalkd_current_jobs_ready"), "7");
  EXPECT_EQ(Sample(text, "stalkd_current_jobs_urgent"), "2");
  EXPECT_EQ(Sample(text, "stalkd_cmd_put_total"), "11");
  EXPECT_EQ(Sample(text, "stalkd_cmd_pause_tube_total"), "0");
  EXPECT_EQ(Sample(text, "stalkd_cmd_reserve_with_timeout_total"), "0");
  EXPECT_EQ(Sample(text, "stalkd_cmd_tube_tries_total"), "4");
  EXPECT_EQ(Sample(text, "stalkd_cmd_reserve_job_total"), "");  // not in stats either
  EXPECT_EQ(Sample(text, "stalkd_cmd_quit_total"), "");
  EXPECT_EQ(Sample(text, "stalkd_total_jobs_total"), "12");
  EXPECT_EQ(Sample(text, "stalkd_draining"), "1");
  EXPECT_EQ(Sample(text, "stalkd_memory_used_bytes"), "1048576");
  EXPECT_EQ(Sample(text, "stalkd_memory_limit_bytes"), "1073741824");
  EXPECT_EQ(Sample(text, "stalkd_pid"), "4242");
  EXPECT_EQ(Sample(text, "stalkd_rusage_utime_seconds_total"), "1.5");
  EXPECT_EQ(Sample(text, "stalkd_rusage_stime_seconds_total"), "0.00025");
  EXPECT_EQ(Sample(text, "stalkd_binlog_live_bytes"), "1000");
  EXPECT_EQ(Sample(text, "stalkd_binlog_dead_bytes"), "24");
  EXPECT_EQ(Sample(text, "stalkd_tube_current_jobs_ready{tube=\"ns/q\"}"), "2");
  EXPECT_EQ(Sample(text, "stalkd_tube_total_jobs_total{tube=\"default\"}"), "10");
  EXPECT_EQ(Sample(text, "stalkd_tube_pause_seconds{tube=\"default\"}"), "5");
  EXPECT_EQ(Sample(text, "stalkd_tube_default_tries{tube=\"default\"}"), "3");
  EXPECT_EQ(Sample(text, "stalkd_http_requests_total{route=\"publish\",code=\"201\"}"), "2");
  EXPECT_EQ(Sample(text, "stalkd_http_requests_total{route=\"consume\",code=\"404\"}"), "1");
  EXPECT_EQ(Sample(text, "stalkd_metrics_other_tubes"), "0");
  // One family per key of `stats` but those that are labels of stalkd_info (version, id,
  // hostname, os, platform), and one per key of stats-tube but its name.
  std::set<std::string> families;
  for (const std::string& line : Lines(text)) {
    if (line.starts_with("# TYPE stalkd_tube_") && !line.ends_with(" histogram")) {
      families.insert(line.substr(7, line.find(' ', 7) - 7));
    }
  }
  EXPECT_EQ(families.size(), 16u);
}

TEST_F(MetricsTest, LabelValuesAreEscaped) {
  std::string text = Write();
  EXPECT_NE(text.find("hostname=\"host \\\"with\\\" \\\\quotes\\\\\\nand a newline\""),
            std::string::npos)
      << text;
  writer_.Begin(stats_, binlog_);
  writer_.AddTube(Tube("a\"b\\c", 1));
  metrics_.ObserveQueueLatency("x\"y", kMilli);
  text = WriteAll(&writer_);
  EXPECT_EQ(Sample(text, "stalkd_tube_current_jobs_ready{tube=\"a\\\"b\\\\c\"}"), "1");
  EXPECT_EQ(Sample(text, "stalkd_tube_queue_latency_seconds_count{tube=\"x\\\"y\"}"), "1");
}

TEST_F(MetricsTest, CountersEndInTotalAndFamiliesAreContiguous) {
  std::string text = Write();
  std::map<std::string, std::string> types;  // family -> type
  std::string current;
  std::set<std::string> ended;
  for (const std::string& line : Lines(text)) {
    if (line.starts_with("# HELP ")) continue;
    if (line.starts_with("# TYPE ")) {
      std::string name = line.substr(7, line.find(' ', 7) - 7);
      std::string type = line.substr(line.rfind(' ') + 1);
      EXPECT_TRUE(types.emplace(name, type).second) << "family twice: " << name;
      EXPECT_EQ(name.ends_with("_total"), type == "counter") << line;
      EXPECT_TRUE(name.starts_with("stalkd_")) << line;
      if (!current.empty()) ended.insert(current);
      current = name;
      continue;
    }
    std::string name = line.substr(0, line.find_first_of("{ "));
    if (types[current] == "histogram") {
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        if (name.ends_with(suffix)) name.resize(name.size() - strlen(suffix));
      }
    }
    EXPECT_EQ(name, current) << "sample outside its family: " << line;
    EXPECT_EQ(ended.count(name), 0u) << line;
  }
}

TEST(MetricsCapTest, TubesBeyondTheCapAreSummedUnderOther) {
  Metrics metrics(2);
  MetricsWriter writer(&metrics);
  writer.Begin(command::ServerStats(), BinlogMetrics());
  writer.AddTube(Tube("a", 1));
  writer.AddTube(Tube("b", 2));
  writer.AddTube(Tube("a", 100));  // again (the tube list changed between slices): ignored
  writer.AddTube(Tube("c", 4));
  writer.AddTube(Tube("_other", 8));  // a real tube of that name is summed too
  writer.AddTube(Tube("d", 16));
  for (const char* t : {"q1", "q2", "q3", "q4", "q1"}) metrics.ObserveQueueLatency(t, kMilli);
  std::string text = WriteAll(&writer);
  EXPECT_EQ(Sample(text, "stalkd_tube_current_jobs_ready{tube=\"a\"}"), "1");
  EXPECT_EQ(Sample(text, "stalkd_tube_current_jobs_ready{tube=\"b\"}"), "2");
  EXPECT_EQ(Sample(text, "stalkd_tube_current_jobs_ready{tube=\"_other\"}"), "28");
  EXPECT_EQ(Sample(text, "stalkd_tube_total_jobs_total{tube=\"_other\"}"), "280");
  EXPECT_EQ(Sample(text, "stalkd_tube_current_jobs_ready{tube=\"c\"}"), "");
  EXPECT_EQ(Sample(text, "stalkd_tube_pause_seconds{tube=\"a\"}"), "5");
  EXPECT_EQ(Sample(text, "stalkd_tube_pause_seconds{tube=\"_other\"}"), "");  // not additive
  EXPECT_EQ(Sample(text, "stalkd_tube_default_tries{tube=\"_other\"}"), "");
  EXPECT_EQ(Sample(text, "stalkd_metrics_other_tubes"), "3");
  EXPECT_EQ(Sample(text, "stalkd_tube_queue_latency_seconds_count{tube=\"q1\"}"), "2");
  EXPECT_EQ(Sample(text, "stalkd_tube_queue_latency_seconds_count{tube=\"q2\"}"), "1");
  EXPECT_EQ(Sample(text, "stalkd_tube_queue_latency_seconds_count{tube=\"_other\"}"), "2");
  EXPECT_EQ(Sample(text, "stalkd_tube_queue_latency_seconds_count{tube=\"q3\"}"), "");
  EXPECT_EQ(Sample(text, "stalkd_tube_run_time_seconds_count{tube=\"_other\"}"), "0");
}

TEST(MetricsCapTest, NamespacesSumTheirTubesWithinTheCap) {
  Metrics metrics(2);
  MetricsWriter writer(&metrics);
  writer.Begin(command::ServerStats(), BinlogMetrics());
  for (auto [name, ready] : std::initializer_list<std::pair<const char*, uint64_t>>{{"a/x", 1},
                                                                                    {"a/y", 2},
                                                                                    {"b/x", 4},
                                                                                    {"a/x", 100},
                                                                                    {"plain", 8},
                                                                                    {"/q", 16},
                                                                                    {"c/q", 32},
                                                                                    {"d/q", 64}}) {
    writer.AddTube(Tube(name, ready));
  }
  for (const char* t : {"a/x", "a/y", "plain", "b/x", "c/q", "d/q"}) {
    metrics.ObserveQueueLatency(t, kMilli);
  }
  std::string text = WriteAll(&writer);
  // Every tube of the namespace counts, also those beyond the tube cap (a/y, b/x); "plain"
  // and "/q" are of none; c and d are beyond the namespace cap.
  const std::pair<const char*, const char*> kWant[] = {
      {"current_jobs_ready{namespace=\"a\"}", "3"},
      {"total_jobs_total{namespace=\"a\"}", "30"},
      {"current_jobs_ready{namespace=\"b\"}", "4"},
      {"current_jobs_ready{namespace=\"_other\"}", "96"},
      {"current_jobs_ready{namespace=\"c\"}", ""},
      {"current_jobs_ready{namespace=\"plain\"}", ""},
      {"reserved_jobs_total{namespace=\"a\"}", "2"},
      {"reserved_jobs_total{namespace=\"b\"}", "1"},
      {"reserved_jobs_total{namespace=\"_other\"}", "2"},
  };
  for (const auto& [series, value] : kWant) {
    EXPECT_EQ(Sample(text, std::string("stalkd_namespace_") + series), value) << series;
  }
}

TEST(MetricsCapTest, CappedSeriesSlots) {
  using Series = CappedSeries<int>;
  Series s(1);
  Series::Slot slot;
  s.Get("x", &slot) = 1;
  EXPECT_EQ(slot, Series::Slot::kNew);
  EXPECT_EQ(s.Get("x", &slot), 1);
  EXPECT_EQ(slot, Series::Slot::kOwn);
  s.Get("y", &slot) += 2;
  EXPECT_EQ(slot, Series::Slot::kOther);
  s.Get("_other", &slot) += 3;
  EXPECT_EQ(slot, Series::Slot::kOther);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s.label(1), "_other");
  EXPECT_EQ(s.value(1), 5);
  Series none(0);
  none.Get("z", &slot);
  EXPECT_EQ(slot, Series::Slot::kOther);
}

TEST_F(MetricsTest, SlicesWriteTheSameTextWithinTheirBudget) {
  std::string whole = Write();
  writer_.Begin(stats_, binlog_);
  writer_.AddTube(Tube("default", 1));
  writer_.AddTube(Tube("ns/q", 2));
  std::string sliced;
  size_t calls = 0;
  for (bool more = true; more; calls++) {
    size_t before = sliced.size();
    more = writer_.WriteSome(&sliced, 5);
    size_t lines = static_cast<size_t>(
        std::count(sliced.begin() + static_cast<ptrdiff_t>(before), sliced.end(), '\n'));
    // Short of the budget, one more header and group may follow: at most a histogram
    // series (the first call writes the whole `stats` block).
    if (calls > 0) {
      EXPECT_LT(lines, 5u + 2 + JobTimeHistogram::kBuckets + 3);
    }
  }
  EXPECT_EQ(sliced, whole);
  EXPECT_GE(calls, 10u);
  std::string after;
  EXPECT_FALSE(writer_.WriteSome(&after, 100));
  EXPECT_EQ(after, "");
}

TEST(MetricsScaleTest, AHundredThousandTubes) {
  Metrics metrics;  // the default cap
  MetricsWriter writer(&metrics);
  writer.Begin(command::ServerStats(), BinlogMetrics());
  std::vector<std::string> names;
  for (int i = 0; i < 100'000; i++) names.push_back("tube-" + std::to_string(i));
  for (const std::string& n : names) writer.AddTube(Tube(n, 1));
  std::string text;
  size_t slices = 0;
  while (writer.WriteSome(&text, 1000)) slices++;
  EXPECT_EQ(Sample(text, "stalkd_metrics_other_tubes"), "99000");
  EXPECT_EQ(Sample(text, "stalkd_tube_current_jobs_ready{tube=\"_other\"}"), "99000");
  EXPECT_EQ(Sample(text, "stalkd_tube_current_jobs_ready{tube=\"tube-999\"}"), "1");
  EXPECT_GT(slices, 10u);
}

// The fixture's output, checked by promtool (lint included) when it is installed.
TEST_F(MetricsTest, PromtoolAcceptsTheOutput) {
  if (system("command -v promtool > /dev/null 2>&1") != 0) GTEST_SKIP() << "no promtool";
  std::string text = Write();
  char in[] = "/tmp/stalkd-metrics-XXXXXX";
  int fd = mkstemp(in);
  ASSERT_GE(fd, 0);
  close(fd);
  std::string report = std::string(in) + ".out";
  std::ofstream(in) << text;
  int rc =
      system(("promtool check metrics < " + std::string(in) + " > " + report + " 2>&1").c_str());
  std::ifstream r(report);
  std::stringstream problems;
  problems << r.rdbuf();
  EXPECT_EQ(rc, 0) << problems.str();
  unlink(in);
  unlink(report.c_str());
}

}  // namespace
}  // namespace stalkd::http
