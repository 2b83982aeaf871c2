// The command interface as any front end sees it, on the in-memory store: values in,
// Results out, late results through the Client.
#include "store/memory_store.h"

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace stalkd::store {
namespace {

using command::Outcome;
using command::Result;
using command::Verb;

// Records late results, copying what they point to (valid only during OnResult).
struct Recorder final : command::Client {
  void OnResult(const Result& r) override {
    outcomes.push_back(r.outcome);
    numbers.push_back(r.number);
    bodies.emplace_back(r.job.body);
  }
  std::vector<Outcome> outcomes;
  std::vector<uint64_t> numbers;
  std::vector<std::string> bodies;
};

class MemoryStoreTest : public ::testing::Test {
 protected:
  MemoryStoreTest() : store_(clock_, {}, nullptr) {}
  ~MemoryStoreTest() override {
    sessions_.clear();
    store_.engine().CheckInvariants();
  }

  command::Session& Open(Recorder& r) {
    sessions_.push_back(store_.Open(r));
    return *sessions_.back();
  }
  // A whole put; returns its Result.
  static Result Put(command::Session& s, std::string_view body, uint32_t delay_s = 0) {
    command::PutSlot slot = s.BeginPut({0, delay_s, 60, static_cast<uint32_t>(body.size())});
    EXPECT_NE(slot.data, nullptr);
    EXPECT_EQ(slot.size, body.size() + 2);
    std::memcpy(slot.data, body.data(), body.size());
    std::memcpy(slot.data + body.size(), "\r\n", 2);
    return s.CommitPut();
  }

  FakeClock clock_;
  MemoryStore store_;
  std::vector<std::unique_ptr<command::Session>> sessions_;
};

TEST_F(MemoryStoreTest, ImmediateResultsCarryValues) {
  Recorder r;
  command::Session& s = Open(r);
  Result put = Put(s, "hello");
  EXPECT_EQ(put.outcome, Outcome::kInserted);
  EXPECT_EQ(put.number, 1u);
  Result got = s.Reserve(kForever);
  ASSERT_EQ(got.outcome, Outcome::kReserved);
  EXPECT_EQ(got.job.id, 1u);
  EXPECT_EQ(got.job.body, "hello");
  EXPECT_EQ(s.Touch(1).outcome, Outcome::kTouched);
  EXPECT_EQ(s.Delete(1).outcome, Outcome::kDeleted);
  EXPECT_EQ(s.Delete(1).outcome, Outcome::kNotFound);
  Result use = s.Use("emails");
  EXPECT_EQ(use.outcome, Outcome::kUsing);
  EXPECT_EQ(use.name, "emails");
  EXPECT_EQ(s.Watch("emails").number, 2u);
  EXPECT_EQ(s.Ignore("default").number, 1u);
  EXPECT_EQ(s.Ignore("emails").outcome, Outcome::kNotIgnored);
  Result list = s.ListTubesWatched();
  ASSERT_EQ(list.outcome, Outcome::kTubeList);
  ASSERT_EQ(list.tubes->size(), 1u);
  EXPECT_EQ((*list.tubes)[0], "emails");
  EXPECT_TRUE(r.outcomes.empty());  // nothing arrived late
}

TEST_F(MemoryStoreTest, RefusalsAreOutcomes) {
  Recorder r;
  command::Session& s = Open(r);
  store_.set_max_job_size(4);
  command::PutSlot big = s.BeginPut({0, 0, 60, 5});
  EXPECT_EQ(big.data, nullptr);
  EXPECT_EQ(big.refusal, Outcome::kJobTooBig);
  command::PutSlot bad = s.BeginPut({0, 0, 60, 1, /*malformed=*/true});
  EXPECT_EQ(bad.data, nullptr);
  EXPECT_EQ(bad.refusal, Outcome::kBadFormat);
  EXPECT_EQ(store_.count(Verb::kPut), 2u);  // counted before either check, as beanstalkd
  EXPECT_EQ(s.Use("-bad").outcome, Outcome::kBadFormat);
  EXPECT_EQ(store_.count(Verb::kUse), 0u);
  EXPECT_EQ(s.PauseTube("-bad", 1).outcome, Outcome::kBadFormat);
  EXPECT_EQ(store_.count(Verb::kPauseTube), 1u);  // counted before the name check
  EXPECT_EQ(s.PauseTube("nosuch", 1).outcome, Outcome::kNotFound);
  EXPECT_EQ(s.StatsJob(42).outcome, Outcome::kNotFound);
  EXPECT_EQ(s.Reserve(0).outcome, Outcome::kTimedOut);
  store_.SetDraining(true);
  EXPECT_EQ(Put(s, "x").outcome, Outcome::kDraining);
}

TEST_F(MemoryStoreTest, WaitingReserveArrivesThroughTheClient) {
  Recorder worker_client, producer_client;
  command::Session& worker = Open(worker_client);
  command::Session& producer = Open(producer_client);
  EXPECT_EQ(worker.Reserve(kForever).outcome, Outcome::kPending);
  EXPECT_EQ(Put(producer, "job").outcome, Outcome::kInserted);
  // Delivered from inside the put, to the session that asked, and only to it.
  ASSERT_EQ(worker_client.outcomes.size(), 1u);
  EXPECT_EQ(worker_client.outcomes[0], Outcome::kReserved);
  EXPECT_EQ(worker_client.bodies[0], "job");
  EXPECT_TRUE(producer_client.outcomes.empty());
  // A reserve with a timeout answers TIMED_OUT from Tick once the timeout passes.
  EXPECT_EQ(worker.Reserve(2 * kSecond).outcome, Outcome::kPending);
  clock_.Advance(3 * kSecond);
  store_.Tick();
  ASSERT_EQ(worker_client.outcomes.size(), 2u);
  EXPECT_EQ(worker_client.outcomes[1], Outcome::kTimedOut);
  // A client that goes away abandons its waiting reserve: TIMED_OUT now, nothing later.
  EXPECT_EQ(worker.Reserve(kForever).outcome, Outcome::kPending);
  EXPECT_EQ(worker.AbandonReserve().outcome, Outcome::kTimedOut);
  EXPECT_EQ(Put(producer, "later").outcome, Outcome::kInserted);
  EXPECT_EQ(worker_client.outcomes.size(), 2u);
}

TEST_F(MemoryStoreTest, LongKickCompletesInTicks) {
  Recorder r;
  command::Session& s = Open(r);
  constexpr int kJobs = 2500;
  for (int i = 0; i < kJobs; i++) ASSERT_EQ(Put(s, "d", 100).outcome, Outcome::kInserted);
  EXPECT_EQ(s.Kick(kJobs).outcome, Outcome::kPending);  // the first slice is done
  EXPECT_EQ(store_.engine().counters().delayed, kJobs - MemoryStore::kKickSlice);
  EXPECT_TRUE(store_.Busy());
  EXPECT_EQ(store_.Tick(), clock_.Now());  // more slices to do
  EXPECT_TRUE(r.outcomes.empty());
  store_.Tick();
  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_EQ(r.outcomes[0], Outcome::kKicked);
  EXPECT_EQ(r.numbers[0], static_cast<uint64_t>(kJobs));
  EXPECT_EQ(store_.engine().counters().ready, static_cast<uint64_t>(kJobs));
  EXPECT_FALSE(store_.Busy());
}

TEST_F(MemoryStoreTest, ClosingASessionDuringAKickDropsIt) {
  Recorder r;
  command::Session& s = Open(r);
  for (int i = 0; i < 1500; i++) ASSERT_EQ(Put(s, "d", 100).outcome, Outcome::kInserted);
  EXPECT_EQ(s.Kick(1500).outcome, Outcome::kPending);
  sessions_.clear();
  store_.Tick();  // no result for a session that is gone
  EXPECT_TRUE(r.outcomes.empty());
}

}  // namespace
}  // namespace stalkd::store
