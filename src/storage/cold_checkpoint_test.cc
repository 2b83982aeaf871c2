// The disk tier's checkpoint (docs/DISK-TIER.md): its format (round trip, every cut and
// every flipped byte refused), its match against the segments, and restarts: one that uses
// it restores exactly what a full replay of the same directory restores, without reading the
// cold jobs' records; every mismatch (a write after it, another segment, a damaged or cut
// file, one left half-written, the tier off, a record that is not the job's) makes the start
// replay everything instead, and no job is lost.
#include "storage/cold_checkpoint.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "command/put_test_util.h"
#include "storage/binlog.h"
#include "storage/binlog_test_util.h"
#include "storage/cold_store.h"
#include "storage/cold_tier_test_util.h"
#include "storage/record.h"
#include "store/memory_store.h"

namespace stalkd::storage {
namespace {

using command::Outcome;
using command::Result;
using testing_util::Exists;
using testing_util::ExpectSameAnswers;
using testing_util::Files;
using testing_util::MakeHistory;
using testing_util::MakeTempDir;
constexpr auto Put = command::testing_util::PutThrough;
using testing_util::ReadFile;
using testing_util::RemoveDir;
using testing_util::Tier;
using testing_util::WriteFile;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir(); }
  void TearDown() override {
    RemoveDir(dir_);
    for (const std::string& d : more_) RemoveDir(d);
  }
  std::string Path(const char* name) const { return dir_ + "/" + name; }
  // Jobs in every state, most of them long-delayed and on disk, a tube default, changes
  // after the put; then a clean shutdown that writes the checkpoint. Returns the jobs.
  size_t Fill(uint32_t seed, int puts) {
    Tier t(clock_, dir_, 1);  // a budget of 1 byte: every job that may go, goes
    MakeHistory(t, seed, puts, false);
    command::Session& s = *t.session;
    s.Reserve(0);  // reserved at the shutdown
    clock_.Advance(kSecond);
    for (int i = 0; i < 5; i++) t.Tick();
    cold_before_ = t.cold->Count();
    EXPECT_GT(cold_before_, static_cast<size_t>(puts) / 3);
    const size_t jobs = t.Jobs();
    EXPECT_TRUE(t.Shutdown());
    EXPECT_TRUE(Exists(Path(kCheckpointName)));
    return jobs;
  }
  // The directory as it is, and back to it (a restart changes it: segments are made and
  // removed, the checkpoint is removed).
  void Snap() {
    snap_.clear();
    for (const std::string& f : Files(dir_)) snap_[f] = ReadFile(dir_ + "/" + f);
  }
  void Back() {
    for (const std::string& f : Files(dir_)) unlink((dir_ + "/" + f).c_str());
    for (const auto& [f, bytes] : snap_) WriteFile(dir_ + "/" + f, bytes);
  }
  // A copy of the directory but for the checkpoint (removed when the test ends): its start
  // replays every record.
  std::string CopyWithoutCheckpoint() {
    const std::string copy = MakeTempDir();
    more_.push_back(copy);
    for (const std::string& f : Files(dir_)) {
      if (f != kCheckpointName) WriteFile(copy + "/" + f, ReadFile(dir_ + "/" + f));
    }
    return copy;
  }
  // A restart with the tier: whether it used the checkpoint; every job must be back.
  bool Restart(size_t jobs) {
    Tier t(clock_, dir_, 1);
    EXPECT_EQ(t.Jobs(), jobs);
    EXPECT_FALSE(Exists(Path(kCheckpointName)));  // never applied twice
    EXPECT_FALSE(Exists(Path(kCheckpointTmpName)));
    return t.log->restored_cold() > 0;
  }
  // The checkpoint as read back, changed by `edit`, written again with a good CRC.
  void Rewrite(const std::function<void(CheckpointMeta*, std::vector<CheckpointJob>*)>& edit) {
    CheckpointReader r;
    std::string why;
    ASSERT_TRUE(r.Open(Path(kCheckpointName), &why)) << why;
    CheckpointMeta meta = r.meta();
    std::vector<CheckpointJob> jobs;
    CheckpointJob j;
    while (r.Next(&j, &why)) jobs.push_back(j);
    ASSERT_EQ(why, "");
    edit(&meta, &jobs);
    meta.jobs = jobs.size();
    int dfd = open(dir_.c_str(), O_RDONLY | O_DIRECTORY);
    CheckpointWriter w;
    ASSERT_TRUE(w.Begin(dir_, dfd, meta, &why)) << why;
    for (const CheckpointJob& x : jobs) ASSERT_TRUE(w.Add(x, &why)) << why;
    ASSERT_TRUE(w.Finish(&why)) << why;
    close(dfd);
  }

