// The engine's core: put, bury and kick, delete, sessions, events, its destructor, and a
// random walk over the whole API with the invariants checked after every step.
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

// ------------------------------------------------------------------ put

TEST_F(EngineTest, PutReadyAndCounters) {
  Session* s = Open();
  EXPECT_FALSE(s->is_producer());
  uint64_t a = Put(s, 5);
  uint64_t b = Put(s, 2000);
  EXPECT_EQ(a, 1u);
  EXPECT_EQ(b, 2u);
  EXPECT_TRUE(s->is_producer());
  EXPECT_EQ(State(a), JobState::kReady);
  EXPECT_EQ(C().ready, 2u);
  EXPECT_EQ(C().urgent, 1u);
  EXPECT_EQ(C().total_jobs, 2u);
  EXPECT_EQ(C().producers, 1u);
  Tube* t = engine_.FindTube("default");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->stat.urgent, 1u);
  EXPECT_EQ(t->stat.total_jobs, 2u);
  EXPECT_EQ(engine_.PeekReady(t)->id, a);
  // Priority 1023 is urgent, 1024 is not.
  Put(s, 1023);
  Put(s, 1024);
  EXPECT_EQ(C().urgent, 2u);
}

TEST_F(EngineTest, PutDelayedBecomesReadyAfterTick) {
  Session* s = Open();
  uint64_t id = Put(s, 0, 5);
  EXPECT_EQ(State(id), JobState::kDelayed);
  EXPECT_EQ(C().delayed, 1u);
  EXPECT_EQ(C().ready, 0u);
  EXPECT_EQ(engine_.PeekDelayed(engine_.FindTube("default"))->id, id);
  EXPECT_EQ(Tick(), clock_.Now() + 5 * kSecond);
  Advance(4 * kSecond);
  EXPECT_EQ(State(id), JobState::kDelayed);
  Advance(kSecond);
  EXPECT_EQ(State(id), JobState::kReady);
  EXPECT_EQ(C().delayed, 0u);
  EXPECT_EQ(C().ready, 1u);
  EXPECT_EQ(Tick(), kForever);
}

TEST_F(EngineTest, DelayedJobGoesToWaitingReserver) {
  Session* p = Open();
  Session* w = Open();
  uint64_t id = Put(p, 0, 2);
  ReserveWait(w);
  Advance(2 * kSecond);
  std::vector<Event> ev = Events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, Kind::kReserved);
  EXPECT_EQ(ev[0].session, w);
  EXPECT_EQ(ev[0].job->id, id);
  EXPECT_FALSE(w->waiting());
}

TEST_F(EngineTest, TtrZeroBecomesOne) {
  Session* s = Open();
  uint64_t id = Put(s, 0, 0, 0);
  EXPECT_EQ(engine_.Find(id)->ttr_s, 1u);
}

TEST_F(EngineTest, DrainingRefusesPut) {
  Session* s = Open();
  engine_.set_draining(true);
  EXPECT_TRUE(engine_.draining());
  Job* j = engine_.NewJob(s, 0, 0, 1, 1);
  ASSERT_NE(j, nullptr);
  std::memcpy(j->data(), "x\r\n", 3);
  EXPECT_EQ(engine_.Put(s, j), Engine::PutResult::kDraining);
  Check();
  EXPECT_EQ(C().total_jobs, 0u);
  EXPECT_EQ(C().ready, 0u);
  engine_.set_draining(false);
  EXPECT_NE(Put(s), 0u);
}

TEST_F(EngineTest, DiscardFreesTubeReference) {
  Session* s = Open();
  engine_.Use(s, "t");
  Job* j = engine_.NewJob(s, 0, 0, 1, 3);
  ASSERT_NE(j, nullptr);
  engine_.Use(s, "default");
  EXPECT_NE(engine_.FindTube("t"), nullptr);  // the new job holds it
  engine_.Discard(j);
  Check();
  EXPECT_EQ(engine_.FindTube("t"), nullptr);
  EXPECT_EQ(engine_.Find(1), nullptr);
}

TEST_F(EngineTest, IdsAreNotReusedAfterDiscard) {
  Session* s = Open();
  Job* j = engine_.NewJob(s, 0, 0, 1, 0);
  engine_.Discard(j);
  EXPECT_EQ(Put(s), 2u);
}

// ------------------------------------------------------------------ bury / kick

