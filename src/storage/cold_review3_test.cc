// Review of the disk tier's rewrites of changed jobs (docs/DISK-TIER.md, "Which jobs go"):
// a tier slightly over its budget should write again only about as many changed jobs as
// must leave memory, and those should go as soon as their records are written.
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "command/put_test_util.h"
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

struct Quiet final : command::Client {
  void OnResult(const Result&) override {}
};

struct Store {
  std::string dir = MakeTempDir();
  std::unique_ptr<store::MemoryStore> store;
  std::unique_ptr<Binlog> log;
  std::unique_ptr<ColdStore> cold;
  Quiet quiet;
  std::unique_ptr<command::Session> s;

  Store(FakeClock& clock, size_t budget, uint32_t tick_budget) {
    store = std::make_unique<store::MemoryStore>(clock, store::MemoryStoreOptions{}, nullptr);
    BinlogOptions o;
    o.dir = dir;
    o.fsync_never = true;
    o.segment_size = 1 << 22;  // no compaction (it writes jobs whole too)
    o.disk_tier = budget != 0;
    log = std::make_unique<Binlog>(o, clock);
    if (budget != 0) {
      ColdStoreOptions co;
      co.budget = budget;
      co.ready_hot = 0;
      co.tick_budget = tick_budget;
      cold = std::make_unique<ColdStore>(store->engine(), *log, co);
    }
    std::string error;
    EXPECT_TRUE(log->Lock(&error) && log->Recover(&store->engine(), &error)) << error;
    store->engine().set_log(log.get());
    if (cold) store->set_cold(cold.get());
    s = store->Open(quiet);
  }
  ~Store() {
    s.reset();
    store->set_cold(nullptr);
    log->Close();
    store->engine().set_log(nullptr);
    cold.reset();
    log.reset();
    store.reset();
    RemoveDir(dir);
  }
  void Tick() {
    store->Tick();
    log->Flush();
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

TEST(ColdReview3Test, ReleasedJobsRewriteNoMoreThanMustGo) { RewritesNoMoreThanMustGo(0); }
TEST(ColdReview3Test, ReleasedDelayedJobsRewriteNoMoreThanMustGo) {
  RewritesNoMoreThanMustGo(3600);
}

}  // namespace
}  // namespace stalkd::storage
