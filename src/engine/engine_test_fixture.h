#pragma once

// EngineTest, the fixture the engine's unit tests share (engine_test.cc and its siblings
// engine_*_test.cc): an engine on a FakeClock, with helpers that check the invariants after
// every step.
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"

namespace stalkd::engine {

class EngineTest : public ::testing::Test {
 protected:
  explicit EngineTest(EngineOptions options = {}) : engine_(clock_, options) {}

  ~EngineTest() override { engine_.CheckInvariants(); }

  // Every helper below calls this after acting on the engine.
  void Check() { engine_.CheckInvariants(); }

  Session* Open() {
    Session* s = engine_.OpenSession(nullptr);
    Check();
    return s;
  }
  void Close(Session* s) {
    engine_.CloseSession(s);
    Check();
  }

  // Puts a job with body `body` into s's used tube; returns its id (0 if refused).
  uint64_t Put(Session* s, uint32_t pri = 0, uint32_t delay = 0, uint32_t ttr = 60,
               std::string_view body = "x") {
    Job* j = engine_.NewJob(s, pri, delay, ttr, static_cast<uint32_t>(body.size()));
    Check();
    if (!j) return 0;
    std::memcpy(j->data(), body.data(), body.size());
    std::memcpy(j->data() + body.size(), "\r\n", 2);
    uint64_t id = j->id;
    Engine::PutResult r = engine_.Put(s, j);
    Check();
    return r == Engine::PutResult::kInserted ? id : 0;
  }

  std::vector<Event> Events() {
    std::vector<Event> out;
    engine_.TakeEvents(&out);
    return out;
  }

  // Reserve that must be answered at once with a job; returns its id.
  uint64_t ReserveNow(Session* s, Nanos timeout = 0) {
    EXPECT_TRUE(engine_.Reserve(s, timeout));
    Check();
    std::vector<Event> ev = Events();
    EXPECT_EQ(ev.size(), 1u);
    if (ev.size() != 1) return 0;
    EXPECT_EQ(ev[0].session, s);
    if (ev[0].kind != Event::Kind::kReserved) {
      ADD_FAILURE() << "expected kReserved, got " << static_cast<int>(ev[0].kind);
      return 0;
    }
    EXPECT_EQ(ev[0].job->reserver(), s);
    EXPECT_EQ(ev[0].job->state(), JobState::kReserved);
    return ev[0].job->id;
  }

  // Starts a reserve that must wait (no event yet).
  void ReserveWait(Session* s, Nanos timeout = kForever) {
    EXPECT_TRUE(engine_.Reserve(s, timeout));
    Check();
    EXPECT_FALSE(engine_.has_events());
    EXPECT_TRUE(s->waiting());
  }

  Nanos Tick() {
    Nanos n = engine_.Tick();
    Check();
    return n;
  }
  void Advance(Nanos d) {
    clock_.Advance(d);
    Tick();
  }

  JobState State(uint64_t id) {
    Job* j = engine_.Find(id);
    EXPECT_NE(j, nullptr) << "job " << id;
    return j ? j->state() : JobState::kNew;
  }

  std::vector<std::string> TubeNames() {
    std::vector<std::string> v;
    for (Tube* t : engine_.tubes()) v.push_back(t->name());
    return v;
  }
  static std::vector<std::string> WatchNames(const Session* s) {
    std::vector<std::string> v;
    for (Tube* t : s->watch()) v.push_back(t->name());
    return v;
  }

  const GlobalCounters& C() { return engine_.counters(); }

  FakeClock clock_;
  Engine engine_;
};

using Kind = Event::Kind;

}  // namespace stalkd::engine
