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

}  // namespace
}  // namespace stalkd
