// The checkpoint covers a prefix of the binlog (docs/DISK-TIER.md, "Restarts after a
// crash"): a start from it, then commands of every kind (puts, deletes, releases with a
// delay, buries, kicks, reserves) with compaction moving jobs, new segments made and head
// segments removed, then a kill: the next start uses the checkpoint, replays only the records
// written after it, and answers every command as a full replay of the same directory. Copies
// of the directory taken at many points of the run each restore every acknowledged job. A
// checkpoint that cannot be trusted so (the segment of its position gone, a job it lists in
// a removed segment with no later record, other bytes before its position) is not used: a
// full replay, no job lost.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "command/put_test_util.h"
#include "storage/binlog.h"
#include "storage/cold_checkpoint.h"
#include "storage/cold_tier_test_util.h"

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

constexpr uint64_t kMaxId = 4000;  // above every id the tests hand out

class CheckpointTailTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    wall0_ = std::chrono::system_clock::now();
  }
  void TearDown() override {
    RemoveDir(dir_);
    for (const std::string& d : more_) RemoveDir(d);
  }
  std::string Path(const char* name) const { return dir_ + "/" + name; }
  std::string NewDir() {
    more_.push_back(MakeTempDir());
    return more_.back();
  }
  // How far apart times restored from the wall clock may be (the fake clock does not follow
  // it; see cold_checkpoint_test.cc).
  double Drift() const {
    return std::chrono::duration<double>(std::chrono::system_clock::now() - wall0_).count() + 2;
  }
  // A history of jobs in every state, most of them on disk (delayed, and ready beyond the
  // 64 a tube keeps in memory), then a clean stop: the checkpoint.
  void Fill(uint32_t seed) {
    Tier t(clock_, dir_, 1);  // a budget of 1 byte: every job that may go, goes
    ASSERT_TRUE(t.ok) << t.error;
    MakeHistory(t, seed, 300, false);
    const char* tubes[] = {"default", "a", "b"};
    for (int i = 0; i < 3 * 64 + 150; i++) {
      t.session->Use(tubes[i % 3]);
      ASSERT_EQ(Put(*t.session, static_cast<uint32_t>(i % 7), 0, "r" + std::to_string(i)).outcome,
                Outcome::kInserted);
      if (i % 50 == 0) t.Tick();
    }
    for (int i = 0; i < 5; i++) t.Tick();
    EXPECT_GT(t.cold->ReadyOnDisk(nullptr).ready, 100u);
    ASSERT_TRUE(t.Shutdown());
    ASSERT_TRUE(Exists(Path(kCheckpointName)));
  }
  // The ids t answers stats-job for.
  static std::set<uint64_t> Live(Tier& t) { return testing_util::LiveIds(t, kMaxId); }
  // The checkpoint's segments, and of them the newest with records (its position's).
  CheckpointMeta Meta(const std::string& dir) const {
    CheckpointReader r;
    std::string why;
    EXPECT_TRUE(r.Open(dir + "/" + kCheckpointName, &why)) << why;
    return r.meta();
  }
  static uint32_t Position(const CheckpointMeta& m) {
    uint32_t seq = 0;
    for (const CheckpointSegment& c : m.segments) {
      if (c.end > int64_t{kSegmentHeaderSize}) seq = c.seq;
    }
    return seq;
  }
  // How many segments the checkpoint lists with records are gone from dir_ (compaction).
  size_t ListedGone(const CheckpointMeta& m) const {
    size_t n = 0;
    for (const CheckpointSegment& c : m.segments) {
      n +=
          c.end > int64_t{kSegmentHeaderSize} && !Exists(dir_ + "/binlog." + std::to_string(c.seq));
    }
    return n;
  }
  bool PositionThere(const CheckpointMeta& m) const {
    return Exists(dir_ + "/binlog." + std::to_string(Position(m)));
  }
  // One random command of t's session (watching "default", "a", "b"), `live` kept as the
  // jobs the server has acknowledged; a loop iteration (Tick: demotions, promotions,
  // compaction, the flush) every few.
  void Command(Tier& t, std::mt19937_64& rng, std::set<uint64_t>* live) {
    auto rand = [&](uint64_t n) { return rng() % n; };
    command::Session& s = *t.session;
    auto any = [&]() -> uint64_t {
      if (live->empty()) return 1;
      auto it = live->lower_bound(1 + rand(*live->rbegin()));
      return it == live->end() ? *live->begin() : *it;
    };
    const char* tubes[] = {"default", "a", "b"};
    switch (rand(10)) {
      case 0:
      case 1:
      case 2: {
        s.Use(tubes[rand(3)]);
        const uint32_t delay = rand(3) == 0 ? 0 : static_cast<uint32_t>(100 + rand(100000));
        Result r = Put(s, static_cast<uint32_t>(rand(5)), delay,
                       "tail " + std::to_string(rng()) + std::string(rand(80), 'y'));
        ASSERT_EQ(r.outcome, Outcome::kInserted);
        live->insert(r.number);
        break;
      }
      case 3: {
        const uint64_t id = any();
        if (s.Delete(id).outcome == Outcome::kDeleted) live->erase(id);
        break;
      }
      case 4:
      case 5: {
        Result r = s.Reserve(0);
        if (r.outcome != Outcome::kReserved) break;
        const uint64_t id = r.job.id;
        switch (rand(3)) {
          case 0:
            s.Release(id, static_cast<uint32_t>(rand(5)), static_cast<uint32_t>(rand(2) * 5000));
            break;
          case 1:
            s.Bury(id, 3);
            break;
          default:
            if (s.Delete(id).outcome == Outcome::kDeleted) live->erase(id);
        }
        break;
      }
      case 6:
        s.KickJob(any());
        break;
      case 7:
        s.Use(tubes[rand(3)]);
        s.Kick(1 + static_cast<uint32_t>(rand(3)));
        break;
      case 8:
        s.Peek(any());  // read back from disk
        break;
      default:
        t.Tick();
    }
    if (rand(4) == 0) t.Tick();
  }
  // a (from the checkpoint) and b (a full replay of a copy without it) answer alike:
  // stats, stats-tube, stats-job and peek of every id, peek-ready, list-jobs of each tube
  // and state, and the order of every reserve.
  void ExpectSameAsFullReplay(Tier& a, Tier& b) {
    ExpectSameAnswers(a, b, kMaxId, Drift());
    for (const char* tube : {"default", "a", "b"}) {
      a.session->Use(tube);
      b.session->Use(tube);
      Result x = a.session->PeekReady(), y = b.session->PeekReady();
      ASSERT_EQ(x.outcome, y.outcome) << tube;
      EXPECT_EQ(x.job.id, y.job.id) << tube;
      for (StateFilter st : {StateFilter::kReady, StateFilter::kDelayed, StateFilter::kBuried}) {
        Result p = a.session->ListJobs(tube, st, 0, 5000);
        ASSERT_EQ(p.outcome, Outcome::kJobList) << tube;
        const std::vector<uint64_t> ids = *p.ids;  // valid until a's next call
        Result q = b.session->ListJobs(tube, st, 0, 5000);
        ASSERT_EQ(q.outcome, Outcome::kJobList) << tube;
        EXPECT_EQ(ids, *q.ids) << tube;
      }
    }
    ExpectSameOrder(a, b, clock_);
  }
  // A copy of dir without its checkpoint: its start replays every record.
  std::string CopyWithoutCheckpoint(const std::string& dir) {
    const std::string copy = NewDir();
    for (const std::string& f : Files(dir)) {
      if (f != kCheckpointName) WriteFile(copy + "/" + f, ReadFile(dir + "/" + f));
    }
    return copy;
  }
  // A copy of dir as it is: what a kill -9 between two flushes leaves.
  std::string Copy(const std::string& dir) {
    const std::string copy = NewDir();
    for (const std::string& f : Files(dir)) WriteFile(copy + "/" + f, ReadFile(dir + "/" + f));
    return copy;
  }
  // The checkpoint in dir_ as read back, changed by `edit`, written again with a good CRC.
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
  // A start on dir_ that must not use the checkpoint: every job of `live` comes back, and the
  // checkpoint is removed.
  void ExpectNotUsed(const std::set<uint64_t>& live) {
    Tier t(clock_, dir_, 1);
    ASSERT_TRUE(t.ok) << t.error;
    EXPECT_FALSE(t.log->checkpoint_used());
    EXPECT_EQ(t.log->restored_cold(), 0u);
    EXPECT_FALSE(Exists(Path(kCheckpointName)));
    EXPECT_EQ(Live(t), live);
  }
  // From the checkpoint Fill wrote: random commands, until at least `ops` and a head segment
  // it lists with records is gone (at most `max_ops`; the segment of its position stays),
  // then a kill. Returns the acknowledged jobs. With `before`, the start must restore those.
  std::set<uint64_t> RunAndKill(uint32_t seed, int ops, int max_ops,
                                const std::set<uint64_t>* before = nullptr) {
    std::mt19937_64 rng(seed);
    const CheckpointMeta meta = Meta(dir_);
    Tier t(clock_, dir_, 1);
    EXPECT_TRUE(t.log->checkpoint_used());
    std::set<uint64_t> live = Live(t);
    if (before) {
      EXPECT_EQ(live, *before);
    }
    for (const char* tube : {"default", "a", "b"}) t.session->Watch(tube);
    for (int i = 0; i < max_ops && (i < ops || ListedGone(meta) == 0); i++) {
      Command(t, rng, &live);
      if (HasFatalFailure() || !PositionThere(meta)) break;
    }
    t.Tick();
    t.Crash();
    return live;
  }

  std::string dir_;
  std::vector<std::string> more_;
  FakeClock clock_;
  std::chrono::system_clock::time_point wall0_;
};