  std::string dir_;
  std::vector<std::string> more_;
  std::map<std::string, std::string> snap_;
  FakeClock clock_;
  size_t cold_before_ = 0;
};

// ---------------------------------------------------------------------------- format

CheckpointMeta SampleMeta() {
  CheckpointMeta m;
  m.max_id = 99;
  m.segments = {{3, 8192, 4000, 0x1234}, {4, 8192, 16, 0}};
  m.tubes = {"default", "a"};
  m.tube_tries = {{"a", 3, 3, 20}};
  m.jobs = 3;
  return m;
}

std::vector<CheckpointJob> SampleJobs() {
  CheckpointJob hot{5, 3, 16, 80};
  CheckpointJob cold{7, 3, 96, 90, true, 83, 1, 1'700'000'000'000'000'000, 1'600'000'000};
  CheckpointJob last{99, 3, 186, 70, true, 17, 0, -5, 6};
  return {hot, cold, last};
}

TEST_F(CheckpointTest, FormatRoundTripsAndRefusesEveryCutAndFlippedByte) {
  int dfd = open(dir_.c_str(), O_RDONLY | O_DIRECTORY);
  CheckpointWriter w;
  std::string why;
  ASSERT_TRUE(w.Begin(dir_, dfd, SampleMeta(), &why));
  for (const CheckpointJob& j : SampleJobs()) ASSERT_TRUE(w.Add(j, &why));
  ASSERT_TRUE(w.Finish(&why)) << why;
  EXPECT_FALSE(Exists(Path(kCheckpointTmpName)));
  // Read back, twice (Rewind).
  CheckpointReader r;
  ASSERT_TRUE(r.Open(Path(kCheckpointName), &why)) << why;
  EXPECT_EQ(r.meta(), SampleMeta());
  for (int pass = 0; pass < 2; pass++) {
    std::vector<CheckpointJob> got;
    CheckpointJob j;
    while (r.Next(&j, &why)) got.push_back(j);
    EXPECT_EQ(why, "");
    EXPECT_EQ(got, SampleJobs());
    ASSERT_TRUE(r.Rewind(&why));
  }
  // Order and count are the writer's to keep.
  CheckpointWriter bad;
  ASSERT_TRUE(bad.Begin(dir_, dfd, SampleMeta(), &why));
  ASSERT_TRUE(bad.Add(SampleJobs()[1], &why));
  EXPECT_FALSE(bad.Add(SampleJobs()[0], &why));
  EXPECT_FALSE(bad.Finish(&why));
  close(dfd);

  const std::string good = ReadFile(Path(kCheckpointName));
  for (size_t n = 0; n < good.size(); n++) {  // every cut
    WriteFile(Path(kCheckpointName), good.substr(0, n));
    CheckpointReader c;
    EXPECT_FALSE(c.Open(Path(kCheckpointName), &why)) << n;
  }
  for (size_t i = 0; i < good.size(); i++) {  // every flipped byte
    std::string bytes = good;
    bytes[i] ^= 0x20;
    WriteFile(Path(kCheckpointName), bytes);
    CheckpointReader c;
    EXPECT_FALSE(c.Open(Path(kCheckpointName), &why)) << i;
  }
  int err = 0;
  CheckpointReader none;
  EXPECT_FALSE(none.Open(dir_ + "/none", &why, &err));
  EXPECT_EQ(err, ENOENT);
}

TEST_F(CheckpointTest, MatchSegmentsFindsEveryDifference) {
  std::string seg;
  AppendSegmentHeader(&seg);
  AppendDelete(&seg, 1);
  AppendDelete(&seg, 2);
  const int64_t end = static_cast<int64_t>(seg.size());
  seg.resize(4096, '\0');
  std::string empty;
  AppendSegmentHeader(&empty);
  empty.resize(4096, '\0');
  CheckpointMeta m;
  m.segments = {{1, 4096, end, SegmentTailCrc(seg.data(), end)},
                {2, 4096, int64_t{kSegmentHeaderSize}, 0}};
  auto views = [&](const std::string& a, const std::string& b) {
    return std::vector<SegmentView>{{1, a.data(), a.size()}, {2, b.data(), b.size()}};
  };
  std::string why;
  EXPECT_TRUE(MatchSegments(m, views(seg, empty), &why)) << why;
  // Another number of segments, another segment, another size.
  EXPECT_FALSE(MatchSegments(m, {views(seg, empty)[0]}, &why));
  std::vector<SegmentView> other = views(seg, empty);
  other[1].seq = 3;
  EXPECT_FALSE(MatchSegments(m, other, &why));
  std::string longer = empty + std::string(4096, '\0');
  EXPECT_FALSE(MatchSegments(m, views(seg, longer), &why));
  // A record after the position, in the segment it ends in or in a later one.
  std::string more = seg;
  std::string rec;
  AppendDelete(&rec, 3);
  more.replace(static_cast<size_t>(end), rec.size(), rec);
  EXPECT_FALSE(MatchSegments(m, views(more, empty), &why));
  EXPECT_NE(why.find("after offset"), std::string::npos) << why;
  std::string filled = empty;
  filled.replace(kSegmentHeaderSize, rec.size(), rec);
  EXPECT_FALSE(MatchSegments(m, views(seg, filled), &why));
  // Other bytes before the position.
  std::string changed = seg;
  changed[static_cast<size_t>(end) - 3] ^= 1;
  EXPECT_FALSE(MatchSegments(m, views(changed, empty), &why));
  EXPECT_NE(why.find("tail CRC"), std::string::npos) << why;
}

// ---------------------------------------------------------------------------- restarts

// A restart from the checkpoint restores what a full replay of the same directory restores,
// and reads no cold job's record: every cold job is in the index, none was demoted again.
TEST_F(CheckpointTest, RestartFromItEqualsAFullReplay) {
  for (uint32_t seed = 1; seed <= 3; seed++) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    RemoveDir(dir_);
    dir_ = MakeTempDir();
    // Times go through the wall clock, which the fake clock does not follow: a record's and
    // the checkpoint's conversions differ by as much as the two clocks drifted apart.
    const auto wall0 = std::chrono::system_clock::now();
    const size_t jobs = Fill(seed, 600);
    const std::string copy = CopyWithoutCheckpoint();
    Tier a(clock_, dir_, 1), b(clock_, copy, 1);
    ASSERT_TRUE(a.ok && b.ok);
    // The fake clock advanced 1 s in Fill, the wall one by the test's run time.
    const double drift_s =
        std::chrono::duration<double>(std::chrono::system_clock::now() - wall0).count() + 1 + 1;
    EXPECT_EQ(a.log->restored_cold(), cold_before_);
    EXPECT_EQ(a.cold->Count(), cold_before_);
    EXPECT_EQ(a.cold->stats().demotions, 0u);
    EXPECT_EQ(b.log->restored_cold(), 0u);
    EXPECT_EQ(a.log->restored(), b.log->restored());
    EXPECT_EQ(a.Jobs(), jobs);
    EXPECT_EQ(b.Jobs(), jobs);
    ExpectSameAnswers(a, b, 600, drift_s);
    EXPECT_EQ(a.cold->stats().read_errors, 0u);
  }
}

