// The engine's timer work in Tick: bounded by its budget (a closed session's jobs, due
// delayed jobs, TTR expiries), deadlines nobody waits for in batches, the next work it reports.
// The engine's unit tests are split by topic, sharing the EngineTest fixture
// (engine_test_fixture.h): engine_test.cc (put, bury and kick, delete, sessions, events,
// a random walk), engine_reserve_test.cc, engine_memory_test.cc, engine_tubes_test.cc,
// engine_timers_test.cc; engine_lifecycle_test.cc has the lifecycle extensions.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine_test_fixture.h"

namespace stalkd::engine {
namespace {

class SmallBudgetEngineTest : public EngineTest {
 protected:
  static EngineOptions Opts() {
    EngineOptions o;
    o.tick_budget = 10;
    return o;
  }
  SmallBudgetEngineTest() : EngineTest(Opts()) {}
};

TEST_F(SmallBudgetEngineTest, CloseSessionReleasesFewJobsAtOnce) {
  Session* p = Open();
  Session* w = Open();
  const size_t n = Engine::kImmediateRelease;
  for (size_t i = 0; i < n; i++) Put(p);
  for (size_t i = 0; i < n; i++) ReserveNow(w);
  Close(w);
  EXPECT_EQ(C().ready, n);
  EXPECT_EQ(C().reserved, 0u);
}

TEST_F(SmallBudgetEngineTest, CloseSessionReleasesManyJobsOverSeveralTicks) {
  Session* p = Open();
  Session* w = Open();
  const size_t n = Engine::kImmediateRelease + 31;  // 95 with the budget of 10
  std::vector<uint64_t> ids;
  for (size_t i = 0; i < n; i++) ids.push_back(Put(p, static_cast<uint32_t>(i)));
  for (size_t i = 0; i < n; i++) EXPECT_EQ(ReserveNow(w), ids[i]);
  Close(w);
  EXPECT_EQ(C().ready, 0u);
  EXPECT_EQ(C().reserved, n);
  size_t ticks = 0;
  while (C().reserved > 0) {
    EXPECT_EQ(C().ready, ticks * 10);
    Nanos next = Tick();
    EXPECT_EQ(next, C().reserved > 0 ? clock_.Now() : kForever);
    ticks++;
    ASSERT_LT(ticks, 20u);
  }
  EXPECT_EQ(ticks, 10u);
  EXPECT_EQ(C().ready, n);
  // They come back in reservation order, so the most urgent is first again.
  Session* w2 = Open();
  EXPECT_EQ(ReserveNow(w2), ids[0]);
}

TEST_F(SmallBudgetEngineTest, AWaitingConsumerIsNotBehindABacklogOfDueJobsNobodyWaitsFor) {
  Session* p = Open();
  Session* w = Open();
  engine_.Use(p, "bulk");
  for (int i = 0; i < 50; i++) Put(p, 0, 1);  // fall due first, five budgets' worth
  engine_.Use(p, "consumed");
  clock_.Advance(kSecond / 2);
  uint64_t wanted = Put(p, 0, 1);
  uint64_t second = Put(p, 0, 1);
  engine_.Watch(w, "consumed");
  engine_.Ignore(w, "default");
  ReserveWait(w);
  clock_.Advance(kSecond);  // all 52 are due
  Tick();
  std::vector<Event> ev = Events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].session, w);
  EXPECT_EQ(ev[0].job->id, wanted);
  // The rest of the budget went to the oldest due jobs, as ever; the other consumed job is
  // one of the rest, in deadline order, since nobody waits for it.
  EXPECT_EQ(C().ready, 9u);
  EXPECT_EQ(State(second), JobState::kDelayed);
  for (int i = 0; i < 5; i++) Tick();
  EXPECT_EQ(C().ready, 51u);
  EXPECT_EQ(State(second), JobState::kReady);
}

class BatchWaitEngineTest : public EngineTest {
 protected:
  static EngineOptions Opts() {
    EngineOptions o;
    o.batch_wait = 250'000;
    return o;
  }
  BatchWaitEngineTest() : EngineTest(Opts()) {}
};

