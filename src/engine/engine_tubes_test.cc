// The engine's tubes: pause, creation on reference and vanishing, watch and ignore.
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

// ------------------------------------------------------------------ pause

TEST_F(EngineTest, PauseHoldsReservationsUntilTick) {
  Session* p = Open();
  Session* w = Open();
  uint64_t id = Put(p);
  EXPECT_FALSE(engine_.PauseTube("nope", 5));
  EXPECT_TRUE(engine_.PauseTube("default", 5));
  Check();
  Tube* t = engine_.FindTube("default");
  EXPECT_TRUE(t->paused());
  EXPECT_EQ(t->stat.pauses, 1u);
  ReserveWait(w);
  uint64_t id2 = Put(p);
  EXPECT_FALSE(engine_.has_events());
  EXPECT_EQ(Tick(), clock_.Now() + 5 * kSecond);
  Advance(5 * kSecond - 1);
  EXPECT_FALSE(engine_.has_events());
  Advance(1);
  EXPECT_FALSE(t->paused());
  std::vector<Event> ev = Events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].job->id, id);
  EXPECT_EQ(State(id2), JobState::kReady);
}

TEST_F(EngineTest, PausedTubeSkippedForOtherWatchedTubes) {
  Session* p = Open();
  Session* w = Open();
  engine_.Use(p, "paused");
  uint64_t best = Put(p, 0);
  engine_.Use(p, "open");
  uint64_t worse = Put(p, 100);
  engine_.Watch(w, "paused");
  engine_.Watch(w, "open");
  EXPECT_TRUE(engine_.PauseTube("paused", 5));
  Check();
  EXPECT_EQ(ReserveNow(w), worse);
  ReserveWait(w);
  Advance(5 * kSecond);
  std::vector<Event> ev = Events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].job->id, best);
}

TEST_F(EngineTest, PauseZeroUnpauses) {
  Session* p = Open();
  Session* w = Open();
  EXPECT_TRUE(engine_.PauseTube("default", 100));
  Check();
  ReserveWait(w);
  uint64_t id = Put(p);
  EXPECT_FALSE(engine_.has_events());
  EXPECT_TRUE(engine_.PauseTube("default", 0));
  Check();
  EXPECT_FALSE(engine_.FindTube("default")->paused());
  EXPECT_EQ(engine_.FindTube("default")->stat.pauses, 2u);
  std::vector<Event> ev = Events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].job->id, id);
  EXPECT_EQ(Tick(), clock_.Now() + 60 * kSecond);  // only the TTR remains
}

TEST_F(EngineTest, RepauseMovesUnpauseTime) {
  Session* w = Open();
  engine_.Watch(w, "default");
  EXPECT_TRUE(engine_.PauseTube("default", 100));
  EXPECT_TRUE(engine_.PauseTube("default", 2));
  Check();
  EXPECT_EQ(Tick(), clock_.Now() + 2 * kSecond);
  Advance(2 * kSecond);
  EXPECT_FALSE(engine_.FindTube("default")->paused());
}

TEST_F(EngineTest, PausedTubeVanishesWhenUnreferenced) {
  Session* s = Open();
  engine_.Use(s, "p");
  EXPECT_TRUE(engine_.PauseTube("p", 10));
  engine_.Use(s, "default");
  Check();
  EXPECT_EQ(engine_.FindTube("p"), nullptr);
  EXPECT_EQ(Tick(), kForever);
}

// ------------------------------------------------------------------ tubes

