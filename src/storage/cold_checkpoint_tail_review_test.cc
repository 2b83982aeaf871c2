// A review of the checkpoint's tail (docs/DISK-TIER.md, "Restarts: the checkpoint"): paths
// the random runs of cold_checkpoint_tail_test.cc reach rarely or not at all. Tube defaults
// set, moved by compaction and cleared after its position; a clean stop whose checkpoint
// cannot be written (the old one serves, the whole run its tail); a torn tail cleared by a
// start from it, then written on; a stop while its tail is replayed; and a run from it that
// compacts away every segment it lists, after which a full replay still has every job.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "storage/cold_checkpoint_tail_review_test_util.h"

namespace stalkd::storage::tail_review {
namespace {

TEST_F(CheckpointTailReviewTest, TubeDefaultsAfterItsPositionAnswerAsAFullReplay) {
  Fill(31);
  if (HasFatalFailure()) return;
  const CheckpointMeta meta = Meta();
  ASSERT_EQ(meta.tube_tries.size(), 1u);
  const std::string a_seg = dir_ + "/binlog." + std::to_string(meta.tube_tries[0].seq);
  std::set<uint64_t> live;
  std::mt19937_64 rng(31);
  {
    Tier t(clock_, dir_, 1);
    ASSERT_TRUE(t.log->checkpoint_used());
    live = Live(t);
    ASSERT_EQ(t.session->TubeTries("b", 5).outcome, Outcome::kTubeTries);
    ASSERT_EQ(t.session->TubeTries("c", 2).outcome, Outcome::kTubeTries);
    for (int i = 0; i < 20000 && (i < 300 || Exists(a_seg)); i++) {
      Churn(t, rng, &live);
      if (HasFatalFailure()) return;
      if (ListedGone(meta) + 1 >= ListedWithRecords(meta)) break;  // keep its position
    }
    ASSERT_FALSE(Exists(a_seg));  // "a"'s default moved on
    ASSERT_EQ(t.session->TubeTries("c", 0).outcome, Outcome::kTubeTries);
    t.Tick();
    t.Crash();
  }
  const std::map<std::string, uint32_t> want{{"a", 3}, {"b", 5}};
  {
    const std::string copy = CopyWithoutCheckpoint(dir_);
    Tier a(clock_, dir_, 1), b(clock_, copy, 1);
    ASSERT_TRUE(a.ok && b.ok) << a.error << b.error;
    EXPECT_TRUE(a.log->checkpoint_used());
    EXPECT_EQ(Defaults(a), want);
    EXPECT_EQ(Defaults(b), want);
    EXPECT_EQ(Live(a), live);
    ExpectSameAnswers(a, b, kMaxId, Drift());
    // The run from it goes on until every segment it lists is gone, then a kill.
    for (int i = 0; i < 40000 && ListedGone(meta) < ListedWithRecords(meta); i++) {
      Churn(a, rng, &live);
      if (HasFatalFailure()) return;
    }
    ASSERT_EQ(ListedGone(meta), ListedWithRecords(meta));
    a.Tick();
    a.Crash();
  }
  Tier c(clock_, dir_, 1);  // it is not used: a full replay
  ASSERT_TRUE(c.ok) << c.error;
  EXPECT_FALSE(c.log->checkpoint_used());
  EXPECT_EQ(Defaults(c), want);
  EXPECT_EQ(Live(c), live);
}

// A clean stop after a start from it whose own checkpoint cannot be written (a directory
// in the way of checkpoint.tmp): the old one stays and the next start uses it, with the
// whole run (and the jobs the stop wrote whole again) as its tail.
TEST_F(CheckpointTailReviewTest, AStopThatCannotWriteItsCheckpointLeavesTheOldOneUsable) {
  Fill(32);
  if (HasFatalFailure()) return;
  const std::string before = ReadFile(Path(kCheckpointName));
  std::set<uint64_t> live;
  std::mt19937_64 rng(32);
  {
    Tier t(clock_, dir_, 1);
    ASSERT_TRUE(t.log->checkpoint_used());
    live = Live(t);
    for (int i = 0; i < 600; i++) {
      Churn(t, rng, &live);
      if (HasFatalFailure()) return;
    }
    ASSERT_EQ(mkdir(Path(kCheckpointTmpName).c_str(), 0700), 0);
    EXPECT_FALSE(t.Shutdown());
    ASSERT_EQ(rmdir(Path(kCheckpointTmpName).c_str()), 0);
  }
  ASSERT_EQ(ReadFile(Path(kCheckpointName)), before);
  ExpectUsedAndAsAFullReplay(live, [](Tier& a, Tier&) { EXPECT_GT(a.log->checkpoint_tail(), 0u); });
}

// A kill that tears the record being written after a start from it: the next start clears
// the torn tail and uses it; more records after that, another kill, and the start after
// it uses it again and answers as a full replay.
TEST_F(CheckpointTailReviewTest, ATornTailClearedByAStartFromItIsWrittenOn) {
  Fill(33);
  if (HasFatalFailure()) return;
  std::set<uint64_t> live;
  std::mt19937_64 rng(33);
  for (int round = 0; round < 2; round++) {
    SCOPED_TRACE(round);
    Tier t(clock_, dir_, 1);
    ASSERT_TRUE(t.ok) << t.error;
    ASSERT_TRUE(t.log->checkpoint_used());
    if (round > 0) {
      EXPECT_EQ(Live(t), live);
    } else {
      live = Live(t);
    }
    for (int i = 0; i < 200; i++) {
      Churn(t, rng, &live);
      if (HasFatalFailure()) return;
    }
    t.Tick();
    t.Crash();
    // Half a record after the last one (as a kill in the middle of a write leaves it).
    const auto [path, end] = EndOfRecords(dir_);
    const int fd = open(path.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    const std::string torn("\x11\x22\x33\x44\x50\x00\x00\x00\x01garbage", 16);
    ASSERT_EQ(pwrite(fd, torn.data(), torn.size(), static_cast<off_t>(end)),
              static_cast<ssize_t>(torn.size()));
    close(fd);
  }
  ExpectUsedAndAsAFullReplay(live);
}

// A stop asked while the records after its position are replayed: nothing written, it
// stays, and the next start uses it with every acknowledged job.
TEST_F(CheckpointTailReviewTest, AStopWhileItsTailIsReplayedLeavesItUsable) {
  Fill(34);
  if (HasFatalFailure()) return;
  std::set<uint64_t> live;
  std::mt19937_64 rng(34);
  {
    Tier t(clock_, dir_, 1);
    ASSERT_TRUE(t.log->checkpoint_used());
    live = Live(t);
    for (int i = 0; i < 400; i++) {
      Churn(t, rng, &live);
      if (HasFatalFailure()) return;
    }
    t.Tick();
    t.Crash();
  }
  std::map<std::string, std::string> files;
  for (const std::string& f : Files(dir_)) files[f] = ReadFile(dir_ + "/" + f);
  {
    Tier t(clock_, dir_, 1, [] { return false; });  // asked to stop at once
    EXPECT_FALSE(t.ok);
    EXPECT_TRUE(t.log->stopped());
  }
  std::map<std::string, std::string> after;
  for (const std::string& f : Files(dir_)) after[f] = ReadFile(dir_ + "/" + f);
  EXPECT_TRUE(after == files);
  Tier t(clock_, dir_, 1);
  ASSERT_TRUE(t.ok) << t.error;
  EXPECT_TRUE(t.log->checkpoint_used());
  EXPECT_EQ(Live(t), live);
}

// -s changed between runs: the checkpoint written with segments of 4 KiB (its empty ones,
// too small for the next run, dropped and made again under the same numbers), a run of
// 8 KiB segments from it, then one of 32 KiB, each ended by a kill: the start after them
// uses it and answers as a full replay.
TEST_F(CheckpointTailReviewTest, SegmentSizesChangedBetweenRunsAnswerAsAFullReplay) {
  std::set<uint64_t> live;
  std::mt19937_64 rng(35);
  {
    SizedTier t(clock_, dir_, 4096);
    for (int i = 0; i < 400; i++) {
      t.session->Use(i % 3 == 0 ? "a" : "b");
      Result r = Put(*t.session, 1, (i % 4) * 40000, "s" + std::string(i % 90, 'q'));
      ASSERT_EQ(r.outcome, Outcome::kInserted);
      live.insert(r.number);
      if (i % 20 == 0) t.Tick();
    }
    for (int i = 0; i < 5; i++) t.Tick();
    ASSERT_TRUE(t.Shutdown());
  }
  const CheckpointMeta meta = Meta();
  ASSERT_GT(meta.segments.size(), ListedWithRecords(meta));  // empty ones it lists
  for (const int64_t size : {8192, 32768}) {
    SCOPED_TRACE(size);
    SizedTier t(clock_, dir_, size);
    ASSERT_TRUE(t.ok);
    ASSERT_TRUE(t.log->checkpoint_used());
    for (int i = 0; i < 400; i++) {
      Churn(t, *t.session, rng, &live);
      if (HasFatalFailure()) return;
    }
    t.Tick();
    t.Close();  // a kill: no checkpoint
  }
  ExpectUsedAndAsAFullReplay(live);
}

// Tubes come back in the order of their lowest live id, as in a replay, when that id is a
// job on disk it lists, one in memory, one with state records after its position, one put
// after it, or the next one up after a delete after it.
TEST_F(CheckpointTailReviewTest, TubesAfterItsTailAreInTheOrderOfAFullReplay) {
  std::vector<uint64_t> first(12);  // each tube's first job
  // (ExpectSameAnswers looks at tubes "a" and "b": t0 and t1 are named so.)
  auto name = [](int k) {
    return k == 0 ? std::string("a") : k == 1 ? "b" : "t" + std::to_string(k);
  };
  {
    Tier t(clock_, dir_, 1);
    for (int round = 0; round < 3; round++) {
      for (int k = 0; k < 12; k++) {
        t.session->Use(name((k * 7 + round) % 12));
        // Tubes 0-3 delayed (on disk), 4-7 buried (in memory), 8-11 ready.
        const int kind = ((k * 7 + round) % 12) / 4;
        Result r = Put(*t.session, 1, kind == 0 ? 90000 : 0, "x" + std::to_string(k));
        ASSERT_EQ(r.outcome, Outcome::kInserted);
        if (round == 0) first[static_cast<size_t>((k * 7) % 12)] = r.number;
        if (kind == 1) {
          ASSERT_EQ(t.session->ReserveJob(r.number).outcome, Outcome::kReserved);
          ASSERT_EQ(t.session->Bury(r.number, 1).outcome, Outcome::kBuried);
        }
        t.Tick();
      }
    }
    ASSERT_TRUE(t.Shutdown());
  }
  {
    Tier t(clock_, dir_, 1);
    ASSERT_TRUE(t.log->checkpoint_used());
    // After its position: the first job of t0 (on disk), t4 (in memory) and t8 deleted;
    // t5's kicked and t9's released with a delay (state records); new tubes u0-u3.
    for (size_t k : {size_t{0}, size_t{4}, size_t{8}}) {
      EXPECT_EQ(t.session->Delete(first[k]).outcome, Outcome::kDeleted);
    }
    EXPECT_EQ(t.session->KickJob(first[5]).outcome, Outcome::kKickedJob);
    ASSERT_EQ(t.session->ReserveJob(first[9]).outcome, Outcome::kReserved);
    EXPECT_EQ(t.session->Release(first[9], 1, 50000).outcome, Outcome::kReleased);
    for (int i = 0; i < 4; i++) {
      t.session->Use("u" + std::to_string(i));
      ASSERT_EQ(Put(*t.session, 1, i % 2 ? 90000 : 0, "u").outcome, Outcome::kInserted);
    }
    t.Tick();
    t.Crash();
  }
  const std::string copy = CopyWithoutCheckpoint(dir_);
  Tier a(clock_, dir_, 1), b(clock_, copy, 1);
  ASSERT_TRUE(a.ok && b.ok) << a.error << b.error;
  EXPECT_TRUE(a.log->checkpoint_used());
  EXPECT_GT(a.log->checkpoint_tail(), 0u);
  EXPECT_EQ(TubeList(a), TubeList(b));
  ExpectSameAnswers(a, b, kMaxId, Drift());
}

// Many runs in a row on one directory, each ended at random by a kill, a kill that tears
// the record being written, a clean stop (a new checkpoint), or a clean stop that cannot
// write its checkpoint (the old one stays); now and then a start without the tier (it is
// removed). Tube defaults set and cleared among the commands. Every start restores every
// acknowledged job and answers as a full replay of a copy of the same directory.
TEST_F(CheckpointTailReviewTest, ManyRunsEndedAnyWayLoseNothing) {
  for (uint32_t seed = 40; seed < 43; seed++) {
    SCOPED_TRACE(seed);
    RemoveDir(dir_);
    dir_ = MakeTempDir();
    Fill(seed);
    if (HasFatalFailure()) return;
    std::mt19937_64 rng(seed);
    std::set<uint64_t> live;
    bool first = true;
    size_t used = 0;
    for (int run = 0; run < 12; run++) {
      SCOPED_TRACE(run);
      const bool had = Exists(Path(kCheckpointName));
      const std::string copy = CopyWithoutCheckpoint(dir_);
      const size_t budget = run % 5 == 4 ? 0 : 1;  // now and then, the tier off
      Tier t(clock_, dir_, budget);
      ASSERT_TRUE(t.ok) << t.error;
      EXPECT_EQ(t.log->checkpoint_used(), had && budget != 0);
      used += t.log->checkpoint_used();
      if (budget == 0) {
        EXPECT_FALSE(Exists(Path(kCheckpointName)));
      }
      if (first) live = Live(t);
      first = false;
      EXPECT_EQ(Live(t), live);
      {
        Tier b(clock_, copy, budget);
        ASSERT_TRUE(b.ok) << b.error;
        EXPECT_EQ(Defaults(t), Defaults(b));
        ExpectSameAnswers(t, b, kMaxId, Drift());
      }
      if (HasFatalFailure()) return;
      for (int i = 0; i < 150 + static_cast<int>(rng() % 300); i++) {
        if (rng() % 40 == 0) {
          const char* tube = rng() % 2 ? "a" : "c";
          t.session->TubeTries(tube, static_cast<uint32_t>(rng() % 3));
        }
        if (rng() % 4 == 0) {
          ChurnExtensions(t, rng, &live);
        } else {
          Churn(t, rng, &live);
        }
        if (HasFatalFailure()) return;
      }
      t.Tick();
      switch (rng() % 4) {
        case 0:
          t.Crash();
          break;
        case 1: {
          t.Crash();
          const auto [path, end] = EndOfRecords(dir_);
          const int fd = open(path.c_str(), O_WRONLY);
          ASSERT_GE(fd, 0);
          const std::string torn("\x21\x22\x33\x44\x40\x00\x00\x00\x01torn", 13);
          ASSERT_EQ(pwrite(fd, torn.data(), torn.size(), static_cast<off_t>(end)),
                    static_cast<ssize_t>(torn.size()));
          close(fd);
          break;
        }
        case 2:
          EXPECT_EQ(t.Shutdown(), budget != 0);
          break;
        default:
          ASSERT_EQ(mkdir(Path(kCheckpointTmpName).c_str(), 0700), 0);
          EXPECT_FALSE(t.Shutdown());
          ASSERT_EQ(rmdir(Path(kCheckpointTmpName).c_str()), 0);
      }
    }
    EXPECT_GT(used, 3u);
  }
}

// Jobs put and deleted after its position (a run's churn, the checkpoint's own jobs left
// alone) are gone as in a replay: the start from it holds nothing for them, so its memory
// while it replays the tail is not above a full replay's but for the checkpoint it reads
// (its reader's buffer). Heap in use, sampled at each turn of the loop a start gives, above
// what it was before the start.
}  // namespace
}  // namespace stalkd::storage::tail_review
