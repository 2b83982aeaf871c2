#include "engine/job_log.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"

namespace stalkd::engine {
namespace {

// Records what the engine reports, as "put 1 ready", "update 1 buried", "delete 1".
class RecordingLog : public JobLog {
 public:
  bool admit = true;
  bool can_update = true;
  std::vector<std::string> records;
  std::vector<uint32_t> reserves;  // the job's reserves counter in each put and update

  bool Admit(const Job&) override { return admit; }
  bool CanUpdate(const Job&) override { return can_update; }
  void Put(const Job& j) override { Add("put", j); }
  void Update(const Job& j) override { Add("update", j); }
  void Delete(const Job& j) override { records.push_back("delete " + std::to_string(j.id)); }

 private:
  void Add(const char* what, const Job& j) {
    records.push_back(std::string(what) + " " + std::to_string(j.id) + " " +
                      JobStateName(j.state()));
    reserves.push_back(j.reserves());
  }
};

class JobLogTest : public ::testing::Test {
 protected:
  JobLogTest() : engine_(clock_) { engine_.set_log(&log_); }

  uint64_t Put(Session* s, uint32_t delay = 0) {
    Job* j = engine_.NewJob(s, 5, delay, 10, 1);
    j->data()[0] = 'x';
    j->data()[1] = '\r';
    j->data()[2] = '\n';
    uint64_t id = j->id;
    EXPECT_EQ(engine_.Put(s, j), Engine::PutResult::kInserted);
    return id;
  }

