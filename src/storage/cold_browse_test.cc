// list-jobs and purge of a tube whose jobs are mostly on disk (docs/DISK-TIER.md): list-jobs
// answers from the tier's indexes without reading a job, page for page as the all-in-memory
// store answers; a purge reads back at most one slice of jobs per loop iteration, so memory
// stays within a slice of the budget however many jobs the tube has on disk.
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "command/put_test_util.h"
#include "server/cold_store_test_util.h"
#include "storage/binlog_test_util.h"
#include "store/memory_store.h"

namespace stalkd::storage {
namespace {

constexpr auto Put = command::testing_util::PutThrough;
using command::Outcome;
using command::Result;
using command::StateFilter;

// The results that arrive later (a purge done in slices).
struct Later final : command::Client {
  void OnResult(const Result& r) override { results.push_back({r.outcome, r.number}); }
  struct Got {
    Outcome outcome;
    uint64_t number;
  };
  std::vector<Got> results;
};

// A store with a binlog and, with a budget, the disk tier; one session.
struct Side : testing_util::SessionTier<Later> {
  Side(FakeClock& clock, const std::string& in, size_t budget, uint32_t ready_hot = 64)
      : SessionTier(clock, in, ColdStoreOptions{budget, 2 * kSecond, 1000, ready_hot}) {}
};

struct Dirs {
  std::string hot = testing_util::MakeTempDir(), cold = testing_util::MakeTempDir();
  ~Dirs() {
    testing_util::RemoveDir(hot);
    testing_util::RemoveDir(cold);
  }
};

// Puts n jobs into `tube` on both sides: ready ones of mixed priorities, and delayed ones
// due in an hour to a day (every third).
void Fill(Side& hot, Side& cold, const char* tube, int n) {
  for (Side* side : {&hot, &cold}) {
    ASSERT_EQ(side->s->Use(tube).outcome, Outcome::kUsing);
    for (int i = 0; i < n; i++) {
      const uint32_t delay = i % 3 == 0 ? 3600 + static_cast<uint32_t>(i % 86400) : 0;
      ASSERT_EQ(
          Put(*side->s, static_cast<uint32_t>(i % 7), delay, "job " + std::to_string(i)).outcome,
          Outcome::kInserted);
      if (i % 500 == 0) side->Tick();
    }
  }
}

// Every page of list-jobs, from the start with `count` ids a page, for a state.
std::vector<std::vector<uint64_t>> Pages(Side& side, const char* tube, StateFilter st,
                                         uint32_t count, std::vector<uint64_t>* nexts,
                                         size_t max_pages = 100000) {
  std::vector<std::vector<uint64_t>> pages;
  uint64_t from = 0;
  do {
    Result r = side.s->ListJobs(tube, st, from, count);
    EXPECT_EQ(r.outcome, Outcome::kJobList);
    if (r.outcome != Outcome::kJobList || pages.size() > max_pages) break;
    pages.push_back(*r.ids);
    from = r.number;
    nexts->push_back(from);
  } while (from != 0);
  return pages;
}

TEST(ColdBrowseTest, ListJobsReadsNoJobFromDiskAndPagesAsInMemory) {
  FakeClock clock;
  Dirs dirs;
  Side hot(clock, dirs.hot, 0), cold(clock, dirs.cold, 1);
  // The tube's jobs come before and after more than a list-jobs window of another tube's.
  Fill(hot, cold, "t", 3000);
  Fill(hot, cold, "u", static_cast<int>(engine::Engine::kListScan) + 2000);
  Fill(hot, cold, "t", 3000);
  for (int i = 0; i < 200; i++) cold.Tick();
  const engine::ColdTier::Stats before = cold.cold->stats();
  EXPECT_GT(before.cold + cold.cold->ReadyOnDisk(nullptr).ready, 70000u);
  EXPECT_GT(cold.cold->Count(cold.store->engine().FindTube("t")), 1500u);
  EXPECT_GT(cold.cold->ReadyOnDisk(cold.store->engine().FindTube("t")).ready, 3000u);
  for (StateFilter st : {StateFilter::kReady, StateFilter::kDelayed}) {
    for (uint32_t count : {1000u, 7u, 1u}) {
      std::vector<uint64_t> hot_next, cold_next;
      auto a = Pages(hot, "t", st, count, &hot_next);
      auto b = Pages(cold, "t", st, count, &cold_next);
      EXPECT_EQ(a, b) << "state " << static_cast<int>(st) << " count " << count;
      EXPECT_EQ(hot_next, cold_next) << "state " << static_cast<int>(st) << " count " << count;
      size_t listed = 0;
      for (const auto& p : b) listed += p.size();
      EXPECT_EQ(listed, st == StateFilter::kReady ? 4000u : 2000u);
    }
  }
  // Listing read nothing back: every job that was on disk still is.
  const engine::ColdTier::Stats after = cold.cold->stats();
  EXPECT_EQ(after.promotions, before.promotions);
  EXPECT_EQ(after.waited_reads, before.waited_reads);
  EXPECT_EQ(after.cold, before.cold);
}

// Ids that start far above 0 (a server that has handed out 2^33 ids): the all-in-memory
// store's scan starts at its lowest live id, so a listing from 0 has the jobs on its first
// page; with jobs on disk it must too, not after 2^17 empty windows.
TEST(ColdBrowseTest, ListJobsFromZeroOfHighIdsPagesAsInMemory) {
  FakeClock clock;
  Dirs dirs;
  Side hot(clock, dirs.hot, 0), cold(clock, dirs.cold, 1);
  for (Side* side : {&hot, &cold}) side->store->engine().ReserveIdsThrough(uint64_t{1} << 33);
  Fill(hot, cold, "t", 3000);
  for (int i = 0; i < 20; i++) cold.Tick();
  EXPECT_GT(cold.cold->ReadyOnDisk(cold.store->engine().FindTube("t")).ready, 1000u);
  for (StateFilter st : {StateFilter::kReady, StateFilter::kDelayed}) {
    Result a = hot.s->ListJobs("t", st, 0, 1000);
    const std::vector<uint64_t> hot_ids = *a.ids;
    Result b = cold.s->ListJobs("t", st, 0, 1000);
    ASSERT_EQ(b.outcome, Outcome::kJobList);
    EXPECT_EQ(hot_ids, *b.ids) << "state " << static_cast<int>(st);
    EXPECT_EQ(a.number, b.number) << "state " << static_cast<int>(st);
  }
}

// The converse: a tube's jobs with low ids, and a server that has handed out 2^33 ids since
// (none live): the all-in-memory store's scan ends at its highest live id, so the listing
// ends (next 0) after the tube's jobs, not after 2^17 windows of ids nobody holds. And a
// first window that is not full: `next` is where the all-in-memory store's is, from 0.
TEST(ColdBrowseTest, ListJobsEndsAtTheHighestLiveIdAsInMemory) {
  FakeClock clock;
  Dirs dirs;
  Side hot(clock, dirs.hot, 0), cold(clock, dirs.cold, 1);
  Fill(hot, cold, "s", 30);  // its 10 delayed ones fill less than a page of 1000
  Fill(hot, cold, "t", 3000);
  for (Side* side : {&hot, &cold}) side->store->engine().ReserveIdsThrough(uint64_t{1} << 33);
  for (int i = 0; i < 20; i++) cold.Tick();
  EXPECT_GT(cold.cold->ReadyOnDisk(cold.store->engine().FindTube("t")).ready, 1000u);
  EXPECT_EQ(cold.cold->Count(cold.store->engine().FindTube("s")), 10u);
  for (const char* tube : {"s", "t"}) {
    for (StateFilter st : {StateFilter::kReady, StateFilter::kDelayed}) {
      for (uint32_t count : {1000u, 7u}) {
        std::vector<uint64_t> hot_next, cold_next;
        auto a = Pages(hot, tube, st, count, &hot_next, 1000);
        auto b = Pages(cold, tube, st, count, &cold_next, 1000);
        EXPECT_EQ(a, b) << tube << " state " << static_cast<int>(st) << " count " << count;
        EXPECT_EQ(hot_next, cold_next)
            << tube << " state " << static_cast<int>(st) << " count " << count;
      }
    }
  }
}

// A tube with no job on disk, while the lowest live ids are on disk (another tube's delayed
// jobs): its listing still scans from the lowest live id, as the all-in-memory store's.
TEST(ColdBrowseTest, ListJobsOfATubeWithNoJobOnDiskPagesAsInMemory) {
  FakeClock clock;
  Dirs dirs;
  Side hot(clock, dirs.hot, 0), cold(clock, dirs.cold, 1);
  for (Side* side : {&hot, &cold}) {
    ASSERT_EQ(side->s->Use("d").outcome, Outcome::kUsing);
    for (int i = 0; i < 10; i++) ASSERT_EQ(Put(*side->s, 0, 3600, "d").outcome, Outcome::kInserted);
    side->store->engine().ReserveIdsThrough(100000);
    ASSERT_EQ(side->s->Use("r").outcome, Outcome::kUsing);
    for (int i = 0; i < 10; i++) ASSERT_EQ(Put(*side->s, 0, 0, "r").outcome, Outcome::kInserted);
  }
  for (int i = 0; i < 5; i++) cold.Tick();
  EXPECT_EQ(cold.cold->Count(cold.store->engine().FindTube("d")), 10u);
  for (StateFilter st : {StateFilter::kReady, StateFilter::kReserved}) {
    std::vector<uint64_t> hot_next, cold_next;
    auto a = Pages(hot, "r", st, 1000, &hot_next);
    auto b = Pages(cold, "r", st, 1000, &cold_next);
    EXPECT_EQ(a, b) << "state " << static_cast<int>(st);
    EXPECT_EQ(hot_next, cold_next) << "state " << static_cast<int>(st);
  }
}

// Random puts (ready and delayed, into two tubes), reserves, buries, deletes, jumps of the
// ids (from past 2^32, by up to 300,000), time, and now and then a purge (ready, delayed,
// buried or all) run to its end, on a store with a 1-byte budget and on an all-in-memory
// one: every listing from 0 or from an id, paged to its end with 1, 7 or 1000 ids a page,
// has the same ids, and every purge the same count and leaves the same stats.
TEST(ColdBrowseTest, RandomListingsAndPurgesMatchTheAllInMemoryStore) {
  for (uint32_t seed = 1; seed <= 3; seed++) {
    std::mt19937_64 rng(seed);
    auto rand = [&](uint64_t n) { return rng() % n; };
    FakeClock clock;
    Dirs dirs;
    Side hot(clock, dirs.hot, 0), cold(clock, dirs.cold, 1, static_cast<uint32_t>(seed % 3));
    Side* sides[] = {&hot, &cold};
    const char* tubes[] = {"t", "u"};
    uint64_t next_id = (uint64_t{1} << 32) - 700;
    for (Side* side : sides) {
      side->store->engine().ReserveIdsThrough(next_id - 1);
      ASSERT_EQ(side->s->Watch("u").outcome, Outcome::kWatching);
    }
    std::vector<uint64_t> ids;
    for (int step = 0; step < 4000; step++) {
      const uint64_t op = step < 2400 ? 0 : rand(100);  // a backlog first: purges of slices
      if (op < 55) {
        const char* t = tubes[rand(2)];
        const uint32_t delay = rand(3) == 0 ? 3600 + static_cast<uint32_t>(rand(9000)) : 0;
        const auto pri = static_cast<uint32_t>(rand(5));
        for (Side* side : sides) {
          ASSERT_EQ(side->s->Use(t).outcome, Outcome::kUsing);
          Result r = Put(*side->s, pri, delay, "j");
          ASSERT_EQ(r.outcome, Outcome::kInserted);
          ASSERT_EQ(r.number, next_id);
        }
        ids.push_back(next_id++);
      } else if (op < 62) {  // ids nobody holds: a gap
        next_id += rand(300000);
        for (Side* side : sides) side->store->engine().ReserveIdsThrough(next_id - 1);
      } else if (op < 72 && !ids.empty()) {
        const uint64_t id = ids[rand(ids.size())];
        Result a = hot.s->Delete(id), b = cold.s->Delete(id);
        ASSERT_EQ(a.outcome, b.outcome) << "delete " << id;
      } else if (op < 80) {  // a reserve and a bury: jobs neither ready nor delayed
        Result a = hot.s->Reserve(0), b = cold.s->Reserve(0);
        ASSERT_EQ(a.outcome, b.outcome);
        if (a.outcome == Outcome::kReserved) {
          ASSERT_EQ(a.job.id, b.job.id);
          if (rand(2)) {
            ASSERT_EQ(hot.s->Bury(a.job.id, 1).outcome, cold.s->Bury(a.job.id, 1).outcome);
          }
        }
      } else if (op < 88) {
        clock.Advance(static_cast<Nanos>(rand(600)) * kSecond);
        for (Side* side : sides) side->Tick();
      } else if (op < 98) {
        const char* t = tubes[rand(2)];
        const StateFilter st = rand(2) ? StateFilter::kReady : StateFilter::kDelayed;
        const uint64_t from = rand(3) == 0 ? 0 : ids.empty() ? 1 : ids[rand(ids.size())] - rand(2);
        const uint32_t counts[] = {1, 7, 1000};
        const uint32_t count = counts[rand(3)];
        std::vector<uint64_t> listed[2];
        for (int i = 0; i < 2; i++) {
          uint64_t at = from;
          for (int page = 0; page < 20000; page++) {
            Result r = sides[i]->s->ListJobs(t, st, at, count);
            if (r.outcome == Outcome::kNotFound) {  // the tube is gone: on both sides
              listed[i].push_back(0);
              at = 0;
              break;
            }
            ASSERT_EQ(r.outcome, Outcome::kJobList);
            ASSERT_LE(r.ids->size(), count);
            listed[i].insert(listed[i].end(), r.ids->begin(), r.ids->end());
            ASSERT_TRUE(r.number == 0 || r.number > at) << "next " << r.number << " from " << at;
            at = r.number;
            if (at == 0) break;
          }
          ASSERT_EQ(at, 0u) << "seed " << seed << " step " << step << " side " << i << " from "
                            << from << " count " << count << " listed " << listed[i].size()
                            << ": no end";
        }
        ASSERT_EQ(listed[0], listed[1]) << "seed " << seed << " step " << step << " tube " << t
                                        << " from " << from << " count " << count;
      } else {
        const char* t = tubes[rand(2)];
        const StateFilter purges[] = {StateFilter::kReady, StateFilter::kDelayed,
                                      StateFilter::kBuried, StateFilter::kAll};
        const StateFilter st = purges[rand(4)];
        uint64_t purged[2] = {};
        Outcome first[2] = {};
        for (int i = 0; i < 2; i++) {
          sides[i]->client.results.clear();
          Result r = sides[i]->s->Purge(t, st);
          first[i] = r.outcome;
          if (r.outcome == Outcome::kNotFound) continue;
          for (int slices = 0; r.outcome == Outcome::kPending && sides[i]->client.results.empty();
               slices++) {
            ASSERT_LT(slices, 1000);
            sides[i]->Tick();
          }
          purged[i] =
              r.outcome == Outcome::kPending ? sides[i]->client.results.back().number : r.number;
        }
        ASSERT_EQ(first[0] == Outcome::kNotFound, first[1] == Outcome::kNotFound);
        ASSERT_EQ(purged[0], purged[1]) << "seed " << seed << " step " << step;
        for (const char* tube : tubes) {
          Result a = hot.s->StatsTube(tube), b = cold.s->StatsTube(tube);
          ASSERT_EQ(a.outcome, b.outcome);
          if (a.outcome != Outcome::kTubeStats) continue;
          EXPECT_EQ(a.tube_stats->ready, b.tube_stats->ready) << tube;
          EXPECT_EQ(a.tube_stats->delayed, b.tube_stats->delayed) << tube;
          EXPECT_EQ(a.tube_stats->buried, b.tube_stats->buried) << tube;
          EXPECT_EQ(a.tube_stats->reserved, b.tube_stats->reserved) << tube;
        }
      }
      if (step % 50 == 0) cold.Tick();  // jobs to disk (every one that may go)
    }
    EXPECT_GT(cold.cold->stats().demotions, 0u);
  }
}

TEST(ColdBrowseTest, PurgeReadsASliceAtATime) {
  FakeClock clock;
  Dirs dirs;
  const size_t budget = 64 << 10;
  Side hot(clock, dirs.hot, 0), cold(clock, dirs.cold, budget);
  Fill(hot, cold, "t", 30000);
  for (int i = 0; i < 200; i++) cold.Tick();
  const engine::Tube* t = cold.store->engine().FindTube("t");
  const size_t on_disk = cold.cold->Count(t) + cold.cold->ReadyOnDisk(t).ready;
  EXPECT_GT(on_disk, 25000u);
  const uint64_t promotions = cold.cold->stats().promotions;
  for (StateFilter st : {StateFilter::kDelayed, StateFilter::kAll}) {
    uint64_t purged[2] = {};
    int side = 0;
    for (Side* s : {&hot, &cold}) {
      s->client.results.clear();
      Result r = s->s->Purge("t", st);
      if (r.outcome == Outcome::kPending) {
        size_t slices = 0;
        while (s->client.results.empty()) {
          ASSERT_LT(++slices, 1000u);
          s->Tick();
          // A slice brings back at most its own jobs, and the tier sends the rest of memory's
          // jobs away again as it goes: memory stays near the budget.
          if (s == &cold) {
            EXPECT_LE(s->store->engine().memory_used(),
                      budget + store::MemoryStore::kPurgeSlice * 512);
          }
        }
        ASSERT_EQ(s->client.results.back().outcome, Outcome::kPurged);
        purged[side] = s->client.results.back().number;
      } else {
        ASSERT_EQ(r.outcome, Outcome::kPurged);
        purged[side] = r.number;
      }
      side++;
    }
    EXPECT_EQ(purged[0], purged[1]);
    EXPECT_EQ(purged[1], st == StateFilter::kDelayed ? 10000u : 20000u);
    Result a = hot.s->StatsTube("t"), b = cold.s->StatsTube("t");
    ASSERT_EQ(b.outcome, Outcome::kTubeStats);
    EXPECT_EQ(a.tube_stats->ready, b.tube_stats->ready);
    EXPECT_EQ(a.tube_stats->delayed, b.tube_stats->delayed);
    EXPECT_EQ(b.tube_stats->delayed, 0u);
  }
  EXPECT_EQ(cold.cold->Count(), 0u);
  EXPECT_EQ(cold.cold->ReadyOnDisk(nullptr).ready, 0u);
  EXPECT_GE(cold.cold->stats().promotions - promotions, on_disk);  // each read once, to purge
  EXPECT_EQ(cold.cold->stats().read_errors, 0u);
}

}  // namespace
}  // namespace stalkd::storage
