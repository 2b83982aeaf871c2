// Review of the disk tier's rewrites of changed jobs (docs/DISK-TIER.md, "Which jobs go"):
// a tier slightly over its budget should write again only about as many changed jobs as
// must leave memory, and those should go as soon as their records are written.
#include <chrono>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "command/put_test_util.h"
#include "server/cold_store_test_util.h"
#include "storage/binlog.h"
#include "storage/binlog_test_util.h"
#include "storage/cold_store.h"
#include "store/memory_store.h"

namespace stalkd::storage {
namespace {

using command::Outcome;
using command::Result;
using testing_util::MakeTempDir;
using testing_util::RemoveDir;
constexpr auto Put = command::testing_util::PutThrough;

struct Store : testing_util::TierParts {
  testing_util::IgnoredClient quiet;
  std::unique_ptr<command::Session> s;

  bool crashed = false;

  Store(FakeClock& clock, size_t budget, uint32_t tick_budget, const std::string& in = "",
        int64_t segment_size = 1 << 22)
      : TierParts(clock, LogOptions(in, segment_size), TierOptions(budget, tick_budget)) {
    EXPECT_TRUE(ok) << error;
    s = store->Open(quiet);
  }
  static BinlogOptions LogOptions(const std::string& in, int64_t segment_size) {
    BinlogOptions o;
    o.dir = in.empty() ? MakeTempDir() : in;
    o.fsync_never = true;
    o.segment_size = segment_size;  // by default no compaction (it writes jobs whole too)
    return o;
  }
  static ColdStoreOptions TierOptions(size_t budget, uint32_t tick_budget) {
    ColdStoreOptions co;
    co.budget = budget;
    co.ready_hot = 0;
    co.tick_budget = tick_budget;
    return co;
  }
  ~Store() {
    s.reset();
    if (crashed) return;
    Close();
    store.reset();
    RemoveDir(dir);
  }
  // A clean stop, as the server's, with the checkpoint written.
  void Shutdown() {
    crashed = true;
    s.reset();
    EXPECT_TRUE(TierParts::Shutdown());
  }
  // A kill -9: what is buffered is lost.
  void Crash() {
    crashed = true;
    s.reset();
    store->engine().set_log(nullptr);
    store->set_cold(nullptr);
    cold.reset();
    log.reset();
  }
  // n jobs put in one tube, all reserved, then all released (with `delay`): every one has
  // changed since its put.
  void Churn(size_t n, uint32_t delay) {
    std::vector<uint64_t> ids;
    for (size_t i = 0; i < n; i++) {
      Result r = Put(*s, 100, 0, std::string(100, 'x'));
      ASSERT_EQ(r.outcome, Outcome::kInserted);
    }
    for (size_t i = 0; i < n; i++) {
      Result r = s->Reserve(0);
      ASSERT_EQ(r.outcome, Outcome::kReserved);
      ids.push_back(r.job.id);
    }
    for (uint64_t id : ids) ASSERT_EQ(s->Release(id, 100, delay).outcome, Outcome::kReleased);
    log->Flush();
  }
};

// 10 % over the budget: about a tenth of the jobs must go. Each Tick the tier rewrites
// "no more than would take memory down to the goal once they go", but the demotion visit
// then goes on *past* the jobs it rewrote (a rewrite counts as "had to stay" in the tube's
// depth), so the next Tick rewrites the next ones instead of demoting those now written,
// and so on over the whole heap: every job is written again before any leaves memory.
void RewritesNoMoreThanMustGo(uint32_t delay) {
  FakeClock clock;
  const size_t n = 3000;
  size_t used = 0;
  {
    Store hot(clock, 0, 0);
    hot.Churn(n, delay);
    used = hot.store->engine().memory_used();
  }
  const size_t budget = used - used / 10;
  Store cold(clock, budget, 50);
  cold.Churn(n, delay);
  ASSERT_GT(cold.store->engine().memory_used(), budget);
  int ticks = 0;
  for (; ticks < 1000 && cold.store->engine().memory_used() > budget; ticks++) cold.Tick();
  const engine::ColdTier::Stats st = cold.cold->stats();
  EXPECT_LE(cold.store->engine().memory_used(), budget);
  // What went, and the rewrites of one Tick (50) on top at most.
  EXPECT_LE(st.rewrites, st.demotions + 50)
      << "delay " << delay << ": " << st.rewrites << " rewrites for " << st.demotions
      << " demotions, " << ticks << " ticks to get under the budget";
}

TEST(ColdStoreRewriteTest, ReleasedJobsRewriteNoMoreThanMustGo) { RewritesNoMoreThanMustGo(0); }
TEST(ColdStoreRewriteTest, ReleasedDelayedJobsRewriteNoMoreThanMustGo) {
  RewritesNoMoreThanMustGo(3600);
}

// The clock stands still (a restart reads times through the wall clock, which a FakeClock
// does not move): no TTR ends, no delay ends.
// Random puts, reserves, releases (other priority, delay) and deletes on an
// all-in-memory store and on one with a small budget (compaction on: 8 KiB segments), the
// tier's Tick between them, sometimes without the log written; then a kill -9 of the
// second (its last Tick's rewrites buffered or not) and a start of it all in memory: every
// job as the first shows it.
using Seen = std::tuple<std::string, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, std::string>;
std::pair<Seen, int64_t> See(command::Session& s, uint64_t id) {
  Result p = s.Peek(id);
  if (p.outcome != Outcome::kFound) return {Seen{"absent", 0, 0, 0, 0, 0, ""}, 0};
  const std::string body(p.job.body);
  Result r = s.StatsJob(id);
  const command::JobStats& x = *r.job_stats;
  return {Seen{std::string(x.state), x.pri, x.delay_s, x.reserves, x.releases, x.timeouts, body},
          x.time_left_s};
}

TEST(ColdStoreRewriteTest, RandomChurnAndAKillLoseNothing) {
  for (uint32_t seed = 1; seed <= 30; seed++) {
    std::mt19937 rng(seed);
    auto rnd = [&](uint32_t n) { return static_cast<uint32_t>(rng() % n); };
    const std::string dir = MakeTempDir();
    FakeClock clock;
    std::vector<uint64_t> ids;
    std::map<uint64_t, std::pair<Seen, int64_t>> want;
    std::vector<uint64_t> order;  // the ready jobs as reserves give them out
    // A job's delay ends at a wall-clock time in its record, which a restart reads back: the
    // time left may drop by the real time since the puts (more on a busy machine), never grow.
    const auto began = std::chrono::steady_clock::now();
    {
      Store hot(clock, 0, 0);
      Store cold(clock, 20000, 30, dir, 8192);
      for (int step = 0; step < 3000 && !HasFatalFailure(); step++) {
        const uint32_t op = rnd(100);
        if (op < 35) {
          const uint32_t pri = rnd(5), delay = rnd(3) == 0 ? 20 + rnd(200) : 0;
          const std::string body(10 + rnd(200), static_cast<char>('a' + rnd(26)));
          Result a = Put(*hot.s, pri, delay, body), b = Put(*cold.s, pri, delay, body);
          ASSERT_EQ(a.number, b.number);
          ids.push_back(a.number);
        } else if (op < 75) {
          Result a = hot.s->Reserve(0), b = cold.s->Reserve(0);
          ASSERT_EQ(a.outcome, b.outcome) << "seed " << seed << " step " << step;
          if (a.outcome != Outcome::kReserved) continue;
          ASSERT_EQ(a.job.id, b.job.id) << "seed " << seed << " step " << step;
          const uint32_t fate = rnd(10);
          if (fate < 6) {
            const uint32_t pri = rnd(5), delay = rnd(2) == 0 ? rnd(300) : 0;
            ASSERT_EQ(hot.s->Release(a.job.id, pri, delay).outcome, Outcome::kReleased);
            ASSERT_EQ(cold.s->Release(a.job.id, pri, delay).outcome, Outcome::kReleased);
          } else {
            ASSERT_EQ(hot.s->Delete(a.job.id).outcome, Outcome::kDeleted);
            ASSERT_EQ(cold.s->Delete(a.job.id).outcome, Outcome::kDeleted);
          }
        } else if (op < 90) {
          hot.Tick();
          cold.Tick();
        } else {
          cold.log->Flush();
          cold.store->Tick();  // rewrites placed, not written
        }
      }
      hot.Tick();
      cold.log->Flush();
      cold.store->Tick();
      if (seed % 2 == 0) cold.log->Flush();
      for (uint64_t id : ids) want[id] = See(*hot.s, id);
      for (Result r = hot.s->Reserve(0); r.outcome == Outcome::kReserved; r = hot.s->Reserve(0)) {
        order.push_back(r.job.id);
      }
      ASSERT_GT(cold.cold->stats().rewrites, 0u);
      if (seed % 3 == 2) {
        cold.Shutdown();
      } else {
        cold.Crash();
      }
    }
    {
      // Back all in memory, or (every third seed) with the tier again, demoting meanwhile.
      Store back(clock, seed % 3 == 0 ? 0 : 20000, 30, dir, 8192);
      for (int i = 0; i < 10; i++) back.Tick();
      // Jobs whose delay ran out in the real time the test took (a busy machine): ready now,
      // and where they join the ready order depends on that time, so it is not compared.
      std::set<uint64_t> ran_out;
      for (uint64_t id : ids) {
        const auto got = See(*back.s, id);
        const auto passed =
            std::chrono::ceil<std::chrono::seconds>(std::chrono::steady_clock::now() - began)
                .count();
        if (std::get<0>(want[id].first) == "delayed" && std::get<0>(got.first) == "ready" &&
            want[id].second <= passed + 1) {
          ran_out.insert(id);
          continue;
        }
        EXPECT_EQ(got.first, want[id].first) << "seed " << seed << " job " << id;
        EXPECT_LE(got.second, want[id].second + 1) << "seed " << seed << " job " << id;
        EXPECT_GE(got.second, want[id].second - 1 - passed) << "seed " << seed << " job " << id;
      }
      std::vector<uint64_t> got;
      for (Result r = back.s->Reserve(0); r.outcome == Outcome::kReserved; r = back.s->Reserve(0)) {
        if (!ran_out.count(r.job.id)) got.push_back(r.job.id);
      }
      EXPECT_EQ(got, order) << "seed " << seed;
    }
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace stalkd::storage
