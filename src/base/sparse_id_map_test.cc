#include "base/sparse_id_map.h"

#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace stalkd {
namespace {

struct Meta {
  int64_t a;
  uint32_t b;
};

// Against a std::map under random inserts and erases, dense and sparse, across pages and
// past 2^32; its bytes kept as it changes.
TEST(SparseIdMapTest, MatchesAMapUnderRandomOperations) {
  for (uint32_t seed = 1; seed <= 4; seed++) {
    std::mt19937_64 rng(seed);
    SparseIdMap<Meta> m;
    std::map<uint64_t, Meta> model;
    const uint64_t base = seed % 2 ? 1 : (uint64_t{1} << 32) - 300;
    const uint64_t span = seed <= 2 ? 600 : 100000;  // dense pages, sparse ones
    for (int step = 0; step < 20000; step++) {
      const uint64_t id = base + rng() % span;
      if (rng() % 3 != 0) {
        const Meta v{static_cast<int64_t>(rng()), static_cast<uint32_t>(id)};
        auto [p, fresh] = m.Emplace(id, v);
        ASSERT_EQ(fresh, model.count(id) == 0);
        if (fresh) model[id] = v;
        ASSERT_EQ(p->a, model[id].a);
      } else {
        ASSERT_EQ(m.Erase(id), model.erase(id) == 1);
      }
      ASSERT_EQ(m.size(), model.size());
      // Bounds of the ids: never inside them, exact while the ends' pages hold an id.
      if (model.empty()) {
        ASSERT_GT(m.lo(), m.hi());
      } else {
        ASSERT_LE(m.lo(), model.begin()->first);
        ASSERT_GE(m.hi(), model.rbegin()->first);
        if (span == 600 && seed % 2) {
          ASSERT_EQ(m.lo(), model.begin()->first);  // page 0 never empties for long
        }
      }
      if (step % 97 == 0) {
        ASSERT_EQ(m.bytes(), m.BytesByWalk());
        for (uint64_t probe = base; probe < base + std::min<uint64_t>(span, 700); probe++) {
          const Meta* got = m.Find(probe);
          auto it = model.find(probe);
          ASSERT_EQ(got != nullptr, it != model.end());
          if (got) {
            ASSERT_EQ(got->a, it->second.a);
          }
        }
        // A range, within a page, across pages or empty: the model's ids in it, in order.
        const uint64_t from = base + rng() % span;
        const uint64_t below = from + rng() % (step % 2 ? 40 : 3000);
        std::vector<uint64_t> ids;
        m.ForRange(from, below, [&](uint64_t at, const Meta& v) {
          ASSERT_EQ(model.at(at).a, v.a);
          ids.push_back(at);
        });
        std::vector<uint64_t> want;
        for (auto it = model.lower_bound(from); it != model.end() && it->first < below; ++it) {
          want.push_back(it->first);
        }
        ASSERT_EQ(ids, want);
      }
    }
    size_t seen = 0;
    m.ForEach([&](uint64_t id, Meta& v) {
      ASSERT_EQ(model.at(id).a, v.a);
      seen++;
    });
    EXPECT_EQ(seen, model.size());
    for (const auto& [id, v] : model) ASSERT_TRUE(m.Erase(id));
    EXPECT_EQ(m.size(), 0u);
    EXPECT_GT(m.lo(), m.hi());
    EXPECT_EQ(m.bytes(), m.BytesByWalk());
  }
}

// One id in every page of 256 costs its entry and its page, not 256 entries.
TEST(SparseIdMapTest, SparseIdsCostTheirEntries) {
  SparseIdMap<Meta> m;
  for (uint64_t i = 0; i < 1000; i++) m.Emplace(i * 256 + 7, Meta{1, 2});
  EXPECT_LT(m.bytes(), 1000 * (sizeof(Meta) * 4 + 160));
  for (uint64_t i = 0; i < 1000; i++) ASSERT_NE(m.Find(i * 256 + 7), nullptr);
  EXPECT_EQ(m.Find(8), nullptr);
}

}  // namespace
}  // namespace stalkd
