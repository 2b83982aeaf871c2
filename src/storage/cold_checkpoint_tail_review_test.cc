// A review of the checkpoint's tail (docs/DISK-TIER.md, "Restarts: the checkpoint"): paths
// the random runs of cold_checkpoint_tail_test.cc reach rarely or not at all. Tube defaults
// set, moved by compaction and cleared after its position; a clean stop whose checkpoint
// cannot be written (the old one serves, the whole run its tail); a torn tail cleared by a
// start from it, then written on; a stop while its tail is replayed; and a run from it that
// compacts away every segment it lists, after which a full replay still has every job.
#include <fcntl.h>
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "command/put_test_util.h"
#include "storage/binlog.h"
#include "storage/cold_checkpoint.h"
#include "storage/cold_tier_test_util.h"
#include "storage/record.h"

namespace stalkd::storage {
namespace {

using command::Outcome;
using command::Result;
using testing_util::Exists;
using testing_util::ExpectSameAnswers;
using testing_util::Files;
using testing_util::IgnoredClient;
using testing_util::MakeHistory;
using testing_util::MakeTempDir;
constexpr auto Put = command::testing_util::PutThrough;
using testing_util::ReadFile;
using testing_util::RemoveDir;
using testing_util::Tier;
using testing_util::TierParts;
using testing_util::TubeList;
using testing_util::WriteFile;

constexpr uint64_t kMaxId = 6000;  // above every id the tests hand out

// Tier with segments of `size` bytes (-s) instead of 8192.
struct SizedTier : TierParts {
  IgnoredClient rec;
  std::unique_ptr<command::Session> session;
  SizedTier(FakeClock& clock, const std::string& in, int64_t size)
      : TierParts(clock, Options(in, size), Tier::TierOptions(1)) {
    EXPECT_TRUE(ok) << error;
    session = store->Open(rec);
  }
  static BinlogOptions Options(const std::string& in, int64_t size) {
    BinlogOptions o = Tier::LogOptions(in, {});
    o.segment_size = size;
    return o;
  }
  ~SizedTier() {
    session.reset();
    Close();
  }
};

class CheckpointTailReviewTest : public ::testing::Test {
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
  double Drift() const {
    return std::chrono::duration<double>(std::chrono::system_clock::now() - wall0_).count() + 2;
  }
  // Jobs in every state, most on disk, tube "a" with a default of 3 tries; a clean stop.
  void Fill(uint32_t seed) {
    Tier t(clock_, dir_, 1);
    ASSERT_TRUE(t.ok) << t.error;
    MakeHistory(t, seed, 300, false);
    for (int i = 0; i < 200; i++) {
      t.session->Use(i % 2 ? "a" : "b");
      ASSERT_EQ(Put(*t.session, 1, 0, "r" + std::to_string(i)).outcome, Outcome::kInserted);
      if (i % 50 == 0) t.Tick();
    }
    for (int i = 0; i < 5; i++) t.Tick();
    ASSERT_TRUE(t.Shutdown());
    ASSERT_TRUE(Exists(Path(kCheckpointName)));
  }
  static std::set<uint64_t> Live(Tier& t) {
    std::set<uint64_t> out;
    for (uint64_t id = 1; id <= kMaxId; id++) {
      if (t.session->StatsJob(id).outcome == Outcome::kJobStats) out.insert(id);
    }
    return out;
  }
  static std::map<std::string, uint32_t> Defaults(Tier& t) {
    std::map<std::string, uint32_t> out;
    t.store->engine().ForEachTubeTries(
        [&](std::string_view name, uint32_t tries) { out[std::string(name)] = tries; });
    return out;
  }
  CheckpointMeta Meta() const {
    CheckpointReader r;
    std::string why;
    EXPECT_TRUE(r.Open(Path(kCheckpointName), &why)) << why;
    return r.meta();
  }
  // Segments the checkpoint lists with records that are gone, and whether the one of its
  // position (the newest with records) is there.
  size_t ListedGone(const CheckpointMeta& m) const {
    size_t n = 0;
    for (const CheckpointSegment& c : m.segments) {
      n +=
          c.end > int64_t{kSegmentHeaderSize} && !Exists(dir_ + "/binlog." + std::to_string(c.seq));
    }
    return n;
  }
  size_t ListedWithRecords(const CheckpointMeta& m) const {
    return static_cast<size_t>(std::count_if(m.segments.begin(), m.segments.end(), [](auto& c) {
      return c.end > int64_t{kSegmentHeaderSize};
    }));
  }
  std::string CopyWithoutCheckpoint(const std::string& dir) {
    more_.push_back(MakeTempDir());
    for (const std::string& f : Files(dir)) {
      if (f != kCheckpointName) WriteFile(more_.back() + "/" + f, ReadFile(dir + "/" + f));
    }
    return more_.back();
  }
  // Commands that leave state records of the checkpoint's jobs in the tail (releases with
  // a delay, buries, kicks), deletes of old and new jobs, and puts of new ones, with loop
  // iterations (demotions, compaction).
  static void Churn(Tier& t, std::mt19937_64& rng, std::set<uint64_t>* live) {
    Churn(t, *t.session, rng, live);
  }
  static void Churn(TierParts& t, command::Session& s, std::mt19937_64& rng,
                    std::set<uint64_t>* live) {
    const char* tubes[] = {"default", "a", "b"};
    for (const char* tube : tubes) s.Watch(tube);
    switch (rng() % 6) {
      case 0: {
        Result r = s.Reserve(0);
        if (r.outcome == Outcome::kReserved) s.Release(r.job.id, 2, (rng() % 2) * 3000);
        break;
      }
      case 1: {
        Result r = s.Reserve(0);
        if (r.outcome == Outcome::kReserved) s.Bury(r.job.id, 4);
        break;
      }
      case 2:
        s.Use(tubes[rng() % 3]);
        s.Kick(2);
        break;
      case 3:
        if (!live->empty()) {
          auto it = live->lower_bound(1 + rng() % *live->rbegin());
          if (it != live->end() && s.Delete(*it).outcome == Outcome::kDeleted) live->erase(it);
        }
        break;
      default: {
        s.Use(tubes[rng() % 3]);
        Result r = Put(s, 1, (rng() % 2) * 50000, "churn " + std::string(rng() % 150, 'z'));
        ASSERT_EQ(r.outcome, Outcome::kInserted);
        live->insert(r.number);
        if (rng() % 2 == 0 && s.Delete(r.number).outcome == Outcome::kDeleted) {
          live->erase(r.number);
        }
      }
    }
    t.Tick();
  }

