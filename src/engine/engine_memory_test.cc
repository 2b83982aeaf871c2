// The engine's memory accounting: the cap, and what each job, heap and table is counted as.
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

}  // namespace
}  // namespace stalkd::engine
