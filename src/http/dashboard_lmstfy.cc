#include <algorithm>
#include <iterator>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "http/dashboard_browse.h"
#include "http/dashboard_call.h"
#include "http/dead_letters.h"
#include "http/names.h"

// The dashboard's lmstfy view (docs/DASHBOARD.md, section 10): the namespace tree's page
// and the deletion of a queue's dead letters.
//
// GET /dashboard/api/namespaces: the tube list grouped as lmstfy sees it: each namespace whose
// queues (tubes "ns/q") match the search, with its queues' totals, and each plain tube as itself,
// by name, one page. Bounded as the tube list is: the names are looked at kScanSlice per step and
// only the first offset + limit + 1 groups are kept; the totals read the stats of the page's
// namespaces' queues only, kStatsSlice per step.
namespace stalkd::http::dash {

using command::Outcome;
using command::Result;

namespace {

constexpr uint64_t kDeadSlice = 1000;  // dead letters deleted per step

// A row of the page: a namespace (its name) or a plain tube (its name), in name order, a
// namespace before a plain tube of the same name.
struct GroupKey {
  std::string name;
  bool plain = false;
  bool operator<(const GroupKey& o) const {
    if (int c = name.compare(o.name); c != 0) return c < 0;
    return !plain && o.plain;
  }
};

struct Group {
  uint64_t queues = 0;     // matching queues of a namespace
  command::TubeStats sum;  // their counts' sums (kTubeCounts), read for the page only
  uint64_t paused = 0;     // of them paused
};

class NamespacesPage {
 public:
  NamespacesPage(Session& s, Dashboard& d, ListQuery q, Nanos now)
      : s_(s), d_(d), q_(std::move(q)), now_(now), keep_(q_.offset + q_.limit + 1) {}
  NamespacesPage(const NamespacesPage&) = delete;
  NamespacesPage& operator=(const NamespacesPage&) = delete;

  Co<> Run(Response* resp) {
    // 1. Every name, grouped; the first keep_ groups kept.
    for (bool done = false; !done;) {
      Result r = co_await Ask(s_.ListTubes());
      if (r.outcome != Outcome::kTubeList) co_return Fail(resp, 500, "cannot list the tubes");
      done = Scan(*r.tubes);
      co_await Slice();
    }
    // The page: past the offset, at most limit groups; one more kept says there are more.
    more_ = groups_.size() > q_.offset + q_.limit;
    size_t i = 0;
    for (auto it = groups_.begin(); it != groups_.end(); ++it, ++i) {
      // In the answer's order, the group is at i (ascending) or from the end (descending).
      size_t at = q_.desc ? groups_.size() - 1 - i : i;
      if (at >= q_.offset && at < q_.offset + q_.limit) page_.push_back(it);
    }
    if (q_.desc) std::reverse(page_.begin(), page_.end());
    // 2. The names of the page's namespaces' queues (again in slices), then their stats.
    for (auto it : page_) {
      if (!it->first.plain) wanted_.emplace(it->first.name, &it->second);
    }
    if (!wanted_.empty()) {
      pos_ = 0;
      for (bool done = false; !done;) {
        Result r = co_await Ask(s_.ListTubes());
        if (r.outcome != Outcome::kTubeList) co_return Fail(resp, 500, "cannot list the tubes");
        done = Collect(*r.tubes);
        co_await Slice();
      }
      for (size_t next = 0; next < members_.size();) {
        size_t end = std::min(members_.size(), next + kStatsSlice);
        for (; next < end; next++) {
          Result r = co_await Ask(s_.StatsTube(members_[next].first));
          if (r.outcome == Outcome::kTubeStats) Add(*r.tube_stats, members_[next].second);
        }
        co_await Slice();
      }
    }
    co_await Write(resp);
  }

 private:
  // a worse than b: later in the answer's order.
  bool Worse(const GroupKey& a, const GroupKey& b) const { return q_.desc ? a < b : b < a; }

  // Looks at the next kScanSlice names; true at the end.
  bool Scan(const std::vector<std::string_view>& names) {
    total_ = names.size();
    size_t end = std::min(names.size(), pos_ + kScanSlice);
    for (; pos_ < end; pos_++) {
      std::string_view name = names[pos_], ns, queue;
      if (!name.starts_with(q_.prefix) || !Matches(name, q_.q)) continue;
      matched_++;
      bool plain = !SplitTube(name, &ns, &queue);
      Offer(plain ? name : ns, plain);
    }
    return pos_ >= names.size();
  }

