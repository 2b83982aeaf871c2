// The disk tier's index of ready jobs against a plain model (a sorted set per tube), under
// random operations: adds in every order, removes by id, takes of each tube's first.
#include "storage/cold_ready_index.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

namespace stalkd::storage {
namespace {

using Entry = ColdReadyIndex::Entry;
using Key = ColdReadyIndex::Key;

const engine::Tube* TubeNo(int i) { return reinterpret_cast<const engine::Tube*>(0x1000 + 16 * i); }

struct Model {
  std::map<uint64_t, Entry> by_id;
  std::map<const engine::Tube*, std::set<std::pair<uint32_t, uint64_t>>> order;

  void Add(const Entry& e) {
    by_id[e.id] = e;
    order[e.tube].insert({e.pri, e.id});
  }
  void Remove(uint64_t id) {
    const Entry e = by_id.at(id);
    by_id.erase(id);
    order[e.tube].erase({e.pri, e.id});
    if (order[e.tube].empty()) order.erase(e.tube);
  }
  size_t Urgent(const engine::Tube* t) const {
    size_t n = 0;
    for (const auto& [id, e] : by_id) n += (t == nullptr || e.tube == t) && e.pri < 1024;
    return n;
  }
};

TEST(ColdReadyIndexTest, KeyOrderIsPriorityThenId) {
  EXPECT_LT(Key::Of(1, 99), Key::Of(2, 1));
  EXPECT_LT(Key::Of(5, 1), Key::Of(5, 2));
  EXPECT_LT(Key::Of(5, 0xFFFFFFFFu), Key::Of(5, 0x100000000u));  // the id's high half counts
  EXPECT_EQ(Key::Of(7, 0x123456789ABull).id(), 0x123456789ABull);
  EXPECT_EQ(sizeof(Key), 12u);
}

TEST(ColdReadyIndexTest, MatchesAModelUnderRandomOperations) {
  // Seeds above 3: ids from just below 2^32, now and then jumping by 2^32 (keys whose ids
  // differ in their high half, between equal priorities and others).
  for (uint32_t seed = 1; seed <= 5; seed++) {
    std::mt19937_64 rng(seed);
    auto rand = [&](uint64_t n) { return rng() % n; };
    ColdReadyIndex index;
    Model model;
    const uint64_t first_id = seed <= 3 ? 1 : (uint64_t{1} << 32) - 3000;
    uint64_t next_id = first_id;
    // Few priorities (equal ones, so ids decide), some urgent, some near the top.
    const uint32_t pris[] = {0, 1, 1023, 1024, 1024, 5000, 0xFFFFFFFFu};
    for (int step = 0; step < 5000; step++) {
      const engine::Tube* t = TubeNo(static_cast<int>(rand(3)));
      switch (rand(7)) {
        case 0:
        case 1:
        case 2: {  // add a new job; sometimes a run of them (a demotion round)
          const size_t n = rand(4) == 0 ? 1 + rand(1200) : 1;
          for (size_t i = 0; i < n; i++) {
            Entry e{next_id++, pris[rand(7)], static_cast<Nanos>(rand(1000000)), t};
            if (seed > 3 && rand(300) == 0) next_id += uint64_t{1} << 32;
            index.Add(e);
            model.Add(e);
          }
          break;
        }
        case 3: {  // remove an id, there or not (delete, peek of a job on disk)
          uint64_t id = first_id + rand(next_id - first_id + 1);
          auto near = model.by_id.lower_bound(id);
          if (near != model.by_id.end() && rand(2) == 0) id = near->first;
          Entry got;
          const bool had = model.by_id.count(id) != 0;
          ASSERT_EQ(index.Remove(id, &got), had);
          if (had) {
            EXPECT_EQ(got, model.by_id.at(id));
            model.Remove(id);
          }
          break;
        }
        case 4: {  // re-add a removed id (a job demoted again)
          if (next_id == first_id) break;
          const uint64_t id = first_id + rand(next_id - first_id);
          if (model.by_id.count(id)) break;
          Entry e{id, pris[rand(7)], 5, t};
          index.Add(e);
          model.Add(e);
          break;
        }
        case 5: {  // take a tube's first ones (reserves)
          const size_t n = 1 + rand(700);
          for (size_t i = 0; i < n; i++) {
            Entry got;
            auto it = model.order.find(t);
            if (it == model.order.end()) {
              ASSERT_FALSE(index.TakeFirst(t, &got));
              break;
            }
            const uint64_t want = it->second.begin()->second;
            ASSERT_TRUE(index.TakeFirst(t, &got));
            ASSERT_EQ(got, model.by_id.at(want));
            model.Remove(want);
          }
          break;
        }
        default:
          break;
      }
      // Every step: sizes, memory, counts, urgent counts and each tube's first.
      ASSERT_EQ(index.size(), model.by_id.size());
      ASSERT_EQ(index.bytes(), index.BytesByWalk());
      for (int i = 0; i < 3; i++) {
        const engine::Tube* u = TubeNo(i);
        auto it = model.order.find(u);
        Key first{};
        ASSERT_EQ(index.First(u, &first), it != model.order.end());
        ASSERT_EQ(index.Count(u), it == model.order.end() ? 0 : it->second.size());
        if (it != model.order.end()) {
          ASSERT_EQ(first.pri, it->second.begin()->first);
          ASSERT_EQ(first.id(), it->second.begin()->second);
        }
        if (step % 97 == 0) {
          ASSERT_EQ(index.Urgent(u), model.Urgent(u));
        }
      }
      if (step % 97 == 0) {
        ASSERT_EQ(index.urgent(), model.Urgent(nullptr));
      }
      if (step % 1000 == 0) {
        for (const auto& [id, e] : model.by_id) ASSERT_TRUE(index.Contains(id));
      }
    }
    // Drain: every tube's jobs come out in (pri, id) order.
    for (int i = 0; i < 3; i++) {
      const engine::Tube* u = TubeNo(i);
      Entry got;
      std::pair<uint32_t, uint64_t> last{0, 0};
      while (index.TakeFirst(u, &got)) {
        ASSERT_LE(last, std::make_pair(got.pri, got.id));
        last = {got.pri, got.id};
        model.Remove(got.id);
      }
    }
    EXPECT_EQ(index.size(), 0u);
    EXPECT_TRUE(model.by_id.empty());
  }
}

// A large backlog costs a few dozen bytes a job, and a drained one gives its room back.
TEST(ColdReadyIndexTest, BytesPerJobAreBoundedAndFreedWhenDrained) {
  ColdReadyIndex index;
  const engine::Tube* t = TubeNo(0);
  const size_t n = 200000;
  for (uint64_t id = 1; id <= n; id++) index.Add({id, static_cast<uint32_t>(id % 3), 0, t});
  EXPECT_LE(index.bytes(), n * 32);
  EXPECT_EQ(index.bytes(), index.BytesByWalk());
  for (uint64_t id = 1; id <= n - 10; id++) {
    Entry e;
    ASSERT_TRUE(index.TakeFirst(t, &e));
  }
  EXPECT_LE(index.bytes(), 64u * 1024);
  EXPECT_EQ(index.bytes(), index.BytesByWalk());
}

// A chunk's keys share the high half of their ids: keys whose ids differ there, between
// others (priorities interleaving ids below and above 2^32, added in random order), cut
// chunks in two and get chunks of their own; the order, removals and memory stay right.
TEST(ColdReadyIndexTest, KeysAcrossTheHighHalfOfIds) {
  for (uint32_t seed = 1; seed <= 3; seed++) {
    std::mt19937_64 rng(seed);
    ColdReadyIndex index;
    std::set<std::pair<uint32_t, uint64_t>> model;
    std::vector<Entry> all;
    for (uint64_t i = 0; i < 3000; i++) {
      const uint64_t hi = rng() % 3;  // 0, 2^32, 2^33
      all.push_back({(hi << 32) + 1 + i, static_cast<uint32_t>(rng() % 40), 0, TubeNo(0)});
    }
    std::shuffle(all.begin(), all.end(), rng);
    for (size_t i = 0; i < all.size(); i++) {
      index.Add(all[i]);
      model.insert({all[i].pri, all[i].id});
      if (i % 7 == 0) {  // and some go again
        const Entry& gone = all[rng() % (i + 1)];
        if (model.erase({gone.pri, gone.id})) {
          ASSERT_TRUE(index.Remove(gone.id));
        }
      }
      Key first{};
      ASSERT_EQ(index.First(TubeNo(0), &first), !model.empty());
      if (!model.empty()) {
        ASSERT_EQ(std::make_pair(first.pri, first.id()), *model.begin());
      }
      ASSERT_EQ(index.bytes(), index.BytesByWalk());
    }
    for (const auto& [pri, id] : model) {
      Entry e;
      ASSERT_TRUE(index.TakeFirst(TubeNo(0), &e));
      ASSERT_EQ(std::make_pair(e.pri, e.id), std::make_pair(pri, id));
    }
    EXPECT_EQ(index.size(), 0u);
    EXPECT_EQ(index.bytes(), index.BytesByWalk());
  }
}

// Tubes get two-byte numbers, given back with their last job and reused; past 65,535 tubes
// at once, a job's tube is kept aside.
TEST(ColdReadyIndexTest, TubeNumbersAreReusedAndOverflowKeepsTubes) {
  ColdReadyIndex index;
  const int n = 70000;
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < n; i++) {
      const auto id = static_cast<uint64_t>(i + 1);
      index.Add({id, static_cast<uint32_t>(i % 2000), Nanos(i) * kSecond, TubeNo(i)});
      index.Add({id + 1000000, 7, 3, TubeNo(i)});
    }
    EXPECT_EQ(index.bytes(), index.BytesByWalk());
    for (int i = 0; i < n; i += 1111) {
      EXPECT_EQ(index.Count(TubeNo(i)), 2u);
      EXPECT_EQ(index.Urgent(TubeNo(i)), i % 2000 < 1024 ? 2u : 1u);
    }
    for (int i = 0; i < n; i++) {
      const auto id = static_cast<uint64_t>(i + 1);
      Entry e;
      ASSERT_TRUE(index.TakeFirst(TubeNo(i), &e));
      const auto pri = static_cast<uint32_t>(i % 2000);
      EXPECT_EQ(e, pri <= 7 ? (Entry{id, pri, Nanos(i) * kSecond, TubeNo(i)})
                            : (Entry{id + 1000000, 7, 3, TubeNo(i)}));
      ASSERT_TRUE(index.Remove(e.id == id ? id + 1000000 : id, &e));
      EXPECT_EQ(e.tube, TubeNo(i));
    }
    EXPECT_EQ(index.size(), 0u);
    EXPECT_EQ(index.urgent(), 0u);
  }
}

}  // namespace
}  // namespace stalkd::storage
