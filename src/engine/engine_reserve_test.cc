// The engine's reserve: order, waiting reserves and their timeouts, TTR, DEADLINE_SOON,
// release, reserve-job.
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

// ------------------------------------------------------------------ reserve

TEST_F(EngineTest, ReserveOrderPriThenIdAcrossTubes) {
  Session* p = Open();
  Session* w = Open();
  engine_.Use(p, "a");
  uint64_t a1 = Put(p, 10);
  uint64_t a2 = Put(p, 5);
  engine_.Use(p, "b");
  uint64_t b1 = Put(p, 5);
  uint64_t b2 = Put(p, 1);
  engine_.Use(p, "c");
  uint64_t c1 = Put(p, 0);  // not watched
  engine_.Watch(w, "a");
  engine_.Watch(w, "b");
  Check();
  EXPECT_EQ(ReserveNow(w), b2);
  EXPECT_EQ(ReserveNow(w), a2);  // pri 5, lower id than b1
  EXPECT_EQ(ReserveNow(w), b1);
  EXPECT_EQ(ReserveNow(w), a1);
  EXPECT_TRUE(engine_.Reserve(w, 0));
  std::vector<Event> ev = Events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, Kind::kTimedOut);
  EXPECT_EQ(State(c1), JobState::kReady);
  EXPECT_EQ(C().reserved, 4u);
  EXPECT_EQ(w->reserved_count(), 4u);
  EXPECT_EQ(C().workers, 1u);
  EXPECT_TRUE(w->is_worker());
  EXPECT_EQ(engine_.Find(a1)->reserves(), 1u);
  EXPECT_EQ(engine_.FindTube("a")->stat.reserved, 2u);
}

TEST_F(EngineTest, WaitingReserveServedByPutInAnyWatchedTube) {
  Session* p = Open();
  Session* w = Open();
  engine_.Watch(w, "x");
  engine_.Watch(w, "y");
  ReserveWait(w);
  EXPECT_EQ(C().waiting, 1u);
  EXPECT_EQ(engine_.FindTube("y")->waiters.size(), 1u);
  engine_.Use(p, "other");
  Put(p);
  EXPECT_FALSE(engine_.has_events());
  engine_.Use(p, "y");
  uint64_t id = Put(p);
  std::vector<Event> ev = Events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, Kind::kReserved);
  EXPECT_EQ(ev[0].session, w);
  EXPECT_EQ(ev[0].job->id, id);
  EXPECT_EQ(C().waiting, 0u);
  EXPECT_EQ(engine_.FindTube("x")->waiters.size(), 0u);
  EXPECT_EQ(State(id), JobState::kReserved);
}

// A session's wait nodes are kept from one wait to the next and grow with its watch list:
// each wait is listed on exactly the tubes watched then.
TEST_F(EngineTest, EachWaitIsOnTheTubesWatchedThen) {
  Session* p = Open();
  Session* w = Open();
  auto waiters = [&](const char* tube) { return engine_.FindTube(tube)->waiters.size(); };
  ReserveWait(w);
  engine_.CancelReserve(w);
  Check();
  engine_.Watch(w, "x");
  engine_.Watch(w, "y");
  ReserveWait(w);  // three nodes now, where one was
  EXPECT_EQ(waiters("default"), 1u);
  EXPECT_EQ(waiters("x"), 1u);
  EXPECT_EQ(waiters("y"), 1u);
  engine_.Use(p, "y");
  uint64_t id = Put(p);
  std::vector<Event> ev = Events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].job->id, id);
  EXPECT_EQ(waiters("default") + waiters("x") + waiters("y"), 0u);
  engine_.Ignore(w, "y");
  engine_.Ignore(w, "default");
  ReserveWait(w);  // one of the three kept nodes, on x only
  EXPECT_EQ(waiters("default"), 0u);
  EXPECT_EQ(waiters("x"), 1u);
  EXPECT_EQ(waiters("y"), 0u);
  engine_.Use(p, "x");
  id = Put(p);
  ev = Events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].job->id, id);
  EXPECT_EQ(waiters("x"), 0u);
  Close(w);
}