TEST_F(EngineTest, TubesCreatedOnReferenceAndVanish) {
  EXPECT_EQ(TubeNames(), std::vector<std::string>({"default"}));
  Session* s = Open();
  engine_.Use(s, "a");
  Check();
  engine_.Watch(s, "b");
  Check();
  engine_.Watch(s, "c");
  Check();
  EXPECT_EQ(TubeNames(), std::vector<std::string>({"default", "a", "b", "c"}));
  EXPECT_EQ(engine_.FindTube("a")->stat.using_ct, 1u);
  EXPECT_EQ(engine_.FindTube("b")->stat.watching_ct, 1u);
  // Removing "a" moves the last tube into its place.
  engine_.Use(s, "default");
  Check();
  EXPECT_EQ(TubeNames(), std::vector<std::string>({"default", "c", "b"}));
  EXPECT_EQ(engine_.Ignore(s, "c"), 2u);
  Check();
  EXPECT_EQ(TubeNames(), std::vector<std::string>({"default", "b"}));
  // A tube holding a job stays after its last user leaves.
  engine_.Use(s, "j");
  uint64_t id = Put(s);
  engine_.Use(s, "default");
  Check();
  EXPECT_NE(engine_.FindTube("j"), nullptr);
  EXPECT_EQ(engine_.FindTube("j")->stat.using_ct, 0u);
  EXPECT_TRUE(engine_.Delete(s, id));
  Check();
  EXPECT_EQ(engine_.FindTube("j"), nullptr);
  Close(s);
  EXPECT_EQ(TubeNames(), std::vector<std::string>({"default"}));
}

TEST_F(EngineTest, DefaultNeverVanishes) {
  Session* s = Open();
  engine_.Use(s, "x");
  engine_.Watch(s, "x");
  EXPECT_EQ(engine_.Ignore(s, "default"), 1u);
  Check();
  ASSERT_NE(engine_.FindTube("default"), nullptr);
  EXPECT_EQ(engine_.FindTube("default")->stat.using_ct, 0u);
  EXPECT_EQ(engine_.FindTube("default")->stat.watching_ct, 0u);
  Close(s);
  EXPECT_EQ(TubeNames(), std::vector<std::string>({"default"}));
}

TEST_F(EngineTest, WatchAndIgnoreSemantics) {
  Session* s = Open();
  EXPECT_EQ(WatchNames(s), std::vector<std::string>({"default"}));
  EXPECT_EQ(engine_.Watch(s, "a"), 2u);
  EXPECT_EQ(engine_.Watch(s, "a"), 2u);  // idempotent
  EXPECT_EQ(engine_.FindTube("a")->stat.watching_ct, 1u);
  EXPECT_EQ(engine_.Watch(s, "b"), 3u);
  EXPECT_EQ(engine_.Watch(s, "c"), 4u);
  Check();
  // Ignoring swaps the last watched tube into the gap.
  EXPECT_EQ(engine_.Ignore(s, "default"), 3u);
  EXPECT_EQ(WatchNames(s), std::vector<std::string>({"c", "a", "b"}));
  // Ignoring a tube not watched (or not existing) changes nothing and creates nothing.
  EXPECT_EQ(engine_.Ignore(s, "zzz"), 3u);
  EXPECT_EQ(engine_.FindTube("zzz"), nullptr);
  EXPECT_EQ(engine_.Ignore(s, "default"), 3u);
  EXPECT_EQ(engine_.Ignore(s, "a"), 2u);
  EXPECT_EQ(engine_.Ignore(s, "c"), 1u);
  Check();
  EXPECT_EQ(WatchNames(s), std::vector<std::string>({"b"}));
  // The last watched tube cannot be ignored: NOT_IGNORED.
  EXPECT_EQ(engine_.Ignore(s, "b"), 0u);
  EXPECT_EQ(WatchNames(s), std::vector<std::string>({"b"}));
  // ...but a tube not watched still answers with the count.
  EXPECT_EQ(engine_.Ignore(s, "nothere"), 1u);
  Check();
}

TEST_F(EngineTest, IgnoredTubeNotReserved) {
  Session* p = Open();
  Session* w = Open();
  engine_.Watch(w, "other");
  engine_.Ignore(w, "default");
  Put(p);
  EXPECT_TRUE(engine_.Reserve(w, 0));
  std::vector<Event> ev = Events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, Kind::kTimedOut);
}

}  // namespace
}  // namespace stalkd::engine
