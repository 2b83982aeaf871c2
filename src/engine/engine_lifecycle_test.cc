// The engine's lifecycle extensions (docs/EXTENSIONS.md): tries and dead letters, TTL,
// TTR at reserve, detached reservations, unique keys, attributes, purge, list, tube tries.
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"

// The tests name only the options they set (designated initializers).
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace stalkd::engine {
namespace {

class LifecycleTest : public ::testing::Test {
 protected:
  explicit LifecycleTest(EngineOptions options = {}) : engine_(clock_, options) {
    s_ = engine_.OpenSession(nullptr);
  }
  ~LifecycleTest() override { engine_.CheckInvariants(); }

  // Puts a one-byte job with `opts` into s's used tube; returns the engine's answer and, in
  // *id, the new (or, for kExists, the existing) job's id.
  Engine::PutResult PutWith(const JobOptions& opts, uint64_t* id, Session* s = nullptr,
                            uint32_t delay = 0, uint32_t ttr = 60) {
    Engine::PutResult r = PutUnchecked(opts, id, s, delay, ttr);
    engine_.CheckInvariants();
    return r;
  }
  // For tests that put many jobs: the invariants walk them all.
  Engine::PutResult PutUnchecked(const JobOptions& opts, uint64_t* id, Session* s = nullptr,
                                 uint32_t delay = 0, uint32_t ttr = 60) {
    Job* j = engine_.NewJob(s ? s : s_, 0, delay, ttr, 1, opts);
    if (!j) return Engine::PutResult::kNotDurable;
    std::memcpy(j->data(), "x\r\n", 3);
    *id = j->id;
    return engine_.Put(s ? s : s_, j, id);
  }
  uint64_t Put(const JobOptions& opts, uint32_t delay = 0, uint32_t ttr = 60) {
    uint64_t id = 0;
    EXPECT_EQ(PutWith(opts, &id, nullptr, delay, ttr), Engine::PutResult::kInserted);
    return id;
  }
  // A reserve answered at once with a job; returns it.
  Job* Reserve(Session* s, const ReserveOptions& o = {}) {
    EXPECT_TRUE(engine_.Reserve(s, 0, o));
    std::vector<Event> ev;
    engine_.TakeEvents(&ev);
    engine_.CheckInvariants();
    if (ev.size() != 1 || ev[0].kind != Event::Kind::kReserved) {
      ADD_FAILURE() << "no job reserved";
      return nullptr;
    }
    return ev[0].job;
  }
  void Advance(Nanos d) {
    clock_.Advance(d);
    engine_.Tick();
    engine_.CheckInvariants();
  }
  JobState StateOf(uint64_t id) const { return engine_.Find(id)->state(); }

  FakeClock clock_;
  Engine engine_;
  Session* s_;
};

TEST_F(LifecycleTest, TriesRunOutOnReleaseAndKickGivesOneMore) {
  uint64_t id = Put({.tries = 2});
  Job* j = Reserve(s_);
  EXPECT_EQ(j->extra()->tries_left, 1u);
  ASSERT_TRUE(engine_.Release(s_, id, 0, 0));
  EXPECT_EQ(StateOf(id), JobState::kReady);
  Reserve(s_);
  EXPECT_EQ(j->extra()->tries_left, 0u);
  ASSERT_TRUE(engine_.Release(s_, id, 5, 30));  // no tries left: buried, not delayed
  EXPECT_EQ(StateOf(id), JobState::kBuried);
  EXPECT_EQ(j->extra()->bury_reason, BuryReason::kRelease);
  EXPECT_EQ(j->pri, 5u);
  EXPECT_EQ(engine_.counters().tries_exhausted, 1u);
  EXPECT_EQ(j->tube->stat.tries_exhausted, 1u);
  ASSERT_TRUE(engine_.KickJob(id));
  EXPECT_EQ(j->extra()->tries_left, 1u);
  EXPECT_EQ(j->extra()->bury_reason, BuryReason::kNone);
}

TEST_F(LifecycleTest, TriesRunOutOnTimeoutAndFreezeTriesKeepsThem) {
  uint64_t id = Put({.tries = 1}, 0, 2);
  Job* j = Reserve(s_, {.freeze_tries = true});
  EXPECT_EQ(j->extra()->tries_left, 1u);
  Advance(2 * kSecond);  // TTR: back to ready, the try kept
  EXPECT_EQ(StateOf(id), JobState::kReady);
  Reserve(s_);
  EXPECT_EQ(j->extra()->tries_left, 0u);
  Advance(2 * kSecond);
  EXPECT_EQ(StateOf(id), JobState::kBuried);
  EXPECT_EQ(j->extra()->bury_reason, BuryReason::kTimeout);
  EXPECT_EQ(j->timeouts(), 2u);
}

TEST_F(LifecycleTest, ClosingTheWorkerOfAJobWithoutTriesBuriesIt) {
  Session* w = engine_.OpenSession(nullptr);
  uint64_t id = Put({.tries = 1});
  Reserve(w);
  engine_.CloseSession(w);
  EXPECT_EQ(StateOf(id), JobState::kBuried);
  EXPECT_EQ(engine_.Find(id)->extra()->bury_reason, BuryReason::kRelease);
}

TEST_F(LifecycleTest, TubeDefaultTriesApplyToJobsPutWithoutTries) {
  engine_.SetTubeTries("default", 3);
  uint64_t plain = Put({});
  uint64_t own = Put({.tries = 7});
  EXPECT_EQ(engine_.Find(plain)->extra()->tries_left, 3u);
  EXPECT_EQ(engine_.Find(own)->extra()->tries_left, 7u);
  EXPECT_EQ(engine_.TubeTries("default"), 3u);
  // The setting outlives the tube.
  engine_.SetTubeTries("other", 2);
  engine_.Use(s_, "other");
  uint64_t id = Put({});
  EXPECT_EQ(engine_.Find(id)->extra()->tries_left, 2u);
  ASSERT_TRUE(engine_.Delete(s_, id));
  engine_.Use(s_, "default");
  EXPECT_EQ(engine_.FindTube("other"), nullptr);
  engine_.Use(s_, "other");
  EXPECT_EQ(engine_.FindTube("other")->default_tries, 2u);
  engine_.SetTubeTries("other", 0);
  EXPECT_FALSE(engine_.Find(Put({}))->has_extra());
}

TEST_F(LifecycleTest, TtlDeletesReadyDelayedAndBuriedJobs) {
  uint64_t ready = Put({.ttl_s = 5});
  uint64_t delayed = Put({.ttl_s = 5}, 100);
  uint64_t buried = Put({.ttl_s = 5});
  uint64_t keep = Put({.ttl_s = 50});
  Reserve(s_);  // ready (the lowest id)
  ASSERT_TRUE(engine_.Release(s_, ready, 0, 0));
  Job* b = engine_.ReserveJob(s_, buried);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(engine_.Bury(s_, buried, 0));
  Advance(4 * kSecond);
  EXPECT_NE(engine_.Find(ready), nullptr);
  Advance(kSecond);
  EXPECT_EQ(engine_.Find(ready), nullptr);
  EXPECT_EQ(engine_.Find(delayed), nullptr);
  EXPECT_EQ(engine_.Find(buried), nullptr);
  EXPECT_NE(engine_.Find(keep), nullptr);
  EXPECT_EQ(engine_.counters().expired, 3u);
  EXPECT_EQ(engine_.FindTube("default")->stat.expired, 3u);
}

TEST_F(LifecycleTest, AReservedJobExpiresWhenItsReservationEnds) {
  uint64_t a = Put({.ttl_s = 2});
  uint64_t b = Put({.ttl_s = 2});
  uint64_t c = Put({.ttl_s = 2}, 0, 10);
  Reserve(s_);
  Reserve(s_);
  Reserve(s_);
  Advance(3 * kSecond);
  EXPECT_EQ(StateOf(a), JobState::kReserved);  // not taken from its worker
  EXPECT_TRUE(engine_.Touch(s_, a));
  ASSERT_TRUE(engine_.Release(s_, a, 0, 0));
  EXPECT_EQ(engine_.Find(a), nullptr);
  ASSERT_TRUE(engine_.Bury(s_, b, 0));
  EXPECT_EQ(engine_.Find(b), nullptr);
  Advance(8 * kSecond);  // c's TTR
  EXPECT_EQ(engine_.Find(c), nullptr);
  EXPECT_EQ(engine_.counters().expired, 3u);
}

TEST_F(LifecycleTest, ExpiryIsSlicedByTheTickBudget) {
  Engine small(clock_, EngineOptions{.tick_budget = 10});
  Session* s = small.OpenSession(nullptr);
  for (int i = 0; i < 25; i++) {
    Job* j = small.NewJob(s, 0, 0, 60, 1, {.ttl_s = 1});
    std::memcpy(j->data(), "x\r\n", 3);
    ASSERT_EQ(small.Put(s, j), Engine::PutResult::kInserted);
  }
  clock_.Advance(kSecond);
  EXPECT_EQ(small.Tick(), clock_.Now());  // more to do
  EXPECT_EQ(small.counters().expired, 10u);
  small.Tick();
  small.Tick();
  EXPECT_EQ(small.counters().expired, 25u);
  EXPECT_EQ(small.Tick(), kForever);
  small.CheckInvariants();
}

TEST_F(LifecycleTest, TtrGivenAtReserveAndTouch) {
  uint64_t id = Put({}, 0, 60);
  Job* j = Reserve(s_, {.ttr_s = 5});
  EXPECT_EQ(j->deadline(), clock_.Now() + 5 * kSecond);
  EXPECT_EQ(j->ttr_s, 60u);  // the job's own TTR is unchanged
  clock_.Advance(3 * kSecond);
  ASSERT_TRUE(engine_.Touch(s_, id));
  EXPECT_EQ(j->deadline(), clock_.Now() + 5 * kSecond);
  Advance(5 * kSecond);
  EXPECT_EQ(StateOf(id), JobState::kReady);
  Reserve(s_);  // a later reservation uses the job's own TTR
  EXPECT_EQ(j->deadline(), clock_.Now() + 60 * kSecond);
}

TEST_F(LifecycleTest, DetachedReservationsBelongToNoSession) {
  Session* w = engine_.OpenSession(nullptr);
  Session* other = engine_.OpenSession(nullptr);
  uint64_t a = Put({}, 0, 5);
  uint64_t b = Put({}, 0, 5);
  uint64_t c = Put({}, 0, 5);
  Job* ja = Reserve(w, {.detached = true});
  EXPECT_EQ(ja->reserver(), engine_.detached());
  Reserve(w, {.detached = true});
  Reserve(w, {.detached = true});
  EXPECT_EQ(w->reserved_count(), 0u);
  engine_.CloseSession(w);  // gives nothing back
  EXPECT_EQ(StateOf(a), JobState::kReserved);
  EXPECT_TRUE(engine_.Delete(other, a));
  EXPECT_TRUE(engine_.Release(other, b, 0, 0));
  EXPECT_EQ(StateOf(b), JobState::kReady);
  Advance(5 * kSecond);  // nobody acted on c: back at its TTR
  EXPECT_EQ(StateOf(c), JobState::kReady);
  EXPECT_EQ(engine_.Find(c)->timeouts(), 1u);
}

TEST_F(LifecycleTest, UniqueKeysHoldWhileTheJobLives) {
  uint64_t id = Put({.key = "k1"});
  uint64_t existing = 0;
  EXPECT_EQ(PutWith({.key = "k1"}, &existing), Engine::PutResult::kExists);
  EXPECT_EQ(existing, id);
  engine_.Use(s_, "other");  // keys are per tube
  EXPECT_NE(Put({.key = "k1"}), 0u);
  engine_.Use(s_, "default");
  ASSERT_TRUE(engine_.Delete(s_, id));
  uint64_t again = Put({.ttl_s = 1, .key = "k1"});
  EXPECT_GT(again, id);
  Advance(kSecond);  // expired: the key is free
  uint64_t third = Put({.key = "k1"});
  EXPECT_GT(third, again);
  engine_.Purge(engine_.FindTube("default"), PurgeWhat::kAll, 100);
  EXPECT_NE(Put({.key = "k1"}), 0u);
}

TEST_F(LifecycleTest, AttributesAreKeptInPutOrder) {
  JobAttribute attrs[] = {{"color", "red"}, {"n", ""}, {"x-y_z", "1=2"}};
  uint64_t id = Put({.key = "key", .attrs = attrs, .attr_count = 3});
  const JobExtra* x = engine_.Find(id)->extra();
  EXPECT_EQ(x->key(), "key");
  std::vector<std::string> seen;
  x->ForEachAttribute(
      [&](JobAttribute a) { seen.push_back(std::string(a.name) + "=" + std::string(a.value)); });
  EXPECT_EQ(seen, (std::vector<std::string>{"color=red", "n=", "x-y_z=1=2"}));
}

TEST_F(LifecycleTest, MemoryCountsTheExtensionsExactly) {
  Put({});  // the first job grows the id table and the heap
  size_t one_plain = engine_.memory_used();
  uint64_t plain = Put({});
  EXPECT_EQ(engine_.memory_used() - one_plain, Job::Footprint(1, false));
  // A job with a TTL grows the expiry heap by a chunk, which stays.
  ASSERT_TRUE(engine_.Delete(s_, Put({.ttl_s = 9})));
  JobAttribute attrs[] = {{"a", "bc"}};
  size_t before = engine_.memory_used();
  uint64_t id = Put({.tries = 2, .ttl_s = 9, .key = "kk", .attrs = attrs, .attr_count = 1});
  size_t cost = engine_.memory_used() - before;
  size_t blob = 2 + (2 + 1 + 2);
  // The job, its extension part with the blob, and its key's entry in the tube's index.
  EXPECT_GT(cost, Job::ExtraFootprint(1, blob));
  EXPECT_LE(cost, Job::ExtraFootprint(1, blob) + 64);
  ASSERT_TRUE(engine_.Delete(s_, id));
  EXPECT_EQ(engine_.memory_used(), before);
  ASSERT_TRUE(engine_.Delete(s_, plain));
}

TEST_F(LifecycleTest, PurgeDeletesTheChosenStatesInSlices) {
  for (int i = 0; i < 5; i++) Put({});
  for (int i = 0; i < 3; i++) Put({}, 100);
  uint64_t reserved = Put({});
  (void)reserved;
  Job* r = engine_.ReserveJob(s_, 9);
  ASSERT_NE(r, nullptr);
  ASSERT_TRUE(engine_.Bury(s_, 9, 0));
  Reserve(s_);  // job 1 stays reserved
  Tube* t = engine_.FindTube("default");
  EXPECT_EQ(engine_.Purge(t, PurgeWhat::kDelayed, 2), 2u);
  EXPECT_EQ(engine_.Purge(t, PurgeWhat::kDelayed, 2), 1u);
  EXPECT_EQ(engine_.Purge(t, PurgeWhat::kAll, 100), 5u);  // 1 buried + 4 ready
  EXPECT_EQ(StateOf(1), JobState::kReserved);
  engine_.CheckInvariants();
}

TEST_F(LifecycleTest, PurgingATubesLastJobRemovesTheTube) {
  engine_.Use(s_, "gone");
  Put({});
  engine_.Use(s_, "default");
  Tube* t = engine_.FindTube("gone");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(engine_.Purge(t, PurgeWhat::kReady, 10), 1u);
  EXPECT_EQ(engine_.FindTube("gone"), nullptr);
}

TEST_F(LifecycleTest, ListJobsInIdOrderWithPaging) {
  for (int i = 0; i < 10; i++) Put({}, i % 2 == 0 ? 0 : 100);  // odd ids ready
  Tube* t = engine_.FindTube("default");
  std::vector<uint64_t> ids;
  uint64_t next = engine_.ListJobs(t, JobState::kReady, 0, 3, &ids);
  EXPECT_EQ(ids, (std::vector<uint64_t>{1, 3, 5}));
  EXPECT_EQ(next, 6u);
  ids.clear();
  next = engine_.ListJobs(t, JobState::kReady, next, 3, &ids);
  EXPECT_EQ(ids, (std::vector<uint64_t>{7, 9}));
  EXPECT_EQ(next, 0u);
  ids.clear();
  EXPECT_EQ(engine_.ListJobs(t, JobState::kDelayed, 9, 10, &ids), 0u);
  EXPECT_EQ(ids, (std::vector<uint64_t>{10}));
}

TEST_F(LifecycleTest, ListJobsLooksAtABoundedNumberOfIds) {
  engine_.Use(s_, "busy");
  uint64_t id;
  for (uint64_t i = 0; i < Engine::kListScan + 10; i++) PutUnchecked({}, &id);
  engine_.Use(s_, "default");
  uint64_t last = Put({});
  Tube* t = engine_.FindTube("default");
  std::vector<uint64_t> ids;
  uint64_t next = engine_.ListJobs(t, JobState::kReady, 1, 10, &ids);
  EXPECT_TRUE(ids.empty());
  EXPECT_EQ(next, 1 + Engine::kListScan);
  next = engine_.ListJobs(t, JobState::kReady, next, 10, &ids);
  EXPECT_EQ(ids, (std::vector<uint64_t>{last}));
  EXPECT_EQ(next, 0u);
}

TEST_F(LifecycleTest, ReserveReadyTakesTheBestUnpausedJob) {
  engine_.Watch(s_, "b");
  engine_.Watch(s_, "c");
  engine_.Use(s_, "b");
  Job* jb = engine_.NewJob(s_, 5, 0, 60, 1);
  std::memcpy(jb->data(), "x\r\n", 3);
  engine_.Put(s_, jb);
  engine_.Use(s_, "c");
  Job* jc = engine_.NewJob(s_, 1, 0, 60, 1);
  std::memcpy(jc->data(), "x\r\n", 3);
  engine_.Put(s_, jc);
  ASSERT_TRUE(engine_.PauseTube("c", 10));
  EXPECT_EQ(engine_.ReserveReady(s_), jb);
  EXPECT_EQ(engine_.ReserveReady(s_), nullptr);
  engine_.CheckInvariants();
}

}  // namespace
}  // namespace stalkd::engine
