#include "engine/engine.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace stalkd::engine {
namespace {

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

// ------------------------------------------------------------------ memory cap

TEST(EngineMemory, CapRefusesAndFreesAfterDelete) {
  FakeClock clock;
  EngineOptions opt;
  opt.max_memory = 64 * 1024;
  Engine e(clock, opt);
  Session* s = e.OpenSession(nullptr);
  std::vector<uint64_t> ids;
  for (;;) {
    Job* j = e.NewJob(s, 0, 0, 10, 1000);
    e.CheckInvariants();
    if (!j) break;
    std::memset(j->data(), 'a', 1000);
    std::memcpy(j->data() + 1000, "\r\n", 2);
    ids.push_back(j->id);
    e.Put(s, j);
    e.CheckInvariants();
    ASSERT_LT(ids.size(), 1000u);
  }
  EXPECT_GT(ids.size(), 10u);
  EXPECT_LE(e.memory_used(), opt.max_memory);
  EXPECT_EQ(e.NewJob(s, 0, 0, 10, 1000), nullptr);
  EXPECT_TRUE(e.Delete(s, ids.back()));
  EXPECT_TRUE(e.Delete(s, ids[ids.size() - 2]));
  e.CheckInvariants();
  Job* j = e.NewJob(s, 0, 0, 10, 1000);
  ASSERT_NE(j, nullptr);
  e.Discard(j);
  e.CheckInvariants();
  size_t before = e.memory_used();
  for (uint64_t id : ids) e.Delete(s, id);
  EXPECT_LT(e.memory_used(), before);
  e.CloseSession(s);
  e.CheckInvariants();
}

// Puts n jobs (1-byte bodies, `delay`) into engines whose cap is the memory used after the
// n-th put, and one byte less: the n-th put must fit the first and be refused by the
// second. Returns what the n-th put added to memory_used.
size_t NthPutFitsTheCapToTheByte(int n, uint32_t delay) {
  FakeClock clock;
  auto put = [delay](Engine& e, Session* s) {
    Job* j = e.NewJob(s, 0, delay, 10, 1);
    if (!j) return false;
    std::memcpy(j->data(), "x\r\n", 3);
    e.Put(s, j);
    e.CheckInvariants();
    return true;
  };
  size_t before = 0, after = 0;
  {
    Engine e(clock);
    Session* s = e.OpenSession(nullptr);
    for (int k = 1; k < n; k++) EXPECT_TRUE(put(e, s));
    before = e.memory_used();
    EXPECT_TRUE(put(e, s));
    after = e.memory_used();
    e.CloseSession(s);
  }
  for (size_t cap : {after - 1, after}) {
    EngineOptions opt;
    opt.max_memory = cap;
    Engine e(clock, opt);
    Session* s = e.OpenSession(nullptr);
    for (int k = 1; k < n; k++) EXPECT_TRUE(put(e, s));
    EXPECT_EQ(put(e, s), cap == after) << n << " jobs, delay " << delay;
    EXPECT_LE(e.memory_used(), cap);
    e.CloseSession(s);
  }
  return after - before;
}

// The room a put needs in its tube's heap counts against the cap: four jobs fill a heap's
// first storage, and the fifth doubles it.
TEST(EngineMemory, CapCountsTheHeapRoomAPutNeeds) {
  EXPECT_EQ(NthPutFitsTheCapToTheByte(5, 0), Job::Footprint(1, false) + 4 * sizeof(Job*));
  EXPECT_EQ(NthPutFitsTheCapToTheByte(5, 5),
            Job::Footprint(1, true) + 4 * (sizeof(Nanos) + sizeof(Job*)));
}

// So does the page a put needs in the id table: ids 1 to 1023 fill the first page (and
// 1023 of a ready heap's 1024 entries), id 1024 needs a second page and a directory slot.
TEST(EngineMemory, CapCountsTheIdTablePageAPutNeeds) {
  EXPECT_GT(NthPutFitsTheCapToTheByte(1024, 0), Job::Footprint(1, false) + 1024 * sizeof(Job*));
}

// A job waiting ready and never reserved has no cold part; everything else brings one,
// and memory_used counts it to the byte while it exists.
TEST_F(EngineTest, ColdPartIsCountedAndOnlyWhenNeeded) {
  Session* s = Open();
  const size_t hot = sizeof(Job) + 3 + 2;  // body "abc" and CRLF
  // A heap's first storage: 4 entries (a pointer, and a deadline too in a deadline heap)
  // and a chunk table of one pointer. A heap keeps it once emptied.
  const size_t ready_heap = 4 * sizeof(Job*) + sizeof(void*);
  const size_t deadline_heap = 4 * (sizeof(Nanos) + sizeof(Job*)) + sizeof(void*);
  uint64_t a = Put(s, 0, 0, 60, "abc");
  EXPECT_EQ(engine_.Find(a)->cold, nullptr);
  const size_t one = engine_.memory_used();  // also a job-table page
  EXPECT_GT(one, hot + ready_heap);
  EXPECT_EQ(engine_.Find(a)->kicks(), 0u);
  EXPECT_EQ(engine_.Find(a)->created(), clock_.Now());

  EXPECT_EQ(ReserveNow(s), a);  // and the session's reserved heap gets its first storage
  EXPECT_NE(engine_.Find(a)->cold, nullptr);
  EXPECT_EQ(engine_.memory_used(), one + sizeof(JobCold) + deadline_heap);
  EXPECT_TRUE(engine_.Release(s, a, 0, 0));
  EXPECT_EQ(engine_.memory_used(),
            one + sizeof(JobCold) + deadline_heap);  // kept: reserves is 1
  EXPECT_EQ(engine_.Find(a)->reserves(), 1u);

  uint64_t d = Put(s, 0, 5, 60, "abc");  // delayed: cold from the put, counted at once
  EXPECT_NE(engine_.Find(d)->cold, nullptr);
  EXPECT_EQ(engine_.Find(d)->delay_s(), 5u);
  EXPECT_EQ(engine_.memory_used(), one + hot + 2 * sizeof(JobCold) + 2 * deadline_heap);
  EXPECT_TRUE(engine_.Delete(s, d));
  EXPECT_EQ(engine_.memory_used(), one + sizeof(JobCold) + 2 * deadline_heap);
  EXPECT_TRUE(engine_.Delete(s, a));
  // The job table may keep its page.
  EXPECT_LE(engine_.memory_used(), one - hot + 2 * deadline_heap);
}

// The heaps holding jobs (a tube's ready and delayed heaps, a session's reserved heap) are
// counted as their storage grows and shrinks, and given back with their tube or session.
class EngineHeapMemoryTest : public EngineTest {
 protected:
  static constexpr uint64_t kN = 10000;  // three heap chunks of 4096
  // Heap storage holding kN entries: three chunks and a table of 4 pointers; emptied, the
  // first chunk and a spare one.
  static constexpr size_t kTable = 4 * sizeof(void*);
  static constexpr size_t kReadyFull = 3 * 4096 * sizeof(Job*) + kTable;
  static constexpr size_t kReadyEmptied = 2 * 4096 * sizeof(Job*) + kTable;
  static constexpr size_t kDeadlineFull = 3 * 4096 * (sizeof(Nanos) + sizeof(Job*)) + kTable;
  static constexpr size_t kDeadlineEmptied = 2 * 4096 * (sizeof(Nanos) + sizeof(Job*)) + kTable;

