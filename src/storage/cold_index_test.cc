// The disk tier's index against a plain model (a map of entries), under random operations.
#include "storage/cold_index.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace stalkd::storage {
namespace {

using Entry = ColdIndex::Entry;

const engine::Tube* TubeNo(int i) { return reinterpret_cast<const engine::Tube*>(0x1000 + 16 * i); }

bool Earlier(const Entry& a, const Entry& b) {
  return a.deadline != b.deadline ? a.deadline < b.deadline : a.id < b.id;
}

// The shapes of the random runs: how far deadlines spread, where ids start, how many tubes.
struct Shape {
  size_t split_work = 16384;    // ids moved to finer buckets per TakeDue
  Nanos spread = 60 * kSecond;  // deadlines up to this far ahead
  uint64_t first_id = 1;
  int tubes = 4;
  bool odd_created = false;  // creation times that do not fit in the entry (kept wide)
};

// Takes everything due before `until` (as the loop would, call after call) and checks it
// comes in (deadline, id) order, exactly the model's due entries.
void TakeAllDue(ColdIndex& index, std::map<uint64_t, Entry>& model, Nanos until, size_t max) {
  std::vector<Entry> want;
  for (const auto& [id, e] : model) {
    if (e.deadline < until) want.push_back(e);
  }
  std::sort(want.begin(), want.end(), Earlier);
  std::vector<Entry> got;
  for (int calls = 0;; calls++) {
    ASSERT_LT(calls, 100000) << "TakeDue makes no progress";
    if (!index.TakeDue(until, max, &got)) break;
  }
  ASSERT_EQ(got, want);
  for (const Entry& e : got) model.erase(e.id);
}

void RunModel(uint32_t seed, const Shape& shape) {
  std::mt19937_64 rng(seed);
  ColdIndex index(shape.split_work);
  std::map<uint64_t, Entry> model;
  uint64_t next_id = shape.first_id;
  Nanos now = 0;
  auto rand = [&](uint64_t n) { return rng() % n; };
  auto tube = [&] { return TubeNo(static_cast<int>(rand(static_cast<uint64_t>(shape.tubes)))); };
  auto deadline = [&] {
    // Mostly within the spread; sometimes in the same nanosecond as another, or past.
    switch (rand(8)) {
      case 0:
        return now + static_cast<Nanos>(rand(3)) * kSecond;
      case 1:
        return now - static_cast<Nanos>(rand(kSecond));
      default:
        return now + static_cast<Nanos>(rand(static_cast<uint64_t>(shape.spread)));
    }
  };
  auto created = [&](Nanos d) {
    if (rand(2) == 0) {  // a Job's (a multiple of 16 ns), as a release: any age to 30 days
      return (d - static_cast<Nanos>(rand(30 * 86400 * kSecond))) & ~Nanos{15};
    }
    if (!shape.odd_created || rand(4) != 0) {  // as a put: delay in seconds, plus a few µs
      return d - static_cast<Nanos>(rand(40 * 86400)) * kSecond - static_cast<Nanos>(rand(5000));
    }
    switch (rand(4)) {
      case 0:
        return d + static_cast<Nanos>(rand(kSecond));  // after its deadline
      case 1:
        return d - 300 * 86400 * kSecond;  // a delay beyond 194 days
      case 2:
        return d - static_cast<Nanos>(rand(kSecond));  // a release: any nanoseconds
      default:
        return static_cast<Nanos>(rng());
    }
  };
  for (int step = 0; step < 4000; step++) {
    switch (rand(8)) {
      case 0:
      case 1:
      case 2: {  // add: often several in one bucket
        const Nanos d = deadline();
        Entry e{next_id, d, created(d), tube()};
        next_id += rand(16) == 0 ? rand(uint64_t{1} << 33) : 1;  // ids far apart now and then
        index.Add(e);
        model[e.id] = e;
        break;
      }
      case 3: {  // remove an id (live or not)
        auto it = model.lower_bound(shape.first_id + rand(next_id - shape.first_id + 1));
        const uint64_t id = it != model.end() && rand(2) ? it->first : next_id + 5;
        Entry got;
        bool had = model.count(id) != 0;
        ASSERT_EQ(index.Remove(id, &got), had);
        if (had) {
          EXPECT_EQ(got, model[id]);
        }
        model.erase(id);
        break;
      }
      case 4: {  // re-add a removed id (a job demoted again after coming back)
        if (next_id == shape.first_id) break;
        const uint64_t id = shape.first_id + rand(next_id - shape.first_id);
        if (model.count(id)) break;
        const Nanos d = deadline();
        Entry e{id, d, created(d), TubeNo(0)};
        index.Add(e);
        model[id] = e;
        break;
      }
      case 5: {  // time passes; take what falls due within the lead
        now += static_cast<Nanos>(rand(3 * kSecond));
        if (rand(50) == 0 && now < INT64_MAX / 2 - shape.spread) {  // a long sleep
          now += static_cast<Nanos>(rand(static_cast<uint64_t>(shape.spread / 8)));
        }
        const Nanos until = now + 2 * kSecond;
        const size_t max = 1 + rand(50);
        std::vector<Entry> due;
        for (const auto& [id, e] : model) {
          if (e.deadline < until) due.push_back(e);
        }
        std::sort(due.begin(), due.end(), Earlier);
        std::vector<Entry> out;
        bool more = index.TakeDue(until, max, &out);
        ASSERT_LE(out.size(), std::min(due.size(), max));
        // The first due, in order; fewer only while buckets are being split.
        ASSERT_TRUE(std::equal(out.begin(), out.end(), due.begin()));
        if (out.size() < std::min(due.size(), max) || due.size() > max) {
          EXPECT_TRUE(more);
        }
        if (shape.split_work >= 16384) {
          EXPECT_EQ(out.size(), std::min(due.size(), max));
          EXPECT_EQ(more, due.size() > max);
        }
        for (const Entry& e : out) model.erase(e.id);
        break;
      }
      case 6: {  // a tube's earliest n, in order
        const engine::Tube* t = tube();
        size_t n = rand(5);
        std::vector<Entry> want;
        for (const auto& [id, e] : model) {
          if (e.tube == t) want.push_back(e);
        }
        std::sort(want.begin(), want.end(), Earlier);
        want.resize(std::min(n, want.size()));
        std::vector<Entry> out;
        index.TakeEarliest(t, n, &out);
        EXPECT_EQ(out, want);
        for (const Entry& e : out) model.erase(e.id);
        break;
      }
      default: {  // queries
        for (int i = 0; i < shape.tubes; i++) {
          const engine::Tube* t = TubeNo(i);
          size_t count = 0;
          Nanos min = kForever;
          for (const auto& [id, e] : model) {
            if (e.tube != t) continue;
            count++;
            min = std::min(min, e.deadline);
          }
          EXPECT_EQ(index.Count(t), count);
          EXPECT_LE(index.Floor(t), min);
          if (count == 0) {
            EXPECT_EQ(index.Floor(t), kForever);
          }
        }
        Nanos min = kForever;
        for (const auto& [id, e] : model) min = std::min(min, e.deadline);
        EXPECT_LE(index.NextDeadline(), min);
        break;
      }
    }
    ASSERT_EQ(index.size(), model.size()) << "seed " << seed << " step " << step;
    ASSERT_EQ(index.bytes(), index.BytesByWalk()) << "seed " << seed << " step " << step;
    if (step % 16 == 0) {
      for (const auto& [id, e] : model) {
        Entry got;
        ASSERT_TRUE(index.Get(id, &got));
        ASSERT_EQ(got, e);
      }
    }
  }
  // Everything comes out in order, and the index is empty after.
  TakeAllDue(index, model, kForever, 1 + rng() % 1000);
  EXPECT_TRUE(model.empty());
  EXPECT_EQ(index.size(), 0u);
  EXPECT_EQ(index.wide(), 0u);
  EXPECT_EQ(index.NextDeadline(), kForever);
}

TEST(ColdIndexTest, MatchesAModelUnderRandomOperations) {
  for (uint32_t seed = 1; seed <= 20; seed++) RunModel(seed, Shape{});
}

// Many tubes sharing buckets: each bucket's groups of tubes partly ordered, partly as they
// came (merged in as they grow), a tube's earliest found among its own.
TEST(ColdIndexTest, MatchesAModelWithManyTubes) {
  for (uint32_t seed = 1; seed <= 4; seed++) {
    Shape shape;
    shape.tubes = 100;
    shape.spread = 3 * 86400 * kSecond;
    shape.odd_created = seed % 2 == 0;
    RunModel(seed, shape);
  }
}

// Deadlines up to 40 days apart (buckets of every level, split while time passes), a few
// ids moved per TakeDue (splits left half done), ids across 2^32 and far apart, creation
// times kept wide, many tubes.
TEST(ColdIndexTest, MatchesAModelWithFarDeadlinesAndPartialSplits) {
  for (uint32_t seed = 1; seed <= 12; seed++) {
    Shape shape;
    shape.split_work = 1 + seed % 5;
    shape.spread = 40 * 86400 * kSecond;
    shape.first_id = (uint64_t{1} << 32) - 700;
    shape.tubes = 9;
    shape.odd_created = true;
    RunModel(seed, shape);
  }
}

TEST(ColdIndexTest, MatchesAModelWithLargeDeadlines) {
  for (uint32_t seed = 1; seed <= 6; seed++) {
    Shape shape;
    shape.spread = INT64_MAX / 4;  // up to decades ahead
    shape.split_work = 50;
    shape.odd_created = true;
    RunModel(seed, shape);
  }
}

// Creation times: a Job's (a multiple of 16 ns) up to 26 days before the deadline, and
// those of a put with a delay (whole seconds and up to 8.4 ms) up to 194 days, fit in the
// entry; anything else is kept aside, exactly.
TEST(ColdIndexTest, CreationTimesAreExact) {
  ColdIndex index;
  const Nanos d = 1000 * 86400 * kSecond + 123456789;
  const Nanos job = 999 * 86400 * kSecond + 16 * 12345;  // a Job's: a multiple of 16 ns
  const Nanos max_grains = Nanos{1} << 51;               // the first form's reach, in ns
  const Nanos created[] = {
      d - 3600 * kSecond - 850,                            // a put with a delay: fits
      d - 193 * 86400 * kSecond - 8'000'000,               // fits (up to 194 days, 8.4 ms)
      d - 195 * 86400 * kSecond,                           // too far back
      d - 3600 * kSecond - 9'000'000,                      // too many nanoseconds, not a Job's
      d,                                                   // fits
      d + 1,                                               // after the deadline
      INT64_MIN,                                           // any value
      job,                                                 // a release: fits at any nanosecond
      (d & ~Nanos{15}) - 25 * 86400 * kSecond - 16 * 777,  // a Job's, 25 days back
      ((d - max_grains) & ~Nanos{15}) + 16,                // the last that fits
      ((d - max_grains) & ~Nanos{15}) - 16 * 1000 - 3600,  // just beyond: not whole s
      (d - 3600 * kSecond - 9'000'000) & ~Nanos{15},       // a Job's: fits at any nanosecond
  };
  const size_t wide[] = {0, 0, 1, 2, 2, 3, 4, 4, 4, 4, 5, 5};
  static_assert(std::size(wide) == std::size(created));
  for (size_t i = 0; i < std::size(created); i++) {
    index.Add({i + 1, d, created[i], TubeNo(1)});
    EXPECT_EQ(index.wide(), wide[i]) << i;
  }
  for (size_t i = 0; i < std::size(created); i++) {
    Entry e;
    ASSERT_TRUE(index.Get(i + 1, &e));
    EXPECT_EQ(e, (Entry{i + 1, d, created[i], TubeNo(1)})) << i;
  }
  std::vector<Entry> out;
  EXPECT_FALSE(index.TakeDue(kForever, 100, &out));
  ASSERT_EQ(out.size(), std::size(created));
  for (size_t i = 0; i < out.size(); i++) EXPECT_EQ(out[i].created, created[i]);
  EXPECT_EQ(index.wide(), 0u);
}

// Tubes get two-byte numbers, given back with their last job and reused; past 65,535 tubes
// at once, a job's tube is kept aside.
TEST(ColdIndexTest, TubeNumbersAreReusedAndOverflowKeepsTubes) {
  ColdIndex index;
  const int n = 70000;
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < n; i++) {
      index.Add({static_cast<uint64_t>(i + 1), 10 * kSecond + i, 5 * kSecond, TubeNo(i)});
    }
    EXPECT_EQ(index.wide(), static_cast<size_t>(n - 65535));
    EXPECT_EQ(index.bytes(), index.BytesByWalk());
    for (int i = 0; i < n; i += 1111) {
      Entry e;
      ASSERT_TRUE(index.Get(static_cast<uint64_t>(i + 1), &e));
      EXPECT_EQ(e.tube, TubeNo(i));
      EXPECT_EQ(index.Count(TubeNo(i)), 1u);
    }
    std::vector<Entry> out;
    index.TakeEarliest(TubeNo(n - 1), 5, &out);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0],
              (Entry{static_cast<uint64_t>(n), 10 * kSecond + n - 1, 5 * kSecond, TubeNo(n - 1)}));
    for (int i = 0; i < n - 1; i++) ASSERT_TRUE(index.Remove(static_cast<uint64_t>(i + 1)));
    EXPECT_EQ(index.size(), 0u);
    EXPECT_EQ(index.wide(), 0u);
  }
}

