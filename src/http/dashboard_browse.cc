#include "http/dashboard_browse.h"

#include <algorithm>
#include <queue>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "http/dashboard.h"
#include "http/dashboard_json.h"

// The dashboard's sliced browsing: see dashboard_browse.h.
namespace stalkd::http::dash {

using command::Outcome;
using command::Result;
using command::Session;
using command::StateFilter;

namespace {

constexpr uint32_t kMaxListCalls = 256;  // list-jobs calls of one browse (65536 ids each)
constexpr size_t kRowPreview = 48;       // body bytes of a job in a list

}  // namespace

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

void WriteListHead(size_t total, uint64_t matched, const ListQuery& q, JsonWriter& w) {
  w.Key("total_tubes");
  w.Uint(total);
  w.Key("matched");
  w.Uint(matched);
  w.Key("offset");
  w.Uint(q.offset);
  w.Key("limit");
  w.Uint(q.limit);
}

Co<bool> ReadListRow(Session& s, Dashboard& d, std::string_view name, Nanos now, TubeRow* row) {
  bool found = co_await ReadTube(s, name, row);  // (co_await out of the if: co.h)
  if (!found) co_return false;
  co_await ReadNextReady(s, row);
  d.history().Track(row->name, now);
  co_return true;
}

namespace {

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
      if (!name.starts_with(q_.prefix) || !Matches(name, q_.q)) continue;
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
      bool found = co_await ReadListRow(s_, d_, e.name, now_, &row);
      if (found) rows.push_back(std::move(row));
    }
    Ok(resp);
    JsonWriter w(&resp->body);
    w.StartObject();
    WriteListHead(total_, matched_, q_, w);
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

}  // namespace

Co<> SearchTubes(Session& s, Dashboard& d, ListQuery q, Nanos now, Response* resp) {
  TubesSearch search(s, d, std::move(q), now);
  co_await search.Run(resp);
}

Co<> ListJobsPage(Session& s, std::string tube, StateFilter state, uint64_t from, uint32_t limit,
                  Response* resp) {
  JobsPage page(s, std::move(tube), state, from, limit);
  co_await page.Run(resp);
}

}  // namespace stalkd::http::dash