TEST_F(EngineTest, BuryAndKickBuriedFifo) {
  Session* p = Open();
  Session* w = Open();
  uint64_t a = Put(p, 3);
  uint64_t b = Put(p, 1);
  uint64_t c = Put(p, 2);
  EXPECT_EQ(ReserveNow(w), b);
  EXPECT_EQ(ReserveNow(w), c);
  EXPECT_EQ(ReserveNow(w), a);
  EXPECT_FALSE(engine_.Bury(p, a, 0));
  EXPECT_TRUE(engine_.Bury(w, c, 100));
  EXPECT_TRUE(engine_.Bury(w, a, 5000));
  EXPECT_TRUE(engine_.Bury(w, b, 9));
  Check();
  EXPECT_FALSE(engine_.Bury(w, b, 9));
  EXPECT_EQ(C().buried, 3u);
  EXPECT_EQ(engine_.Find(c)->pri, 100u);
  EXPECT_EQ(engine_.Find(c)->buries(), 1u);
  Tube* t = engine_.FindTube("default");
  EXPECT_EQ(engine_.PeekBuried(t)->id, c);
  // Kicked oldest-buried first, regardless of priority.
  EXPECT_EQ(engine_.KickBuried(t, 2), 2u);
  Check();
  EXPECT_EQ(State(c), JobState::kReady);
  EXPECT_EQ(State(a), JobState::kReady);
  EXPECT_EQ(State(b), JobState::kBuried);
  EXPECT_EQ(engine_.Find(c)->kicks(), 1u);
  EXPECT_EQ(engine_.KickBuried(t, 10), 1u);
  Check();
  EXPECT_EQ(engine_.KickBuried(t, 10), 0u);
  EXPECT_EQ(C().buried, 0u);
  EXPECT_EQ(C().ready, 3u);
}

TEST_F(EngineTest, KickDelayedSoonestFirst) {
  Session* p = Open();
  uint64_t a = Put(p, 0, 30);
  uint64_t b = Put(p, 0, 10);
  uint64_t c = Put(p, 0, 20);
  Tube* t = engine_.FindTube("default");
  EXPECT_EQ(engine_.PeekDelayed(t)->id, b);
  EXPECT_EQ(engine_.KickDelayed(t, 2), 2u);
  Check();
  EXPECT_EQ(State(b), JobState::kReady);
  EXPECT_EQ(State(c), JobState::kReady);
  EXPECT_EQ(State(a), JobState::kDelayed);
  EXPECT_EQ(engine_.Find(b)->kicks(), 1u);
  EXPECT_EQ(engine_.KickDelayed(t, 0), 0u);
  EXPECT_EQ(engine_.KickDelayed(t, 5), 1u);
  Check();
  EXPECT_EQ(C().delayed, 0u);
}

TEST_F(EngineTest, KickBuriedHandsToWaiter) {
  Session* p = Open();
  Session* w = Open();
  uint64_t id = Put(p);
  ReserveNow(w);
  engine_.Bury(w, id, 0);
  Session* w2 = Open();
  ReserveWait(w2);
  EXPECT_EQ(engine_.KickBuried(engine_.FindTube("default"), 1), 1u);
  Check();
  std::vector<Event> ev = Events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].session, w2);
}

TEST_F(EngineTest, KickJob) {
  Session* p = Open();
  Session* w = Open();
  uint64_t reserved = Put(p, 1);
  uint64_t delayed = Put(p, 0, 100);
  uint64_t buried = Put(p, 0);
  uint64_t ready = Put(p, 5);
  EXPECT_EQ(ReserveNow(w), buried);
  EXPECT_TRUE(engine_.Bury(w, buried, 0));
  EXPECT_EQ(ReserveNow(w), reserved);
  EXPECT_FALSE(engine_.KickJob(ready));
  EXPECT_FALSE(engine_.KickJob(reserved));
  EXPECT_FALSE(engine_.KickJob(12345));
  Check();
  EXPECT_TRUE(engine_.KickJob(buried));
  Check();
  EXPECT_EQ(State(buried), JobState::kReady);
  EXPECT_EQ(engine_.Find(buried)->kicks(), 1u);
  EXPECT_TRUE(engine_.KickJob(delayed));
  Check();
  EXPECT_EQ(State(delayed), JobState::kReady);
  EXPECT_EQ(engine_.Find(delayed)->kicks(), 1u);
  EXPECT_EQ(engine_.Find(ready)->kicks(), 0u);
  EXPECT_EQ(C().delayed, 0u);
  EXPECT_EQ(C().buried, 0u);
  EXPECT_FALSE(engine_.KickJob(buried));  // now ready
}

// ------------------------------------------------------------------ delete