// The kill after random commands: the next start uses the checkpoint (with a tail, and head
// segments it lists removed since) and answers as a full replay of the same directory.
TEST_F(CheckpointTailTest, AKillAfterCommandsAnswersAsAFullReplay) {
  for (uint32_t seed = 1; seed <= 3; seed++) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    RemoveDir(dir_);
    dir_ = MakeTempDir();
    Fill(seed);
    if (HasFatalFailure()) return;
    const CheckpointMeta meta = Meta(dir_);
    const std::set<uint64_t> live = RunAndKill(seed, 300, 20000);
    if (HasFatalFailure()) return;
    ASSERT_TRUE(PositionThere(meta));
    EXPECT_GT(ListedGone(meta), 0u);  // compaction removed head segments it lists
    const std::string copy = CopyWithoutCheckpoint(dir_);
    Tier a(clock_, dir_, 1), b(clock_, copy, 1);
    ASSERT_TRUE(a.ok && b.ok);
    EXPECT_TRUE(a.log->checkpoint_used());
    EXPECT_FALSE(b.log->checkpoint_used());
    EXPECT_GT(a.log->checkpoint_tail(), 0u);
    EXPECT_EQ(a.log->replayed_records(), a.log->checkpoint_tail());
    EXPECT_LT(a.log->replayed_records(), b.log->replayed_records());
    EXPECT_EQ(a.log->restored(), b.log->restored());
    EXPECT_EQ(a.Jobs(), live.size());
    EXPECT_EQ(Live(a), live);
    ExpectSameAsFullReplay(a, b);
    EXPECT_EQ(a.cold->stats().read_errors, 0u);
  }
}

