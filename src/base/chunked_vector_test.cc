#include "base/chunked_vector.h"

#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace stalkd {
namespace {

TEST(ChunkedVector, MatchesAVectorAcrossChunkBoundaries) {
  ChunkedVector<int, 4> c;  // chunks of 16, so boundaries are crossed often
  std::vector<int> ref;
  std::mt19937 rnd(7);
  for (int step = 0; step < 20000; step++) {
    if (ref.empty() || rnd() % 3 != 0) {
      int x = static_cast<int>(rnd());
      c.push_back(x);
      ref.push_back(x);
    } else {
      c.pop_back();
      ref.pop_back();
    }
    ASSERT_EQ(c.size(), ref.size());
    if (!ref.empty()) {
      size_t i = rnd() % ref.size();
      ASSERT_EQ(c[i], ref[i]);
      c[i] = ref[i] = static_cast<int>(rnd());
      ASSERT_EQ(c.back(), ref.back());
    }
  }
  for (size_t i = 0; i < ref.size(); i++) ASSERT_EQ(c[i], ref[i]);
}

TEST(ChunkedVector, ElementsNeverMoveOnceBeyondTheFirstChunk) {
  ChunkedVector<long, 4> c;
  for (long i = 0; i < 16; i++) c.push_back(i);
  c.push_back(16);
  long* p = &c[16];
  for (long i = 17; i < 1000; i++) c.push_back(i);
  EXPECT_EQ(p, &c[16]);
  EXPECT_EQ(*p, 16);
}

TEST(ChunkedVector, EmptiesCompletely) {
  ChunkedVector<int, 4> c;
  for (int i = 0; i < 100; i++) c.push_back(i);
  while (!c.empty()) c.pop_back();
  EXPECT_EQ(c.size(), 0u);
  c.push_back(5);
  EXPECT_EQ(c[0], 5);
}

// The bytes a ChunkedVector<long, 4> holds after n pushes and no pops, from the growth policy:
// the first chunk doubles from 4 to 16 elements, then chunks of 16 are added, and the chunk
// table doubles from 1 slot.
size_t BytesAfterPushes(size_t n) {
  if (n == 0) return 0;
  size_t first = 4;
  while (first < n && first < 16) first *= 2;
  size_t chunks = 1 + (n > 16 ? (n - 16 + 15) / 16 : 0);
  size_t table = 1;
  while (table < chunks) table *= 2;
  return (first + (chunks - 1) * 16) * sizeof(long) + table * sizeof(long*);
}

TEST(ChunkedVector, CounterFollowsEveryAllocationAndFree) {
  size_t counter = 0;
  {
    ChunkedVector<long, 4> c(&counter);
    EXPECT_EQ(counter, 0u);
    for (long i = 0; i < 200; i++) {  // 12 chunks and a half
      size_t growth = c.push_growth();
      size_t before = counter;
      c.push_back(i);
      ASSERT_EQ(counter, BytesAfterPushes(static_cast<size_t>(i) + 1)) << i;
      ASSERT_EQ(counter, before + growth) << i;
      ASSERT_EQ(counter, c.bytes());
    }
    EXPECT_EQ(counter, (16 + 12 * 16) * sizeof(long) + 16 * sizeof(long*));
    // Shrinking frees all but one spare chunk past the one in use; the table stays.
    for (int i = 0; i < 200 - 40; i++) c.pop_back();
    // 40 elements use 3 chunks; a fourth is kept spare.
    EXPECT_EQ(counter, (16 + 3 * 16) * sizeof(long) + 16 * sizeof(long*));
    while (!c.empty()) c.pop_back();
    EXPECT_EQ(counter, (16 + 16) * sizeof(long) + 16 * sizeof(long*));  // first and spare
    EXPECT_EQ(counter, c.bytes());
    EXPECT_EQ(c.push_growth(), 0u);
  }
  EXPECT_EQ(counter, 0u);
}

TEST(ChunkedVector, CounterIsSharedAndMatchesRandomOps) {
  size_t counter = 0;
  {
    ChunkedVector<int, 4> a(&counter);
    ChunkedVector<int, 4> b(&counter);
    std::mt19937 rnd(11);
    for (int step = 0; step < 20000; step++) {
      ChunkedVector<int, 4>& c = rnd() % 2 ? a : b;
      if (c.empty() || rnd() % 5 < 3) {
        size_t growth = c.push_growth();
        size_t before = counter;
        c.push_back(step);
        ASSERT_EQ(counter, before + growth);
      } else {
        c.pop_back();
      }
      ASSERT_EQ(counter, a.bytes() + b.bytes());
    }
    EXPECT_GT(a.size(), 16u * 4);  // several chunks were crossed
  }
  EXPECT_EQ(counter, 0u);
}

TEST(ChunkedVector, HoldsNothingUntilTheFirstPush) {
  size_t counter = 0;
  ChunkedVector<long, 4> c(&counter);
  EXPECT_EQ(c.bytes(), 0u);
  EXPECT_EQ(c.push_growth(), 4 * sizeof(long) + sizeof(long*));
}

}  // namespace
}  // namespace stalkd