// As after a start from the checkpoint: entries added before the loop ever asked (no
// horizon) sit in the coarsest bucket; TakeDue moves them to finer ones a bounded number per
// call (asking to be called again meanwhile, taking nothing before the split reaches what
// is due), then hands them out in order.
TEST(ColdIndexTest, SplitWorkIsBoundedPerCall) {
  ColdIndex index(1000);
  std::mt19937_64 rng(5);
  const Nanos now = 50 * kSecond;
  std::vector<Entry> all;
  for (uint64_t id = 1; id <= 50000; id++) {
    const Nanos d = now + static_cast<Nanos>(rng() % (7 * 86400)) * kSecond;
    all.push_back({id, d, d - 10 * kSecond, TubeNo(static_cast<int>(id % 3))});
    index.Add(all.back());
  }
  std::vector<Entry> out;
  size_t calls = 1;
  while (index.TakeDue(now, 100, &out)) calls++;
  EXPECT_GE(calls, 50u);  // 50,000 ids at most 1,000 a call
  EXPECT_TRUE(out.empty());
  EXPECT_LE(index.NextDeadline(), std::min_element(all.begin(), all.end(), Earlier)->deadline);
  EXPECT_EQ(index.bytes(), index.BytesByWalk());
  std::sort(all.begin(), all.end(), Earlier);
  for (Nanos until = now; index.size() > 0; until += 3600 * kSecond) {
    while (index.TakeDue(until, 100, &out)) {
    }
  }
  EXPECT_EQ(out, all);
}