// The checkpoint stays through several runs each ended by a kill: each start uses it, with a
// longer tail, and restores what the last run acknowledged; the last answers as a full replay.
TEST_F(CheckpointTailTest, ItServesSeveralKillsInARow) {
  Fill(9);
  if (HasFatalFailure()) return;
  std::set<uint64_t> live;
  for (uint32_t round = 0; round < 3; round++) {
    live = RunAndKill(10 + round, 150, 150, round == 0 ? nullptr : &live);
    if (HasFatalFailure()) return;
  }
  const std::string copy = CopyWithoutCheckpoint(dir_);
  Tier a(clock_, dir_, 1), b(clock_, copy, 1);
  ASSERT_TRUE(a.ok && b.ok);
  EXPECT_TRUE(a.log->checkpoint_used());
  EXPECT_GT(a.log->checkpoint_tail(), 0u);
  EXPECT_EQ(Live(a), live);
  ExpectSameAsFullReplay(a, b);
}

// Copies of the directory taken at many points of the run (between two flushes, as a kill
// leaves it), compaction moving jobs meanwhile: each restores every acknowledged job, from
// the checkpoint, and answers as a full replay of the same copy.
TEST_F(CheckpointTailTest, CopiesTakenWhileItRunsLoseNothing) {
  Fill(5);
  if (HasFatalFailure()) return;
  std::vector<std::pair<std::string, std::set<uint64_t>>> copies;
  {
    std::mt19937_64 rng(5);
    const CheckpointMeta meta = Meta(dir_);
    Tier t(clock_, dir_, 1);
    ASSERT_TRUE(t.log->checkpoint_used());
    std::set<uint64_t> live = Live(t);
    for (const char* tube : {"default", "a", "b"}) t.session->Watch(tube);
    // Every 97 commands, then (once compaction moves jobs) every 15 jobs it moves, until a
    // head segment the checkpoint lists is gone and 4 copies were taken while it moved jobs.
    int64_t migrated = t.log->stats().records_migrated;
    size_t mid_compaction = 0;
    for (int i = 0; i < 20000 && PositionThere(meta); i++) {
      if (i >= 1200 && ListedGone(meta) > 0 && mid_compaction >= 4) break;
      Command(t, rng, &live);
      if (HasFatalFailure()) return;
      const int64_t now = t.log->stats().records_migrated;
      if ((i < 1200 && i % 97 == 0) || now >= migrated + 15) {
        mid_compaction += now >= migrated + 15;
        migrated = now;
        t.Tick();
        copies.emplace_back(Copy(dir_), live);
      }
    }
    EXPECT_GE(mid_compaction, 4u);
    EXPECT_GT(ListedGone(meta), 0u);
  }
  ASSERT_GE(copies.size(), 8u);
  size_t used = 0;
  for (const auto& [copy, live] : copies) {
    SCOPED_TRACE(copy);
    const std::string full = CopyWithoutCheckpoint(copy);
    Tier a(clock_, copy, 1), b(clock_, full, 1);
    ASSERT_TRUE(a.ok && b.ok);
    used += a.log->checkpoint_used();
    EXPECT_EQ(Live(a), live);
    EXPECT_EQ(Live(b), live);
    ExpectSameAnswers(a, b, kMaxId, Drift());
  }
  EXPECT_EQ(used, copies.size());
}

