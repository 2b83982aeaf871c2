// The disk tier against the all-in-memory store: the same random commands on a store whose
// memory budget sends every long-delayed job and every ready job it may to disk (released,
// released with a delay and timed-out ones too, written whole again) and on one without a
// budget; every reply must be the same, those of waiting reserves included.
#include "storage/cold_store.h"

#include <cstring>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "command/put_test_util.h"
#include "storage/binlog.h"
#include "storage/cold_store_test_util.h"
#include "store/memory_store.h"

namespace stalkd::storage {
namespace {

using cold_test_util::ExpectSame;
using cold_test_util::Side;
using command::Outcome;
using command::Result;
constexpr auto Put = command::testing_util::PutThrough;

TEST(ColdStoreTest, RepliesMatchTheAllInMemoryStore) {
  for (uint32_t seed = 1; seed <= 8; seed++) {
    FakeClock clock;
    // A budget of 1 byte: every job that may go, goes. Odd seeds keep only each tube's first
    // ready job in memory (the rest come back one at a time, when a reserve reaches them);
    // even ones keep 4 and refill below 2 (Tick reads ahead).
    const uint32_t ready_hot = seed % 2 == 1 ? 0 : 4;
    Side hot(clock, 0), cold(clock, 1, ready_hot);
    std::mt19937_64 rng(seed);
    auto rand = [&](uint64_t n) { return rng() % n; };
    const char* tubes[] = {"default", "a", "b"};
    // Urgent and not, equal ones (so ids decide), the extremes.
    const uint32_t pris[] = {0, 1, 7, 9, 1023, 1024, 1024, 5000, 0xFFFFFFFFu};
    uint64_t ids = 1;
    // A session whose reserve waits sends nothing until its answer arrives (as a client).
    size_t answered[Side::kSessions] = {};
    bool waiting[Side::kSessions] = {};
    for (int step = 0; step < 4000; step++) {
      const int si = static_cast<int>(rand(Side::kSessions));
      for (int i = 0; i < Side::kSessions; i++) {
        ASSERT_EQ(hot.rec[i].late, cold.rec[i].late) << "seed " << seed << " step " << step;
        if (hot.rec[i].late.size() > answered[i]) waiting[i] = false;
        answered[i] = hot.rec[i].late.size();
      }
      command::Session& h = *hot.sessions[si];
      command::Session& c = *cold.sessions[si];
      const uint64_t id = 1 + rand(ids + 1);
      const std::string what = "seed " + std::to_string(seed) + " step " + std::to_string(step);
      auto both = [&](auto fn, const std::string& op) {
        Result a = fn(h);
        Result b = fn(c);
        // The tier writes changed jobs whole again: its segments are not the other's.
        ExpectSame(a, b, what + " " + op, false);
        if (b.outcome == Outcome::kJobStats) {
          const Binlog::Stats ls = cold.log->stats();
          EXPECT_GE(b.job_stats->file, ls.oldest_index) << what;
          EXPECT_LE(b.job_stats->file, ls.current_index) << what;
        }
        return a;
      };
      const uint64_t op = rand(20);
      if (waiting[si] && op < 18) continue;  // its reserve still waits; time may pass
      switch (op) {
        case 0:
        case 1:
        case 2:
        case 3: {
          const uint32_t pri = pris[rand(std::size(pris))];
          const uint32_t delay = rand(3) != 0 ? 0 : static_cast<uint32_t>(rand(200));
          const std::string body = "job " + std::to_string(ids) + std::string(rand(40), 'x');
          Result r = both([&](command::Session& s) { return Put(s, pri, delay, body); }, "put");
          if (r.outcome == Outcome::kInserted) ids = r.number + 1;
          break;
        }
        case 4: {
          const char* t = tubes[rand(3)];
          both([&](command::Session& s) { return s.Use(t); }, "use");
          both([&](command::Session& s) { return s.Watch(t); }, "watch");
          if (rand(3) == 0) {
            const char* u = tubes[rand(3)];
            both([&](command::Session& s) { return s.Ignore(u); }, "ignore");
          }
          break;
        }
        case 5:
        case 6: {
          Result r = both([&](command::Session& s) { return s.Reserve(0); }, "reserve");
          if (r.outcome == Outcome::kReserved && rand(2) == 0) {  // a retry, maybe backed off
            const uint32_t delay = rand(2) == 0 ? 0 : static_cast<uint32_t>(5 + rand(200));
            const uint32_t pri = pris[rand(std::size(pris))];
            both([&](command::Session& s) { return s.Release(r.job.id, pri, delay); }, "release");
          }
          break;
        }
        case 7: {  // a reserve that may wait: answered by a later put, kick, unpause or time
          Result r = both([&](command::Session& s) { return s.Reserve(3 * kSecond); }, "reserve");
          waiting[si] = r.outcome == Outcome::kPending;
          break;
        }
        case 8:
          both([&](command::Session& s) { return s.Delete(id); }, "delete");
          break;
        case 9:
          both([&](command::Session& s) { return s.KickJob(id); }, "kick-job");
          both([&](command::Session& s) { return s.Peek(id); }, "peek");
          break;
        case 10:
          both([&](command::Session& s) { return s.StatsJob(id); }, "stats-job");
          break;
        case 11:
          both([&](command::Session& s) { return s.PeekDelayed(); }, "peek-delayed");
          both([&](command::Session& s) { return s.PeekReady(); }, "peek-ready");
          both([&](command::Session& s) { return s.PeekBuried(); }, "peek-buried");
          break;
        case 12: {
          const uint32_t n = static_cast<uint32_t>(1 + rand(4));
          both([&](command::Session& s) { return s.Kick(n); }, "kick");
          break;
        }
        case 13: {
          const uint32_t delay = rand(2) == 0 ? 0 : static_cast<uint32_t>(rand(100));
          const uint32_t pri = pris[rand(std::size(pris))];
          both([&](command::Session& s) { return s.Release(id, pri, delay); }, "release");
          break;
        }
        case 14:
          both([&](command::Session& s) { return s.Bury(id, 9); }, "bury");
          both([&](command::Session& s) { return s.ReserveJob(id + 1); }, "reserve-job");
          break;
        case 15: {
          const char* t = tubes[rand(3)];
          both([&](command::Session& s) { return s.StatsTube(t); }, "stats-tube");
          both([&](command::Session& s) { return s.Stats(); }, "stats");
          both(
              [&](command::Session& s) {
                return s.ListJobs(t, command::StateFilter::kReady, 0, 1000);
              },
              "list-jobs");
          break;
        }
        case 16: {
          const char* t = tubes[rand(3)];
          const uint32_t delay = static_cast<uint32_t>(rand(3));
          both([&](command::Session& s) { return s.PauseTube(t, delay); }, "pause-tube");
          break;
        }
        case 17:
          if (rand(10) == 0) {  // now and then a purge of a tube's ready jobs
            const char* t = tubes[rand(3)];
            both([&](command::Session& s) { return s.Purge(t, command::StateFilter::kReady); },
                 "purge");
          } else {
            const uint64_t many[] = {id, id + 1, id + 5};
            both([&](command::Session& s) { return s.DeleteMany(many); }, "delete-many");
          }
          break;
        default:
          clock.Advance(static_cast<Nanos>(rand(4 * kSecond)));
          break;
      }
      if (HasFatalFailure()) return;
      hot.Tick();
      cold.Tick();
      if (step % 500 == 0) cold.store->engine().CheckInvariants();
    }
    for (int i = 0; i < Side::kSessions; i++) EXPECT_EQ(hot.rec[i].late, cold.rec[i].late);
    const engine::ColdTier::Stats st = cold.cold->stats();
    EXPECT_GT(st.demotions, 100u) << "seed " << seed;  // the test did exercise the tier
    EXPECT_GT(st.promotions, 100u) << "seed " << seed;
    EXPECT_GT(st.rewrites, 10u) << "seed " << seed;  // released and timed-out jobs went too
    EXPECT_EQ(st.read_errors, 0u);
  }
}

// A backlog of ready jobs (mixed priorities, equal ones among them, two tubes watched)
// mostly on disk comes back in exactly beanstalkd's order, each with its body, and the
// counts include the jobs on disk all along.
TEST(ColdStoreTest, ReadyBacklogOnDiskIsReservedInOrder) {
  for (uint32_t ready_hot : {0u, 16u}) {
    FakeClock clock;
    Side hot(clock, 0), cold(clock, 1, ready_hot);
    std::mt19937_64 rng(ready_hot + 7);
    for (Side* side : {&hot, &cold}) {
      command::Session& s = *side->sessions[0];
      ASSERT_EQ(s.Watch("other").outcome, Outcome::kWatching);
    }
    for (int i = 0; i < 3000; i++) {
      const uint32_t pri = static_cast<uint32_t>(rng() % 4 == 0 ? 1000 + rng() % 50 : 2000);
      const char* tube = rng() % 3 == 0 ? "other" : "default";
      const std::string body = "backlog " + std::to_string(i);
      for (Side* side : {&hot, &cold}) {
        command::Session& s = *side->sessions[1];
        ASSERT_EQ(s.Use(tube).outcome, Outcome::kUsing);
        ASSERT_EQ(Put(s, pri, 0, body).outcome, Outcome::kInserted);
      }
      if (i % 100 == 0) {
        hot.Tick();
        cold.Tick();
      }
    }
    for (int i = 0; i < 5; i++) cold.Tick();
    const engine::ColdTier::ReadyCounts on_disk = cold.cold->ReadyOnDisk(nullptr);
    EXPECT_GT(on_disk.ready, 2500u);
    EXPECT_GT(on_disk.urgent, 0u);  // pri 1000..1049: some urgent ones went too
    ExpectSame(hot.sessions[0]->Stats(), cold.sessions[0]->Stats(), "stats");
    // A job's tube, as a namespace check asks it before a command naming the job: found on
    // disk too.
    for (uint64_t id = 1; id <= 3000; id += 7) {
      Result a = hot.sessions[0]->JobTube(id), b = cold.sessions[0]->JobTube(id);
      ASSERT_EQ(b.outcome, Outcome::kFound) << "job-tube " << id;
      EXPECT_EQ(a.name, b.name) << "job-tube " << id;
    }
    for (int i = 0; i < 3000; i++) {
      Result a = hot.sessions[0]->Reserve(0);
      Result b = cold.sessions[0]->Reserve(0);
      ExpectSame(a, b, "reserve " + std::to_string(i));
      ASSERT_EQ(b.outcome, Outcome::kReserved);
      ASSERT_EQ(cold.sessions[0]->Delete(b.job.id).outcome, Outcome::kDeleted);
      ASSERT_EQ(hot.sessions[0]->Delete(a.job.id).outcome, Outcome::kDeleted);
      if (i % 50 == 0) {
        ExpectSame(hot.sessions[0]->StatsTube("default"), cold.sessions[0]->StatsTube("default"),
                   "stats-tube");
        cold.Tick();
      }
      if (HasFatalFailure()) return;
    }
    EXPECT_EQ(cold.sessions[0]->Reserve(0).outcome, Outcome::kTimedOut);
    EXPECT_EQ(cold.cold->stats().read_errors, 0u);
  }
}

// A job on disk comes back from its record exactly (body, priority, times, counters), and
// compaction, moving it by copying its record, keeps it readable.
TEST(ColdStoreTest, ColdJobsSurviveCompactionAndComeBackOnTime) {
  FakeClock clock;
  Side cold(clock, 1);
  command::Session& s = *cold.sessions[0];
  std::vector<uint64_t> keep;
  for (int i = 0; i < 200; i++) {
    Result r = Put(s, 5, 3600, "long " + std::to_string(i));
    ASSERT_EQ(r.outcome, Outcome::kInserted);
    keep.push_back(r.number);
    cold.Tick();
  }
  cold.Tick();
  EXPECT_EQ(cold.cold->Count(), keep.size());
  // Churn: put and delete many ready jobs so the head segments die and get compacted.
  for (int i = 0; i < 3000; i++) {
    Result r = Put(s, 1, 0, std::string(200, 'z'));
    ASSERT_EQ(r.outcome, Outcome::kInserted);
    ASSERT_EQ(s.Delete(r.number).outcome, Outcome::kDeleted);
    cold.Tick();
  }
  EXPECT_GT(cold.log->stats().records_migrated, 0);
  EXPECT_LE(cold.log->stats().segments, 12u);  // the cold jobs did not pin their segments
  EXPECT_EQ(cold.cold->Count(), keep.size());  // nothing was read back for compaction
  clock.Advance(3600 * kSecond);
  for (int i = 0; i < 5; i++) cold.Tick();
  EXPECT_EQ(cold.cold->Count(), 0u);
  for (size_t i = 0; i < keep.size(); i++) {
    Result r = s.Reserve(0);
    ASSERT_EQ(r.outcome, Outcome::kReserved);
    EXPECT_EQ(r.job.id, keep[i]);
    EXPECT_EQ(r.job.body, "long " + std::to_string(i));
    ASSERT_EQ(s.Delete(r.job.id).outcome, Outcome::kDeleted);
  }
}

}  // namespace
}  // namespace stalkd::storage
