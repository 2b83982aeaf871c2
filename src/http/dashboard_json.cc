#include "http/dashboard_json.h"

#include <cmath>

#include "http/dashboard_series.h"

// The dashboard API's common pieces: see dashboard_json.h.
namespace stalkd::http::dash {

using command::Outcome;
using command::Result;
using command::Session;
using command::StateFilter;

void Fail(Response* r, int status, std::string_view text) {
  Error(r, status, text);
  r->extra_headers = kApiHeaders;
}

void Ok(Response* r) {
  r->status = 200;
  r->body.clear();
  r->extra_headers = kApiHeaders;
}

std::optional<StateFilter> ParseState(std::string_view s, bool all) {
  if (s == "ready") return StateFilter::kReady;
  if (s == "delayed") return StateFilter::kDelayed;
  if (s == "reserved") return StateFilter::kReserved;
  if (s == "buried") return StateFilter::kBuried;
  if (all && s == "all") return StateFilter::kAll;
  return std::nullopt;
}

std::string_view StateName(StateFilter s) {
  switch (s) {
    case StateFilter::kReady:
      return "ready";
    case StateFilter::kDelayed:
      return "delayed";
    case StateFilter::kReserved:
      return "reserved";
    case StateFilter::kBuried:
      return "buried";
    case StateFilter::kAll:
      break;
  }
  return "all";
}
const TubeCount kTubeCounts[11] = {
    {"ready", &command::TubeStats::ready},
    {"urgent", &command::TubeStats::urgent},
    {"reserved", &command::TubeStats::reserved},
    {"delayed", &command::TubeStats::delayed},
    {"buried", &command::TubeStats::buried},
    {"waiting", &command::TubeStats::waiting},
    {"total_jobs", &command::TubeStats::total_jobs},
    {"deletes", &command::TubeStats::deletes},
    {"pauses", &command::TubeStats::pauses},
    {"expired", &command::TubeStats::expired},
    {"tries_exhausted", &command::TubeStats::tries_exhausted},
};

const ServerField kConnectionCounts[5] = {
    {"current", &command::ServerStats::connections},
    {"producers", &command::ServerStats::producers},
    {"workers", &command::ServerStats::workers},
    {"waiting", &command::ServerStats::waiting},
    {"total", &command::ServerStats::total_connections},
};
const ServerField kJobCounts[9] = {
    {"urgent", &command::ServerStats::urgent},
    {"ready", &command::ServerStats::ready},
    {"reserved", &command::ServerStats::reserved},
    {"delayed", &command::ServerStats::delayed},
    {"buried", &command::ServerStats::buried},
    {"total", &command::ServerStats::total_jobs},
    {"timeouts", &command::ServerStats::timeouts},
    {"expired", &command::ServerStats::expired},
    {"tries_exhausted", &command::ServerStats::tries_exhausted},
};
const ServerField kMemory[2] = {
    {"used", &command::ServerStats::memory_used},
    {"limit", &command::ServerStats::memory_limit},
};
namespace {

// stats-job's counters.
constexpr Field<uint32_t command::JobStats::*> kJobCounters[] = {
    {"reserves", &command::JobStats::reserves}, {"timeouts", &command::JobStats::timeouts},
    {"releases", &command::JobStats::releases}, {"buries", &command::JobStats::buries},
    {"kicks", &command::JobStats::kicks},
};

}  // namespace

const TubeCount* FindCount(std::string_view name) {
  for (const TubeCount& c : kTubeCounts) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

void Rate(JsonWriter& w, std::optional<double> r) {
  if (!r) return w.Null();
  w.Double(std::round(*r * 100) / 100);
}

Co<bool> ReadTube(Session& s, std::string_view name, TubeRow* row) {
  Result r = co_await Ask(s.StatsTube(name));
  if (r.outcome != Outcome::kTubeStats) co_return false;
  row->name = name;
  row->st = *r.tube_stats;
  row->st.name = {};
  co_return true;
}

// The job a reserve would take next (peek-ready: best priority, then lowest id) and its age.
// The session uses the tube meanwhile, then "default" again, so the dashboard's connection
// keeps no tube alive.
Co<> ReadNextReady(Session& s, TubeRow* row) {
  if (row->st.ready == 0) co_return;
  Result use = co_await Ask(s.Use(row->name));
  if (use.outcome != Outcome::kUsing) co_return;
  Result p = co_await Ask(s.PeekReady());
  if (p.outcome == Outcome::kFound) {
    uint64_t id = p.job.id;
    Result st = co_await Ask(s.StatsJob(id));
    if (st.outcome == Outcome::kJobStats) {
      row->next_id = id;
      row->next_age_s = st.job_stats->age_s;
    }
  }
  co_await Ask(s.Use(kDefaultTube));
}
void WriteTubeRow(const TubeRow& row, const DashboardHistory& h, size_t step, JsonWriter& w) {
  const command::TubeStats& t = row.st;
  w.StartObject();
  w.Key("name");
  w.String(row.name);
  WriteFields(t, kTubeCounts, w);
  w.Key("using");
  w.Uint(t.using_ct);
  w.Key("watching");
  w.Uint(t.watching_ct);
  w.Key("default_tries");
  w.Uint(t.default_tries);
  w.Key("paused");
  w.Bool(t.pause_s > 0);
  w.Key("pause_s");
  w.Int(t.pause_s);
  w.Key("pause_left_s");
  w.Int(t.pause_left_s);
  w.Key("next_ready_id");
  if (row.next_id) {
    w.Uint(*row.next_id);
  } else {
    w.Null();
  }
  w.Key("next_ready_age_s");
  if (row.next_id) {
    w.Int(row.next_age_s);
  } else {
    w.Null();
  }
  const DashboardHistory::Tube* ht = h.Find(row.name);
  DashboardHistory::Rates rates;
  if (ht) rates = h.TubeRates(*ht, kRateWindow);
  w.Key("put_rate");
  Rate(w, rates.puts);
  w.Key("reserve_rate");
  Rate(w, rates.reserves);
  w.Key("history");
  if (ht && step > 0) {
    WriteTubeHistory(h, *ht, step, w);
  } else {
    w.Null();
  }
  w.EndObject();
}

// A job's stats-job fields, with the extensions' (null where a plain job has none).
void WriteJobFields(const command::JobStats& js, JsonWriter& w) {
  w.Key("id");
  w.Uint(js.id);
  w.Key("tube");
  w.String(js.tube);
  w.Key("state");
  w.String(js.state);
  w.Key("pri");
  w.Uint(js.pri);
  w.Key("age_s");
  w.Int(js.age_s);
  w.Key("delay_s");
  w.Uint(js.delay_s);
  w.Key("ttr_s");
  w.Uint(js.ttr_s);
  w.Key("time_left_s");
  w.Int(js.time_left_s);
  w.Key("file");
  w.Uint(js.file);
  WriteFields(js, kJobCounters, w);
  w.Key("detached");
  w.Bool(js.detached);
  const command::JobExtensionStats* x = js.extension;
  w.Key("tries_left");
  if (x && x->limited) {
    w.Uint(x->tries_left);
  } else {
    w.Null();
  }
  w.Key("ttl_left_s");
  if (x && x->has_ttl) {
    w.Int(x->ttl_left_s);
  } else {
    w.Null();
  }
  w.Key("bury_reason");
  if (x && !x->bury_reason.empty()) {
    w.String(x->bury_reason);
  } else {
    w.Null();
  }
}

}  // namespace stalkd::http::dash