TEST_F(EngineTest, LongestWaiterServedFirst) {
  Session* p = Open();
  Session* w1 = Open();
  Session* w2 = Open();
  ReserveWait(w1);
  ReserveWait(w2);
  Put(p);
  std::vector<Event> ev = Events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].session, w1);
  Put(p);
  ev = Events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].session, w2);
}

TEST_F(EngineTest, ReserveWithTimeoutZero) {
  Session* w = Open();
  EXPECT_TRUE(engine_.Reserve(w, 0));
  Check();
  std::vector<Event> ev = Events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, Kind::kTimedOut);
  EXPECT_EQ(ev[0].session, w);
  EXPECT_FALSE(w->waiting());
  EXPECT_EQ(C().waiting, 0u);
}

TEST_F(EngineTest, ReserveTimeoutExpiresViaTick) {
  Session* w = Open();
  ReserveWait(w, 3 * kSecond);
  EXPECT_EQ(Tick(), clock_.Now() + 3 * kSecond);
  Advance(3 * kSecond - 1);
  EXPECT_FALSE(engine_.has_events());
  Advance(1);
  std::vector<Event> ev = Events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, Kind::kTimedOut);
  EXPECT_FALSE(w->waiting());
  EXPECT_EQ(Tick(), kForever);
}

TEST_F(EngineTest, CancelReserveSendsNoEvent) {
  Session* p = Open();
  Session* w = Open();
  ReserveWait(w, 3 * kSecond);
  engine_.CancelReserve(w);
  Check();
  EXPECT_FALSE(w->waiting());
  Put(p);
  Advance(5 * kSecond);
  EXPECT_FALSE(engine_.has_events());
  engine_.CancelReserve(w);  // no-op when not waiting
  Check();
}

// ------------------------------------------------------------------ TTR

TEST_F(EngineTest, TtrExpiryReleasesJobEveryTime) {
  Session* p = Open();
  Session* w = Open();
  uint64_t id = Put(p, 0, 0, 2);
  EXPECT_EQ(ReserveNow(w), id);
  EXPECT_EQ(Tick(), clock_.Now() + 2 * kSecond);
  Advance(2 * kSecond);
  EXPECT_EQ(State(id), JobState::kReady);
  EXPECT_EQ(engine_.Find(id)->timeouts(), 1u);
  EXPECT_EQ(C().timeouts, 1u);
  EXPECT_EQ(C().reserved, 0u);
  EXPECT_EQ(w->reserved_count(), 0u);

  // Again, with a touch in between.
  EXPECT_EQ(ReserveNow(w), id);
  clock_.Advance(kSecond + kSecond / 2);
  EXPECT_TRUE(engine_.Touch(w, id));
  Check();
  Advance(kSecond);  // the original deadline has passed, the touched one not
  EXPECT_EQ(State(id), JobState::kReserved);
  Advance(kSecond);
  EXPECT_EQ(State(id), JobState::kReady);
  EXPECT_EQ(engine_.Find(id)->timeouts(), 2u);
  EXPECT_EQ(C().timeouts, 2u);

  // And by another worker.
  Session* w2 = Open();
  EXPECT_EQ(ReserveNow(w2), id);
  Advance(2 * kSecond);
  EXPECT_EQ(State(id), JobState::kReady);
  EXPECT_EQ(engine_.Find(id)->timeouts(), 3u);
  EXPECT_EQ(engine_.Find(id)->reserves(), 3u);
  EXPECT_EQ(C().timeouts, 3u);
}

TEST_F(EngineTest, TtrExpiryHandsJobToWaiter) {
  Session* p = Open();
  Session* w1 = Open();
  Session* w2 = Open();
  uint64_t id = Put(p, 0, 0, 5);
  EXPECT_EQ(ReserveNow(w1), id);
  ReserveWait(w2);
  Advance(5 * kSecond);
  std::vector<Event> ev = Events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, Kind::kReserved);
  EXPECT_EQ(ev[0].session, w2);
  EXPECT_EQ(ev[0].job->id, id);
}