// Tubes come back in the order a replay (as beanstalkd's) makes them: of their lowest live
// job id, "default" first. A start from the checkpoint merges the cold jobs it restores
// from it with those whose records it reads, in id order. Random histories over many tubes
// (long-delayed and ready jobs, on disk; buried ones, in memory; deletes; a tube default
// alone makes no tube): list-tubes after a start from the checkpoint equals that after a
// replay of a copy of the directory, and that order.
TEST_F(CheckpointTest, TubesComeBackInTheOrderOfAReplay) {
  for (uint32_t seed = 1; seed <= 8; seed++) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    RemoveDir(dir_);
    dir_ = MakeTempDir();
    std::mt19937_64 rng(seed);
    auto rand = [&](uint64_t n) { return rng() % n; };
    std::map<uint64_t, std::string> live;  // id: tube
    {
      Tier t(clock_, dir_, 1);  // a budget of 1 byte: every job that may go, goes
      command::Session& s = *t.session;
      const uint64_t tubes = 3 + rand(30);
      for (uint64_t k = 0; k < tubes; k++) s.Watch("t" + std::to_string(k));
      EXPECT_EQ(s.TubeTries("t-tries-only", 3).outcome, Outcome::kTubeTries);
      for (int i = 0; i < 400; i++) {
        const std::string tube = rand(8) == 0 ? "default" : "t" + std::to_string(rand(tubes));
        s.Use(tube);
        const uint64_t kind = rand(4);  // 0: buried; 1: ready; else delayed
        Result r =
            Put(s, kind == 0 ? 0 : 1 + static_cast<uint32_t>(rand(5)),
                kind < 2 ? 0 : static_cast<uint32_t>(3600 + rand(7200)), "j" + std::to_string(i));
        ASSERT_EQ(r.outcome, Outcome::kInserted);
        live[r.number] = tube;
        if (kind == 0) {  // the only job of priority 0 ready: reserved at once
          Result got = s.Reserve(0);
          ASSERT_EQ(got.outcome, Outcome::kReserved);
          ASSERT_EQ(s.Bury(got.job.id, 0).outcome, Outcome::kBuried);
        }
        if (rand(4) == 0) {  // a delete of a random live job: tubes' lowest ids change
          auto it = live.lower_bound(1 + rand(r.number));
          ASSERT_EQ(s.Delete(it->first).outcome, Outcome::kDeleted);
          live.erase(it);
        }
        if (i % 7 == 0) t.Tick();
      }
      for (int i = 0; i < 5; i++) t.Tick();
      EXPECT_GT(t.cold->Count(), live.size() / 3);
      EXPECT_TRUE(t.Shutdown());
    }
    ASSERT_TRUE(Exists(Path(kCheckpointName)));
    std::vector<std::string> order = {"default"};  // then by lowest live id
    for (const auto& [id, tube] : live) {
      if (std::find(order.begin(), order.end(), tube) == order.end()) order.push_back(tube);
    }
    const std::string copy = CopyWithoutCheckpoint();
    Tier a(clock_, dir_, 1), b(clock_, copy, 1);
    ASSERT_TRUE(a.ok && b.ok);
    EXPECT_GT(a.log->restored_cold(), 0u);  // from the checkpoint
    EXPECT_EQ(b.log->restored_cold(), 0u);  // a replay
    EXPECT_EQ(a.Jobs(), live.size());
    EXPECT_EQ(testing_util::TubeList(a), order);
    EXPECT_EQ(testing_util::TubeList(b), order);
  }
}

