#include "base/id_map.h"

#include <cstdint>
#include <map>
#include <random>

#include <gtest/gtest.h>

namespace stalkd {
namespace {

struct Meta {
  uint32_t a;
  int64_t b;
};

TEST(IdMapTest, InsertFindEraseAcrossPages) {
  IdMap<Meta, 6> m;  // pages of 64 ids
  EXPECT_EQ(m.Find(1), nullptr);
  for (uint64_t id = 1; id <= 1000; id++) {
    auto [p, fresh] = m.Emplace(id, Meta{static_cast<uint32_t>(id), -static_cast<int64_t>(id)});
    ASSERT_TRUE(fresh);
    ASSERT_EQ(p->a, id);
  }
  EXPECT_EQ(m.size(), 1000u);
  auto [again, fresh] = m.Emplace(7, Meta{0, 0});
  EXPECT_FALSE(fresh);
  EXPECT_EQ(again->a, 7u);  // kept
  m.Find(7)->a = 70;
  EXPECT_EQ(m.Find(7)->a, 70u);
  EXPECT_TRUE(m.Erase(7));
  EXPECT_FALSE(m.Erase(7));
  EXPECT_EQ(m.Find(7), nullptr);
  EXPECT_EQ(m.Find(0), nullptr);
  EXPECT_EQ(m.Find(1001), nullptr);
  EXPECT_EQ(m.size(), 999u);
  size_t seen = 0;
  m.ForEach([&](uint64_t id, Meta& x) {
    EXPECT_EQ(x.b, -static_cast<int64_t>(id));
    seen++;
  });
  EXPECT_EQ(seen, 999u);
}

TEST(IdMapTest, MatchesAMapUnderRandomOperations) {
  IdMap<Meta, 6> m;
  std::map<uint64_t, int64_t> want;
  std::mt19937_64 rng(5);
  uint64_t next = 1;
  for (int i = 0; i < 200000; i++) {
    uint64_t r = rng() % 10;
    if (r < 5) {
      uint64_t id = next++;
      m.Emplace(id, Meta{0, static_cast<int64_t>(rng())});
      want[id] = m.Find(id)->b;
    } else if (!want.empty()) {
      // Erase an old or a recent id (either end of the window, or anywhere).
      uint64_t id = r < 8 ? want.begin()->first : 1 + rng() % next;
      EXPECT_EQ(m.Erase(id), want.erase(id) == 1);
    }
    if (i % 1000 == 0) {
      ASSERT_EQ(m.size(), want.size());
      for (const auto& [id, b] : want) ASSERT_EQ(m.Find(id)->b, b);
    }
  }
}

}  // namespace
}  // namespace stalkd
