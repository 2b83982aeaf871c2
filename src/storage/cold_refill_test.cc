// The disk tier's Tick looks only at the tubes whose ready jobs changed (docs/DISK-TIER.md,
// "Ready jobs: the order stays exact"): a tube whose ready job left memory since the last
// Tick (reserved, deleted, expired...) gets its check and its refill, and the others, with
// their first ready job in memory and no refill due, are not looked at. Before, every Tick
// looked at every tube with ready jobs on disk.
#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "command/put_test_util.h"
#include "engine/tube.h"
#include "server/cold_store_test_util.h"
#include "storage/binlog_test_util.h"
#include "storage/cold_store.h"
#include "store/memory_store.h"

namespace stalkd::storage {
namespace {

using command::Outcome;
using command::Result;
constexpr auto Put = command::testing_util::PutThrough;

struct Late final : command::Client {
  void OnResult(const Result& r) override {
    ids.push_back(r.outcome == Outcome::kReserved ? r.job.id : 0);
  }
  std::vector<uint64_t> ids;
};

// A store with a binlog and, with a budget, the disk tier; a producer and a consumer.
struct Store : testing_util::TierParts {
  Late late[2];
  std::unique_ptr<command::Session> producer, consumer;

  Store(FakeClock& clock, size_t budget, uint32_t ready_hot, uint32_t tick_budget = 1000)
      : TierParts(clock, LogOptions(), TierOptions(budget, ready_hot, tick_budget)) {
    EXPECT_TRUE(ok) << error;
    producer = store->Open(late[0]);
    consumer = store->Open(late[1]);
  }
  static BinlogOptions LogOptions() {
    BinlogOptions o;
    o.dir = testing_util::MakeTempDir();
    o.fsync_never = true;
    return o;
  }
  static ColdStoreOptions TierOptions(size_t budget, uint32_t ready_hot, uint32_t tick_budget) {
    ColdStoreOptions co;
    co.budget = budget;
    co.ready_hot = ready_hot;
    co.tick_budget = tick_budget;
    return co;
  }
  ~Store() {
    producer.reset();
    consumer.reset();
    if (ok) store->engine().CheckInvariants();
    Close();
    store.reset();
    testing_util::RemoveDir(dir);
  }
  // The producer uses tube `name`, the consumer watches it only.
  void Between(const std::string& name) {
    ASSERT_EQ(producer->Use(name).outcome, Outcome::kUsing);
    ASSERT_EQ(consumer->Watch(name).outcome, Outcome::kWatching);
    ASSERT_EQ(consumer->Ignore("default").outcome, Outcome::kWatching);
  }
  const engine::Tube* Tube(const std::string& name) const { return store->engine().FindTube(name); }
  size_t Hot(const std::string& name) const { return Tube(name)->ready.size(); }
  size_t OnDisk(const std::string& name) const { return cold->ReadyOnDisk(Tube(name)).ready; }
  // The tubes the tier looks at in one Tick (a tube looked at for its first and then for its
  // refill counts twice).
  uint64_t LookedInATick() {
    const uint64_t before = cold->looked_tubes();
    Tick();
    return cold->looked_tubes() - before;
  }
};

std::string TubeName(int i) { return "t" + std::to_string(i); }

// The ids of t's ready jobs in memory from the `from`th of its heap on (none if t is null).
std::vector<uint64_t> ReadyInMemory(const engine::Tube* t, size_t from) {
  std::vector<uint64_t> ids;
  for (size_t k = from; t && k < t->ready.size(); k++) ids.push_back(t->ready.at(k)->id);
  return ids;
}

// Deletes every ready job in memory of tube `name` but its first (a delete of a job on disk
// would read it back first); returns their ids.
std::vector<uint64_t> DeleteAllButTheFirstInMemory(Store& s, const std::string& name) {
  const std::vector<uint64_t> ids = ReadyInMemory(s.Tube(name), 1);
  for (uint64_t id : ids) EXPECT_EQ(s.producer->Delete(id).outcome, Outcome::kDeleted) << id;
  return ids;
}

constexpr int kTubes = 5000;
constexpr int kPerTube = 8;  // 4 stay in memory (ready_hot), 4 go to disk

// kTubes tubes of kPerTube ready jobs each (tube i has ids i*kPerTube+1 on), under a 1-byte
// budget: all but 4 of each tube's go to disk.
void FillAndSettle(Store& s) {
  command::Session& p = *s.producer;
  for (int i = 0; i < kTubes; i++) {
    ASSERT_EQ(p.Use(TubeName(i)).outcome, Outcome::kUsing);
    for (int k = 0; k < kPerTube; k++) {
      ASSERT_EQ(Put(p, 100, 0, "job").outcome, Outcome::kInserted);
    }
  }
  const size_t want = size_t{kTubes} * (kPerTube - 4);
  for (int i = 0; i < 200 && s.cold->ReadyOnDisk(nullptr).ready < want; i++) s.Tick();
  ASSERT_EQ(s.cold->ReadyOnDisk(nullptr).ready, want);
  s.Tick();
}

// With 5,000 tubes each with ready jobs on disk, a Tick where nothing changed looks at no
// tube (it looked at all 5,000), and one after jobs left 10 tubes looks at those 10 and
// refills them as before.
TEST(ColdRefillTest, ATickLooksOnlyAtTheTubesWhoseReadyJobsChanged) {
  FakeClock clock;
  Store s(clock, 1, 4);
  FillAndSettle(s);
  for (int i = 0; i < 3; i++) EXPECT_EQ(s.LookedInATick(), 0u) << "an idle Tick, " << i;

  // 3 jobs of each of 10 tubes deleted (all of those in memory but the first): 1 left in
  // memory, below the refill mark (2).
  std::vector<uint64_t> deleted;
  for (int i = 0; i < 10; i++) {
    std::vector<uint64_t> ids = DeleteAllButTheFirstInMemory(s, TubeName(i));
    ASSERT_EQ(ids.size(), 3u);
    if (i == 3) deleted = ids;
    ASSERT_EQ(s.Hot(TubeName(i)), 1u) << i;
  }
  const uint64_t promotions = s.cold->stats().promotions;
  EXPECT_LE(s.LookedInATick(), 20u);  // each twice at most: its first, then its refill
  for (int i = 0; i < 10; i++) {      // refilled up to 4 in memory from their first on disk
    EXPECT_EQ(s.Hot(TubeName(i)), 4u) << i;
    EXPECT_EQ(s.OnDisk(TubeName(i)), 1u) << i;
  }
  EXPECT_EQ(s.cold->stats().promotions - promotions, 30u);
  for (int i = 10; i < kTubes; i += 499) EXPECT_EQ(s.OnDisk(TubeName(i)), 4u) << i;
  EXPECT_EQ(s.LookedInATick(), 0u);

  // Every job still comes out in the tube's order: the 5 left of tube 3 (equal priorities:
  // by id), in memory or on disk.
  s.Between(TubeName(3));
  command::Session& c = *s.consumer;
  for (uint64_t id = 3 * kPerTube + 1; id <= 4 * kPerTube; id++) {
    if (std::find(deleted.begin(), deleted.end(), id) != deleted.end()) continue;
    Result r = c.Reserve(0);
    ASSERT_EQ(r.outcome, Outcome::kReserved);
    EXPECT_EQ(r.job.id, id);
    ASSERT_EQ(c.Delete(r.job.id).outcome, Outcome::kDeleted);
  }
  EXPECT_EQ(c.Reserve(0).outcome, Outcome::kTimedOut);
}

// Many tubes falling below the refill mark at once: the refills take `tick_budget` reads a
// Tick, and a Tick looks at the tubes that changed since the last one plus those refills
// (the tubes still waiting for theirs are not looked at again), until all are refilled.
TEST(ColdRefillTest, RefillsOfManyTubesAreBoundedPerTick) {
  FakeClock clock;
  Store s(clock, 1, 4, 300);
  FillAndSettle(s);
  // Each tube's jobs in memory but the first deleted: 1 left in memory.
  for (int i = 0; i < kTubes; i++) {
    ASSERT_EQ(DeleteAllButTheFirstInMemory(s, TubeName(i)).size(), 3u) << i;
  }
  // The first Tick looks at the 5,000 (each first, still in memory) and refills 100 of them
  // (3 reads each); each later one refills 100 more, looking at those only.
  EXPECT_LE(s.LookedInATick(), uint64_t{kTubes} + 101);
  int ticks = 1;
  for (; ticks < 200 && s.cold->ReadyOnDisk(nullptr).ready > size_t{kTubes}; ticks++) {
    EXPECT_LE(s.LookedInATick(), 101u) << "Tick " << ticks;
  }
  EXPECT_EQ(ticks, kTubes / 100);
  for (int i = 0; i < kTubes; i++) {
    ASSERT_EQ(s.Hot(TubeName(i)), 4u) << i;
    ASSERT_EQ(s.OnDisk(TubeName(i)), 1u) << i;
  }
  EXPECT_EQ(s.LookedInATick(), 0u);
}

// A paused tube whose jobs in memory are all deleted (not reserved: no check of its first)
// while a session waits on it: when the pause ends, the session gets the tube's first job,
// which is on disk, as all in memory. The deletes are what makes the Tick look at the tube.
TEST(ColdRefillTest, APauseEndingAfterTheJobsInMemoryWereDeletedServesTheFirstOnDisk) {
  FakeClock clock;
  Store hot(clock, 0, 0), cold(clock, 1, 0);
  for (Store* side : {&hot, &cold}) {
    side->Between("t");
    for (uint32_t i = 0; i < 6; i++) {  // ids 1..6, priorities 5, 4, .. 0: id 6 first
      Result r = Put(*side->producer, 5 - i, 0, "job " + std::to_string(i));
      ASSERT_EQ(r.outcome, Outcome::kInserted);
    }
    for (int i = 0; i < 4; i++) side->Tick();
  }
  ASSERT_EQ(cold.Hot("t"), 1u);  // the first (id 6); the others on disk
  ASSERT_EQ(cold.OnDisk("t"), 5u);
  for (Store* side : {&hot, &cold}) {
    ASSERT_EQ(side->producer->PauseTube("t", 5).outcome, Outcome::kPaused);
    ASSERT_EQ(side->consumer->Reserve(100 * kSecond).outcome, Outcome::kPending);
    ASSERT_EQ(side->producer->Delete(6).outcome, Outcome::kDeleted);
  }
  clock.Advance(5 * kSecond);
  hot.Tick();
  cold.Tick();
  ASSERT_EQ(hot.late[1].ids, std::vector<uint64_t>{5});
  EXPECT_EQ(cold.late[1].ids, hot.late[1].ids);
}

// Random commands over 12 tubes, on a store whose tier keeps 4 ready jobs a tube in memory
// and reads back only 2 jobs a Tick (refills wait in turn, over several Ticks) and on one all
// in memory: the same answers, those of a waiting reserve included, with pauses ending,
// deletes (of a tube's jobs in memory, or all but its first, too), buries and kicks,
// releases at other priorities and reserves of each tube's first.
TEST(ColdRefillTest, RandomCommandsOverManyTubesAnswerAsAllInMemory) {
  for (uint32_t seed = 1; seed <= 4; seed++) {
    FakeClock clock;
    Store hot(clock, 0, 0), cold(clock, 1, 4, 2);
    std::mt19937_64 rng(seed);
    auto rand = [&](uint64_t n) { return rng() % n; };
    for (Store* side : {&hot, &cold}) {
      for (int i = 0; i < 12; i++) {
        ASSERT_EQ(side->producer->Watch(TubeName(i)).outcome, Outcome::kWatching);
        if (i % 2 == 0) {
          ASSERT_EQ(side->consumer->Watch(TubeName(i)).outcome, Outcome::kWatching);
        }
      }
    }
    uint64_t ids = 1;
    for (Store* side : {&hot, &cold}) {  // a backlog, mostly on disk
      for (uint64_t i = 0; i < 240; i++) {
        ASSERT_EQ(side->producer->Use(TubeName(static_cast<int>(i % 12))).outcome, Outcome::kUsing);
        ASSERT_EQ(Put(*side->producer, static_cast<uint32_t>(i * 7 % 5), 0, "b").outcome,
                  Outcome::kInserted);
      }
      for (int i = 0; i < 120; i++) side->Tick();
      ids = 241;
    }
    size_t answered = 0;
    bool waiting = false;
    for (int step = 0; step < 3000; step++) {
      const std::string what = "seed " + std::to_string(seed) + " step " + std::to_string(step);
      ASSERT_EQ(hot.late[1].ids, cold.late[1].ids) << what;
      if (hot.late[1].ids.size() > answered) {  // the waiting reserve got its job: done with it
        waiting = false;
        answered = hot.late[1].ids.size();
        const uint64_t got = hot.late[1].ids.back();  // 0: it timed out
        for (Store* side : {&hot, &cold}) {
          if (got != 0) {
            EXPECT_EQ(side->consumer->Delete(got).outcome, Outcome::kDeleted) << what;
          }
        }
      }
      auto both = [&](auto fn, const char* op) {
        Result a = fn(*hot.producer), b = fn(*cold.producer);
        EXPECT_EQ(a.outcome, b.outcome) << what << " " << op;
        EXPECT_EQ(a.number, b.number) << what << " " << op;
        EXPECT_EQ(a.job.id, b.job.id) << what << " " << op;
        return a;
      };
      const std::string tube = TubeName(static_cast<int>(rand(12)));
      const uint64_t id = 1 + rand(ids);
      const uint32_t pri = static_cast<uint32_t>(rand(6));
      switch (rand(13)) {
        case 0:
        case 1:
        case 2: {
          both([&](command::Session& p) { return p.Use(tube); }, "use");
          Result r = both([&](command::Session& p) { return Put(p, pri, 0, "j"); }, "put");
          if (r.outcome == Outcome::kInserted) ids = r.number + 1;
          break;
        }
        case 3:
        case 4:
        case 5: {
          Result r = both([&](command::Session& p) { return p.Reserve(0); }, "reserve");
          if (r.outcome != Outcome::kReserved) break;
          const uint64_t j = r.job.id;
          switch (rand(3)) {
            case 0:
              both([&](command::Session& p) { return p.Delete(j); }, "delete");
              break;
            case 1:
              both([&](command::Session& p) { return p.Release(j, pri, 0); }, "release");
              break;
            default:
              both([&](command::Session& p) { return p.Bury(j, pri); }, "bury");
              break;
          }
          break;
        }
        case 6:
          if (waiting) break;
          for (Store* side : {&hot, &cold}) {
            Result r = side->consumer->Reserve(3 * kSecond);
            waiting = r.outcome == Outcome::kPending;
            if (r.outcome == Outcome::kReserved) side->late[1].OnResult(r);
          }
          break;
        case 7:
          both([&](command::Session& p) { return p.Delete(id); }, "delete");
          break;
        case 8: {
          const auto delay = static_cast<uint32_t>(rand(3));
          both([&](command::Session& p) { return p.PauseTube(tube, delay); }, "pause-tube");
          break;
        }
        case 9:
          both([&](command::Session& p) { return p.Use(tube); }, "use");
          both([&](command::Session& p) { return p.Kick(2); }, "kick");
          both([&](command::Session& p) { return p.PeekReady(); }, "peek-ready");
          break;
        case 10: {  // the tier's jobs in memory of a tube (but its first, or all): it runs low
          for (uint64_t j : ReadyInMemory(cold.Tube(tube), rand(2))) {
            both([&](command::Session& p) { return p.Delete(j); }, "delete");
          }
          break;
        }
        default:
          clock.Advance(static_cast<Nanos>(rand(1500)) * (kSecond / 1000));
          break;
      }
      if (HasFailure()) return;
      hot.Tick();
      cold.Tick();
    }
    EXPECT_GT(cold.cold->stats().demotions, 100u) << "seed " << seed;
    EXPECT_GT(cold.cold->stats().promotions, 100u) << "seed " << seed;
  }
}

// Tubes that come and go: nobody watches or uses a tube for long, so a tube whose last job
// goes is freed, and one made later may get its address while the tier still has the old one
// to look at or to refill (its to-look list and refill queue hold addresses). Random puts,
// reserves of one tube, deletes by id (of jobs on disk too: a tube can empty) and of a tube's
// jobs in memory, on a store with the tier (4 ready jobs a tube in memory, 2 reads a Tick) and
// one all in memory: the same answers; the engine's invariants hold at the end (ASan: no
// use of a freed tube).
TEST(ColdRefillTest, TubesFreedAndMadeAgainAnswerAsAllInMemory) {
  for (uint32_t seed = 1; seed <= 6; seed++) {
    FakeClock clock;
    Store hot(clock, 0, 0), cold(clock, 1, 4, 2);
    std::mt19937_64 rng(seed);
    auto rand = [&](uint64_t n) { return rng() % n; };
    uint64_t ids = 1;
    uint64_t freed = 0;
    for (int step = 0; step < 4000; step++) {
      const std::string what = "seed " + std::to_string(seed) + " step " + std::to_string(step);
      auto both = [&](auto fn, const char* op) {
        Result a = fn(hot), b = fn(cold);
        EXPECT_EQ(a.outcome, b.outcome) << what << " " << op;
        EXPECT_EQ(a.number, b.number) << what << " " << op;
        EXPECT_EQ(a.job.id, b.job.id) << what << " " << op;
        return a;
      };
      const std::string tube = TubeName(static_cast<int>(rand(8)));
      const uint32_t pri = static_cast<uint32_t>(rand(4));
      switch (rand(8)) {
        case 0:
        case 1: {  // a few puts to a tube, then back to default: the tube holds only its jobs
          const int n = 1 + static_cast<int>(rand(8));
          both([&](Store& s) { return s.producer->Use(tube); }, "use");
          for (int i = 0; i < n; i++) {
            Result r = both([&](Store& s) { return Put(*s.producer, pri, 0, "j"); }, "put");
            if (r.outcome == Outcome::kInserted) ids = r.number + 1;
          }
          both([&](Store& s) { return s.producer->Use("default"); }, "use default");
          break;
        }
        case 2: {  // a reserve of the tube's first, deleted
          both([&](Store& s) { return s.consumer->Watch(tube); }, "watch");
          both([&](Store& s) { return s.consumer->Ignore("default"); }, "ignore");
          Result r = both([&](Store& s) { return s.consumer->Reserve(0); }, "reserve");
          if (r.outcome == Outcome::kReserved) {
            const uint64_t j = r.job.id;
            both([&](Store& s) { return s.consumer->Delete(j); }, "delete reserved");
          }
          both([&](Store& s) { return s.consumer->Watch("default"); }, "watch default");
          both([&](Store& s) { return s.consumer->Ignore(tube); }, "ignore tube");
          break;
        }
        case 3:
        case 4: {  // deletes by id, on disk or not
          for (int i = 0; i < 4; i++) {
            const uint64_t id = 1 + rand(ids);
            both([&](Store& s) { return s.producer->Delete(id); }, "delete");
          }
          break;
        }
        case 5: {  // the tier's jobs in memory of a tube (but its first, or all): it runs low
          for (uint64_t j : ReadyInMemory(cold.Tube(tube), rand(2))) {
            both([&](Store& s) { return s.producer->Delete(j); }, "delete in memory");
          }
          break;
        }
        case 6:
          both([&](Store& s) { return s.producer->Use(tube); }, "use");
          both([&](Store& s) { return s.producer->PeekReady(); }, "peek-ready");
          both([&](Store& s) { return s.producer->Use("default"); }, "use default");
          break;
        default: {  // every job of a tube, one by one (a tube that had jobs on disk goes)
          const engine::Tube* t = cold.Tube(tube);
          if (!t) break;
          std::vector<uint64_t> all = ReadyInMemory(t, 0);
          cold.cold->ListIds(t, engine::JobState::kReady, 1, ids + 1, &all);
          for (uint64_t j : all) {
            both([&](Store& s) { return s.producer->Delete(j); }, "delete all");
          }
          if (!cold.Tube(tube)) freed++;
          break;
        }
      }
      if (HasFailure()) return;
      hot.Tick();
      cold.Tick();
    }
    EXPECT_GT(freed, 50u) << "seed " << seed;
    EXPECT_GT(cold.cold->stats().demotions, 100u) << "seed " << seed;
  }
}

}  // namespace
}  // namespace stalkd::storage