// A delayed job on disk costs about 20 bytes here, with deadlines spread over 30 days
// (with one bucket a second, the buckets alone cost more than that).
TEST(ColdIndexTest, BytesPerJobWithDeadlinesOverAMonth) {
  ColdIndex index;
  std::mt19937_64 rng(3);
  Nanos now = 100 * kSecond;
  std::vector<Entry> out;
  const uint64_t n = 300000;
  for (uint64_t id = 1; id <= n; id++) {
    const Nanos delay = (3600 + static_cast<Nanos>(rng() % (30 * 86400))) * kSecond;
    index.Add({id, now + delay + 300, now, TubeNo(static_cast<int>(id % 10))});
    now += kSecond / 1000;
    if (id % 1000 == 0) index.TakeDue(now + 2 * kSecond, 1000, &out);
  }
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(index.wide(), 0u);
  EXPECT_EQ(index.bytes(), index.BytesByWalk());
  printf("bytes per job put with a delay of 1 h to 30 days, 10 tubes: %.1f\n",
         static_cast<double>(index.bytes()) / static_cast<double>(n));
  EXPECT_LE(index.bytes(), n * 22);
}

// Jobs released with a delay of an hour: their deadlines at any nanosecond, their creation
// times (a Job's: multiples of 16 ns) from minutes to days before; each fits in its 16
// bytes, as a put's does (none kept aside).
TEST(ColdIndexTest, BytesPerJobReleasedWithADelay) {
  ColdIndex index;
  std::mt19937_64 rng(4);
  Nanos now = 100 * kSecond + 123;
  std::vector<Entry> out;
  const uint64_t n = 200000;
  for (uint64_t id = 1; id <= n; id++) {
    const Nanos put = now - static_cast<Nanos>(rng() % (20 * 86400 * kSecond));
    index.Add({id, now + 3600 * kSecond, put & ~Nanos{15}, TubeNo(static_cast<int>(id % 10))});
    now += static_cast<Nanos>(rng() % (kSecond / 500));
    if (id % 1000 == 0) index.TakeDue(now + 2 * kSecond, 1000, &out);
  }
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(index.wide(), 0u);
  EXPECT_EQ(index.bytes(), index.BytesByWalk());
  printf("bytes per job released with a delay of 1 h: %.1f\n",
         static_cast<double>(index.bytes()) / static_cast<double>(n));
  EXPECT_LE(index.bytes(), n * 23);
}