  // The lifecycle extensions: puts with tries, a TTL or a key (jobs with tries only may
  // start on disk), reserves that spend a try, purges, respawns of dead letters. `live` is
  // then what the server says (a purge deletes jobs not named).
  static void ChurnExtensions(Tier& t, std::mt19937_64& rng, std::set<uint64_t>* live) {
    command::Session& s = *t.session;
    s.Use(rng() % 2 ? "a" : "c");
    switch (rng() % 5) {
      case 0:
      case 1: {
        const std::string body = "ext " + std::to_string(rng() % 1000);
        const std::string key = "key" + std::to_string(rng());
        command::PutOptions o;
        o.tries = static_cast<uint32_t>(rng() % 3);
        if (rng() % 4 == 0) o.ttl_s = 500000;
        if (rng() % 6 == 0) o.key = key;
        command::PutArgs a{1, static_cast<uint32_t>((rng() % 2) * 70000), 30,
                           static_cast<uint32_t>(body.size())};
        a.options = &o;
        command::PutSlot slot = s.BeginPut(a);
        ASSERT_NE(slot.data, nullptr);
        std::copy(body.begin(), body.end(), slot.data);
        std::copy_n("\r\n", 2, slot.data + body.size());
        Result r = s.CommitPut();
        ASSERT_EQ(r.outcome, Outcome::kInserted);
        live->insert(r.number);
        break;
      }
      case 2: {
        command::ReserveArgs ra;
        ra.timeout = 0;
        ra.count = 1 + static_cast<uint32_t>(rng() % 3);
        s.Watch("c");
        s.ReserveExt(ra);
        break;
      }
      case 3:
        // (Only "c": ExpectSameAnswers looks at "a" and "b", which must stay.)
        s.Purge("c", rng() % 2 ? command::StateFilter::kBuried : command::StateFilter::kReady);
        *live = Live(t);
        break;
      default:
        s.Respawn(rng() % 2 ? "a" : "c", 3, static_cast<uint32_t>(rng() % 2) * 90000);
    }
    t.Tick();
  }

