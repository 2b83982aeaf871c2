#include <algorithm>
#include <cmath>
#include <string>

#include "http/dashboard_browse.h"
#include "http/dashboard_call.h"
#include "http/dashboard_series.h"

// The dashboard's reads, each a GET of /dashboard/api/: the server's panel, the tube list
// and a tube, a tube's jobs, a job and its body. None changes anything.
namespace stalkd::http::dash {

using command::Outcome;
using command::Result;
using command::StateFilter;

namespace {

constexpr size_t kDetailPreview = 65536;  // body bytes of a job's detail

}  // namespace

Co<> DashboardCall::Server() {
  std::optional<uint64_t> step = Number("step", 1, 1, 60);
  if (!step) co_return;
  Result r = co_await Ask(s_.Stats());
  if (r.outcome != Outcome::kStats) co_return Fail(&resp(), 500, "internal error");
  const command::ServerStats& st = *r.stats;
  const DashboardHistory& h = d_.history();
  BinlogMetrics b = d_.host().BinlogNow();
  Ok(&resp());
  JsonWriter w(&resp().body);
  w.StartObject();
  w.Key("version");
  w.String(d_.host().version());
  w.Key("pid");
  w.Int(st.host.pid);
  w.Key("hostname");
  w.String(st.host.hostname);
  w.Key("uptime_s");
  w.Uint(st.host.uptime_s);
  w.Key("draining");
  w.Bool(st.draining);
  w.Key("tubes");
  w.Uint(st.tubes);
  w.Key("connections");
  w.StartObject();
  WriteFields(st, kConnectionCounts, w);
  w.EndObject();
  w.Key("jobs");
  w.StartObject();
  WriteFields(st, kJobCounts, w);
  w.EndObject();
  w.Key("memory");
  w.StartObject();
  WriteFields(st, kMemory, w);
  w.EndObject();
  w.Key("binlog");
  w.StartObject();
  w.Key("enabled");
  w.Bool(b.segments > 0);
  w.Key("files");
  w.Uint(b.segments);
  w.Key("live_bytes");
  w.Int(b.live_bytes);
  w.Key("dead_bytes");
  w.Int(b.dead_bytes);
  w.Key("oldest_index");
  w.Int(st.host.binlog_oldest_index);
  w.Key("current_index");
  w.Int(st.host.binlog_current_index);
  w.Key("file_size");
  w.Int(st.host.binlog_max_size);
  w.Key("failed");
  w.Bool(b.failed);
  w.EndObject();
  DashboardHistory::Syncs sy = h.SyncsNow(d_.host().BinlogSyncs());
  w.Key("sync");
  w.StartObject();
  w.Key("window_s");
  w.Uint(DashboardHistory::kSyncWindow);
  w.Key("count");
  w.Uint(sy.count);
  w.Key("mean_ms");
  if (sy.mean) {
    w.Double(std::round(static_cast<double>(*sy.mean) / 1e3) / 1e3);
  } else {
    w.Null();
  }
  w.Key("p99_ms");
  if (sy.p99) {
    w.Double(static_cast<double>(*sy.p99) / 1e6);
  } else {
    w.Null();
  }
  w.EndObject();
  DashboardHistory::Rates rates = h.ServerRates(kRateWindow);
  w.Key("put_rate");
  Rate(w, rates.puts);
  w.Key("reserve_rate");
  Rate(w, rates.reserves);
  w.Key("sampling");
  w.StartObject();
  w.Key("tubes");
  w.Uint(h.tube_count());
  w.Key("max_tubes");
  w.Uint(DashboardHistory::kMaxTubes);
  w.Key("seconds");
  w.Uint(DashboardHistory::kSeconds);
  w.EndObject();
  w.Key("history");
  WriteServerHistory(h, *step, w);
  w.EndObject();
}

bool DashboardCall::ListParams(ListQuery* q, bool by_count) {
  if (auto v = target_.Query("q")) {
    q->q = *v;
    for (char& c : q->q) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
  }
  if (auto v = target_.Query("prefix")) {
    if (v->size() > command::kMaxTubeNameLength) {
      Fail(&resp(), 400, "invalid prefix");
      return false;
    }
    q->prefix = *v;
  }
  if (auto v = by_count ? target_.Query("sort") : std::nullopt) {
    q->sort = FindCount(*v);
    if (!q->sort && *v != "name") {
      Fail(&resp(), 400, "invalid sort");
      return false;
    }
  }
  if (auto v = target_.Query("order")) {
    if (*v != "asc" && *v != "desc") {
      Fail(&resp(), 400, "invalid order");
      return false;
    }
    q->desc = *v == "desc";
  } else {
    q->desc = q->sort != nullptr;  // counts: the biggest first
  }
  std::optional<uint64_t> offset = Number("offset", 0, 0, kMaxOffset);
  if (!offset) return false;
  std::optional<uint64_t> limit = Number("limit", kDefaultPage, 1, kMaxPage);
  if (!limit) return false;
  std::optional<uint64_t> step = Number("step", 5, 0, 60);
  if (!step) return false;
  q->offset = *offset;
  q->limit = static_cast<uint32_t>(*limit);
  q->step = *step;
  return true;
}

Co<> DashboardCall::Tubes() {
  ListQuery q;
  if (!ListParams(&q, true)) co_return;
  co_await SearchTubes(s_, d_, std::move(q), ex_.now, &resp());
}

Co<> DashboardCall::Tube(const std::string& name) {
  std::optional<uint64_t> step = Number("step", 1, 0, 60);
  if (!step) co_return;
  TubeRow row;
  bool exists = co_await TubeExists(name, &row);
  if (!exists) co_return;
  co_await ReadNextReady(s_, &row);
  d_.history().Track(name, ex_.now);
  Ok(&resp());
  JsonWriter w(&resp().body);
  WriteTubeRow(row, d_.history(), *step, w);
}

Co<> DashboardCall::Jobs(const std::string& tube) {
  std::optional<StateFilter> state = ParseState(target_.Query("state").value_or("ready"), false);
  if (!state) co_return Fail(&resp(), 400, "invalid state");
  std::optional<uint64_t> from = Number("from", 1, 0, UINT64_MAX);
  if (!from) co_return;
  std::optional<uint64_t> limit = Number("limit", kDefaultPage, 1, kMaxPage);
  if (!limit) co_return;
  if (!command::IsValidTubeName(tube)) co_return Fail(&resp(), 400, "invalid tube name");
  co_await ListJobsPage(s_, tube, *state, std::max<uint64_t>(*from, 1),
                        static_cast<uint32_t>(*limit), &resp());
}

Co<> DashboardCall::Job(uint64_t id) {
  Result p = co_await Ask(s_.Peek(id));
  if (p.outcome != Outcome::kFound) co_return Fail(&resp(), 404, "job not found");
  std::string body(p.job.body.substr(0, kDetailPreview));
  size_t size = p.job.body.size();
  Result st = co_await Ask(s_.StatsJob(id));
  if (st.outcome != Outcome::kJobStats) co_return Fail(&resp(), 404, "job not found");
  const command::JobStats& js = *st.job_stats;
  Ok(&resp());
  JsonWriter w(&resp().body);
  w.StartObject();
  WriteJobFields(js, w);
  w.Key("age_ms");
  w.Int(js.age_ms);
  const command::JobExtensionStats* x = js.extension;
  w.Key("key");
  if (x && !x->key.empty()) {
    w.String(x->key);
  } else {
    w.Null();
  }
  w.Key("attributes");
  w.StartObject();
  if (x) {
    for (const command::Attribute& a : x->attributes) {
      w.Key(a.name);
      w.String(a.value);
    }
  }
  w.EndObject();
  w.Key("body_size");
  w.Uint(size);
  std::string b64;
  AppendBase64(body, &b64);
  w.Key("body");
  w.String(b64);
  w.Key("body_truncated");
  w.Bool(size > body.size());
  w.EndObject();
}

Co<> DashboardCall::JobBody(uint64_t id) {
  Result p = co_await Ask(s_.Peek(id));
  if (p.outcome != Outcome::kFound) co_return Fail(&resp(), 404, "job not found");
  resp().status = 200;
  resp().body.assign(p.job.body);
  resp().content_type = "application/octet-stream";
  resp().extra_headers = kApiHeaders;
}

}  // namespace stalkd::http::dash