  // A session `a` on "default", and the baseline memory with the job table holding its
  // spare page (kept after the first delete); then a session using and watching only "t".
  void SetUp() override {
    a_ = Open();
    EXPECT_TRUE(engine_.Delete(a_, Put(a_)));
    base_ = engine_.memory_used();
    b_ = Open();
    engine_.Use(b_, "t");
    engine_.Watch(b_, "t");
    engine_.Ignore(b_, "default");
  }
  // Without the invariant check after each job: kN of them.
  uint64_t PutQuiet(Session* s, uint32_t delay) {
    Job* j = engine_.NewJob(s, 0, delay, 60, 3);
    std::memcpy(j->data(), "abc\r\n", 5);
    uint64_t id = j->id;
    EXPECT_EQ(engine_.Put(s, j), Engine::PutResult::kInserted);
    return id;
  }
  void ReserveAllQuiet(Session* s) {
    for (uint64_t k = 0; k < kN; k++) {
      Event ev;
      ASSERT_TRUE(engine_.Reserve(s, 0));
      ASSERT_TRUE(engine_.TakeOwnEvent(s, &ev));
      ASSERT_EQ(ev.kind, Kind::kReserved);
    }
  }

  Session* a_ = nullptr;
  Session* b_ = nullptr;
  size_t base_ = 0;
};

TEST_F(EngineHeapMemoryTest, DelayedReadyAndReservedHeapsAreCounted) {
  const size_t job = sizeof(Job) + 3 + 2 + sizeof(JobCold);
  std::vector<uint64_t> ids;
  for (uint64_t k = 0; k < kN; k++) ids.push_back(PutQuiet(b_, 100));
  Check();
  const size_t delayed = engine_.memory_used();
  EXPECT_GT(delayed, base_ + kN * job + kDeadlineFull);  // and the job table's pages
  // Kicked: the delayed heap empties (keeping a spare chunk), the ready heap fills.
  EXPECT_EQ(engine_.KickDelayed(engine_.FindTube("t"), kN), kN);
  Check();
  const size_t ready = engine_.memory_used();
  EXPECT_EQ(ready, delayed - (kDeadlineFull - kDeadlineEmptied) + kReadyFull);
  // Reserved: the ready heap empties, b's reserved heap fills.
  ReserveAllQuiet(b_);
  Check();
  EXPECT_EQ(engine_.memory_used(), ready - (kReadyFull - kReadyEmptied) + kDeadlineFull);
  for (uint64_t id : ids) ASSERT_TRUE(engine_.Delete(b_, id));
  Check();
  // No job is left; the three heaps keep their emptied storage.
  EXPECT_EQ(engine_.memory_used(), base_ + kReadyEmptied + 2 * kDeadlineEmptied);
  Close(b_);  // "t" goes with its last user
  EXPECT_EQ(engine_.FindTube("t"), nullptr);
  EXPECT_EQ(engine_.memory_used(), base_);
}

TEST_F(EngineHeapMemoryTest, ClosedSessionGivesItsHeapBack) {
  std::vector<uint64_t> ids;
  for (uint64_t k = 0; k < kN; k++) ids.push_back(PutQuiet(b_, 0));
  ReserveAllQuiet(b_);
  Check();
  const size_t reserved = engine_.memory_used();
  Close(b_);  // more than kImmediateRelease jobs: Tick gives them back, then frees b
  for (int k = 0; k < 20; k++) Tick();
  EXPECT_EQ(C().ready, kN);
  EXPECT_EQ(engine_.memory_used(), reserved - kDeadlineFull + (kReadyFull - kReadyEmptied));
  for (uint64_t id : ids) ASSERT_TRUE(engine_.Delete(a_, id));
  Check();
  EXPECT_EQ(engine_.FindTube("t"), nullptr);  // its last job is gone
  EXPECT_EQ(engine_.memory_used(), base_);
}

// The state shares a word with the creation time; neither disturbs the other.
TEST_F(EngineTest, CreatedAndStateShareAWord) {
  Session* s = Open();
  clock_.Advance(123'456'789);
  Nanos put_at = clock_.Now();
  uint64_t a = Put(s, 0, 0, 60);
  Job* j = engine_.Find(a);
  EXPECT_EQ(j->created(), put_at & ~Nanos{7});
  EXPECT_LE(put_at - j->created(), 7);
  EXPECT_EQ(State(a), JobState::kReady);
  EXPECT_EQ(ReserveNow(s), a);
  EXPECT_TRUE(engine_.Bury(s, a, 0));
  EXPECT_EQ(j->state(), JobState::kBuried);
  EXPECT_EQ(j->created(), put_at & ~Nanos{7});
  j->set_created(-3 * kSecond);  // a restored job may predate the monotonic clock's zero
  EXPECT_EQ(j->created(), -3 * kSecond);
  EXPECT_EQ(j->state(), JobState::kBuried);
}

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