TEST_F(BatchWaitEngineTest, DeadlinesNobodyWaitsForComeInBatchesTheOthersExactly) {
  Session* p = Open();
  Session* w = Open();
  Put(p, 0, 1);
  clock_.Advance(kSecond - 10'000);  // due in 10 us
  EXPECT_EQ(Tick(), clock_.Now() + 250'000);
  // Once a session waits on the tube, its jobs' deadlines count exactly.
  ReserveWait(w);
  EXPECT_EQ(Tick(), clock_.Now() + 10'000);
  clock_.Advance(10'000);
  Tick();
  ASSERT_EQ(Events().size(), 1u);
  // A far deadline is reported as it is; a reserve timeout exactly.
  Put(p, 0, 5);
  EXPECT_EQ(Tick(), clock_.Now() + 5 * kSecond);
  ReserveWait(w, 3'000);
  EXPECT_EQ(Tick(), clock_.Now() + 3'000);
}

TEST_F(SmallBudgetEngineTest, ReleasedJobsOfClosedSessionNotDeletableByOthers) {
  Session* p = Open();
  Session* w = Open();
  const size_t n = Engine::kImmediateRelease + 5;
  std::vector<uint64_t> ids;
  for (size_t i = 0; i < n; i++) ids.push_back(Put(p));
  for (size_t i = 0; i < n; i++) ReserveNow(w);
  Close(w);
  // Until Ticks return them, the closed session's jobs stay reserved: NOT_FOUND for everyone.
  int refused = 0;
  for (uint64_t id : ids) {
    if (engine_.Find(id)->state() == JobState::kReserved) {
      EXPECT_FALSE(engine_.Delete(p, id));
      EXPECT_FALSE(engine_.KickJob(id));
      EXPECT_EQ(engine_.ReserveJob(p, id), nullptr);
      refused++;
    }
  }
  EXPECT_EQ(refused, static_cast<int>(n));
  Check();
  while (C().reserved > 0) Tick();
  EXPECT_EQ(C().ready, n);
}

TEST_F(SmallBudgetEngineTest, TickPromotesBoundedDelayed) {
  Session* p = Open();
  for (int i = 0; i < 100; i++) Put(p, 0, 1);
  clock_.Advance(kSecond);
  EXPECT_EQ(Tick(), clock_.Now());
  EXPECT_EQ(C().ready, 10u);
  EXPECT_EQ(C().delayed, 90u);
  int ticks = 1;
  while (C().delayed > 0) {
    Tick();
    ticks++;
    ASSERT_LT(ticks, 20);
  }
  EXPECT_EQ(ticks, 10);
  EXPECT_EQ(C().ready, 100u);
  EXPECT_EQ(Tick(), kForever);
}

TEST_F(SmallBudgetEngineTest, TickBoundsTtrExpiries) {
  Session* p = Open();
  Session* w = Open();
  for (int i = 0; i < 25; i++) Put(p, 0, 0, 5);
  for (int i = 0; i < 25; i++) ReserveNow(w);
  clock_.Advance(5 * kSecond);
  EXPECT_EQ(Tick(), clock_.Now());
  EXPECT_EQ(C().timeouts, 10u);
  Tick();
  EXPECT_EQ(C().timeouts, 20u);
  Tick();
  EXPECT_EQ(C().timeouts, 25u);
  EXPECT_EQ(C().reserved, 0u);
}

TEST_F(EngineTest, TickReportsNextWork) {
  Session* p = Open();
  Session* w = Open();
  EXPECT_EQ(Tick(), kForever);
  Put(p, 0, 50);
  EXPECT_EQ(Tick(), clock_.Now() + 50 * kSecond);
  engine_.PauseTube("default", 20);
  EXPECT_EQ(Tick(), clock_.Now() + 20 * kSecond);
  Put(p, 0, 0, 10);
  engine_.PauseTube("default", 0);
  ReserveNow(w);
  EXPECT_EQ(Tick(), clock_.Now() + 10 * kSecond);
}

}  // namespace
}  // namespace stalkd::engine