  std::string dir_;
  std::vector<std::string> more_;
  FakeClock clock_;
  std::chrono::system_clock::time_point wall0_;
};

// Tube defaults after its position: one set, one set then cleared, and the one it lists
// ("a") moved forward by compaction when its segment goes. The start from it after a kill
// has the defaults of a full replay; so has a full replay after the next run (the defaults'
// segments counted as a replay counts them: none removed while it holds a default).
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
  const std::string copy = CopyWithoutCheckpoint(dir_);
  Tier a(clock_, dir_, 1), b(clock_, copy, 1);
  ASSERT_TRUE(a.ok && b.ok) << a.error << b.error;
  EXPECT_TRUE(a.log->checkpoint_used());
  EXPECT_GT(a.log->checkpoint_tail(), 0u);
  EXPECT_EQ(Live(a), live);
  ExpectSameAnswers(a, b, kMaxId, Drift());
}

// The newest segment with records and where they end (each record parsed).
std::pair<std::string, size_t> EndOfRecords(const std::string& dir) {
  uint32_t newest = 0;
  size_t end = 0;
  for (const std::string& f : Files(dir)) {
    if (f.rfind("binlog.", 0) != 0) continue;
    const uint32_t seq = static_cast<uint32_t>(std::stoul(f.substr(7)));
    const std::string data = ReadFile(dir + "/" + f);
    size_t off = kSegmentHeaderSize;
    for (;;) {
      Record r;
      size_t size = 0;
      std::string why;
      if (ParseRecord(data.data() + off, data.size() - off, &r, &size, &why) != Parse::kOk) break;
      off += size;
    }
    if (off > kSegmentHeaderSize && seq > newest) {
      newest = seq;
      end = off;
    }
  }
  return {dir + "/binlog." + std::to_string(newest), end};
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
  const std::string copy = CopyWithoutCheckpoint(dir_);
  Tier a(clock_, dir_, 1), b(clock_, copy, 1);
  ASSERT_TRUE(a.ok && b.ok) << a.error << b.error;
  EXPECT_TRUE(a.log->checkpoint_used());
  EXPECT_EQ(Live(a), live);
  ExpectSameAnswers(a, b, kMaxId, Drift());
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
  const std::string copy = CopyWithoutCheckpoint(dir_);
  Tier a(clock_, dir_, 1), b(clock_, copy, 1);
  ASSERT_TRUE(a.ok && b.ok) << a.error << b.error;
  EXPECT_TRUE(a.log->checkpoint_used());
  EXPECT_EQ(Live(a), live);
  ExpectSameAnswers(a, b, kMaxId, Drift());
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
TEST_F(CheckpointTailReviewTest, JobsPutAndDeletedAfterItCostTheStartNothing) {
  {
    Tier t(clock_, dir_, 1);
    for (int i = 0; i < 1000; i++) {
      t.session->Use(i % 2 ? "a" : "b");
      ASSERT_EQ(Put(*t.session, 1, 90000, std::string(2000, 'k')).outcome, Outcome::kInserted);
      if (i % 100 == 0) t.Tick();
    }
    ASSERT_TRUE(t.Shutdown());
  }
  const CheckpointMeta meta = Meta();
  {
    Tier t(clock_, dir_, 1);
    ASSERT_TRUE(t.log->checkpoint_used());
    for (int i = 0; i < 10000; i++) {
      Result r = Put(*t.session, 1, 0, "c");
      ASSERT_EQ(r.outcome, Outcome::kInserted);
      ASSERT_EQ(t.session->Delete(r.number).outcome, Outcome::kDeleted);
      if (i % 500 == 0) t.Tick();
    }
    t.Tick();
    t.Crash();
  }
  ASSERT_EQ(ListedGone(meta), 0u);  // no compaction: the tail is all the churn
  const std::string copy = CopyWithoutCheckpoint(dir_);
  auto peak = [&](const std::string& dir, bool* used) {
    const size_t before = mallinfo2().uordblks;
    size_t top = before;
    {
      Tier t(clock_, dir, 1, [&] {
        top = std::max(top, mallinfo2().uordblks);
        return true;
      });
      EXPECT_TRUE(t.ok) << t.error;
      *used = t.log->checkpoint_used();
      EXPECT_EQ(t.Jobs(), 1000u);
    }
    return top - before;
  };
  bool used = false, replayed = true;
  const size_t from_it = peak(dir_, &used);
  const size_t full = peak(copy, &replayed);
  EXPECT_TRUE(used);
  EXPECT_FALSE(replayed);
  const size_t file = ReadFile(Path(kCheckpointName)).size();
  EXPECT_LE(from_it, full + file) << "from the checkpoint " << from_it << " bytes, full replay "
                                  << full << ", checkpoint " << file;
}

// A checkpoint with a good CRC whose position is not where a record starts (its tail CRC
// taken over the bytes before it, as if so written): the bytes there are no record, but
// neither a torn tail to clear (that erased the acknowledged record they are part of) nor
// damage that stops every start (it stayed, so every start stopped). It is not used: a
// full replay, every job back, the binlog unchanged.
TEST_F(CheckpointTailReviewTest, APositionInsideARecordIsNotUsedAndErasesNothing) {
  Fill(36);
  if (HasFatalFailure()) return;
  std::set<uint64_t> live;
  for (int puts : {1, 3}) {
    SCOPED_TRACE(puts);
    {
      Tier t(clock_, dir_, 1);
      ASSERT_TRUE(t.log->checkpoint_used());
      live = Live(t);
      for (int i = 0; i < puts; i++) {
        Result r = Put(*t.session, 1, 0, "after it " + std::to_string(i));
        ASSERT_EQ(r.outcome, Outcome::kInserted);
        live.insert(r.number);
      }
      t.Tick();
      t.Crash();
    }
    // Its position moved 5 bytes on, into the first record after it.
    CheckpointReader r;
    std::string why;
    ASSERT_TRUE(r.Open(Path(kCheckpointName), &why)) << why;
    CheckpointMeta meta = r.meta();
    std::vector<CheckpointJob> jobs;
    CheckpointJob j;
    while (r.Next(&j, &why)) jobs.push_back(j);
    ASSERT_EQ(why, "");
    CheckpointSegment* position = nullptr;
    for (CheckpointSegment& c : meta.segments) {
      if (c.end > int64_t{kSegmentHeaderSize}) position = &c;
    }
    ASSERT_NE(position, nullptr);
    const std::string path = dir_ + "/binlog." + std::to_string(position->seq);
    const std::string segment = ReadFile(path);
    position->end += 5;
    position->tail_crc = SegmentTailCrc(segment.data(), position->end);
    const int dfd = open(dir_.c_str(), O_RDONLY | O_DIRECTORY);
    CheckpointWriter w;
    ASSERT_TRUE(w.Begin(dir_, dfd, meta, &why)) << why;
    for (const CheckpointJob& x : jobs) ASSERT_TRUE(w.Add(x, &why)) << why;
    ASSERT_TRUE(w.Finish(&why)) << why;
    close(dfd);
    {
      Tier t(clock_, dir_, 1);
      ASSERT_TRUE(t.ok) << t.error;
      EXPECT_FALSE(t.log->checkpoint_used());
      EXPECT_EQ(Live(t), live);
      t.Crash();
    }
    EXPECT_TRUE(ReadFile(path).substr(0, static_cast<size_t>(position->end) + 200) ==
                segment.substr(0, static_cast<size_t>(position->end) + 200));
    // Again from a checkpoint of a clean stop, for the next round.
    {
      Tier t(clock_, dir_, 1);
      ASSERT_TRUE(t.ok) << t.error;
      live = Live(t);
      ASSERT_TRUE(t.Shutdown());
    }
  }
  // A record torn at its position (the first write after it cut by a kill) is left to a
  // full replay as well, which clears it: every job back.
  uint32_t seq = 0;
  int64_t end = 0;
  for (const CheckpointSegment& c : Meta().segments) {
    if (c.end > int64_t{kSegmentHeaderSize}) {
      seq = c.seq;
      end = c.end;
    }
  }
  const int fd = open((dir_ + "/binlog." + std::to_string(seq)).c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  const std::string torn("\x31\x32\x33\x34\x40\x00\x00\x00\x01torn", 13);
  ASSERT_EQ(pwrite(fd, torn.data(), torn.size(), end), static_cast<ssize_t>(torn.size()));
  close(fd);
  Tier t(clock_, dir_, 1);
  ASSERT_TRUE(t.ok) << t.error;
  EXPECT_FALSE(t.log->checkpoint_used());
  EXPECT_EQ(Live(t), live);
}

}  // namespace
}  // namespace stalkd::storage