TEST_F(CheckpointTest, AWriteAfterItMakesItStale) {
  const size_t jobs = Fill(7, 300);
  const std::string saved = ReadFile(Path(kCheckpointName));
  {
    Tier t(clock_, dir_, 1);
    EXPECT_GT(t.log->restored_cold(), 0u);
    ASSERT_EQ(Put(*t.session, 1, 0, "after").outcome, Outcome::kInserted);
    t.Tick();
    t.Crash();
  }
  WriteFile(Path(kCheckpointName), saved);  // as if its removal had not reached the disk
  EXPECT_FALSE(Restart(jobs + 1));
}

TEST_F(CheckpointTest, AnotherSegmentOrSizeMakesItUnused) {
  const size_t jobs = Fill(8, 300);
  Snap();
  uint32_t last = 0;
  for (const auto& [f, bytes] : snap_) {
    if (f.rfind("binlog.", 0) == 0)
      last = std::max(last, static_cast<uint32_t>(std::stoul(f.substr(7))));
  }
  ASSERT_GT(last, 0u);
  EXPECT_TRUE(Restart(jobs));  // as it is: used
  // A segment more (empty, as one preallocated by a later run).
  Back();
  std::string empty;
  AppendSegmentHeader(&empty);
  empty.resize(8192, '\0');
  WriteFile(dir_ + "/binlog." + std::to_string(last + 1), empty);
  EXPECT_FALSE(Restart(jobs));
  // A segment fewer (an empty one: the rest still holds every job).
  Back();
  std::string newest = snap_["binlog." + std::to_string(last)];
  if (newest.size() > kSegmentHeaderSize + 9 &&
      newest.find_first_not_of('\0', kSegmentHeaderSize) == std::string::npos) {
    unlink((dir_ + "/binlog." + std::to_string(last)).c_str());
    EXPECT_FALSE(Restart(jobs));
    Back();
  }
  // A segment of another size.
  ASSERT_EQ(truncate((dir_ + "/binlog." + std::to_string(last)).c_str(), 8192 * 3), 0);
  EXPECT_FALSE(Restart(jobs));
}