TEST_F(EngineTest, DeleteInEveryState) {
  Session* p = Open();
  Session* w = Open();
  uint64_t ready = Put(p, 100);
  uint64_t delayed = Put(p, 0, 10);
  uint64_t res = Put(p, 1);
  uint64_t bur = Put(p, 2);
  EXPECT_EQ(ReserveNow(w), res);
  EXPECT_EQ(ReserveNow(w), bur);
  EXPECT_TRUE(engine_.Bury(w, bur, 2));
  Check();
  Tube* t = engine_.FindTube("default");

  EXPECT_FALSE(engine_.Delete(p, res));  // reserved by another session
  EXPECT_EQ(State(res), JobState::kReserved);
  EXPECT_TRUE(engine_.Delete(w, res));
  Check();
  EXPECT_EQ(engine_.Find(res), nullptr);
  EXPECT_EQ(C().reserved, 0u);
  EXPECT_EQ(w->reserved_count(), 0u);

  EXPECT_TRUE(engine_.Delete(p, ready));
  Check();
  EXPECT_TRUE(engine_.Delete(p, delayed));
  Check();
  EXPECT_TRUE(engine_.Delete(p, bur));
  Check();
  EXPECT_FALSE(engine_.Delete(p, bur));
  EXPECT_FALSE(engine_.Delete(p, 0));
  EXPECT_EQ(t->stat.deletes, 4u);
  EXPECT_EQ(C().ready + C().delayed + C().buried + C().reserved, 0u);
  EXPECT_EQ(C().total_jobs, 4u);
  EXPECT_EQ(Tick(), kForever);  // the delayed job's timer is gone
}

// ------------------------------------------------------------------ sessions

TEST_F(EngineTest, SessionCounters) {
  Session* a = Open();
  Session* b = Open();
  EXPECT_EQ(C().sessions, 2u);
  EXPECT_EQ(C().total_sessions, 2u);
  Put(a);
  ReserveNow(b);
  Session* c = Open();
  ReserveWait(c);
  EXPECT_EQ(C().producers, 1u);
  EXPECT_EQ(C().workers, 2u);
  EXPECT_EQ(C().waiting, 1u);
  Close(c);
  EXPECT_EQ(C().waiting, 0u);
  EXPECT_EQ(C().workers, 1u);
  EXPECT_EQ(engine_.FindTube("default")->waiters.size(), 0u);
  Close(a);
  EXPECT_EQ(C().producers, 0u);
  Close(b);
  EXPECT_EQ(C().sessions, 0u);
  EXPECT_EQ(C().workers, 0u);
  EXPECT_EQ(C().total_sessions, 3u);
  EXPECT_EQ(C().ready, 1u);  // b's reserved job came back
  EXPECT_EQ(C().reserved, 0u);
}

TEST_F(EngineTest, CloseSessionReleasesReservedJobs) {
  Session* p = Open();
  Session* w = Open();
  engine_.Use(p, "t");
  engine_.Watch(w, "t");
  uint64_t a = Put(p, 1);
  uint64_t b = Put(p, 2);
  ReserveNow(w);
  ReserveNow(w);
  engine_.Use(p, "default");
  Session* w2 = Open();
  engine_.Watch(w2, "t");
  ReserveWait(w2);
  Close(w);
  EXPECT_NE(engine_.FindTube("t"), nullptr);
  std::vector<Event> ev = Events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].session, w2);
  EXPECT_EQ(ev[0].job->id, a);
  EXPECT_EQ(State(b), JobState::kReady);
  EXPECT_EQ(engine_.Find(a)->timeouts(), 0u);
  EXPECT_EQ(C().timeouts, 0u);
  EXPECT_EQ(Tick(), clock_.Now() + 60 * kSecond);
}

// As beanstalkd: a closed session's jobs come back in the order they were reserved, each
// offered to the waiting sessions as it comes back (not best-priority first).
TEST_F(EngineTest, CloseSessionReturnsJobsInReservationOrder) {
  Session* p = Open();
  Session* w = Open();
  uint64_t a = Put(p, 0);
  uint64_t b = Put(p, 5);
  uint64_t c = Put(p, 9);
  ASSERT_NE(engine_.ReserveJob(w, c), nullptr);
  ASSERT_NE(engine_.ReserveJob(w, a), nullptr);
  ASSERT_NE(engine_.ReserveJob(w, b), nullptr);
  Check();
  Session* w1 = Open();
  Session* w2 = Open();
  ReserveWait(w1);
  ReserveWait(w2);
  Close(w);
  std::vector<Event> ev = Events();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].session, w1);
  EXPECT_EQ(ev[0].job->id, c);
  EXPECT_EQ(ev[1].session, w2);
  EXPECT_EQ(ev[1].job->id, a);
  EXPECT_EQ(State(b), JobState::kReady);
}

TEST_F(EngineTest, EventsAreTakenOnce) {
  Session* w = Open();
  engine_.Reserve(w, 0);
  EXPECT_TRUE(engine_.has_events());
  std::vector<Event> ev;
  engine_.TakeEvents(&ev);
  engine_.TakeEvents(&ev);
  EXPECT_EQ(ev.size(), 1u);
  EXPECT_FALSE(engine_.has_events());
}

