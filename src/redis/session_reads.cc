// RedisSession's reads: list-tubes and stats (on a cluster they fan out over the
// partitions, per master), stats-job, stats-tube and list-jobs. The session's other calls
// are in session.cc; its reserve machinery in session_reserve.cc.
#include <algorithm>
#include <charconv>

#include "redis/session.h"

namespace stalkd::redis {

Result RedisSession::ListTubes() {
  store_.Count(Verb::kListTubes);
  if (store_.partitions() > 1) return ListTubesAcross();
  return Ask(0, "list_tubes", {}, false, [](RedisSession& s, const Answer& a) {
    s.tube_names_.clear();
    for (size_t i = 0; i < a.size(); i++) s.tube_names_.emplace_back(a.Word(i));
    s.tube_views_.assign(s.tube_names_.begin(), s.tube_names_.end());
    Result r = Result::Of(Outcome::kTubeList);
    r.tubes = &s.tube_views_;
    return r;
  });
}

// A cluster's list-tubes: "default", then each partition's tubes in the order they were made,
// partitions in order. Per master one read over its partitions; a partition it does not hold
// wholly now (migrating) is asked alone.
Result RedisSession::ListTubesAcross() {
  struct Gather : Gathered {
    std::vector<std::vector<std::string>> lists;
  };
  auto g = std::make_shared<Gather>();
  g->lists.resize(store_.partitions());
  auto finish = Countdown(g, [g](RedisSession& me) {
    me.tube_names_.assign(1, "default");
    for (auto& l : g->lists) {
      for (auto& name : l) me.tube_names_.push_back(std::move(name));
    }
    me.tube_views_.assign(me.tube_names_.begin(), me.tube_names_.end());
    Result r = Result::Of(Outcome::kTubeList);
    r.tubes = &me.tube_views_;
    return r;
  });
  // A partition alone: routed, retried through a migration.
  auto alone = [st = &store_, g, finish](uint32_t p) {
    g->left++;
    st->Call(p, "list_tubes", {}, false, [g, finish, p](const Answer& a) {
      if (a.lost || a.oom) g->lost = true;
      g->lists[p].clear();
      for (size_t i = 0; i < a.size(); i++) {
        if (a.Word(i) != "default") g->lists[p].emplace_back(a.Word(i));
      }
      finish();
    });
  };
  g->left += store_
                 .ReadPerMaster("tubes_node", {}, alone,
                                [g, finish, alone](const std::string&, const Reply& r,
                                                   const std::vector<uint32_t>& parts) {
                                  if (r.type != Reply::Type::kArray) {
                                    for (uint32_t p : parts) alone(p);
                                    return finish();
                                  }
                                  // Per partition: a count (-1: not here), then as many names.
                                  size_t i = 0;
                                  for (uint32_t p : parts) {
                                    if (i >= r.elements.size()) break;
                                    int64_t n = 0;
                                    const std::string& c = r.elements[i++].str;
                                    std::from_chars(c.data(), c.data() + c.size(), n);
                                    if (n < 0) {
                                      alone(p);
                                      continue;
                                    }
                                    for (int64_t k = 0; k < n && i < r.elements.size(); k++) {
                                      g->lists[p].push_back(r.elements[i++].str);
                                    }
                                  }
                                  finish();
                                })
                 .size();
  finish();  // the first `left`, held while the calls were sent
  return Result::Of(Outcome::kPending);
}

// ---------------------------------------------------------------------------- stats

Result RedisSession::Stats() {
  store_.Count(Verb::kStats);
  alone_ = true;
  if (store_.partitions() > 1) return StatsAcross();
  return Ask(0, "stats", {store_.fid_}, false,
             [](RedisSession& s, const Answer& a) { return s.store_.FillStats(a, nullptr); });
}

// A cluster's stats: the front ends' counters from the global partition, the job counters
// summed per master over its partitions (a partition it does not hold wholly now is asked
// alone).
Result RedisSession::StatsAcross() {
  struct Gather : Gathered {
    uint64_t sums[10] = {};
    Owned global;
    void Add(const Answer& a) {
      for (size_t i = 0; i < 10; i++) sums[i] += a.Number(i);
    }
  };
  auto g = std::make_shared<Gather>();
  auto finish = Countdown(
      g, [g](RedisSession& me) { return me.store_.FillStats(g->global.View(), g->sums); });
  auto alone = [st = &store_, g, finish](uint32_t p) {
    g->left++;
    st->Call(p, "stats", {""}, false, [g, finish](const Answer& a) {
      if (a.lost || a.oom) g->lost = true;
      g->Add(a);
      finish();
    });
  };
  g->left++;
  store_.Call(store_.Global(), "stats", {store_.fid_}, false, [g, finish](const Answer& a) {
    if (a.lost || a.oom) g->lost = true;
    g->global = Owned(a);
    finish();
  });
  g->left += store_
                 .ReadPerMaster("sum_node", {}, alone,
                                [g, finish, alone](const std::string&, const Reply& r,
                                                   const std::vector<uint32_t>& parts) {
                                  if (r.type != Reply::Type::kArray || r.elements.size() < 10) {
                                    for (uint32_t p : parts) alone(p);
                                    return finish();
                                  }
                                  for (size_t i = 0; i < r.elements.size(); i++) {
                                    int64_t v = 0;
                                    const std::string& c = r.elements[i].str;
                                    std::from_chars(c.data(), c.data() + c.size(), v);
                                    if (i < 10) {
                                      g->sums[i] += static_cast<uint64_t>(std::max<int64_t>(v, 0));
                                    } else if (v >= 1 && static_cast<size_t>(v) <= parts.size()) {
                                      alone(parts[v - 1]);  // not wholly on that master now
                                    }
                                  }
                                  finish();
                                })
                 .size();
  finish();
  return Result::Of(Outcome::kPending);
}

Result RedisSession::StatsJob(uint64_t id) {
  store_.Count(Verb::kStatsJob);
  std::string ids = std::to_string(id);
  return Ask(store_.PartitionOfId(id), "stats_job", {ids}, false,
             [id](RedisSession& s, const Answer& a) {
               if (a.status != "OK") return Result::Of(Outcome::kNotFound);
               // tube state pri age_ms delay ttr time_left_ms reserves timeouts releases buries
               // kicks limited tries reason ttl_left_ms ext key attrs detached
               s.name_ = a.Word(0);
               s.state_ = a.Word(1);
               command::JobStats& j = s.job_stats_;
               j = {};
               j.id = id;
               j.tube = s.name_;
               j.state = s.state_;
               j.pri = static_cast<uint32_t>(a.Number(2));
               j.age_ms = a.Signed(3);
               j.age_s = j.age_ms / 1000;
               j.delay_s = static_cast<uint32_t>(a.Number(4));
               j.ttr_s = static_cast<uint32_t>(a.Number(5));
               j.time_left_s = a.Signed(6) / 1000;
               j.reserves = static_cast<uint32_t>(a.Number(7));
               j.timeouts = static_cast<uint32_t>(a.Number(8));
               j.releases = static_cast<uint32_t>(a.Number(9));
               j.buries = static_cast<uint32_t>(a.Number(10));
               j.kicks = static_cast<uint32_t>(a.Number(11));
               j.detached = a.Number(19) == 1;
               bool limited = a.Number(12) == 1;
               int64_t ttl_left = a.Signed(15);
               bool ext = a.Number(16) == 1;
               if (limited || ttl_left >= 0 || ext) {
                 command::JobExtensionStats& e = s.job_ext_;
                 e = {};
                 e.limited = limited;
                 e.tries_left = static_cast<uint32_t>(a.Number(13));
                 s.reason_ = a.Word(14);
                 e.bury_reason = s.reason_;
                 e.has_ttl = ttl_left >= 0;
                 e.ttl_left_s = std::max<int64_t>(0, ttl_left / 1000);
                 e.ttl_left_ms = std::max<int64_t>(0, ttl_left);
                 s.key_ = a.Word(17);
                 e.key = s.key_;
                 std::string_view blob = a.Word(18);
                 s.attr_text_.clear();
                 while (blob.size() >= 2) {
                   size_t nl = static_cast<unsigned char>(blob[0]);
                   if (blob.size() < 2 + nl) break;
                   size_t vl = static_cast<unsigned char>(blob[1 + nl]);
                   if (blob.size() < 2 + nl + vl) break;
                   s.attr_text_.emplace_back(blob.substr(1, nl));
                   s.attr_text_.emplace_back(blob.substr(2 + nl, vl));
                   blob.remove_prefix(2 + nl + vl);
                 }
                 s.attrs_.clear();
                 for (size_t i = 0; i + 1 < s.attr_text_.size(); i += 2) {
                   s.attrs_.push_back({s.attr_text_[i], s.attr_text_[i + 1]});
                 }
                 e.attributes = s.attrs_;
                 j.extension = &e;
               }
               Result r = Result::Of(Outcome::kJobStats);
               r.job_stats = &j;
               return r;
             });
}

Result RedisSession::StatsTube(std::string_view tube) {
  if (!command::IsValidTubeName(tube)) return Result::Of(Outcome::kBadFormat);
  store_.Count(Verb::kStatsTube);
  std::string name(tube);
  return Ask(store_.PartitionOf(tube), "stats_tube", {tube}, false,
             [name](RedisSession& s, const Answer& a) {
               if (a.status != "OK") return Result::Of(Outcome::kNotFound);
               // ready urgent reserved delayed buried total using watching deletes pauses pause_s
               // pause_left_ms expired exhausted default_tries
               s.name_ = name;
               command::TubeStats& t = s.tube_stats_;
               t = {};
               t.name = s.name_;
               t.ready = a.Number(0);
               t.urgent = a.Number(1);
               t.reserved = a.Number(2);
               t.delayed = a.Number(3);
               t.buried = a.Number(4);
               t.total_jobs = a.Number(5);
               t.using_ct = static_cast<uint32_t>(a.Number(6));
               t.watching_ct = static_cast<uint32_t>(a.Number(7));
               t.deletes = a.Number(8);
               t.pauses = a.Number(9);
               t.pause_s = a.Signed(10);
               t.pause_left_s = a.Signed(11) / 1000;
               t.expired = a.Number(12);
               t.tries_exhausted = a.Number(13);
               t.default_tries = static_cast<uint32_t>(a.Number(14));
               auto w = s.store_.tube_waiters_.find(name);
               if (w != s.store_.tube_waiters_.end()) t.waiting = w->second.size();
               Result r = Result::Of(Outcome::kTubeStats);
               r.tube_stats = &t;
               return r;
             });
}

Result RedisSession::ListJobs(std::string_view tube, command::StateFilter state, uint64_t from,
                              uint32_t count) {
  store_.Count(Verb::kListJobs);
  if (!command::IsValidTubeName(tube) || state == command::StateFilter::kAll) {
    return Result::Of(Outcome::kBadFormat);
  }
  std::string f = std::to_string(from), n = std::to_string(count);
  return Ask(store_.PartitionOf(tube), "list_jobs", {tube, StateWord(state), f, n}, false,
             [](RedisSession& s, const Answer& a) {
               if (a.status != "OK") return Result::Of(Outcome::kNotFound);
               s.ids_.clear();
               for (size_t i = 1; i < a.size(); i++) s.ids_.push_back(a.Number(i));
               Result r = Result::Of(Outcome::kJobList, a.Number(0));
               r.ids = &s.ids_;
               return r;
             });
}

}  // namespace stalkd::redis