  // Counts a matching tube in its group, if the group is among the first keep_. A group
  // dropped for better ones never comes back (the worst kept only gets better), so a kept
  // namespace's count of queues is exact.
  void Offer(std::string_view name, bool plain) {
    // Most names are of a kept group or lose to the worst kept: no copy for them.
    key_.name.assign(name);
    key_.plain = plain;
    if (auto it = groups_.find(key_); it != groups_.end()) {
      it->second.queues += !plain;
      return;
    }
    if (groups_.size() == keep_) {
      auto worst = q_.desc ? groups_.begin() : std::prev(groups_.end());
      if (!Worse(worst->first, key_)) return;
      groups_.erase(worst);
    }
    groups_.emplace(key_, Group{}).first->second.queues = plain ? 0 : 1;
  }

  // Copies the names of the page's namespaces' matching queues; true at the end.
  bool Collect(const std::vector<std::string_view>& names) {
    size_t end = std::min(names.size(), pos_ + kScanSlice);
    for (; pos_ < end; pos_++) {
      std::string_view name = names[pos_], ns, queue;
      if (!name.starts_with(q_.prefix) || !Matches(name, q_.q)) continue;
      if (!SplitTube(name, &ns, &queue)) continue;
      auto it = wanted_.find(ns);
      if (it != wanted_.end()) members_.emplace_back(std::string(name), it->second);
    }
    return pos_ >= names.size();
  }

  static void Add(const command::TubeStats& st, Group* g) {
    for (const TubeCount& c : kTubeCounts) g->sum.*c.field += st.*c.field;
    g->paused += st.pause_s > 0 ? 1 : 0;
  }

  Co<> Write(Response* resp) {
    // The plain tubes' rows, read as the tube list reads its rows.
    std::vector<TubeRow> tubes;
    for (auto it : page_) {
      if (!it->first.plain) continue;
      TubeRow row;
      bool found = co_await ReadListRow(s_, d_, it->first.name, now_, &row);
      if (found) tubes.push_back(std::move(row));
    }
    Ok(resp);
    JsonWriter w(&resp->body);
    w.StartObject();
    WriteListHead(total_, matched_, q_, w);
    w.Key("order");
    w.String(q_.desc ? "desc" : "asc");
    w.Key("more");
    w.Bool(more_);
    w.Key("rows");
    w.StartArray();
    size_t t = 0;
    for (auto it : page_) {
      if (it->first.plain) {
        if (t < tubes.size() && tubes[t].name == it->first.name) {
          w.StartObject();
          w.Key("kind");
          w.String("tube");
          w.Key("tube");
          WriteTubeRow(tubes[t++], d_.history(), q_.step, w);
          w.EndObject();
        }
        continue;
      }
      const Group& g = it->second;
      w.StartObject();
      w.Key("kind");
      w.String("namespace");
      w.Key("namespace");
      w.String(it->first.name);
      w.Key("queues");
      w.Uint(g.queues);
      w.Key("paused");
      w.Uint(g.paused);
      WriteFields(g.sum, kTubeCounts, w);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }

  using Groups = std::map<GroupKey, Group>;

  Session& s_;
  Dashboard& d_;
  ListQuery q_;
  Nanos now_;
  size_t keep_;
  Groups groups_;
  GroupKey key_;  // Offer's, kept to reuse its buffer
  size_t pos_ = 0;
  size_t total_ = 0;
  uint64_t matched_ = 0;
  bool more_ = false;
  std::vector<Groups::iterator> page_;
  std::unordered_map<std::string_view, Group*> wanted_;  // the page's namespaces
  std::vector<std::pair<std::string, Group*>> members_;  // their queues
};

}  // namespace

Co<> DashboardCall::Namespaces() {
  ListQuery q;
  if (!ListParams(&q, false)) co_return;
  NamespacesPage page(s_, d_, std::move(q), ex_.now);
  co_await page.Run(&resp());
}

Co<> DashboardCall::DeleteDead(const std::string& tube) {
  Route("dashboard_delete_dead");
  std::optional<uint64_t> count = Number("count", 1, 1, UINT64_MAX);
  if (!count) co_return;
  TubeRow row;
  bool exists = co_await TubeExists(tube, &row);
  if (!exists) co_return;
  uint64_t n = co_await DeleteDeadLetters(s_, tube, *count, kDeadSlice);
  co_await AnswerCount("deleted", n);
}

}  // namespace stalkd::http::dash
