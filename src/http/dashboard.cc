#include "http/dashboard.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <queue>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "http/dashboard_assets.h"
#include "http/json.h"
#include "http/response.h"
#include "http/url.h"

namespace stalkd::http {

using command::Outcome;
using command::Result;
using command::Session;
using command::StateFilter;

namespace {

// Headers of every dashboard response: nothing is cached by a proxy or sniffed; the page
// runs only the binary's own scripts and styles and cannot be framed.
constexpr std::string_view kApiHeaders =
    "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n";
constexpr std::string_view kAssetHeaders =
    "Cache-Control: no-cache\r\nX-Content-Type-Options: nosniff\r\n";
constexpr std::string_view kPageHeaders =
    "Cache-Control: no-cache\r\nX-Content-Type-Options: nosniff\r\n"
    "Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'\r\n"
    "X-Frame-Options: DENY\r\nReferrer-Policy: no-referrer\r\n";

constexpr uint32_t kDefaultPage = 50;
constexpr uint32_t kMaxPage = 200;           // tubes or jobs in one page
constexpr uint64_t kMaxOffset = 1000000;     // how deep the tube list pages
constexpr size_t kScanSlice = 2500;          // tube names a search looks at per step
constexpr size_t kStatsSlice = 250;          // stats-tube calls of a sorted search per step
constexpr uint32_t kMaxListCalls = 256;      // list-jobs calls of one browse (65536 ids each)
constexpr size_t kRowPreview = 48;           // body bytes of a job in a list
constexpr size_t kDetailPreview = 65536;     // body bytes of a job's detail
constexpr uint32_t kRespawnSlice = 1000;     // dead letters respawned per step
constexpr uint32_t kMoveListSlice = 100;     // ids a move lists per step
constexpr size_t kMoveSliceBytes = 1 << 20;  // body bytes a move copies per step (at least 1 job)
constexpr size_t kRateWindow = 10;           // seconds the rates are averaged over
constexpr std::string_view kDefaultTube = "default";

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

// stats-tube's counts as the dashboard names them: its JSON keys, the sort keys of the
// tube list, and (ready, reserved, delayed, buried) the states of list-jobs.
template <class T>
struct Field {
  std::string_view name;
  T field;
};
using TubeCount = Field<uint64_t command::TubeStats::*>;
constexpr TubeCount kTubeCounts[] = {
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

using ServerField = Field<uint64_t command::ServerStats::*>;
constexpr ServerField kConnectionCounts[] = {
    {"current", &command::ServerStats::connections},
    {"producers", &command::ServerStats::producers},
    {"workers", &command::ServerStats::workers},
    {"waiting", &command::ServerStats::waiting},
    {"total", &command::ServerStats::total_connections},
};
constexpr ServerField kJobCounts[] = {
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
constexpr ServerField kMemory[] = {
    {"used", &command::ServerStats::memory_used},
    {"limit", &command::ServerStats::memory_limit},
};
// stats-job's counters.
constexpr Field<uint32_t command::JobStats::*> kJobCounters[] = {
    {"reserves", &command::JobStats::reserves}, {"timeouts", &command::JobStats::timeouts},
    {"releases", &command::JobStats::releases}, {"buries", &command::JobStats::buries},
    {"kicks", &command::JobStats::kicks},
};

const TubeCount* FindCount(std::string_view name) {
  for (const TubeCount& c : kTubeCounts) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

// Keys and values of one JSON object, from a table of a struct's fields.
template <class T, class Fields>
void WriteFields(const T& x, const Fields& fields, JsonWriter& w) {
  for (const auto& f : fields) {
    w.Key(f.name);
    w.Uint(x.*f.field);
  }
}

void Rate(JsonWriter& w, std::optional<double> r) {
  if (!r) return w.Null();
  w.Double(std::round(*r * 100) / 100);
}

// A tube's stats, copied (the store's views last until its next call).
struct TubeRow {
  std::string name;
  command::TubeStats st;
  std::optional<uint64_t> next_id;  // the next ready job (peek-ready)
  int64_t next_age_s = 0;
};

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

// The history of one tube (or of the server) as points of `step` seconds each, oldest
// first, ending with the newest sample: `ready` the most in the step, `puts` and
// `reserves` per second; null where there is no sample.
void WriteTubeHistory(const DashboardHistory& h, const DashboardHistory::Tube& t, size_t step,
                      JsonWriter& w) {
  size_t points = DashboardHistory::kSeconds / step;
  uint64_t end = h.rounds();  // rounds before it are complete
  w.StartObject();
  w.Key("step_s");
  w.Uint(step);
  auto series = [&](std::string_view key, int which) {
    w.Key(key);
    w.StartArray();
    for (size_t p = points; p-- > 0;) {
      uint64_t hi = end > p * step ? end - p * step : 0;  // the point's rounds: [hi - step, hi)
      uint64_t lo = hi > step ? hi - step : 0;
      bool any = false;
      uint64_t v = 0;
      for (uint64_t k = lo; k < hi; k++) {
        const DashboardHistory::TubeSample* x = h.Sample(t, k);
        if (!x) continue;
        any = true;
        if (which == 0) v = std::max<uint64_t>(v, x->ready);
        if (which == 1) v += x->puts;
        if (which == 2) v += x->reserves;
      }
      if (!any) {
        w.Null();
      } else if (which == 0) {
        w.Uint(v);
      } else {
        w.Double(std::round(static_cast<double>(v) / static_cast<double>(step) * 100) / 100);
      }
    }
    w.EndArray();
  };
  series("ready", 0);
  series("puts", 1);
  series("reserves", 2);
  w.EndObject();
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

// ------------------------------------------------------------------------------ tube list

// Case-insensitive substring match (tube names are ASCII); `lower` is lower case already.
bool Matches(std::string_view name, std::string_view lower) {
  if (lower.empty()) return true;
  if (lower.size() > name.size()) return false;
  auto fold = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  for (size_t i = 0; i + lower.size() <= name.size(); i++) {
    size_t j = 0;
    while (j < lower.size() && fold(name[i + j]) == lower[j]) j++;
    if (j == lower.size()) return true;
  }
  return false;
}

struct ListQuery {
  std::string q;                    // lower case
  const TubeCount* sort = nullptr;  // null: by name
  bool desc = false;
  uint64_t offset = 0;
  uint32_t limit = kDefaultPage;
  size_t step = 5;  // history points of the rows
};

// GET /dashboard/api/tubes: the tubes whose name contains q, sorted, one page. Every tube
// name is looked at, kScanSlice per step (each step lists the tubes again: a list's views
// last until the next store call); only the best offset + limit are kept, in a bounded
// heap, so nothing sorts all 100,000 names. Sorting by a count reads each matching tube's
// stats, kStatsSlice per step. A tube made or removed during the search may be missed, or
// seen twice, in this one answer (never shown twice).
class TubesSearch {
 public:
  TubesSearch(Session& s, Dashboard& d, ListQuery q, Nanos now)
      : s_(s), d_(d), q_(std::move(q)), now_(now), keep_(q_.offset + q_.limit), heap_(Cmp{this}) {}
  TubesSearch(const TubesSearch&) = delete;
  TubesSearch& operator=(const TubesSearch&) = delete;

  // A phase's step at a time.
  Co<> Run(Response* resp) {
    for (;;) {
      switch (phase_) {
        case Phase::kScan: {
          bool done = co_await Scan(resp);
          if (done) co_return;
          break;
        }
        case Phase::kStats:
          co_await Stats();
          break;
        case Phase::kPage:
          co_return co_await Page(resp);
      }
      co_await Slice();
    }
  }

 private:
  enum class Phase : uint8_t { kScan, kStats, kPage };
  struct Entry {
    uint64_t key;
    std::string name;
  };
  // a before b in the answer's order.
  struct Cmp {
    const TubesSearch* t;
    bool operator()(const Entry& a, const Entry& b) const {
      if (t->q_.sort && a.key != b.key) {
        return t->q_.desc ? a.key > b.key : a.key < b.key;
      }
      if (!t->q_.sort && t->q_.desc) return a.name > b.name;
      return a.name < b.name;
    }
  };

  // Keeps e if it is among the best keep_ so far (the heap's top is the worst kept).
  void Offer(uint64_t key, std::string_view name) {
    if (keep_ == 0) return;
    if (heap_.size() == keep_) {
      // Most names lose to the worst kept: compare them without copying.
      const Entry& worst = heap_.top();
      bool better;
      if (q_.sort && key != worst.key) {
        better = q_.desc ? key > worst.key : key < worst.key;
      } else {
        better = !q_.sort && q_.desc ? name > worst.name : name < worst.name;
      }
      if (!better) return;
      heap_.pop();
    }
    heap_.push(Entry{key, std::string(name)});
  }

  Co<bool> Scan(Response* resp) {
    Result r = co_await Ask(s_.ListTubes());
    if (r.outcome != Outcome::kTubeList) {
      Fail(resp, 500, "cannot list the tubes");
      co_return true;
    }
    const std::vector<std::string_view>& names = *r.tubes;
    total_ = names.size();
    size_t end = std::min(names.size(), pos_ + kScanSlice);
    for (; pos_ < end; pos_++) {
      std::string_view name = names[pos_];
      if (!Matches(name, q_.q)) continue;
      matched_++;
      if (!q_.sort) {
        Offer(0, name);
      } else {
        candidates_.emplace_back(name);
      }
    }
    if (pos_ < names.size()) co_return false;
    phase_ = q_.sort ? Phase::kStats : Phase::kPage;
    co_return false;
  }

  Co<> Stats() {
    size_t end = std::min(candidates_.size(), next_ + kStatsSlice);
    for (; next_ < end; next_++) {
      Result r = co_await Ask(s_.StatsTube(candidates_[next_]));
      if (r.outcome != Outcome::kTubeStats) {
        matched_--;  // gone since the scan
        continue;
      }
      Offer((*r.tube_stats).*q_.sort->field, candidates_[next_]);
    }
    if (next_ == candidates_.size()) {
      std::vector<std::string>().swap(candidates_);
      phase_ = Phase::kPage;
    }
  }

  Co<> Page(Response* resp) {
    // The page is the worst kept: those past the offset. Only they are taken out, so a
    // deep page costs limit heap pops, not a sort of everything kept.
    std::vector<Entry> page;
    while (heap_.size() > q_.offset) {
      page.push_back(std::move(const_cast<Entry&>(heap_.top())));
      heap_.pop();
    }
    std::reverse(page.begin(), page.end());
    std::vector<TubeRow> rows;
    std::unordered_set<std::string_view> seen;
    for (const Entry& e : page) {
      if (!seen.insert(e.name).second) continue;
      TubeRow row;
      bool found = co_await ReadTube(s_, e.name, &row);
      if (!found) continue;
      co_await ReadNextReady(s_, &row);
      d_.history().Track(row.name, now_);
      rows.push_back(std::move(row));
    }
    Ok(resp);
    JsonWriter w(&resp->body);
    w.StartObject();
    w.Key("total_tubes");
    w.Uint(total_);
    w.Key("matched");
    w.Uint(matched_);
    w.Key("offset");
    w.Uint(q_.offset);
    w.Key("limit");
    w.Uint(q_.limit);
    w.Key("sort");
    w.String(q_.sort ? q_.sort->name : "name");
    w.Key("order");
    w.String(q_.desc ? "desc" : "asc");
    w.Key("tubes");
    w.StartArray();
    for (const TubeRow& row : rows) WriteTubeRow(row, d_.history(), q_.step, w);
    w.EndArray();
    w.EndObject();
  }

  Session& s_;
  Dashboard& d_;
  ListQuery q_;
  Nanos now_;
  Phase phase_ = Phase::kScan;
  size_t keep_;
  std::priority_queue<Entry, std::vector<Entry>, Cmp> heap_;
  size_t pos_ = 0;
  size_t total_ = 0;
  uint64_t matched_ = 0;
  std::vector<std::string> candidates_;
  size_t next_ = 0;
};

// ------------------------------------------------------------------------------ job lists

// GET /dashboard/api/tubes/:tube/jobs: a page of the tube's jobs in one state, in id order,
// from list-jobs (never a reserve: browsing changes nothing). Each list-jobs call looks at
// up to 65536 ids; one per step, at most kMaxListCalls per request, then the page says
// where to go on.
class JobsPage {
 public:
  JobsPage(Session& s, std::string tube, StateFilter state, uint64_t from, uint32_t limit)
      : s_(s), tube_(std::move(tube)), state_(state), from_(from), limit_(limit) {}

  Co<> Run(Response* resp) {
    while (listing_) {
      Result r = co_await Ask(
          s_.ListJobs(tube_, state_, from_, limit_ - static_cast<uint32_t>(ids_.size())));
      if (r.outcome == Outcome::kNotFound) co_return Fail(resp, 404, "tube not found");
      if (r.outcome != Outcome::kJobList) co_return Fail(resp, 400, "invalid request");
      ids_.insert(ids_.end(), r.ids->begin(), r.ids->end());
      from_ = r.number;
      calls_++;
      if (ids_.size() >= limit_ || from_ == 0 || calls_ >= kMaxListCalls) listing_ = false;
      co_await Slice();
    }
    Ok(resp);
    TubeRow tube;
    bool have_tube = co_await ReadTube(s_, tube_, &tube);
    JsonWriter w(&resp->body);
    w.StartObject();
    w.Key("tube");
    w.String(tube_);
    w.Key("state");
    w.String(StateName(state_));
    w.Key("count");
    w.Uint(have_tube ? tube.st.*FindCount(StateName(state_))->field : 0);
    w.Key("next");
    w.Uint(from_);
    w.Key("jobs");
    w.StartArray();
    for (uint64_t id : ids_) {
      Result p = co_await Ask(s_.Peek(id));
      if (p.outcome != Outcome::kFound) continue;  // gone since it was listed
      std::string body(p.job.body.substr(0, kRowPreview));
      size_t size = p.job.body.size();
      Result st = co_await Ask(s_.StatsJob(id));
      if (st.outcome != Outcome::kJobStats) continue;
      w.StartObject();
      WriteJobFields(*st.job_stats, w);
      w.Key("body_size");
      w.Uint(size);
      std::string b64;
      AppendBase64(body, &b64);
      w.Key("preview");
      w.String(b64);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }

 private:
  Session& s_;
  std::string tube_;
  StateFilter state_;
  uint64_t from_;
  uint32_t limit_;
  bool listing_ = true;
  uint32_t calls_ = 0;
  std::vector<uint64_t> ids_;
};

// ------------------------------------------------------------------------------ actions

// Respawns up to `count` dead letters, kRespawnSlice per step.
Co<> Respawn(Session& s, std::string tube, uint64_t count, uint32_t ttl_s, Response* resp) {
  uint64_t done = 0;
  for (uint64_t left = count;;) {
    auto n = static_cast<uint32_t>(std::min<uint64_t>(left, kRespawnSlice));
    Result r = co_await Ask(s.Respawn(tube, n, ttl_s));
    uint64_t got = r.outcome == Outcome::kKicked ? r.number : 0;
    done += got;
    left -= got;
    if (got != n || left == 0) break;
    co_await Slice();
  }
  Ok(resp);
  JsonWriter w(&resp->body);
  w.StartObject();
  w.Key("respawned");
  w.Uint(done);
  w.EndObject();
}

struct MoveError {
  int status;
  std::string_view text;
};

// Moves one job: puts a copy into `to` (same body, priority, TTR, remaining delay, tries
// left, remaining TTL, key and attributes) and deletes the original, in one step, so no
// other client acts in between. A reserved job cannot be moved (its worker holds it); a
// buried one arrives ready; a job with no tries left gets one. The session uses `to`
// afterwards (the caller uses "default" again).
Co<std::optional<MoveError>> MoveJob(Session& s, uint64_t id, std::string_view to, uint64_t* new_id,
                                     size_t* bytes) {
  Result st = co_await Ask(s.StatsJob(id));
  if (st.outcome != Outcome::kJobStats) co_return MoveError{404, "job not found"};
  const command::JobStats& js = *st.job_stats;
  if (js.state == "reserved") co_return MoveError{409, "a reserved job cannot be moved"};
  if (js.tube == to) co_return MoveError{400, "the job is in that tube already"};
  command::PutArgs args;
  args.pri = js.pri;
  args.ttr_s = js.ttr_s;
  args.delay_s =
      js.state == "delayed" ? static_cast<uint32_t>(std::max<int64_t>(js.time_left_s, 0)) : 0;
  command::PutOptions opts;
  std::string key;
  std::vector<std::pair<std::string, std::string>> attr_text;
  if (const command::JobExtensionStats* x = js.extension) {
    if (x->limited) opts.tries = std::max<uint32_t>(x->tries_left, 1);
    if (x->has_ttl) {
      opts.ttl_s = static_cast<uint32_t>(std::clamp<int64_t>(x->ttl_left_s, 1, UINT32_MAX));
    }
    key = x->key;
    for (const command::Attribute& a : x->attributes) attr_text.emplace_back(a.name, a.value);
  }
  std::vector<command::Attribute> attrs;
  for (const auto& [n, v] : attr_text) attrs.push_back({n, v});
  opts.key = key;
  opts.attributes = attrs;
  Result p = co_await Ask(s.Peek(id));
  if (p.outcome != Outcome::kFound) co_return MoveError{404, "job not found"};
  std::string body(p.job.body);
  Result use = co_await Ask(s.Use(to));
  if (use.outcome != Outcome::kUsing) co_return MoveError{400, "invalid tube name"};
  args.bytes = static_cast<uint32_t>(body.size());
  args.verb = command::Verb::kPut;
  args.options = &opts;
  command::PutSlot slot = s.BeginPut(args);
  Outcome o = slot.refusal;
  if (slot.data) {
    std::copy(body.begin(), body.end(), slot.data);
    slot.data[body.size()] = '\r';
    slot.data[body.size() + 1] = '\n';
    Result c = co_await Ask(s.CommitPut());
    o = c.outcome;
    if (o == Outcome::kInserted) {
      Result del = co_await Ask(s.Delete(id));
      if (del.outcome != Outcome::kDeleted) {
        co_await Ask(s.Delete(c.number));
        co_return MoveError{409, "the job changed; nothing was moved"};
      }
      *new_id = c.number;
      *bytes += body.size();
      co_return std::nullopt;
    }
  }
  switch (o) {
    case Outcome::kExists:
      co_return MoveError{409, "the target tube has a job with the same key"};
    case Outcome::kJobTooBig:
      co_return MoveError{413, "job too big"};
    case Outcome::kDraining:
      co_return MoveError{503, "server is draining"};
    case Outcome::kOutOfMemory:
      co_return MoveError{503, "out of memory"};
    default:
      co_return MoveError{500, "internal error"};
  }
}

// Moves up to `count` of a tube's jobs in one state to another tube: lists them
// kMoveListSlice ids at a time and moves up to kMoveSliceBytes of bodies per step.
class MoveJobs {
 public:
  MoveJobs(Session& s, std::string tube, StateFilter state, std::string to, uint64_t count)
      : s_(s), tube_(std::move(tube)), state_(state), to_(std::move(to)), left_(count) {}

  Co<> Run(Response* resp) {
    for (;;) {
      bool done = co_await Step(resp);
      if (done) break;
      co_await Slice();
    }
  }

 private:
  // One step; true once *resp holds the answer.
  Co<bool> Step(Response* resp) {
    if (ids_.empty() && from_ != 0 && left_ > 0) {
      auto n = static_cast<uint32_t>(std::min<uint64_t>(left_, kMoveListSlice));
      Result r = co_await Ask(s_.ListJobs(tube_, state_, from_, n));
      if (r.outcome == Outcome::kJobList) {
        ids_.assign(r.ids->begin(), r.ids->end());
        from_ = r.number;
      } else {
        from_ = 0;
      }
      next_ = 0;
    }
    size_t bytes = 0;
    while (next_ < ids_.size() && left_ > 0 && bytes < kMoveSliceBytes) {
      uint64_t new_id = 0;
      std::optional<MoveError> e = co_await MoveJob(s_, ids_[next_++], to_, &new_id, &bytes);
      if (e) {
        failed_++;
        if (error_.empty()) error_ = e->text;
        if (e->status == 503 || e->status == 400) left_ = 0;  // the others would fail too
      } else {
        moved_++;
        left_--;
      }
    }
    if (next_ == ids_.size()) ids_.clear();
    if (left_ > 0 && (!ids_.empty() || from_ != 0)) co_return false;
    co_await Ask(s_.Use(kDefaultTube));
    Ok(resp);
    JsonWriter w(&resp->body);
    w.StartObject();
    w.Key("moved");
    w.Uint(moved_);
    w.Key("failed");
    w.Uint(failed_);
    w.Key("error");
    if (error_.empty()) {
      w.Null();
    } else {
      w.String(error_);
    }
    w.EndObject();
    co_return true;
  }
  Session& s_;
  std::string tube_;
  StateFilter state_;
  std::string to_;
  uint64_t left_;
  uint64_t from_ = 1;
  std::vector<uint64_t> ids_;
  size_t next_ = 0;
  uint64_t moved_ = 0, failed_ = 0;
  std::string error_;
};

// ------------------------------------------------------------------------------ routing

class DashboardCall {
 public:
  DashboardCall(Exchange& ex, Dashboard& d) : ex_(ex), s_(ex.session), d_(d) {}
  Co<> Run();

 private:
  Response& resp() { return ex_.response; }
  void Route(std::string_view name) { ex_.route = name; }
  void Asset(std::string_view name);
  Co<> Api();
  Co<> Server();
  Co<> Tubes();
  Co<> Tube(const std::string& name);
  Co<> Jobs(const std::string& tube);
  Co<> TubeAction(const std::string& tube, std::string_view action);
  Co<> Job(uint64_t id);
  Co<> JobBody(uint64_t id);
  Co<> JobAction(uint64_t id, std::string_view action);
  // A uint32 query parameter: absent is `def`; invalid or out of [lo, hi] answers 400
  // "invalid <name>" and gives nullopt.
  std::optional<uint64_t> Number(std::string_view name, uint64_t def, uint64_t lo, uint64_t hi);
  // The tube of the path exists; false: answered (400 or 404).
  Co<bool> TubeExists(const std::string& name, TubeRow* row);
  // {"<key>": n} after a kick or purge, the session using "default" again.
  Co<> AnswerCount(std::string_view key, uint64_t n);

  Exchange& ex_;
  Session& s_;
  Dashboard& d_;
  Target target_;
};

Co<> DashboardCall::Run() {
  if (!target_.Parse(ex_.request.target)) {
    Route("dashboard");
    co_return Fail(&resp(), 400, "invalid request target");
  }
  const std::vector<std::string>& seg = target_.segments();
  Method m = ex_.request.method;
  bool get = m == Method::kGet || m == Method::kHead;
  if (seg.size() >= 3 && seg[0] == "dashboard" && seg[1] == "api") co_return co_await Api();
  if (get) {
    if ((seg.size() == 1 && (seg[0].empty() || seg[0] == "dashboard")) ||
        (seg.size() == 2 && seg[0] == "dashboard" && seg[1].empty())) {
      co_return Asset("index.html");
    }
    if (seg.size() == 2 && seg[0] == "dashboard") co_return Asset(seg[1]);
  }
  Route("unknown");
  Fail(&resp(), 404, "api not found");
}

void DashboardCall::Asset(std::string_view name) {
  const DashboardAsset* a = FindDashboardAsset(name);
  if (!a) {
    Route("unknown");
    return Fail(&resp(), 404, "api not found");
  }
  Route("dashboard_asset");
  resp().status = 200;
  resp().body.assign(a->data);
  resp().content_type = a->content_type;
  resp().extra_headers = name == "index.html" ? kPageHeaders : kAssetHeaders;
}

std::optional<uint64_t> DashboardCall::Number(std::string_view name, uint64_t def, uint64_t lo,
                                              uint64_t hi) {
  std::optional<std::string_view> v = target_.Query(name);
  if (!v) return def;
  std::optional<uint64_t> n = ParseUint(*v, 64);
  if (!n || *n < lo || *n > hi) {
    Fail(&resp(), 400, "invalid " + std::string(name));
    return std::nullopt;
  }
  return n;
}

Co<bool> DashboardCall::TubeExists(const std::string& name, TubeRow* row) {
  if (!command::IsValidTubeName(name)) {
    Fail(&resp(), 400, "invalid tube name");
    co_return false;
  }
  bool found = co_await ReadTube(s_, name, row);
  if (!found) {
    Fail(&resp(), 404, "tube not found");
    co_return false;
  }
  co_return true;
}

Co<> DashboardCall::Api() {
  const std::vector<std::string>& seg = target_.segments();
  Method m = ex_.request.method;
  bool get = m == Method::kGet || m == Method::kHead;
  bool post = m == Method::kPost;
  bool del = m == Method::kDelete;
  // A browser sends a custom header only from a script of the same origin (a cross-site
  // form or image cannot), so a changing request without one is refused: basic auth
  // alone would not stop another site's page from posting here.
  if ((post || del) && ex_.request.requested_with.empty()) {
    Route("dashboard_forbidden");
    co_return Fail(&resp(), 403, "missing X-Requested-With header");
  }
  const std::string& what = seg[2];
  if (what == "server" && seg.size() == 3 && get) {
    Route("dashboard_server");
    co_return co_await Server();
  }
  if (what == "tubes" && seg.size() == 3 && get) {
    Route("dashboard_tubes");
    co_return co_await Tubes();
  }
  if (what == "tubes" && seg.size() >= 4) {
    const std::string& tube = seg[3];
    if (seg.size() == 4 && get) {
      Route("dashboard_tube");
      co_return co_await Tube(tube);
    }
    if (seg.size() == 5 && seg[4] == "jobs" && get) {
      Route("dashboard_jobs");
      co_return co_await Jobs(tube);
    }
    if (seg.size() == 5 && post) co_return co_await TubeAction(tube, seg[4]);
  }
  if (what == "jobs" && (seg.size() == 4 || seg.size() == 5)) {
    std::optional<uint64_t> id = seg[3].size() <= 20 ? ParseUint(seg[3], 64) : std::nullopt;
    if (!id) {
      Route("dashboard_job");
      co_return Fail(&resp(), 400, "invalid job id");
    }
    if (seg.size() == 4 && get) {
      Route("dashboard_job");
      co_return co_await Job(*id);
    }
    if (seg.size() == 4 && del) {
      Route("dashboard_job_delete");
      co_return co_await JobAction(*id, "delete");
    }
    if (seg.size() == 5 && seg[4] == "body" && get) {
      Route("dashboard_job_body");
      co_return co_await JobBody(*id);
    }
    if (seg.size() == 5 && post) co_return co_await JobAction(*id, seg[4]);
  }
  Route("unknown");
  Fail(&resp(), 404, "api not found");
}

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
  // The server's history: gauges as the last sample of each point, puts and reserves per
  // second; null before the first sample.
  w.Key("history");
  w.StartObject();
  w.Key("step_s");
  w.Uint(*step);
  size_t points = DashboardHistory::kSeconds / *step;
  uint64_t end = h.rounds();
  auto series = [&](std::string_view key, auto value, bool rate) {
    w.Key(key);
    w.StartArray();
    for (size_t p = points; p-- > 0;) {
      uint64_t hi = end > p * *step ? end - p * *step : 0;
      uint64_t lo = std::max(hi > *step ? hi - *step : 0, h.oldest_round());
      if (lo >= hi) {
        w.Null();
        continue;
      }
      if (!rate) {
        w.Uint(value(h.server(hi - 1)));
        continue;
      }
      uint64_t sum = 0;
      for (uint64_t k = lo; k < hi; k++) sum += value(h.server(k));
      w.Double(std::round(static_cast<double>(sum) / static_cast<double>(hi - lo) * 100) / 100);
    }
    w.EndArray();
  };
  using S = DashboardHistory::ServerSample;
  series(
      "ready", [](const S& x) { return x.ready; }, false);
  series(
      "reserved", [](const S& x) { return x.reserved; }, false);
  series(
      "delayed", [](const S& x) { return x.delayed; }, false);
  series(
      "buried", [](const S& x) { return x.buried; }, false);
  series(
      "connections", [](const S& x) { return x.connections; }, false);
  series(
      "memory_used", [](const S& x) { return x.memory_used; }, false);
  series(
      "puts", [](const S& x) { return uint64_t{x.puts}; }, true);
  series(
      "reserves", [](const S& x) { return uint64_t{x.reserves}; }, true);
  w.EndObject();
  w.EndObject();
}

Co<> DashboardCall::AnswerCount(std::string_view key, uint64_t n) {
  co_await Ask(s_.Use(kDefaultTube));
  Ok(&resp());
  JsonWriter w(&resp().body);
  w.StartObject();
  w.Key(key);
  w.Uint(n);
  w.EndObject();
}

Co<> DashboardCall::Tubes() {
  ListQuery q;
  if (auto v = target_.Query("q")) {
    q.q = *v;
    for (char& c : q.q) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
  }
  if (auto v = target_.Query("sort")) {
    q.sort = FindCount(*v);
    if (!q.sort && *v != "name") co_return Fail(&resp(), 400, "invalid sort");
  }
  if (auto v = target_.Query("order")) {
    if (*v != "asc" && *v != "desc") co_return Fail(&resp(), 400, "invalid order");
    q.desc = *v == "desc";
  } else {
    q.desc = q.sort != nullptr;  // counts: the biggest first
  }
  std::optional<uint64_t> offset = Number("offset", 0, 0, kMaxOffset);
  if (!offset) co_return;
  std::optional<uint64_t> limit = Number("limit", kDefaultPage, 1, kMaxPage);
  if (!limit) co_return;
  std::optional<uint64_t> step = Number("step", 5, 0, 60);
  if (!step) co_return;
  q.offset = *offset;
  q.limit = static_cast<uint32_t>(*limit);
  q.step = *step;
  TubesSearch search(s_, d_, std::move(q), ex_.now);
  co_await search.Run(&resp());
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
  JobsPage page(s_, tube, *state, std::max<uint64_t>(*from, 1), static_cast<uint32_t>(*limit));
  co_await page.Run(&resp());
}

Co<> DashboardCall::TubeAction(const std::string& tube, std::string_view action) {
  TubeRow row;
  if (action == "kick") {
    Route("dashboard_kick");
    std::optional<uint64_t> count = Number("count", 1, 1, UINT32_MAX);
    if (!count) co_return;
    bool exists = co_await TubeExists(tube, &row);
    if (!exists) co_return;
    co_await Ask(s_.Use(tube));
    Result r = co_await Ask(s_.Kick(static_cast<uint32_t>(*count)));
    co_return co_await AnswerCount("kicked", r.number);
  }
  if (action == "purge") {
    Route("dashboard_purge");
    std::optional<StateFilter> state = ParseState(target_.Query("state").value_or(""), true);
    if (!state || *state == StateFilter::kReserved) co_return Fail(&resp(), 400, "invalid state");
    bool exists = co_await TubeExists(tube, &row);
    if (!exists) co_return;
    Result r = co_await Ask(s_.Purge(tube, *state));
    if (r.outcome == Outcome::kNotFound) co_return Fail(&resp(), 404, "tube not found");
    co_return co_await AnswerCount("purged", r.number);
  }
  if (action == "pause") {
    Route("dashboard_pause");
    std::optional<uint64_t> seconds = Number("seconds", 0, 0, UINT32_MAX);
    if (!seconds) co_return;
    bool exists = co_await TubeExists(tube, &row);
    if (!exists) co_return;
    Result r = co_await Ask(s_.PauseTube(tube, static_cast<uint32_t>(*seconds)));
    if (r.outcome != Outcome::kPaused) co_return Fail(&resp(), 404, "tube not found");
    Ok(&resp());
    JsonWriter w(&resp().body);
    w.StartObject();
    w.Key("paused");
    w.Bool(*seconds > 0);
    w.Key("seconds");
    w.Uint(*seconds);
    w.EndObject();
    co_return;
  }
  if (action == "respawn") {
    Route("dashboard_respawn");
    std::optional<uint64_t> count = Number("count", 1, 1, UINT64_MAX);
    if (!count) co_return;
    std::optional<uint64_t> ttl = Number("ttl", 0, 0, UINT32_MAX);
    if (!ttl) co_return;
    bool exists = co_await TubeExists(tube, &row);
    if (!exists) co_return;
    co_return co_await Respawn(s_, tube, *count, static_cast<uint32_t>(*ttl), &resp());
  }
  if (action == "move") {
    Route("dashboard_move");
    std::optional<StateFilter> state = ParseState(target_.Query("state").value_or(""), false);
    if (!state || *state == StateFilter::kReserved) co_return Fail(&resp(), 400, "invalid state");
    std::string to(target_.Query("to").value_or(""));
    if (!command::IsValidTubeName(to)) co_return Fail(&resp(), 400, "invalid target tube");
    if (to == tube) co_return Fail(&resp(), 400, "the jobs are in that tube already");
    std::optional<uint64_t> count = Number("count", UINT64_MAX, 1, UINT64_MAX);
    if (!count) co_return;
    bool exists = co_await TubeExists(tube, &row);
    if (!exists) co_return;
    MoveJobs move(s_, tube, *state, std::move(to), *count);
    co_return co_await move.Run(&resp());
  }
  Route("unknown");
  Fail(&resp(), 404, "api not found");
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

Co<> DashboardCall::JobAction(uint64_t id, std::string_view action) {
  if (action == "delete") {
    Result st = co_await Ask(s_.StatsJob(id));
    if (st.outcome != Outcome::kJobStats) co_return Fail(&resp(), 404, "job not found");
    bool reserved = st.job_stats->state == "reserved";
    Result del = co_await Ask(s_.Delete(id));
    if (del.outcome != Outcome::kDeleted) {
      if (reserved)
        co_return Fail(&resp(), 409, "the job is reserved: only its worker can delete it");
      co_return Fail(&resp(), 404, "job not found");
    }
    Ok(&resp());
    resp().body = "{\"deleted\":true}";
    co_return;
  }
  if (action == "kick") {
    Route("dashboard_job_kick");
    Result kicked = co_await Ask(s_.KickJob(id));
    if (kicked.outcome != Outcome::kKickedJob) {
      co_return Fail(&resp(), 404, "job not found, or not buried or delayed");
    }
    Ok(&resp());
    resp().body = "{\"kicked\":true}";
    co_return;
  }
  if (action == "move") {
    Route("dashboard_job_move");
    std::string to(target_.Query("to").value_or(""));
    if (!command::IsValidTubeName(to)) co_return Fail(&resp(), 400, "invalid target tube");
    uint64_t new_id = 0;
    size_t bytes = 0;
    std::optional<MoveError> e = co_await MoveJob(s_, id, to, &new_id, &bytes);
    co_await Ask(s_.Use(kDefaultTube));
    if (e) co_return Fail(&resp(), e->status, e->text);
    Ok(&resp());
    JsonWriter w(&resp().body);
    w.StartObject();
    w.Key("id");
    w.Uint(id);
    w.Key("new_id");
    w.Uint(new_id);
    w.Key("tube");
    w.String(to);
    w.EndObject();
    co_return;
  }
  Route("unknown");
  Fail(&resp(), 404, "api not found");
}

Co<> HandleDashboard(Exchange& ex, Dashboard& d) {
  DashboardCall call(ex, d);
  co_await call.Run();
}

}  // namespace

// ------------------------------------------------------------------------------ Dashboard

Dashboard::Dashboard(const Clock& clock, command::Store& store, DashboardHost& host)
    : clock_(clock), store_(store), host_(host) {}

Dashboard::~Dashboard() = default;

bool Dashboard::Serves(std::string_view target) {
  std::string_view path = target.substr(0, target.find('?'));
  return path == "/" || path == "/dashboard" || path.starts_with("/dashboard/");
}

void Dashboard::Handle(Exchange& ex) {
  std::string_view path = ex.request.target;
  if (path.starts_with("/dashboard/api/")) Activate(ex.now);
  ex.error_headers = kApiHeaders;
  Serve(ex, HandleDashboard(ex, *this));
}

void Dashboard::Activate(Nanos now) {
  last_request_ = now;
  if (session_) return;
  session_ = store_.Open(*this);
  history_.Clear();
  next_round_ = now;
  reserves_total_ = 0;
}

void Dashboard::Stop() {
  session_.reset();
  history_.Clear();
}

void Dashboard::Tick(Nanos now) {
  if (!session_) return;
  if (round_) {
    if (flow_.waiting) return;
    return Ran(!flow_.failed && round_.Continue(flow_));
  }
  if (now - last_request_ >= kIdleStop) return Stop();
  if (now < next_round_) return;
  // A round a second; after the loop was held up, the next one a second from now.
  next_round_ = next_round_ + kSecond > now ? next_round_ + kSecond : now + kSecond;
  round_ = Round(now);
  Ran(round_.Start(flow_));
}

void Dashboard::Ran(bool done) {
  if (!done && !flow_.failed) return;  // a slice done, or waiting for the store
  round_ = Co<>();
  // The store could not answer (kInternalError): the round ends with what it has.
  if (flow_.failed && history_.in_round()) history_.EndRound();
  flow_.failed = false;
}

Co<> Dashboard::Round(Nanos now) {
  Result st = co_await Ask(session_->Stats());
  if (st.outcome != Outcome::kStats) co_return;
  bool few = st.stats->tubes <= DashboardHistory::kMaxTubes;
  history_.BeginRound(now, *st.stats, reserves_total_, host_.BinlogSyncs());
  // While every tube fits, every tube has a history.
  if (few) {
    Result l = co_await Ask(session_->ListTubes());
    if (l.outcome == Outcome::kTubeList) {
      for (std::string_view t : *l.tubes) history_.Discover(t);
    }
  }
  for (size_t cursor = 0;;) {
    size_t end = std::min(history_.tube_count(), cursor + kSampleSlice);
    for (; cursor < end; cursor++) {
      Result r = co_await Ask(session_->StatsTube(history_.tube_name(cursor)));
      history_.SampleTube(cursor, r.outcome == Outcome::kTubeStats ? r.tube_stats : nullptr);
    }
    if (cursor >= history_.tube_count()) break;
    co_await Slice();
  }
  history_.EndRound();
}

Nanos Dashboard::next_tick() const {
  if (!session_) return kForever;
  if (round_) return flow_.waiting ? kForever : 0;  // a result wakes the loop when it comes
  return std::min(next_round_, last_request_ + kIdleStop);
}

void Dashboard::OnFirstReserve(std::string_view tube) {
  if (!session_) return;
  reserves_total_++;
  history_.CountReserve(tube);
}

}  // namespace stalkd::http