// A tube's earliest jobs are found among its own ids: with 1,000,000 ids of one tube and
// one of another in the same coarse bucket (entries added with no horizon, as from the
// checkpoint), taking the other's looks at its id alone, not at the bucket's million.
TEST(ColdIndexTest, TakeEarliestLooksOnlyAtItsTubesIds) {
  ColdIndex index;
  const Nanos base = 10 * 86400 * kSecond;
  const uint64_t n = 1000000;
  for (uint64_t id = 1; id <= n; id++) {
    index.Add({id, base + static_cast<Nanos>(id) * 1000, base - kSecond, TubeNo(0)});
  }
  const Entry b{n + 1, base + 7 * 1000, base - kSecond, TubeNo(1)};
  index.Add(b);
  EXPECT_EQ(index.Floor(TubeNo(1)), b.deadline);
  std::vector<Entry> out;
  const uint64_t before = index.looked();
  index.TakeEarliest(TubeNo(1), 1, &out);
  ASSERT_EQ(out, std::vector<Entry>{b});
  EXPECT_LE(index.looked() - before, 4u);
  // And the other tube's: its first ones in order, looking at its own ids.
  out.clear();
  index.TakeEarliest(TubeNo(0), 3, &out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].id, 1u);
  EXPECT_EQ(out[2].id, 3u);
  EXPECT_EQ(index.Count(TubeNo(1)), 0u);
  EXPECT_EQ(index.bytes(), index.BytesByWalk());
}

// Removed ids leave stale slots behind; the index rebuilds before they outgrow the live.
TEST(ColdIndexTest, StaleSlotsAreBounded) {
  ColdIndex index;
  for (uint64_t id = 1; id <= 100000; id++) index.Add({id, Nanos(id) * 1000, 0, TubeNo(0)});
  const size_t full = index.bytes();
  for (uint64_t id = 1; id <= 99990; id++) ASSERT_TRUE(index.Remove(id));
  EXPECT_EQ(index.size(), 10u);
  EXPECT_LT(index.bytes(), full / 4);
  std::vector<Entry> out;
  index.TakeEarliest(TubeNo(0), 100, &out);
  ASSERT_EQ(out.size(), 10u);
  EXPECT_EQ(out.front().id, 99991u);
  EXPECT_EQ(index.NextDeadline(), kForever);
}

}  // namespace
}  // namespace stalkd::storage
