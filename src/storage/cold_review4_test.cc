// A review's tests of a start after a crash with the disk tier (docs/DISK-TIER.md,
// "Restarts"): the jobs a replay starts on disk against the same binlog restored with every
// job in memory. The binlog's accounting, compaction and later crashes, the first commands
// before the tier's loop has run, and priorities on both sides of the urgent mark.
#include <chrono>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "storage/binlog.h"
#include "storage/binlog_test_util.h"
#include "storage/cold_tier_test_util.h"

namespace stalkd::storage {
namespace {

using command::Outcome;
using command::Result;
using testing_util::Tier;
namespace tu = testing_util;

class ColdReview4Test : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tu::MakeTempDir();
    copy_ = tu::MakeTempDir();
    wall0_ = std::chrono::system_clock::now();
  }
  void TearDown() override {
    tu::RemoveDir(dir_);
    tu::RemoveDir(copy_);
  }

  void CopyDir() {
    for (const std::string& f : tu::Files(dir_))
      tu::WriteFile(copy_ + "/" + f, tu::ReadFile(dir_ + "/" + f));
  }
  double Drift() const {
    return std::chrono::duration<double>(std::chrono::system_clock::now() - wall0_).count() + 1;
  }

  // MakeHistory under a tier that sends every job it can to disk, then a crash; the
  // binlog copied to copy_. Returns the number of jobs.
  size_t FillAndCrash(uint32_t seed, int puts) {
    Tier t(clock_, dir_, 1);
    tu::MakeHistory(t, seed, puts, true);
    for (int i = 0; i < 5; i++) t.Tick();
    const size_t jobs = t.Jobs();
    t.Crash();
    CopyDir();
    return jobs;
  }

  static uint64_t Put(Tier& t, const std::string& tube, uint32_t pri, uint32_t delay,
                      const std::string& body, const std::string& key = "") {
    command::Session& s = *t.session;
    s.Use(tube);
    command::PutOptions o;
    command::PutArgs a{pri, delay, 30, static_cast<uint32_t>(body.size())};
    if (!key.empty()) {
      o.key = key;
      a.options = &o;
    }
    command::PutSlot slot = s.BeginPut(a);
    EXPECT_NE(slot.data, nullptr);
    if (!slot.data) return 0;
    std::memcpy(slot.data, body.data(), body.size());
    std::memcpy(slot.data + body.size(), "\r\n", 2);
    Result r = s.CommitPut();
    EXPECT_EQ(r.outcome, Outcome::kInserted);
    return r.number;
  }

  // Every job a reserve hands out now, in order (each deleted); with `tick`, the tier's
  // loop runs before each reserve.
  static std::vector<uint64_t> Drain(Tier& t, bool tick) {
    std::vector<uint64_t> out;
    for (;;) {
      if (tick) t.Tick();
      Result r = t.session->Reserve(0);
      if (r.outcome != Outcome::kReserved) return out;
      out.push_back(r.job.id);
      EXPECT_EQ(t.session->Delete(r.job.id).outcome, Outcome::kDeleted);
    }
  }

  // Jobs 1..max_id alike in a and b but for their binlog file (compaction moved them).
  static void ExpectSameJobs(Tier& a, Tier& b, uint64_t max_id) {
    for (uint64_t id = 1; id <= max_id; id++) {
      Result x = a.session->StatsJob(id), y = b.session->StatsJob(id);
      ASSERT_EQ(x.outcome, y.outcome) << id;
      if (x.outcome != Outcome::kJobStats) continue;
      const command::JobStats &p = *x.job_stats, &q = *y.job_stats;
      auto counts = [](const command::JobStats& j) {
        return std::vector<uint64_t>{j.pri, j.reserves, j.releases, j.buries, j.kicks};
      };
      EXPECT_EQ(std::tie(p.tube, p.state), std::tie(q.tube, q.state)) << id;
      EXPECT_EQ(counts(p), counts(q)) << id;
      EXPECT_EQ(a.session->Peek(id).job.body, b.session->Peek(id).job.body) << id;
    }
  }

  std::string dir_, copy_;
  FakeClock clock_;
  std::chrono::system_clock::time_point wall0_;
};