TEST_F(CheckpointTest, ADamagedOrCutCheckpointIsNotUsed) {
  const size_t jobs = Fill(9, 200);
  Snap();
  const std::string good = snap_[kCheckpointName];
  std::mt19937_64 rng(9);
  for (int k = 0; k < 12; k++) {
    Back();
    std::string bytes = good;
    bytes[rng() % bytes.size()] ^= static_cast<char>(1 + rng() % 255);
    WriteFile(Path(kCheckpointName), bytes);
    EXPECT_FALSE(Restart(jobs));
    Back();
    WriteFile(Path(kCheckpointName), good.substr(0, rng() % good.size()));
    EXPECT_FALSE(Restart(jobs));
  }
  Back();
  EXPECT_TRUE(Restart(jobs));
}

// Killed while writing it: a checkpoint.tmp, whole or not, is removed and never used.
TEST_F(CheckpointTest, AHalfWrittenOneIsRemoved) {
  const size_t jobs = Fill(10, 200);
  Snap();
  const std::string good = snap_[kCheckpointName];
  for (size_t n : {size_t{0}, good.size() / 3, good.size() - 1, good.size()}) {
    Back();
    unlink(Path(kCheckpointName).c_str());
    WriteFile(Path(kCheckpointTmpName), good.substr(0, n));
    EXPECT_FALSE(Restart(jobs));
  }
}

TEST_F(CheckpointTest, NotUsedWithoutTheTier) {
  const size_t jobs = Fill(11, 200);
  {
    Tier t(clock_, dir_, 0);
    EXPECT_EQ(t.Jobs(), jobs);
    EXPECT_EQ(t.log->restored_cold(), 0u);
    EXPECT_FALSE(Exists(Path(kCheckpointName)));
  }
}