TEST_F(EngineTest, TouchExtendsAndOnlyOwnReserved) {
  Session* p = Open();
  Session* w = Open();
  uint64_t id = Put(p, 0, 0, 10);
  uint64_t other = Put(p, 0, 0, 10);
  EXPECT_FALSE(engine_.Touch(w, id));  // ready
  EXPECT_EQ(ReserveNow(w), id);
  EXPECT_FALSE(engine_.Touch(p, id));  // someone else's
  EXPECT_FALSE(engine_.Touch(w, other));
  EXPECT_FALSE(engine_.Touch(w, 999));
  clock_.Advance(9 * kSecond);
  EXPECT_TRUE(engine_.Touch(w, id));
  Check();
  EXPECT_EQ(engine_.Find(id)->deadline(), clock_.Now() + 10 * kSecond);
  Advance(9 * kSecond);
  EXPECT_EQ(State(id), JobState::kReserved);
  Advance(kSecond);
  EXPECT_EQ(State(id), JobState::kReady);
}

// ------------------------------------------------------------------ DEADLINE_SOON

TEST_F(EngineTest, ReserveReturnsFalseWhenDeadlineSoonAndNothingReady) {
  Session* p = Open();
  Session* w = Open();
  uint64_t id = Put(p, 0, 0, 3);
  EXPECT_EQ(ReserveNow(w), id);
  clock_.Advance(kSecond + kSecond / 2);
  Tick();
  // 1.5 s left: not yet within the margin.
  ReserveWait(w);
  engine_.CancelReserve(w);
  Check();
  clock_.Advance(kSecond / 2);  // exactly one second left
  Tick();
  EXPECT_FALSE(engine_.Reserve(w, kForever));
  Check();
  EXPECT_FALSE(engine_.has_events());
  EXPECT_FALSE(w->waiting());
  EXPECT_FALSE(engine_.Reserve(w, 0));
  EXPECT_FALSE(engine_.has_events());
  // With a ready job in a watched tube, the reserve goes ahead.
  uint64_t id2 = Put(p);
  EXPECT_EQ(ReserveNow(w), id2);
}

TEST_F(EngineTest, ReserveDeadlineSoonTtrOneIsImmediate) {
  Session* p = Open();
  Session* w = Open();
  Put(p, 0, 0, 1);
  ReserveNow(w);
  EXPECT_FALSE(engine_.Reserve(w, kForever));
  Check();
}

TEST_F(EngineTest, WaitingReserveGetsDeadlineSoonEvent) {
  Session* p = Open();
  Session* w = Open();
  uint64_t id = Put(p, 0, 0, 10);
  EXPECT_EQ(ReserveNow(w), id);
  ReserveWait(w);
  // The timer fires one second before the TTR deadline.
  EXPECT_EQ(Tick(), clock_.Now() + 9 * kSecond);
  Advance(9 * kSecond - 1);
  EXPECT_FALSE(engine_.has_events());
  Advance(1);
  std::vector<Event> ev = Events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, Kind::kDeadlineSoon);
  EXPECT_EQ(ev[0].session, w);
  EXPECT_FALSE(w->waiting());
  EXPECT_EQ(State(id), JobState::kReserved);
  // The job still times out at its deadline.
  EXPECT_EQ(Tick(), clock_.Now() + kSecond);
  Advance(kSecond);
  EXPECT_EQ(State(id), JobState::kReady);
  EXPECT_EQ(C().timeouts, 1u);
  EXPECT_FALSE(engine_.has_events());
}

// A Tick that comes late (more than the 1 s DEADLINE_SOON margin after the timer was due,
// e.g. the server stalled) finds a waiting session's own reserved job already expired: the
// job goes back to ready and straight to that waiting session, which gets exactly one event.
TEST_F(EngineTest, LateTickWhileWaitingOnOwnExpiredJob) {
  Session* p = Open();
  Session* w = Open();
  uint64_t id = Put(p, 0, 0, 2);
  EXPECT_EQ(ReserveNow(w), id);
  ReserveWait(w);               // 2 s left: not yet DEADLINE_SOON
  clock_.Advance(3 * kSecond);  // no Tick at deadline - 1 s
  Tick();
  std::vector<Event> ev = Events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].session, w);
  EXPECT_FALSE(w->waiting());
  EXPECT_EQ(C().waiting, 0u);
  EXPECT_EQ(C().timeouts, 1u);
  if (ev[0].kind == Kind::kReserved) {
    EXPECT_EQ(ev[0].job->reserver(), w);
  }
}