// Right after the start, and once every job is gone, the binlog accounts for the jobs the
// replay kept on disk as for those it put in memory: the same live bytes and segments, and
// compaction drops the same segments.
TEST_F(ColdReview4Test, ReplayedColdKeepsTheLogsAccounting) {
  const int puts = 600;
  FillAndCrash(11, puts);
  Tier a(clock_, dir_, 1), b(clock_, copy_, 0);
  ASSERT_TRUE(a.ok && b.ok);
  ASSERT_GT(a.log->replayed_cold(), 0u);
  EXPECT_EQ(a.log->stats().live_bytes, b.log->stats().live_bytes);
  EXPECT_EQ(a.log->stats().segments, b.log->stats().segments);
  for (Tier* t : {&a, &b}) {
    for (const char* tube : {"default", "a", "b"}) t->session->Watch(tube);
  }
  EXPECT_EQ(Drain(a, true), Drain(b, true));
  clock_.Advance(200000 * kSecond);
  EXPECT_EQ(Drain(a, true), Drain(b, true));
  for (Tier* t : {&a, &b}) {
    for (const char* tube : {"default", "a", "b"}) {
      t->session->Use(tube);
      t->session->Kick(1000);
    }
  }
  EXPECT_EQ(Drain(a, true), Drain(b, true));
  ASSERT_EQ(a.Jobs(), 0u);
  ASSERT_EQ(b.Jobs(), 0u);
  for (int i = 0; i < 200; i++) {
    a.Tick();
    b.Tick();
  }
  EXPECT_EQ(a.log->stats().live_bytes, b.log->stats().live_bytes);
  EXPECT_EQ(a.log->stats().segments, b.log->stats().segments);
}

// After a start that kept jobs on disk, enough new work to make compaction move them, then
// a second crash: every job is still there, as it was (compared with the same binlog
// restored into memory, without the new work).
TEST_F(ColdReview4Test, ReplayedColdJobsSurviveCompactionAndACrash) {
  const int puts = 500;
  const size_t jobs = FillAndCrash(12, puts);
  {
    Tier a(clock_, dir_, 1);
    ASSERT_TRUE(a.ok);
    ASSERT_GT(a.log->replayed_cold(), jobs / 2);
    const std::string body(300, 'c');
    for (int i = 0; i < 3000; i++) {
      const uint64_t id = Put(a, "churn", 5, 0, body);
      EXPECT_EQ(a.session->Delete(id).outcome, Outcome::kDeleted);
      if (i % 10 == 0) a.Tick();
    }
    for (int i = 0; i < 100; i++) a.Tick();
    EXPECT_EQ(a.Jobs(), jobs);
    a.Crash();
  }
  Tier c(clock_, dir_, 0), b(clock_, copy_, 0);
  ASSERT_TRUE(c.ok && b.ok);
  EXPECT_EQ(c.Jobs(), jobs);
  ExpectSameJobs(c, b, puts);
}

// The same commands on both after the start (reserves, releases with a new priority,
// buries, deletes), then a crash of both and a start of both: still alike.
TEST_F(ColdReview4Test, ChangesAfterAReplayedColdStartSurviveTheNextCrash) {
  const int puts = 500;
  FillAndCrash(13, puts);
  {
    Tier a(clock_, dir_, 1), b(clock_, copy_, 0);
    ASSERT_TRUE(a.ok && b.ok);
    for (Tier* t : {&a, &b}) {
      for (const char* tube : {"default", "a", "b"}) t->session->Watch(tube);
      for (int i = 0; i < 40; i++) {
        t->Tick();
        Result r = t->session->Reserve(0);
        if (r.outcome != Outcome::kReserved) break;
        switch (i % 4) {
          case 0:
            t->session->Release(r.job.id, 2000 + i, 0);
            break;
          case 1:
            t->session->Bury(r.job.id, 3);
            break;
          case 2:
            t->session->Delete(r.job.id);
            break;
          default:
            t->session->Release(r.job.id, 1, 50);
            break;
        }
      }
      for (int i = 0; i < 5; i++) t->Tick();
    }
    tu::ExpectSameAnswers(a, b, puts, Drift());
    a.Crash();
    b.Crash();
  }
  Tier a(clock_, dir_, 1), b(clock_, copy_, 0);
  ASSERT_TRUE(a.ok && b.ok);
  tu::ExpectSameAnswers(a, b, puts, Drift());
  for (Tier* t : {&a, &b}) {
    for (const char* tube : {"default", "a", "b"}) t->session->Watch(tube);
  }
  EXPECT_EQ(Drain(a, true), Drain(b, true));
}

