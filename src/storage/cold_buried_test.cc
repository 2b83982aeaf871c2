// Buried jobs on disk (docs/DISK-TIER.md): the tier with buried jobs on disk against the
// all-in-memory store under the same random commands (bury, kick, kick-job, peek-buried,
// delete, stats, list-jobs, purge, reserve-job, lmstfy's respawn), every reply compared; a
// pile of buried jobs under a small budget; a kill and a clean stop with buried jobs on disk.
#include <cstring>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "command/put_test_util.h"
#include "server/cold_store_test_util.h"
#include "storage/binlog_test_util.h"
#include "storage/cold_tier_test_util.h"

namespace stalkd::storage {
namespace {

using command::Outcome;
using command::Result;
using command::StateFilter;
using testing_util::ExpectSame;
constexpr auto Put = command::testing_util::PutThrough;

// A store on its own directory, with the tier (budget != 0) keeping `buried_hot` buried jobs
// a tube in memory, or all in memory.
struct Side : testing_util::TierParts {
  testing_util::IgnoredClient client;
  std::unique_ptr<command::Session> s;
  bool own;
  Side(FakeClock& clock, size_t budget, uint32_t buried_hot, const std::string& at = "")
      : TierParts(clock, Options(at.empty() ? testing_util::MakeTempDir() : at),
                  ColdStoreOptions{budget, 2 * kSecond, 1000, 4, buried_hot}),
        own(at.empty()) {
    EXPECT_TRUE(ok) << error;
    s = store->Open(client);
  }
  ~Side() {
    s.reset();
    if (log) {
      store->engine().CheckInvariants();
      Close();
    }
    if (own) testing_util::RemoveDir(dir);
  }
  static BinlogOptions Options(const std::string& dir) {
    BinlogOptions o;
    o.dir = dir;
    o.segment_size = 8192;  // rotation and compaction: jobs on disk move
    o.fsync_never = true;
    return o;
  }
  // A kill -9: what the log wrote stays, what it buffered is lost, nothing more is written.
  void Crash() {
    s.reset();
    store->set_cold(nullptr);
    cold.reset();
    store->engine().set_log(nullptr);
    log.reset();  // without Close
  }
  size_t Buried() { return s->Stats().stats->buried; }
};

void PutJob(command::Session& s, uint32_t pri, const std::string& body) {
  EXPECT_EQ(Put(s, pri, 0, body).outcome, Outcome::kInserted);
}

TEST(ColdBuriedTest, RandomCommandsAnswerAsAllInMemory) {
  for (uint32_t seed = 1; seed <= 6; seed++) {
    FakeClock clock;
    // A budget of 1 byte: every buried job that may go, goes, but each tube's first
    // buried_hot (at least one): 0 (one), 2 and 5 in turn.
    const uint32_t buried_hot = seed % 3 == 0 ? 0 : seed % 3 == 1 ? 2 : 5;
    Side hot(clock, 0, 0), cold(clock, 1, buried_hot);
    std::mt19937_64 rng(seed);
    auto rand = [&](uint64_t n) { return rng() % n; };
    const char* tubes[] = {"default", "a", "b"};
    const uint32_t pris[] = {0, 7, 1024, 5000};
    uint64_t ids = 1;
    size_t most_on_disk = 0, last_on_disk = 0, went = 0;  // buried jobs on disk
    for (int step = 0; step < 6000; step++) {
      const std::string what = "seed " + std::to_string(seed) + " step " + std::to_string(step);
      const uint64_t id = 1 + rand(ids + 1);
      const char* tube = tubes[rand(3)];
      auto both = [&](auto fn, const std::string& op) {
        Result a = fn(*hot.s);
        Result b = fn(*cold.s);
        ExpectSame(a, b, what + " " + op, false);
        return a;
      };
      switch (rand(20)) {
        case 0:
        case 1:
        case 2: {
          const uint32_t pri = pris[rand(std::size(pris))];
          const uint32_t delay = rand(5) == 0 ? static_cast<uint32_t>(1 + rand(20)) : 0;
          const std::string body = "job " + std::to_string(ids) + std::string(rand(30), 'x');
          Result r = both([&](command::Session& s) { return Put(s, pri, delay, body); }, "put");
          if (r.outcome == Outcome::kInserted) ids = r.number + 1;
          break;
        }
        case 3:
          both([&](command::Session& s) { return s.Use(tube); }, "use");
          both([&](command::Session& s) { return s.Watch(tube); }, "watch");
          break;
        case 4:
        case 5:
        case 6: {  // most reservations end buried: a pile of dead letters
          Result r = both([&](command::Session& s) { return s.Reserve(0); }, "reserve");
          if (r.outcome == Outcome::kReserved) {
            const uint32_t pri = pris[rand(std::size(pris))];
            if (rand(5) == 0) {
              both([&](command::Session& s) { return s.Release(r.job.id, pri, 0); }, "release");
            } else {
              both([&](command::Session& s) { return s.Bury(r.job.id, pri); }, "bury");
            }
          }
          break;
        }
        case 7: {  // reserve-job takes a buried job (or any), then buries it again
          Result r = both([&](command::Session& s) { return s.ReserveJob(id); }, "reserve-job");
          if (r.outcome == Outcome::kReserved) {
            both([&](command::Session& s) { return s.Bury(id, 3); }, "bury");
          }
          break;
        }
        case 8: {
          if (rand(2) == 0) break;  // buried jobs pile up
          const auto n = static_cast<uint32_t>(1 + rand(rand(4) == 0 ? 40 : 4));
          both([&](command::Session& s) { return s.Kick(n); }, "kick");
          both([&](command::Session& s) { return s.PeekBuried(); }, "peek-buried after kick");
          break;
        }
        case 9:
          both([&](command::Session& s) { return s.KickJob(id); }, "kick-job");
          break;
        case 10:
          both([&](command::Session& s) { return s.PeekBuried(); }, "peek-buried");
          break;
        case 11:
          both([&](command::Session& s) { return s.Delete(id); }, "delete");
          both([&](command::Session& s) { return s.PeekBuried(); }, "peek-buried");
          break;
        case 12:
          both([&](command::Session& s) { return s.StatsJob(id); }, "stats-job");
          both([&](command::Session& s) { return s.Peek(id); }, "peek");
          break;
        case 13:
          both([&](command::Session& s) { return s.Stats(); }, "stats");
          both([&](command::Session& s) { return s.StatsTube(tube); }, "stats-tube");
          break;
        case 14: {
          const uint64_t from = rand(2) ? 0 : rand(ids + 1);
          const auto n = static_cast<uint32_t>(rand(2) ? 1000 : 1 + rand(5));
          both([&](command::Session& s) { return s.ListJobs(tube, StateFilter::kBuried, from, n); },
               "list-jobs");
          break;
        }
        case 15: {  // lmstfy's respawn of dead letters, the oldest first
          both([&](command::Session& s) { return s.PeekBuried(); }, "peek-buried before respawn");
          const auto n = static_cast<uint32_t>(1 + rand(6));
          const uint32_t ttl = rand(2) ? 0 : 600;
          both([&](command::Session& s) { return s.Respawn(tube, n, ttl); }, "respawn");
          both([&](command::Session& s) { return s.PeekBuried(); }, "peek-buried after respawn");
          break;
        }
        case 16:
          if (rand(15) == 0) {
            const StateFilter st = rand(2) ? StateFilter::kBuried : StateFilter::kAll;
            both([&](command::Session& s) { return s.Purge(tube, st); }, "purge");
          } else {
            both([&](command::Session& s) { return s.PeekBuried(); }, "peek-buried");
          }
          break;
        default:
          clock.Advance(static_cast<Nanos>(rand(3 * kSecond)));
          break;
      }
      if (HasFatalFailure()) return;
      hot.Tick();
      cold.Tick();
      const size_t on_disk = cold.cold->BuriedOnDisk(nullptr);
      went += on_disk > last_on_disk ? on_disk - last_on_disk : 0;
      most_on_disk = std::max(most_on_disk, on_disk);
      last_on_disk = on_disk;
      if (step % 500 == 0) cold.store->engine().CheckInvariants();
    }
    printf("seed %u: buried jobs on disk at most %zu, %zu went (at least)\n", seed, most_on_disk,
           went);
    EXPECT_GT(went, 100u) << "seed " << seed;  // the test did exercise the tier
    EXPECT_GT(most_on_disk, 10u) << "seed " << seed;
    EXPECT_EQ(cold.cold->stats().read_errors, 0u);
  }
}

// 4000 jobs buried in an order that is not their ids' under a budget of 64 KiB: memory
// stays near the budget, and peek-buried, kick N and respawn take them in bury order.
TEST(ColdBuriedTest, AThousandsPileStaysNearTheBudgetAndIsKickedInBuryOrder) {
  FakeClock clock;
  const size_t budget = 64 * 1024;
  Side t(clock, budget, 64);
  command::Session& s = *t.s;
  const int n = 4000;
  const std::string body(100, 'b');
  for (int i = 0; i < n; i++) PutJob(s, static_cast<uint32_t>(i % 3), body);
  // Reserved in priority order, then buried: bury order is not id order.
  std::vector<uint64_t> order;
  size_t most = 0;
  for (int i = 0; i < n; i++) {
    Result r = s.Reserve(0);
    ASSERT_EQ(r.outcome, Outcome::kReserved);
    ASSERT_EQ(s.Bury(r.job.id, 5).outcome, Outcome::kBuried);
    order.push_back(r.job.id);
    if (i % 50 == 0) {
      t.Tick();
      if (i > 1000) most = std::max(most, t.store->engine().memory_used());
    }
  }
  for (int i = 0; i < 10; i++) t.Tick();
  EXPECT_LE(t.store->engine().memory_used(), budget);
  EXPECT_LE(most, budget + 50 * 400);  // up to the 50 buried between two Ticks beyond it
  EXPECT_GE(t.cold->BuriedOnDisk(nullptr), static_cast<size_t>(n) - 200);
  EXPECT_EQ(t.Buried(), static_cast<size_t>(n));
  // The first comes back by peek-buried, the next by kick 1, then kick 100 at a time, every
  // kicked job ready, and the next one the one peek-buried shows.
  size_t next = 0;
  auto kicked = [&](size_t k, const std::string& what) {
    for (size_t i = next; i < next + k; i++) {
      Result r = s.StatsJob(order[i]);
      ASSERT_EQ(r.outcome, Outcome::kJobStats) << what;
      EXPECT_EQ(std::string(engine::JobStateName(engine::JobState::kReady)), r.job_stats->state)
          << what << " " << i;
    }
    next += k;
    if (next < order.size()) {
      EXPECT_EQ(s.PeekBuried().job.id, order[next]) << what;
    }
  };
  s.Use("default");
  EXPECT_EQ(s.PeekBuried().job.id, order[0]);
  ASSERT_EQ(s.Kick(1).number, 1u);
  kicked(1, "kick 1");
  while (next + 100 <= order.size() / 2) {
    ASSERT_EQ(s.Kick(100).number, 100u);
    kicked(100, "kick 100 from " + std::to_string(next));
    for (int i = 0; i < 3; i++) t.Tick();  // memory back under the budget meanwhile
    if (HasFatalFailure()) return;
  }
  // Respawn (lmstfy) the same way, 100 at a time.
  while (next + 100 <= order.size()) {
    ASSERT_EQ(s.Respawn("default", 100, 0).number, 100u);
    kicked(100, "respawn from " + std::to_string(next));
    for (int i = 0; i < 3; i++) t.Tick();
    if (HasFatalFailure()) return;
  }
  EXPECT_EQ(t.cold->stats().read_errors, 0u);
}

// A kill -9 once buried jobs went to disk (their records written whole again) loses none:
// the next start brings every one back buried, with its body and priority; so does a clean
// stop (the checkpoint lists them as jobs to read back).
TEST(ColdBuriedTest, AKillOrAStopWithBuriedJobsOnDiskLosesNone) {
  for (bool kill : {true, false}) {
    const std::string dir = testing_util::MakeTempDir();
    FakeClock clock;
    const int n = 500;
    std::vector<uint64_t> buried;
    {
      Side t(clock, 1, 0, dir);
      for (int i = 0; i < n; i++)
        PutJob(*t.s, static_cast<uint32_t>(i), "body " + std::to_string(i));
      for (int i = 0; i < n; i++) {
        Result r = t.s->Reserve(0);
        ASSERT_EQ(r.outcome, Outcome::kReserved);
        if (i % 5 == 4) {
          EXPECT_EQ(t.s->Delete(r.job.id).outcome, Outcome::kDeleted);
          continue;
        }
        ASSERT_EQ(t.s->Bury(r.job.id, 10 + static_cast<uint32_t>(i)).outcome, Outcome::kBuried);
        buried.push_back(r.job.id);
      }
      for (int i = 0; i < 10; i++) t.Tick();
      EXPECT_EQ(t.cold->BuriedOnDisk(nullptr), buried.size() - 1);  // all but the first
      if (kill) {
        t.Crash();
      } else {
        t.s.reset();
        EXPECT_TRUE(t.Shutdown());
      }
    }
    {
      Side back(clock, 0, 0, dir);  // every job into memory
      EXPECT_EQ(back.Buried(), buried.size()) << kill;
      EXPECT_EQ(back.s->Stats().stats->ready, 0u);
      for (uint64_t id : buried) {
        Result r = back.s->StatsJob(id);
        ASSERT_EQ(r.outcome, Outcome::kJobStats) << id;
        EXPECT_EQ(std::string(r.job_stats->state), "buried") << id;
        const uint32_t i = static_cast<uint32_t>(id - 1);
        EXPECT_EQ(r.job_stats->pri, 10 + i) << id;
        EXPECT_EQ(back.s->Peek(id).job.body, "body " + std::to_string(i)) << id;
      }
    }
    testing_util::RemoveDir(dir);
  }
}

// The log as the tier reads it, but a record of `lost` cannot be read back (as a damaged
// one): the job is lost to this run (counted), and kick and peek-buried go on past it.
struct LosingReader final : engine::ColdReader {
  engine::ColdReader& log;
  uint64_t lost = 0;
  explicit LosingReader(engine::ColdReader& l) : log(l) {}
  bool Demotable(const engine::Job& j) const override { return log.Demotable(j); }
  bool Read(uint64_t id, std::string* buf, engine::RestoredJob* out) override {
    return id != lost && log.Read(id, buf, out);
  }
  Rewrite RewriteWhole(const engine::Job& j) override { return log.RewriteWhole(j); }
  bool RewritePending(const engine::Job& j) const override { return log.RewritePending(j); }
  size_t RewritesUnwritten() const override { return log.RewritesUnwritten(); }
};

TEST(ColdBuriedTest, ABuriedJobThatCannotBeReadBackIsPassedOver) {
  FakeClock clock;
  Side t(clock, 1, 0);
  LosingReader reader(*t.log);
  t.store->set_cold(nullptr);
  t.cold = std::make_unique<ColdStore>(t.store->engine(), reader,
                                       ColdStoreOptions{1, 2 * kSecond, 1000, 4, 0});
  t.store->set_cold(t.cold.get());
  command::Session& s = *t.s;
  std::vector<uint64_t> order;
  for (int i = 0; i < 6; i++) PutJob(s, 1, "job " + std::to_string(i));
  for (int i = 0; i < 6; i++) {
    Result r = s.Reserve(0);
    ASSERT_EQ(r.outcome, Outcome::kReserved);
    ASSERT_EQ(s.Bury(r.job.id, 1).outcome, Outcome::kBuried);
    order.push_back(r.job.id);
  }
  for (int i = 0; i < 5; i++) t.Tick();
  ASSERT_EQ(t.cold->BuriedOnDisk(nullptr), 5u);  // all but the first
  reader.lost = order[1];
  EXPECT_EQ(s.Kick(3).number, 3u);  // order[0], then order[2] and order[3]: [1] is lost
  EXPECT_EQ(t.cold->stats().read_errors, 1u);
  EXPECT_EQ(s.PeekBuried().job.id, order[4]);
  EXPECT_EQ(std::string(s.StatsJob(order[3]).job_stats->state), "ready");
  EXPECT_EQ(s.StatsJob(order[1]).outcome, Outcome::kNotFound);
  t.Tick();  // the lost job's reference on its tube goes
  EXPECT_EQ(t.Buried(), 2u);
  t.store->set_cold(nullptr);  // before the reader goes
  t.cold.reset();
}

}  // namespace
}  // namespace stalkd::storage
