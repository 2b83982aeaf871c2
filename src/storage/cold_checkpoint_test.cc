// The disk tier's checkpoint (docs/DISK-TIER.md): restarts (its format and its match against
// the segments: cold_checkpoint_format_test.cc). One that uses it restores exactly what a
// full replay of the same directory restores, and answers as a start with every job in
// memory, without reading the records of the jobs on disk (delayed or ready); version 1 is
// still used, and stays for the next start (records written after it are replayed on top:
// cold_checkpoint_tail_test.cc); every mismatch (a segment it does not cover, a damaged or
// cut file, one left half-written, the tier off, a record that is not the job's) makes the
// start replay everything instead, and no job is lost.
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
#include "storage/crc32c.h"
#include "storage/record.h"
#include "store/memory_store.h"

namespace stalkd::storage {
namespace {

using command::Outcome;
using command::Result;
using command::StateFilter;
using testing_util::Exists;
using testing_util::ExpectSameAnswers;
using testing_util::ExpectSameOrder;
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
  // after the put; then a backlog of ready jobs beyond what the tier keeps in memory per
  // tube (ready_hot), most of them on disk; then a clean shutdown that writes the
  // checkpoint. Returns the jobs.
  size_t Fill(uint32_t seed, int puts) {
    fill_wall_ = std::chrono::system_clock::now();
    Tier t(clock_, dir_, 1);  // a budget of 1 byte: every job that may go, goes
    MakeHistory(t, seed, puts, false);
    command::Session& s = *t.session;
    std::mt19937_64 rng(seed);
    for (int i = 0; i < 3 * 64 + puts / 2; i++) {  // 64: ColdStoreOptions::ready_hot
      s.Use(i % 3 == 0 ? "default" : i % 3 == 1 ? "a" : "b");
      EXPECT_EQ(Put(s, static_cast<uint32_t>(rng() % 3000), 0, "r" + std::to_string(i)).outcome,
                Outcome::kInserted);
      if (i % 50 == 0) t.Tick();
    }
    s.Reserve(0);  // reserved at the shutdown
    clock_.Advance(kSecond);
    for (int i = 0; i < 5; i++) t.Tick();
    delayed_before_ = t.cold->Count();
    ready_before_ = t.cold->ReadyOnDisk(nullptr).ready;
    cold_before_ = delayed_before_ + ready_before_;
    EXPECT_GT(delayed_before_, static_cast<size_t>(puts) / 3);
    EXPECT_GT(ready_before_, static_cast<size_t>(puts) / 4);
    const size_t jobs = t.Jobs();
    EXPECT_TRUE(t.Shutdown());
    EXPECT_TRUE(Exists(Path(kCheckpointName)));
    return jobs;
  }
  // How far apart, in seconds, a time converted from a record and from the checkpoint may
  // be: times go through the wall clock, which the fake clock does not follow (it advanced
  // 1 s in Fill, the wall one by the test's run time since).
  double Drift() const {
    return std::chrono::duration<double>(std::chrono::system_clock::now() - fill_wall_).count() + 2;
  }
  // A new empty directory, for a test's next round.
  void FreshDir() {
    RemoveDir(dir_);
    dir_ = MakeTempDir();
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
  // A restart with the tier: whether it used the checkpoint; every job must be back. One
  // it used stays (it still covers a prefix of the binlog); one it did not use is removed.
  bool Restart(size_t jobs) {
    Tier t(clock_, dir_, 1);
    EXPECT_EQ(t.Jobs(), jobs);
    EXPECT_EQ(Exists(Path(kCheckpointName)), t.log->checkpoint_used());
    EXPECT_FALSE(Exists(Path(kCheckpointTmpName)));
    EXPECT_EQ(t.log->checkpoint_used(), t.log->restored_cold() > 0);
    return t.log->checkpoint_used();
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
  std::chrono::system_clock::time_point fill_wall_;
  size_t cold_before_ = 0;  // delayed and ready on disk at the shutdown
  size_t delayed_before_ = 0;
  size_t ready_before_ = 0;
};

// ---------------------------------------------------------------------------- restarts

// A restart from the checkpoint restores what a full replay of the same directory restores,
// and reads no cold job's record: every cold job is in the index, none was demoted again.
TEST_F(CheckpointTest, RestartFromItEqualsAFullReplay) {
  for (uint32_t seed = 1; seed <= 3; seed++) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    FreshDir();
    const size_t jobs = Fill(seed, 600);
    const std::string copy = CopyWithoutCheckpoint();
    Tier a(clock_, dir_, 1), b(clock_, copy, 1);
    ASSERT_TRUE(a.ok && b.ok);
    EXPECT_EQ(a.log->restored_cold(), cold_before_);
    EXPECT_EQ(a.log->restored_cold_ready(), ready_before_);
    EXPECT_EQ(a.cold->Count(), delayed_before_);
    // Only the jobs that were in memory had their records read.
    EXPECT_EQ(a.log->checkpoint_reads(), jobs - cold_before_);
    EXPECT_EQ(a.cold->stats().demotions, 0u);
    EXPECT_EQ(b.log->restored_cold(), 0u);
    EXPECT_EQ(a.log->restored(), b.log->restored());
    EXPECT_EQ(a.Jobs(), jobs);
    EXPECT_EQ(b.Jobs(), jobs);
    ExpectSameAnswers(a, b, 2000, Drift());
    EXPECT_EQ(a.cold->stats().read_errors, 0u);
  }
}

// Ready jobs on disk at the stop are listed in the checkpoint with their index entry: a start
// from it puts them back in the ready index without reading their records (only the jobs
// that were in memory have theirs read), and then answers exactly as a start that restored
// every job into memory: stats, stats-tube, stats-job, peek-ready, list-jobs and the order
// of every reserve.
TEST_F(CheckpointTest, ReadyJobsOnDiskComeBackUnreadAndAnswerAsAllInMemory) {
  for (uint32_t seed = 21; seed <= 22; seed++) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    FreshDir();
    const size_t jobs = Fill(seed, 400);
    size_t listed_ready = 0, listed_hot = 0;  // as the checkpoint lists them
    {
      CheckpointReader r;
      std::string why;
      ASSERT_TRUE(r.Open(Path(kCheckpointName), &why)) << why;
      EXPECT_EQ(r.meta().version, kCheckpointVersion);
      CheckpointJob j;
      while (r.Next(&j, &why)) {
        listed_ready += j.cold && j.ready;
        listed_hot += !j.cold;
      }
      EXPECT_EQ(why, "");
    }
    EXPECT_EQ(listed_ready, ready_before_);
    EXPECT_EQ(listed_hot, jobs - cold_before_);
    const std::string copy = CopyWithoutCheckpoint();
    Tier a(clock_, dir_, 1), b(clock_, copy, 0);  // from the checkpoint; every job in memory
    ASSERT_TRUE(a.ok && b.ok);
    EXPECT_EQ(a.log->restored_cold_ready(), ready_before_);
    EXPECT_EQ(a.log->checkpoint_reads(), listed_hot);  // none of a job on disk
    EXPECT_LE(a.log->replayed_cold(), listed_hot);
    EXPECT_GE(a.cold->ReadyOnDisk(nullptr).ready, ready_before_);
    EXPECT_EQ(a.cold->stats().promotions, 0u);
    EXPECT_EQ(a.Jobs(), jobs);
    EXPECT_EQ(b.Jobs(), jobs);

    ExpectSameAnswers(a, b, 2000, Drift());
    for (const char* tube : {"default", "a", "b"}) {
      a.session->Use(tube);
      b.session->Use(tube);
      Result x = a.session->PeekReady(), y = b.session->PeekReady();
      ASSERT_EQ(x.outcome, y.outcome) << tube;
      EXPECT_EQ(x.job.id, y.job.id) << tube;
      for (StateFilter st : {StateFilter::kReady, StateFilter::kDelayed}) {
        Result p = a.session->ListJobs(tube, st, 0, 1000);
        ASSERT_EQ(p.outcome, Outcome::kJobList) << tube;
        const std::vector<uint64_t> ids = *p.ids;  // valid until a's next call
        const uint64_t next = p.number;
        Result q = b.session->ListJobs(tube, st, 0, 1000);
        ASSERT_EQ(q.outcome, Outcome::kJobList) << tube;
        EXPECT_EQ(ids, *q.ids) << tube;
        EXPECT_EQ(next, q.number) << tube;
        EXPECT_FALSE(ids.empty()) << tube;
      }
    }
    // The same jobs in the same order: the ready ones now, then the delayed ones once due,
    // then the buried ones once kicked.
    EXPECT_GT(ExpectSameOrder(a, b, clock_).first, ready_before_);
    EXPECT_EQ(a.cold->stats().read_errors, 0u);
  }
}

// A checkpoint of version 1 (which listed the ready jobs on disk as jobs in memory) is still
// used: the records of those jobs are read, as they were then, and nothing is lost.
TEST_F(CheckpointTest, AVersionOneCheckpointIsStillUsed) {
  const size_t jobs = Fill(13, 300);
  Rewrite([](CheckpointMeta* m, std::vector<CheckpointJob>* list) {
    m->version = 1;
    for (CheckpointJob& j : *list) {
      if (j.ready) j = CheckpointJob{j.id, j.seq, j.off, j.size};
    }
  });
  {
    CheckpointReader r;
    std::string why;
    ASSERT_TRUE(r.Open(Path(kCheckpointName), &why)) << why;
    EXPECT_EQ(r.meta().version, 1u);
  }
  const std::string copy = CopyWithoutCheckpoint();
  Tier a(clock_, dir_, 1), b(clock_, copy, 0);
  ASSERT_TRUE(a.ok && b.ok);
  EXPECT_EQ(a.log->restored_cold(), delayed_before_);
  EXPECT_EQ(a.log->restored_cold_ready(), 0u);
  EXPECT_EQ(a.log->checkpoint_reads(), jobs - delayed_before_);
  EXPECT_GE(a.log->replayed_cold(), ready_before_);  // straight to disk, after their read
  EXPECT_TRUE(Exists(Path(kCheckpointName)));
  EXPECT_EQ(a.Jobs(), jobs);
  ExpectSameAnswers(a, b, 2000, Drift());
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
    FreshDir();
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

// Records written after it (a put, then a crash) are replayed on top of it: it is used
// again, and every job is back.
TEST_F(CheckpointTest, AWriteAfterItIsReplayedOnTop) {
  const size_t jobs = Fill(7, 300);
  {
    Tier t(clock_, dir_, 1);
    EXPECT_TRUE(t.log->checkpoint_used());
    EXPECT_EQ(t.log->checkpoint_tail(), 0u);
    ASSERT_EQ(Put(*t.session, 1, 0, "after").outcome, Outcome::kInserted);
    t.Tick();
    t.Crash();
  }
  Tier t(clock_, dir_, 1);
  EXPECT_TRUE(t.log->checkpoint_used());
  EXPECT_EQ(t.log->checkpoint_tail(), 1u);
  EXPECT_EQ(t.Jobs(), jobs + 1);
}

// Segments made since (an empty one preallocated by a later run), empty ones gone, and a
// segment grown since (for a large job) do not stop its use; a segment among those it
// covers that it does not list, or one whose records it covers cut short, do.
TEST_F(CheckpointTest, AnotherSegmentOrSizeMakesItUnused) {
  const size_t jobs = Fill(8, 300);
  Snap();
  uint32_t last = 0;
  for (const auto& [f, bytes] : snap_) {
    if (f.rfind("binlog.", 0) == 0)
      last = std::max(last, static_cast<uint32_t>(std::stoul(f.substr(7))));
  }
  EXPECT_TRUE(Restart(jobs));  // as it is: used
  std::string empty;
  AppendSegmentHeader(&empty);
  empty.resize(8192, '\0');
  // A segment more (empty, as one preallocated by a later run).
  Back();
  WriteFile(dir_ + "/binlog." + std::to_string(last + 1), empty);
  EXPECT_TRUE(Restart(jobs));
  // A segment fewer (an empty one: the rest still holds every job).
  Back();
  std::string newest = snap_["binlog." + std::to_string(last)];
  if (newest.find_first_not_of('\0', kSegmentHeaderSize) == std::string::npos) {
    unlink((dir_ + "/binlog." + std::to_string(last)).c_str());
    EXPECT_TRUE(Restart(jobs));
    Back();
  }
  // A segment of another size: larger.
  ASSERT_EQ(truncate((dir_ + "/binlog." + std::to_string(last)).c_str(), 8192 * 3), 0);
  EXPECT_TRUE(Restart(jobs));
  // A segment among its own that it does not list.
  Back();
  Rewrite([](CheckpointMeta* m, std::vector<CheckpointJob>*) {
    m->segments.erase(m->segments.begin());
  });
  EXPECT_FALSE(Restart(jobs));
  // The segment its position is in, cut before that position: the records it covers there
  // are gone (so are jobs: only that the start neither fails nor uses it is checked).
  Back();
  uint32_t position = 0;
  int64_t end = 0;
  {
    CheckpointReader r;
    std::string why;
    ASSERT_TRUE(r.Open(Path(kCheckpointName), &why)) << why;
    for (const CheckpointSegment& c : r.meta().segments) {
      if (c.end > int64_t{kSegmentHeaderSize}) {
        position = c.seq;
        end = c.end;
      }
    }
  }
  ASSERT_GT(position, 0u);
  ASSERT_EQ(truncate((dir_ + "/binlog." + std::to_string(position)).c_str(), end - 1), 0);
  {
    Tier t(clock_, dir_, 1);
    EXPECT_TRUE(t.ok) << t.error;
    EXPECT_FALSE(t.log->checkpoint_used());
    EXPECT_FALSE(Exists(Path(kCheckpointName)));
  }
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
  auto first_ready = [](std::vector<CheckpointJob>* list) -> CheckpointJob& {
    for (CheckpointJob& j : *list) {
      if (j.cold && j.ready) return j;
    }
    ADD_FAILURE() << "no ready job on disk";
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
      [&](CheckpointMeta*, std::vector<CheckpointJob>* j) { first_ready(j).seq = 1u << 30; },
      [&](CheckpointMeta*, std::vector<CheckpointJob>* j) { first_ready(j).size = 2; },
      [&](CheckpointMeta*, std::vector<CheckpointJob>* j) { first_ready(j).resv = 0; },
      [&](CheckpointMeta*, std::vector<CheckpointJob>* j) { first_ready(j).tube = 1000; },
      [&](CheckpointMeta*, std::vector<CheckpointJob>* j) { first(j, true).resv = 1u << 31; },
      [&](CheckpointMeta*, std::vector<CheckpointJob>* j) { first_ready(j).resv = UINT32_MAX; },
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

// The start trusts what the checkpoint says of a job on disk (its tube, its priority) without
// reading its record: a checkpoint whose CRC is good but whose entry differs from the record
// (written by another build, edited) must not stop the server or break a tube's references
// when the job is read back. The record is checked against the entry then: a job whose
// record is of another tube or priority is a read error (logged, lost to this run, still in
// the binlog), and every other job comes back.
TEST_F(CheckpointTest, AnEntryThatDiffersFromItsRecordIsAReadErrorNotACrash) {
  const size_t jobs = Fill(14, 300);
  Snap();
  using Edit = std::function<void(CheckpointMeta*, std::vector<CheckpointJob>*)>;
  auto nth = [](std::vector<CheckpointJob>* list, bool ready) -> CheckpointJob& {
    for (CheckpointJob& j : *list) {
      if (j.cold && j.ready == ready) return j;
    }
    ADD_FAILURE() << "no such job on disk";
    return list->front();
  };
  const std::vector<Edit> edits = {
      [&](CheckpointMeta*, std::vector<CheckpointJob>* j) { nth(j, true).pri += 1; },
      [&](CheckpointMeta* m, std::vector<CheckpointJob>* j) {
        CheckpointJob& x = nth(j, true);
        x.tube = (x.tube + 1) % static_cast<uint32_t>(m->tubes.size());
      },
      [&](CheckpointMeta* m, std::vector<CheckpointJob>* j) {
        CheckpointJob& x = nth(j, false);
        x.tube = (x.tube + 1) % static_cast<uint32_t>(m->tubes.size());
      },
  };
  for (size_t k = 0; k < edits.size(); k++) {
    SCOPED_TRACE("edit " + std::to_string(k));
    Back();
    Rewrite(edits[k]);
    if (HasFatalFailure()) return;
    Tier t(clock_, dir_, 1);
    ASSERT_TRUE(t.ok);
    ASSERT_GT(t.log->restored_cold(), 0u);  // used: nothing in it says otherwise
    ASSERT_GT(t.log->checkpoint_reads(), 0u);
    // Every job read back, by a look at it.
    for (uint64_t id = 1; id <= jobs + 10; id++) t.session->StatsJob(id);
    for (int i = 0; i < 5; i++) t.Tick();
    EXPECT_EQ(t.cold->stats().read_errors, 1u);
    EXPECT_EQ(t.Jobs(), jobs - 1);
  }
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