TEST_F(EngineTest, WaitingReserveTimeoutBeforeDeadlineSoon) {
  Session* p = Open();
  Session* w = Open();
  Put(p, 0, 0, 10);
  ReserveNow(w);
  ReserveWait(w, 2 * kSecond);
  Advance(2 * kSecond);
  std::vector<Event> ev = Events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, Kind::kTimedOut);
}

// ------------------------------------------------------------------ release

TEST_F(EngineTest, ReleaseReadyWithNewPriority) {
  Session* p = Open();
  Session* w = Open();
  uint64_t id = Put(p, 5000);
  EXPECT_EQ(ReserveNow(w), id);
  EXPECT_FALSE(engine_.Release(p, id, 1, 0));  // not the reserver
  EXPECT_FALSE(engine_.Release(w, id + 1, 1, 0));
  EXPECT_TRUE(engine_.Release(w, id, 1, 0));
  Check();
  Job* j = engine_.Find(id);
  EXPECT_EQ(j->state(), JobState::kReady);
  EXPECT_EQ(j->pri, 1u);
  EXPECT_EQ(j->releases(), 1u);
  EXPECT_EQ(j->reserver(), nullptr);
  EXPECT_EQ(C().urgent, 1u);
  EXPECT_EQ(C().reserved, 0u);
  EXPECT_FALSE(engine_.Release(w, id, 1, 0));  // no longer reserved
}

TEST_F(EngineTest, ReleaseWithDelay) {
  Session* p = Open();
  Session* w = Open();
  uint64_t id = Put(p);
  ReserveNow(w);
  EXPECT_TRUE(engine_.Release(w, id, 7, 3));
  Check();
  EXPECT_EQ(State(id), JobState::kDelayed);
  EXPECT_EQ(engine_.Find(id)->delay_s(), 3u);
  EXPECT_EQ(C().delayed, 1u);
  Advance(3 * kSecond);
  EXPECT_EQ(State(id), JobState::kReady);
  EXPECT_EQ(engine_.Find(id)->releases(), 1u);
}

TEST_F(EngineTest, ReleaseGoesToWaiter) {
  Session* p = Open();
  Session* w1 = Open();
  Session* w2 = Open();
  uint64_t id = Put(p);
  ReserveNow(w1);
  ReserveWait(w2);
  EXPECT_TRUE(engine_.Release(w1, id, 0, 0));
  Check();
  std::vector<Event> ev = Events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].session, w2);
  EXPECT_EQ(ev[0].job->id, id);
}

// ------------------------------------------------------------------ reserve-job

TEST_F(EngineTest, ReserveJobFromReadyDelayedBuried) {
  Session* p = Open();
  Session* w = Open();
  uint64_t ready = Put(p);
  uint64_t delayed = Put(p, 0, 50);
  uint64_t bur = Put(p);
  Job* j = engine_.ReserveJob(w, bur);
  Check();
  ASSERT_NE(j, nullptr);
  EXPECT_TRUE(engine_.Bury(w, bur, 0));
  Check();

  EXPECT_EQ(engine_.ReserveJob(w, 999), nullptr);
  j = engine_.ReserveJob(w, ready);
  Check();
  ASSERT_NE(j, nullptr);
  EXPECT_EQ(j->state(), JobState::kReserved);
  EXPECT_EQ(j->reserver(), w);
  EXPECT_EQ(engine_.ReserveJob(w, ready), nullptr);  // already reserved
  EXPECT_EQ(engine_.ReserveJob(p, ready), nullptr);

  j = engine_.ReserveJob(w, delayed);
  Check();
  ASSERT_NE(j, nullptr);
  EXPECT_EQ(C().delayed, 0u);
  j = engine_.ReserveJob(p, bur);
  Check();
  ASSERT_NE(j, nullptr);
  EXPECT_EQ(j->reserver(), p);
  EXPECT_EQ(engine_.Find(bur)->reserves(), 2u);
  EXPECT_EQ(C().reserved, 3u);
  EXPECT_EQ(C().buried, 0u);
  EXPECT_TRUE(p->is_worker());
  EXPECT_EQ(C().workers, 2u);
  EXPECT_EQ(Tick(), clock_.Now() + 60 * kSecond);  // TTR timers run
}

}  // namespace
}  // namespace stalkd::engine
