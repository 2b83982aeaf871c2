#include "base/small_vector.h"

#include <algorithm>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace stalkd {
namespace {

TEST(SmallVector, OnePointerInlineIsSixteenBytes) { EXPECT_EQ(sizeof(SmallVector<int*, 1>), 16u); }

TEST(SmallVector, MatchesAVectorInlineAndOnTheHeap) {
  SmallVector<int, 2> s;
  std::vector<int> ref;
  std::mt19937 rnd(11);
  for (int step = 0; step < 5000; step++) {
    // Mostly short, sometimes long, so both the inline and the heap storage are exercised.
    if (ref.empty() || (rnd() % 3 != 0 && ref.size() < 40)) {
      int x = static_cast<int>(rnd());
      s.push_back(x);
      ref.push_back(x);
    } else if (rnd() % 50 == 0) {
      s.clear();
      ref.clear();
    } else {
      s.pop_back();
      ref.pop_back();
    }
    ASSERT_EQ(s.size(), ref.size());
    ASSERT_EQ(s.empty(), ref.empty());
    ASSERT_TRUE(std::equal(s.begin(), s.end(), ref.begin(), ref.end()));
    if (!ref.empty()) {
      size_t i = rnd() % ref.size();
      s[i] = ref[i] = static_cast<int>(rnd());
      ASSERT_EQ(s.back(), ref.back());
    }
  }
}

TEST(SmallVector, ClearKeepsTheHeapBlock) {
  SmallVector<int, 1> s;
  for (int i = 0; i < 5; i++) s.push_back(i);
  const int* block = s.data();
  s.clear();
  EXPECT_TRUE(s.empty());
  s.push_back(7);
  EXPECT_EQ(s.data(), block);
  EXPECT_EQ(s[0], 7);
}

}  // namespace
}  // namespace stalkd
