// The disk tier's index against a plain model (a map of entries), under random operations.
#include "storage/cold_index.h"

#include <algorithm>
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

TEST(ColdIndexTest, MatchesAModelUnderRandomOperations) {
  for (uint32_t seed = 1; seed <= 20; seed++) {
    std::mt19937_64 rng(seed);
    ColdIndex index;
    std::map<uint64_t, Entry> model;
    uint64_t next_id = 1;
    Nanos now = 0;
    auto rand = [&](uint64_t n) { return rng() % n; };
    for (int step = 0; step < 4000; step++) {
      switch (rand(8)) {
        case 0:
        case 1:
        case 2: {  // add: a deadline up to a minute ahead, often several in one bucket
          Entry e{next_id++, now + static_cast<Nanos>(rand(60 * kSecond)),
                  now - static_cast<Nanos>(rand(kSecond)), TubeNo(static_cast<int>(rand(4)))};
          index.Add(e);
          model[e.id] = e;
          break;
        }
        case 3: {  // remove an id (live or not)
          uint64_t id = 1 + rand(next_id);
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
          uint64_t id = 1 + rand(next_id - 1 + 1);
          if (id >= next_id || model.count(id)) break;
          Entry e{id, now + static_cast<Nanos>(rand(60 * kSecond)), now, TubeNo(0)};
          index.Add(e);
          model[id] = e;
          break;
        }
        case 5: {  // time passes; take what falls due within the lead
          now += static_cast<Nanos>(rand(3 * kSecond));
          const Nanos until = now + 2 * kSecond;
          const size_t max = 1 + rand(50);
          std::vector<Entry> out;
          bool more = index.TakeDue(until, max, &out);
          size_t due = 0;
          for (const auto& [id, e] : model) due += e.deadline < until ? 1 : 0;
          EXPECT_EQ(out.size(), std::min(due, max));
          EXPECT_EQ(more, due > max);
          for (const Entry& e : out) {
            ASSERT_EQ(model.count(e.id), 1u);
            EXPECT_EQ(e, model[e.id]);
            EXPECT_LT(e.deadline, until);
            model.erase(e.id);
          }
          break;
        }
        case 6: {  // a tube's earliest n, in order
          const engine::Tube* t = TubeNo(static_cast<int>(rand(4)));
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
          for (int i = 0; i < 4; i++) {
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
      for (uint64_t id = 1; id < next_id; id += 97) {
        EXPECT_EQ(index.Contains(id), model.count(id) != 0);
      }
    }
  }
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