TEST_F(EngineTest, DestructorFreesEverything) {
  // Jobs in every state, a closing session still holding jobs: ASan checks the frees.
  FakeClock clock;
  EngineOptions o;
  o.tick_budget = 1;
  auto e = std::make_unique<Engine>(clock, o);
  Session* p = e->OpenSession(nullptr);
  Session* w = e->OpenSession(nullptr);
  for (int i = 0; i < 6; i++) {
    Job* j = e->NewJob(p, 0, i % 2 ? 5u : 0u, 10, 1);
    std::memcpy(j->data(), "a\r\n", 3);
    e->Put(p, j);
  }
  e->Reserve(w, 0);
  std::vector<Event> ev;
  e->TakeEvents(&ev);
  e->Reserve(w, 0);
  e->TakeEvents(&ev);
  ASSERT_EQ(ev.size(), 2u);
  e->Bury(w, ev[0].job->id, 0);
  e->Reserve(w, 0);
  e->Reserve(w, 0);
  e->TakeEvents(&ev);
  e->CloseSession(w);
  e->CheckInvariants();
  e.reset();
}

// ------------------------------------------------------------------ randomized

// A random walk over the whole API with invariants checked after every step.
TEST_F(EngineTest, RandomWalkKeepsInvariants) {
  uint64_t seed = 12345;
  auto rnd = [&seed](uint64_t n) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return (seed >> 33) % n;
  };
  const char* names[] = {"default", "a", "b", "c"};
  std::vector<Session*> ss;
  for (int i = 0; i < 4; i++) ss.push_back(Open());
  std::vector<Event> ev;
  uint64_t inserted = 0, deleted = 0;
  for (int step = 0; step < 6000; step++) {
    Session* s = ss[rnd(ss.size())];
    uint64_t id = rnd(engine_.counters().total_jobs + 2);
    if (s->waiting()) {
      if (rnd(4) == 0) engine_.CancelReserve(s);
      clock_.Advance(static_cast<Nanos>(rnd(3)) * kSecond / 2);
      engine_.Tick();
    } else {
      switch (rnd(16)) {
        case 0:
        case 1:
          if (Put(s, static_cast<uint32_t>(rnd(2000)), static_cast<uint32_t>(rnd(3)),
                  static_cast<uint32_t>(rnd(4)))) {
            inserted++;
          }
          break;
        case 2:
          engine_.Reserve(s, rnd(2) ? kForever : static_cast<Nanos>(rnd(3)) * kSecond);
          break;
        case 3:
          if (engine_.Delete(s, id)) deleted++;
          break;
        case 4:
          engine_.Release(s, id, static_cast<uint32_t>(rnd(2000)), static_cast<uint32_t>(rnd(2)));
          break;
        case 5:
          engine_.Bury(s, id, 0);
          break;
        case 6:
          engine_.KickJob(id);
          break;
        case 7:
          if (rnd(2)) {
            engine_.KickBuried(s->use(), static_cast<uint32_t>(rnd(5)));
          } else {
            engine_.KickDelayed(s->use(), static_cast<uint32_t>(rnd(5)));
          }
          break;
        case 8:
          engine_.Touch(s, id);
          break;
        case 9:
          engine_.Use(s, names[rnd(4)]);
          break;
        case 10:
          engine_.Watch(s, names[rnd(4)]);
          break;
        case 11:
          engine_.Ignore(s, names[rnd(4)]);
          break;
        case 12:
          engine_.PauseTube(names[rnd(4)], static_cast<uint32_t>(rnd(3)));
          break;
        case 13:
          engine_.ReserveJob(s, id);
          break;
        case 14: {
          auto it = std::find(ss.begin(), ss.end(), s);
          engine_.CloseSession(s);
          *it = engine_.OpenSession(nullptr);
          break;
        }
        default:
          clock_.Advance(static_cast<Nanos>(rnd(4)) * kSecond / 2);
          engine_.Tick();
          break;
      }
    }
    engine_.CheckInvariants();
    engine_.TakeEvents(&ev);
    for (const Event& e : ev) {
      ASSERT_TRUE(std::find(ss.begin(), ss.end(), e.session) != ss.end());
      ASSERT_FALSE(e.session->waiting());
      if (e.kind == Kind::kReserved) {
        ASSERT_EQ(e.job->reserver(), e.session);
      }
    }
    ev.clear();
    const GlobalCounters& c = engine_.counters();
    ASSERT_EQ(c.total_jobs, inserted);
    ASSERT_EQ(c.ready + c.reserved + c.delayed + c.buried, inserted - deleted);
  }
}

}  // namespace
}  // namespace stalkd::engine
