#pragma once

// The fixture of the review tests of the checkpoint's tail (cold_checkpoint_tail_review_test.cc,
// cold_checkpoint_tail_bounds_test.cc): a directory with a checkpoint, the jobs a store
// answers for, copies for a full replay, commands that leave records after its position.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "command/put_test_util.h"
#include "storage/binlog.h"
#include "storage/cold_checkpoint.h"
#include "storage/cold_tier_test_util.h"
#include "storage/record.h"

namespace stalkd::storage::tail_review {

using command::Outcome;
using command::Result;
using namespace testing_util;  // NOLINT: the tests' helpers, in this namespace only
constexpr auto Put = command::testing_util::PutThrough;

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

inline std::pair<std::string, size_t> EndOfRecords(const std::string& dir) {
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

class CheckpointTailReviewTest : public ::testing::Test {
 protected:
  ~CheckpointTailReviewTest() override {
    more_.push_back(dir_);
    for (const std::string& d : more_) RemoveDir(d);
  }
  std::string Path(const char* name) const { return dir_ + "/" + name; }
  // How far apart times restored from the wall clock may be (the fake clock does not follow
  // it), in seconds.
  double Drift() const {
    const auto since = std::chrono::system_clock::now() - wall0_;
    return 2 + std::chrono::duration<double>(since).count();
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
  static std::set<uint64_t> Live(Tier& t) { return testing_util::LiveIds(t, kMaxId); }
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
  // Of the segments the checkpoint lists with records: how many, and how many are gone
  // from dir_ (compaction removed them).
  std::pair<size_t, size_t> Listed(const CheckpointMeta& m) const {
    std::pair<size_t, size_t> n{0, 0};
    for (const CheckpointSegment& c : m.segments) {
      if (c.end <= int64_t{kSegmentHeaderSize}) continue;
      n.first++;
      n.second += !Exists(dir_ + "/binlog." + std::to_string(c.seq));
    }
    return n;
  }
  size_t ListedWithRecords(const CheckpointMeta& m) const { return Listed(m).first; }
  size_t ListedGone(const CheckpointMeta& m) const { return Listed(m).second; }
  std::string CopyWithoutCheckpoint(const std::string& dir) {
    more_.push_back(MakeTempDir());
    for (const std::string& f : Files(dir)) {
      if (f != kCheckpointName) WriteFile(more_.back() + "/" + f, ReadFile(dir + "/" + f));
    }
    return more_.back();
  }
  // A start from dir_ uses the checkpoint, answers for exactly the jobs `live`, and answers
  // as a full replay of a copy without it; `more` checks what else a test needs of the two.
  void ExpectUsedAndAsAFullReplay(const std::set<uint64_t>& live,
                                  const std::function<void(Tier&, Tier&)>& more = nullptr) {
    const std::string copy = CopyWithoutCheckpoint(dir_);
    Tier a(clock_, dir_, 1), b(clock_, copy, 1);
    ASSERT_TRUE(a.ok && b.ok) << a.error << b.error;
    EXPECT_TRUE(a.log->checkpoint_used());
    if (more) more(a, b);
    EXPECT_EQ(Live(a), live);
    ExpectSameAnswers(a, b, kMaxId, Drift());
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

  std::string dir_ = MakeTempDir();
  std::vector<std::string> more_;
  FakeClock clock_;
  const std::chrono::system_clock::time_point wall0_ = std::chrono::system_clock::now();
};

// Tube defaults after its position: one set, one set then cleared, and the one it lists
// ("a") moved forward by compaction when its segment goes. The start from it after a kill
// has the defaults of a full replay; so has a full replay after the next run (the defaults'
// segments counted as a replay counts them: none removed while it holds a default).

}  // namespace stalkd::storage::tail_review
