// A start after a crash with the disk tier (docs/DISK-TIER.md, "Restarts"): the replay
// restores the jobs the tier could keep on disk straight into its index, never into memory,
// and the server then answers exactly as one that restored every job into memory: the same
// counts, the same stats-job values and bodies, the same jobs in the same order for every
// reserve (priority then id across memory and disk), on time for the delayed ones.
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "storage/binlog.h"
#include "storage/binlog_test_util.h"
#include "storage/cold_tier_test_util.h"

namespace stalkd::storage {
namespace {

using testing_util::ExpectSameAnswers;
using testing_util::ExpectSameOrder;
using testing_util::Files;
using testing_util::MakeHistory;
using testing_util::MakeTempDir;
using testing_util::ReadFile;
using testing_util::RemoveDir;
using testing_util::Tier;
using testing_util::WriteFile;

class ColdReplayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    copy_ = MakeTempDir();
  }
  void TearDown() override {
    RemoveDir(dir_);
    RemoveDir(copy_);
  }

  // Jobs in every state under a tier that sends every job it can to disk, changes after
  // their put, then a crash (no checkpoint). Returns the number of jobs.
  size_t FillAndCrash(uint32_t seed, int puts) {
    Tier t(clock_, dir_, 1);
    MakeHistory(t, seed, puts, true);
    command::Session& s = *t.session;
    s.Reserve(0);  // reserved at the crash: it comes back ready
    for (int i = 0; i < 5; i++) t.Tick();
    EXPECT_GT(t.cold->Count() + t.cold->ReadyOnDisk(nullptr).ready, size_t(puts) / 3);
    const size_t jobs = t.Jobs();
    t.Crash();
    for (const std::string& f : Files(dir_)) WriteFile(copy_ + "/" + f, ReadFile(dir_ + "/" + f));
    return jobs;
  }

  std::string dir_, copy_;
  FakeClock clock_;
};

TEST_F(ColdReplayTest, StartsOnDiskAndAnswersAsAllInMemory) {
  for (uint32_t seed = 1; seed <= 3; seed++) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const auto wall0 = std::chrono::system_clock::now();
    const int puts = 700;
    const size_t jobs = FillAndCrash(seed, puts);
    Tier a(clock_, dir_, 1), b(clock_, copy_, 0);  // the tier; every job in memory
    ASSERT_TRUE(a.ok && b.ok);
    const double drift_s =
        std::chrono::duration<double>(std::chrono::system_clock::now() - wall0).count() + 1;
    // Most jobs never entered memory; those that must stay (key, TTL, buried) did.
    EXPECT_EQ(a.log->restored_cold(), 0u);  // no checkpoint: a replay
    EXPECT_GT(a.log->replayed_cold(), jobs / 2);
    EXPECT_EQ(a.log->restored(), b.log->restored());
    EXPECT_EQ(a.cold->Count() + a.cold->ReadyOnDisk(nullptr).ready, a.log->replayed_cold());
    EXPECT_LT(a.store->engine().memory_used() * 2, b.store->engine().memory_used());
    EXPECT_EQ(a.cold->stats().promotions, 0u);
    EXPECT_EQ(a.Jobs(), jobs);
    EXPECT_EQ(b.Jobs(), jobs);

    ExpectSameAnswers(a, b, puts, drift_s);
    // The same jobs in the same order: the ready ones now, then the delayed ones once due,
    // then the buried ones once kicked.
    EXPECT_GT(ExpectSameOrder(a, b, clock_).second, 0u);
    EXPECT_EQ(a.cold->stats().read_errors, 0u);
    a.Crash();
    b.Crash();
    RemoveDir(dir_);
    RemoveDir(copy_);
    dir_ = MakeTempDir();
    copy_ = MakeTempDir();
  }
}

// A start stopped in the middle of a replay to disk (a signal; a kill -9 is the blackbox
// test's) has written nothing: the next start brings back every job.
TEST_F(ColdReplayTest, AStartStoppedMidwayLosesNothing) {
  const size_t jobs = FillAndCrash(4, 400);
  for (int stop_after : {1, 3, 8}) {
    int calls = 0;
    {
      Tier t(clock_, dir_, 1, [&] { return ++calls < stop_after; });
      EXPECT_TRUE(t.log->stopped()) << stop_after;
      t.ok = false;
    }
    Tier t(clock_, dir_, 1);
    ASSERT_TRUE(t.ok);
    EXPECT_EQ(t.Jobs(), jobs);
    EXPECT_GT(t.log->replayed_cold(), 0u);
    t.Crash();
  }
}

}  // namespace
}  // namespace stalkd::storage
