// The disk tier's index of buried jobs against a plain model (a map by bury number per
// tube), under random operations: adds at either end and in the middle, removes by id,
// takes of each tube's first, jobs taken out and put back with their same number.
#include "storage/cold_buried_index.h"

#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace stalkd::storage {
namespace {

using Entry = ColdBuriedIndex::Entry;

const engine::Tube* TubeNo(int i) { return reinterpret_cast<const engine::Tube*>(0x1000 + 16 * i); }

struct Model {
  std::map<uint64_t, Entry> by_id;
  std::map<const engine::Tube*, std::map<uint64_t, uint64_t>> order;  // seq -> id

  void Add(const Entry& e) {
    by_id[e.id] = e;
    order[e.tube][e.seq] = e.id;
  }
  void Remove(uint64_t id) {
    const Entry e = by_id.at(id);
    by_id.erase(id);
    order[e.tube].erase(e.seq);
    if (order[e.tube].empty()) order.erase(e.tube);
  }
  bool First(const engine::Tube* t, Entry* out) const {
    auto it = order.find(t);
    if (it == order.end()) return false;
    *out = by_id.at(it->second.begin()->second);
    return true;
  }
};

void ExpectSame(ColdBuriedIndex& index, const Model& m, int tubes, uint64_t below,
                const std::string& what) {
  ASSERT_EQ(index.size(), m.by_id.size()) << what;
  for (int i = 0; i < tubes; i++) {
    const engine::Tube* t = TubeNo(i);
    auto it = m.order.find(t);
    EXPECT_EQ(index.Count(t), it == m.order.end() ? 0 : it->second.size()) << what;
    Entry a, b;
    const bool has = m.First(t, &b);
    ASSERT_EQ(index.First(t, &a), has) << what;
    if (has) {
      EXPECT_EQ(a, b) << what;
    }
    std::vector<uint64_t> ids, want;
    index.ListIds(t, 0, below, &ids);
    for (const auto& [id, e] : m.by_id) {
      if (e.tube == t) want.push_back(id);
    }
    EXPECT_EQ(ids, want) << what;
  }
  for (const auto& [id, e] : m.by_id) {
    Entry got;
    ASSERT_TRUE(index.Get(id, &got)) << what;
    EXPECT_EQ(got, e) << what;
  }
  EXPECT_EQ(index.bytes(), index.BytesByWalk()) << what;
}

TEST(ColdBuriedIndexTest, MatchesAModelUnderRandomOperations) {
  for (uint32_t seed = 1; seed <= 6; seed++) {
    std::mt19937_64 rng(seed);
    auto rand = [&](uint64_t n) { return rng() % n; };
    ColdBuriedIndex index;
    Model m;
    const int tubes = seed % 2 == 0 ? 3 : 9;
    uint64_t next_id = seed * 1000, next_seq = 1u << 20;
    // Per tube, the jobs "in memory": taken out of the index, each with its own number, so
    // that they can come back with it (demoted again) as a tube's jobs do.
    std::vector<Entry> out;
    uint64_t low_seq = 1u << 20;  // numbers below every one yet: for adds at the front
    for (int step = 0; step < 30000; step++) {
      const std::string what = "seed " + std::to_string(seed) + " step " + std::to_string(step);
      const uint64_t op = rand(12);
      const engine::Tube* t = TubeNo(static_cast<int>(rand(tubes)));
      if (op < 3) {  // a newer bury goes to disk: at the end
        const Entry e{next_id++, next_seq++, static_cast<Nanos>(rand(1u << 30)) & ~Nanos{15}, t};
        index.Add(e);
        m.Add(e);
      } else if (op < 5) {  // demotion of a tube's newest first: at the front
        const Entry e{next_id++, --low_seq, static_cast<Nanos>(rand(1u << 30)), t};
        index.Add(e);
        m.Add(e);
      } else if (op < 7 && !m.by_id.empty()) {  // removed by id (peek, delete, kick-job)
        auto it = m.by_id.lower_bound(rand(next_id + 1));
        if (it == m.by_id.end()) it = m.by_id.begin();
        const Entry e = it->second;
        Entry got;
        ASSERT_TRUE(index.Remove(e.id, &got)) << what;
        EXPECT_EQ(got, e) << what;
        m.Remove(e.id);
        out.push_back(e);
      } else if (op < 9) {  // the tube's first taken (kick, refill)
        Entry a, b;
        const bool has = m.First(t, &b);
        ASSERT_EQ(index.TakeFirst(t, &a), has) << what;
        if (has) {
          EXPECT_EQ(a, b) << what;
          m.Remove(b.id);
          out.push_back(b);
        }
      } else if (op < 11 && !out.empty()) {  // one taken out goes back, with its number
        const size_t k = rand(out.size());
        const Entry e = out[k];
        out[k] = out.back();
        out.pop_back();
        index.Add(e);
        m.Add(e);
      } else {
        EXPECT_FALSE(index.Remove(next_id + 5)) << what;
      }
      if (step % 97 == 0) ExpectSame(index, m, tubes, next_id, what);
      if (HasFatalFailure()) return;
    }
    // Drained in order, tube by tube.
    for (int i = 0; i < tubes; i++) {
      Entry a, b;
      while (m.First(TubeNo(i), &b)) {
        ASSERT_TRUE(index.TakeFirst(TubeNo(i), &a));
        EXPECT_EQ(a, b);
        m.Remove(b.id);
      }
      EXPECT_FALSE(index.TakeFirst(TubeNo(i), &a));
    }
    EXPECT_EQ(index.size(), 0u);
  }
}

// Removals by id in a long deque leave slots behind; they are dropped once they outnumber
// the live ones, so the deque stays within twice the jobs (and the memory with it).
TEST(ColdBuriedIndexTest, SlotsLeftBehindAreCompacted) {
  ColdBuriedIndex index;
  const uint64_t n = 100000;
  for (uint64_t id = 1; id <= n; id++) index.Add({id, id, 0, TubeNo(0)});
  const size_t full = index.bytes();
  for (uint64_t id = 1; id <= n; id += 4) {
    for (uint64_t k = id; k < id + 3; k++) EXPECT_TRUE(index.Remove(k));
  }
  EXPECT_EQ(index.Count(TubeNo(0)), n / 4);
  EXPECT_LT(index.bytes(), full * 3 / 4);
  uint64_t expect = 4;
  Entry e;
  while (index.TakeFirst(TubeNo(0), &e)) {
    EXPECT_EQ(e.id, expect);
    expect += 4;
  }
  EXPECT_EQ(expect, n + 4);
}

// glibc's heap only: a sanitizer's allocator does not report to mallinfo2.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kGlibcHeap = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kGlibcHeap = false;
#else
constexpr bool kGlibcHeap = true;
#endif
#else
constexpr bool kGlibcHeap = true;
#endif

// What a buried job on disk costs in memory, measured by the allocator (mallinfo2) and as
// the index reports it: 200,000 jobs over 10 tubes, each tube's newest demoted first (at its
// deque's front), as the tier sends them.
TEST(ColdBuriedIndexTest, BytesPerJob) {
  const uint64_t n = 200000;
  const size_t before = mallinfo2().uordblks;
  {
    ColdBuriedIndex index;
    for (uint64_t k = 0; k < n; k++) {
      const uint64_t id = n - k;  // newest first
      index.Add({id, id, static_cast<Nanos>(id) * 1000, TubeNo(static_cast<int>(id % 10))});
    }
    const size_t used = mallinfo2().uordblks - before;
    EXPECT_EQ(index.bytes(), index.BytesByWalk());
    EXPECT_LE(index.bytes(), n * 36);
    if (!kGlibcHeap) return;
    printf("bytes per buried job on disk: %.1f measured (mallinfo2), %.1f by bytes()\n",
           static_cast<double>(used) / static_cast<double>(n),
           static_cast<double>(index.bytes()) / static_cast<double>(n));
    EXPECT_LE(used, n * 40);
    // bytes() is an estimate of the same: within a quarter of it.
    EXPECT_LE(index.bytes(), used + used / 4);
    EXPECT_GE(index.bytes() + index.bytes() / 4, used);
  }
}

}  // namespace
}  // namespace stalkd::storage