// Ready jobs of priorities on both sides of the urgent mark, some that must stay in memory
// (a key) among those the replay keeps on disk: the counts right after the start, and the
// first commands before the tier's loop has run (peek-ready, reserve) take the tube's first
// by priority then id, as a start with every job in memory does.
TEST_F(ColdReview4Test, FirstCommandsAfterAReplayedColdStartNeedNoTick) {
  {
    Tier t(clock_, dir_, 1);
    const uint32_t pris[] = {5000, 1023, 1024, 0, 4294967295u, 7, 1024, 2000, 1};
    int i = 0;
    for (uint32_t pri : pris) {
      const std::string body = "job " + std::to_string(i);
      // Every fourth with a key: it stays in memory.
      const char* tube = i % 3 == 0 ? "default" : i % 3 == 1 ? "a" : "b";
      Put(t, tube, pri, 0, body, i % 4 == 0 ? "k" + std::to_string(i) : "");
      i++;
    }
    for (int k = 0; k < 5; k++) t.Tick();
    t.Crash();
    CopyDir();
  }
  Tier a(clock_, dir_, 1), b(clock_, copy_, 0);
  ASSERT_TRUE(a.ok && b.ok);
  EXPECT_GT(a.log->replayed_cold(), 0u);
  tu::ExpectSameAnswers(a, b, 9, Drift());
  for (const char* tube : {"default", "a", "b"}) {
    const command::TubeStats ta = *a.session->StatsTube(tube).tube_stats;
    const command::TubeStats tb = *b.session->StatsTube(tube).tube_stats;
    EXPECT_EQ(ta.ready, tb.ready) << tube;
    EXPECT_EQ(ta.urgent, tb.urgent) << tube;
    a.session->Use(tube);
    b.session->Use(tube);
    EXPECT_EQ(a.session->PeekReady().job.id, b.session->PeekReady().job.id) << tube;
  }
  for (Tier* t : {&a, &b}) {
    for (const char* tube : {"default", "a", "b"}) t->session->Watch(tube);
  }
  EXPECT_EQ(Drain(a, false), Drain(b, false));
}

// Jobs released with a delay, then kept on disk (their records written whole again): a
// Job's creation time is a multiple of 16 ns, so the index keeps them in its 16 bytes. A
// start after a crash (the replay to disk) and one from a checkpoint bring them back into
// the index from their records' wall-clock times: they should fit as well, not be kept
// wide (a hash node each), since the job's creation time is a multiple of 16 ns again once
// it is back in memory.
TEST_F(ColdReview4Test, ReleasedJobsFitTheIndexAfterARestart) {
  const int n = 200;
  {
    Tier t(clock_, dir_, 1);
    for (int i = 0; i < n; i++) Put(t, "default", 5, 0, "r" + std::to_string(i));
    for (int i = 0; i < n; i++) {
      Result r = t.session->Reserve(0);
      ASSERT_EQ(r.outcome, Outcome::kReserved);
      clock_.Advance(kSecond / 20 + 12345);  // deadlines at any ns past 8.4 ms
      ASSERT_EQ(t.session->Release(r.job.id, 5, 1000).outcome, Outcome::kReleased);
    }
    for (int i = 0; i < 50 && t.cold->Count() < size_t(n); i++) t.Tick();
    ASSERT_EQ(t.cold->Count(), size_t(n));
    EXPECT_EQ(t.cold->index().wide(), 0u);
    t.Crash();
  }
  {
    Tier a(clock_, dir_, 1);  // a replay: straight to the index
    ASSERT_TRUE(a.ok);
    EXPECT_EQ(a.log->replayed_cold(), size_t(n));
    EXPECT_EQ(a.cold->Count(), size_t(n));
    EXPECT_EQ(a.cold->index().wide(), 0u);
    EXPECT_TRUE(a.Shutdown());
  }
  Tier b(clock_, dir_, 1);  // from the checkpoint
  ASSERT_TRUE(b.ok);
  EXPECT_EQ(b.log->restored_cold(), size_t(n));
  EXPECT_EQ(b.cold->Count(), size_t(n));
  EXPECT_EQ(b.cold->index().wide(), 0u);
}

}  // namespace
}  // namespace stalkd::storage