// A checkpoint with a good CRC that does not describe the binlog (a record that is not the
// job's, a record outside the segments, a tube default in no segment, a changed tail CRC, a
// position before the last record) is not used.
TEST_F(CheckpointTest, OneThatDoesNotDescribeTheBinlogIsNotUsed) {
  const size_t jobs = Fill(12, 300);
  Snap();
  using Edit = std::function<void(CheckpointMeta*, std::vector<CheckpointJob>*)>;
  auto first = [](std::vector<CheckpointJob>* list, bool cold) -> CheckpointJob& {
    for (CheckpointJob& j : *list) {
      if (j.cold == cold) return j;
    }
    return list->front();
  };
  const std::vector<Edit> edits = {
      [&](CheckpointMeta*, std::vector<CheckpointJob>* j) { first(j, false).off += 1; },
      [&](CheckpointMeta*, std::vector<CheckpointJob>* j) {
        CheckpointJob& h = first(j, false);
        for (CheckpointJob& x : *j) {
          if (&x != &h && !x.cold) {
            std::swap(h.off, x.off);
            std::swap(h.seq, x.seq);
            std::swap(h.size, x.size);
            return;
          }
        }
      },
      [&](CheckpointMeta*, std::vector<CheckpointJob>* j) { first(j, true).seq = 1u << 30; },
      [&](CheckpointMeta* m, std::vector<CheckpointJob>* j) {
        first(j, true).off = static_cast<uint32_t>(m->segments.back().size);
      },
      [&](CheckpointMeta*, std::vector<CheckpointJob>* j) { first(j, true).resv = 0; },
      [&](CheckpointMeta*, std::vector<CheckpointJob>* j) { first(j, true).tube = 1000; },
      [&](CheckpointMeta* m, std::vector<CheckpointJob>*) { m->tube_tries[0].seq = 1u << 30; },
      [&](CheckpointMeta* m, std::vector<CheckpointJob>*) { m->segments[0].tail_crc ^= 1; },
      [&](CheckpointMeta* m, std::vector<CheckpointJob>*) {
        for (CheckpointSegment& s : m->segments) {
          if (s.end > int64_t{kSegmentHeaderSize}) s.end -= 1;
        }
      },
      [&](CheckpointMeta* m, std::vector<CheckpointJob>*) { m->max_id = 1; },
  };
  for (size_t k = 0; k < edits.size(); k++) {
    SCOPED_TRACE("edit " + std::to_string(k));
    Back();
    Rewrite(edits[k]);
    if (HasFatalFailure()) return;
    EXPECT_FALSE(Restart(jobs));
  }
  Back();
  Rewrite([](CheckpointMeta*, std::vector<CheckpointJob>*) {});  // unchanged: used
  EXPECT_TRUE(Restart(jobs));
}

// A stop (SIGTERM) while the jobs on disk are restored from the checkpoint: nothing has been
// written, and the checkpoint is still there for the next start.
TEST_F(CheckpointTest, AStopDuringItsRestoreKeepsIt) {
  size_t jobs = 0;
  {
    Tier t(clock_, dir_, 1);
    for (uint32_t i = 0; i < 17000; i++) {  // more than a progress call's 16384
      ASSERT_EQ(Put(*t.session, 1, 3600 + i % 1000, "j" + std::to_string(i)).outcome,
                Outcome::kInserted);
      if (i % 500 == 0) t.Tick();
    }
    for (int i = 0; i < 20; i++) t.Tick();
    ASSERT_GT(t.cold->Count(), 16384u);
    jobs = t.Jobs();
    ASSERT_TRUE(t.Shutdown());
  }
  Snap();
  {
    Tier t(clock_, dir_, 1, [] { return false; });
    EXPECT_FALSE(t.ok);
    EXPECT_TRUE(t.log->stopped());
  }
  for (const auto& [f, bytes] : snap_) {
    if (f != "lock") {
      EXPECT_EQ(ReadFile(dir_ + "/" + f), bytes) << f;  // nothing written
    }
  }
  EXPECT_TRUE(Restart(jobs));
}

}  // namespace
}  // namespace stalkd::storage