  FakeClock clock_;
  RecordingLog log_;
  Engine engine_;
  std::vector<Event> events_;
};

TEST_F(JobLogTest, ReportsEveryDurableChange) {
  Session* s = engine_.OpenSession(nullptr);
  uint64_t a = Put(s);
  uint64_t b = Put(s, 100);
  ASSERT_TRUE(engine_.Reserve(s, kForever));
  ASSERT_TRUE(engine_.Bury(s, a, 7));
  ASSERT_EQ(engine_.KickBuried(s->use(), 10), 1u);
  ASSERT_TRUE(engine_.KickJob(b));
  ASSERT_TRUE(engine_.Delete(s, a));
  EXPECT_EQ(log_.records,
            (std::vector<std::string>{"put 1 ready", "put 2 delayed", "update 1 buried",
                                      "update 1 ready", "update 2 ready", "delete 1"}));
  engine_.CloseSession(s);
  engine_.CheckInvariants();
}

TEST_F(JobLogTest, ACommandWhoseChangeCannotBeRecordedIsRefusedAndChangesNothing) {
  Session* s = engine_.OpenSession(nullptr);
  uint64_t a = Put(s), b = Put(s), c = Put(s), d = Put(s, 100);
  ASSERT_NE(engine_.ReserveJob(s, a), nullptr);
  ASSERT_NE(engine_.ReserveJob(s, b), nullptr);
  ASSERT_FALSE(engine_.Bury(s, c, 1));  // not reserved: NOT_FOUND, as ever
  ASSERT_NE(engine_.ReserveJob(s, c), nullptr);
  ASSERT_TRUE(engine_.Bury(s, c, 1));
  log_.records.clear();
  log_.can_update = false;  // a full disk
  EXPECT_EQ(engine_.Release(s, a, 9, 0).result, Engine::Changed::kNoRoom);
  EXPECT_EQ(engine_.Bury(s, b, 9).result, Engine::Changed::kNoRoom);
  EXPECT_EQ(engine_.KickJob(c).result, Engine::Changed::kNoRoom);
  EXPECT_EQ(engine_.KickJob(d).result, Engine::Changed::kNoRoom);
  EXPECT_EQ(engine_.KickJob(999).result, Engine::Changed::kNotFound);
  EXPECT_EQ(engine_.Release(s, 999, 9, 0).result, Engine::Changed::kNotFound);
  bool no_room = false;
  EXPECT_EQ(engine_.KickBuried(s->use(), 10, &no_room), 0u);
  EXPECT_TRUE(no_room);
  no_room = false;
  EXPECT_EQ(engine_.KickDelayed(s->use(), 10, &no_room), 0u);
  EXPECT_TRUE(no_room);
  EXPECT_TRUE(log_.records.empty());
  EXPECT_EQ(engine_.Find(a)->state(), JobState::kReserved);
  EXPECT_EQ(engine_.Find(a)->pri, 5u);
  EXPECT_EQ(engine_.Find(b)->state(), JobState::kReserved);
  EXPECT_EQ(engine_.Find(b)->buries(), 0u);
  EXPECT_EQ(engine_.Find(c)->state(), JobState::kBuried);
  EXPECT_EQ(engine_.Find(c)->kicks(), 0u);
  EXPECT_EQ(engine_.Find(d)->state(), JobState::kDelayed);
  // Deletes are never refused, and what the engine does on its own is reported as ever
  // (the log records it if it can): a closed session's jobs go back.
  ASSERT_TRUE(engine_.Delete(s, b));
  engine_.CloseSession(s);
  EXPECT_EQ(log_.records, (std::vector<std::string>{"delete 2", "update 1 ready"}));
  Session* t = engine_.OpenSession(nullptr);
  log_.can_update = true;
  ASSERT_TRUE(engine_.KickJob(c));
  EXPECT_EQ(engine_.Find(c)->kicks(), 1u);
  engine_.CloseSession(t);
  engine_.CheckInvariants();
}

TEST_F(JobLogTest, ReserveIsNotReportedAndItsCountGoesWithTheNextChange) {
  Session* s = engine_.OpenSession(nullptr);
  uint64_t a = Put(s);
  ASSERT_NE(engine_.ReserveJob(s, a), nullptr);
  EXPECT_EQ(log_.records, std::vector<std::string>{"put 1 ready"});
  ASSERT_TRUE(engine_.Release(s, a, 5, 0));
  ASSERT_TRUE(engine_.Reserve(s, kForever));  // plain reserve: not reported either
  EXPECT_EQ(engine_.Find(a)->state(), JobState::kReserved);
  ASSERT_EQ(log_.records.size(), 2u);
  EXPECT_EQ(log_.records.back(), "update 1 ready");
  EXPECT_EQ(log_.reserves.back(), 1u);  // the release carries the first reserve
  ASSERT_TRUE(engine_.Bury(s, a, 5));
  EXPECT_EQ(log_.records.back(), "update 1 buried");
  EXPECT_EQ(log_.reserves.back(), 2u);
  engine_.CloseSession(s);
  engine_.CheckInvariants();
}

TEST_F(JobLogTest, TtrExpiryAndCloseAreReported) {
  Session* s = engine_.OpenSession(nullptr);
  uint64_t a = Put(s);
  ASSERT_TRUE(engine_.Reserve(s, kForever));
  clock_.Advance(11 * kSecond);
  engine_.Tick();
  ASSERT_TRUE(engine_.Reserve(s, kForever));
  engine_.CloseSession(s);
  ASSERT_EQ(a, 1u);
  EXPECT_EQ(log_.records,
            (std::vector<std::string>{"put 1 ready", "update 1 ready", "update 1 ready"}));
  EXPECT_EQ(log_.reserves, (std::vector<uint32_t>{0, 1, 2}));
  engine_.CheckInvariants();
}

TEST_F(JobLogTest, RefusedAdmissionMeansNoJob) {
  Session* s = engine_.OpenSession(nullptr);
  log_.admit = false;
  Job* j = engine_.NewJob(s, 0, 0, 10, 0);
  j->data()[0] = '\r';
  j->data()[1] = '\n';
  uint64_t id = j->id;
  EXPECT_EQ(engine_.Put(s, j), Engine::PutResult::kNotDurable);
  EXPECT_EQ(engine_.Find(id), nullptr);
  EXPECT_TRUE(log_.records.empty());
  EXPECT_EQ(engine_.counters().total_jobs, 0u);
  engine_.CloseSession(s);
  engine_.CheckInvariants();
}

TEST_F(JobLogTest, RestoreRebuildsStatesWithoutLoggingAndContinuesIds) {
  RestoredJob r;
  r.id = 41;
  r.tube = "emails";
  r.state = JobState::kBuried;
  r.pri = 3;
  r.ttr_s = 60;
  r.counts.buries = 2;
  r.body = "hello";
  ASSERT_TRUE(engine_.Restore(r));
  r.id = 42;
  r.state = JobState::kDelayed;
  r.deadline = clock_.Now() + 5 * kSecond;
  ASSERT_TRUE(engine_.Restore(r));
  EXPECT_FALSE(engine_.Restore(r));  // duplicate id
  EXPECT_TRUE(log_.records.empty());
  engine_.CheckInvariants();

  const Job* j = engine_.Find(41);
  ASSERT_NE(j, nullptr);
  EXPECT_EQ(j->state(), JobState::kBuried);
  EXPECT_EQ(j->tube->name(), "emails");
  EXPECT_EQ(std::string(j->data(), j->data_size()), "hello\r\n");
  EXPECT_EQ(j->buries(), 2u);
  EXPECT_EQ(engine_.counters().buried, 1u);
  EXPECT_EQ(engine_.counters().delayed, 1u);

  clock_.Advance(5 * kSecond);
  engine_.Tick();
  EXPECT_EQ(engine_.Find(42)->state(), JobState::kReady);

  Session* s = engine_.OpenSession(nullptr);
  EXPECT_EQ(Put(s), 43u);
  engine_.CloseSession(s);
  engine_.CheckInvariants();
}

}  // namespace
}  // namespace stalkd::engine