// Compaction removed the segment the checkpoint's position is in: records written after it
// there may be gone, so it is not used; every job comes back from a full replay.
TEST_F(CheckpointTailTest, ThePositionsSegmentGoneMakesItUnused) {
  Fill(6);
  if (HasFatalFailure()) return;
  const CheckpointMeta meta = Meta(dir_);
  std::set<uint64_t> live;
  {
    std::mt19937_64 rng(6);
    Tier t(clock_, dir_, 1);
    ASSERT_TRUE(t.log->checkpoint_used());
    live = Live(t);
    // Puts and deletes of new jobs only: the old ones move forward as their segments go.
    for (int i = 0; i < 20000 && PositionThere(meta); i++) {
      Result r = Put(*t.session, 1, 0, "churn " + std::string(rng() % 200, 'z'));
      ASSERT_EQ(r.outcome, Outcome::kInserted);
      ASSERT_EQ(t.session->Delete(r.number).outcome, Outcome::kDeleted);
      t.Tick();
    }
    ASSERT_FALSE(PositionThere(meta));
    t.Crash();
  }
  ExpectNotUsed(live);
}

// A job the checkpoint lists in a segment removed since, with no record after its
// position, is in doubt (the records of what became of it are gone): not used, full replay.
// Other bytes before its position (its tail CRC), or a segment cut before it, likewise.
TEST_F(CheckpointTailTest, DoubtAboutAListedJobOrTheCoveredBytesMakesItUnused) {
  Fill(7);
  if (HasFatalFailure()) return;
  const CheckpointMeta meta = Meta(dir_);
  const std::set<uint64_t> live = RunAndKill(7, 100, 20000);
  if (HasFatalFailure()) return;
  ASSERT_TRUE(PositionThere(meta));
  ASSERT_GT(ListedGone(meta), 0u);
  uint32_t gone = 0;
  for (const CheckpointSegment& c : meta.segments) {
    if (c.end > int64_t{kSegmentHeaderSize} && !Exists(dir_ + "/binlog." + std::to_string(c.seq)))
      gone = c.seq;
  }
  const uint32_t position = Position(meta);
  const std::string saved = Copy(dir_);
  auto back = [&] {
    for (const std::string& f : Files(dir_)) unlink((dir_ + "/" + f).c_str());
    for (const std::string& f : Files(saved)) WriteFile(dir_ + "/" + f, ReadFile(saved + "/" + f));
  };
  {  // as it is: used
    Tier t(clock_, dir_, 1);
    ASSERT_TRUE(t.ok);
    EXPECT_TRUE(t.log->checkpoint_used());
    EXPECT_EQ(Live(t), live);
  }
  // The jobs it lists in its position's segment (still there: compaction has not moved
  // them; the commands named a few of them), said to be in a removed one.
  back();
  Rewrite([&](CheckpointMeta*, std::vector<CheckpointJob>* list) {
    size_t moved = 0;
    for (CheckpointJob& j : *list) {
      if (j.seq == position) {
        j.seq = gone;
        moved++;
      }
    }
    ASSERT_GT(moved, 10u);
  });
  ExpectNotUsed(live);
  // Other bytes before its position, as its tail CRC says.
  back();
  Rewrite([&](CheckpointMeta* m, std::vector<CheckpointJob>*) {
    for (CheckpointSegment& c : m->segments) {
      if (c.seq == position) c.tail_crc ^= 1;
    }
  });
  ExpectNotUsed(live);
}

}  // namespace
}  // namespace stalkd::storage
