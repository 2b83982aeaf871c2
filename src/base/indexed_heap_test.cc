#include "base/indexed_heap.h"

#include <memory>
#include <random>
#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace stalkd {
namespace {

struct Item {
  int key;
  int id;
  uint32_t slot = UINT32_MAX;
};

struct ItemOrder {
  static bool Less(const Item* a, const Item* b) {
    return a->key != b->key ? a->key < b->key : a->id < b->id;
  }
  static uint32_t& Slot(Item* x) { return x->slot; }
};

// The same order, with the key kept in the heap.
struct KeyedItemOrder {
  using Key = int;
  static Key KeyOf(const Item* x) { return x->key; }
  static bool Less(int ka, const Item* a, int kb, const Item* b) {
    return ka != kb ? ka < kb : a->id < b->id;
  }
  static bool Less(const Item* a, const Item* b) { return ItemOrder::Less(a, b); }
  static uint32_t& Slot(Item* x) { return x->slot; }
};

using Heap = IndexedHeap<Item, ItemOrder>;
using KeyedHeap = IndexedHeap<Item, KeyedItemOrder>;

TEST(IndexedHeap, Empty) {
  Heap h;
  EXPECT_TRUE(h.empty());
  EXPECT_EQ(h.size(), 0u);
  EXPECT_EQ(h.top(), nullptr);
  EXPECT_EQ(h.Pop(), nullptr);
  EXPECT_TRUE(h.IsHeap());
}

TEST(IndexedHeap, PushPopInOrder) {
  Heap h;
  std::vector<Item> items = {{5, 0}, {3, 1}, {9, 2}, {3, 0}, {1, 4}, {7, 5}};
  for (Item& i : items) h.Push(&i);
  EXPECT_TRUE(h.IsHeap());
  std::vector<std::pair<int, int>> got;
  while (Item* x = h.Pop()) {
    EXPECT_EQ(x->slot, Heap::kNoSlot);
    EXPECT_FALSE(h.Contains(x));
    got.push_back({x->key, x->id});
  }
  EXPECT_EQ(got,
            (std::vector<std::pair<int, int>>{{1, 4}, {3, 0}, {3, 1}, {5, 0}, {7, 5}, {9, 2}}));
}

TEST(IndexedHeap, RemoveAndUpdate) {
  Heap h;
  std::vector<Item> items;
  for (int i = 0; i < 10; i++) items.push_back({i, i});
  for (Item& i : items) h.Push(&i);
  h.Remove(&items[0]);  // the top
  h.Remove(&items[9]);  // the last
  h.Remove(&items[4]);
  EXPECT_TRUE(h.IsHeap());
  EXPECT_EQ(h.size(), 7u);
  EXPECT_FALSE(h.Contains(&items[4]));
  EXPECT_TRUE(h.Contains(&items[5]));
  items[8].key = -1;
  h.Update(&items[8]);
  EXPECT_EQ(h.top(), &items[8]);
  items[8].key = 100;
  h.Update(&items[8]);
  EXPECT_EQ(h.top(), &items[1]);
  EXPECT_TRUE(h.IsHeap());
  // Removing the only element.
  Heap one;
  Item x{1, 1};
  one.Push(&x);
  one.Remove(&x);
  EXPECT_TRUE(one.empty());
  EXPECT_FALSE(one.Contains(&x));
}

TEST(IndexedHeap, KeyedHeapKeepsTheKeyUntilUpdate) {
  KeyedHeap h;
  std::vector<Item> items;
  for (int i = 0; i < 10; i++) items.push_back({i, i});
  for (Item& i : items) h.Push(&i);
  EXPECT_TRUE(h.IsHeap());
  items[7].key = -1;  // changed behind the heap's back: its copy is stale
  EXPECT_FALSE(h.IsHeap());
  EXPECT_EQ(h.top(), &items[0]);
  h.Update(&items[7]);
  EXPECT_TRUE(h.IsHeap());
  EXPECT_EQ(h.top(), &items[7]);
}

// A counter given to the heap follows its storage: 16-byte entries with a key, 8 without.
TEST(IndexedHeap, CountsItsStorage) {
  size_t counter = 0;
  std::vector<Item> items(10000);
  for (int i = 0; i < 10000; i++) items[i] = {i % 97, i};
  {
    KeyedHeap keyed(&counter);
    Heap plain(&counter);
    for (int i = 0; i < 10000; i++) {
      size_t growth = keyed.push_growth();
      size_t before = counter;
      keyed.Push(&items[i]);
      ASSERT_EQ(counter, before + growth);
    }
    // 10000 entries: the first chunk of 4096, two more chunks, a table of 4 slots.
    EXPECT_EQ(counter, 3 * 4096 * 16 + 4 * sizeof(void*));
    EXPECT_EQ(counter, keyed.bytes());
    while (keyed.Pop()) {
    }
    EXPECT_EQ(counter, 2 * 4096 * 16 + 4 * sizeof(void*));  // the first chunk and a spare
    for (int i = 0; i < 5; i++) plain.Push(&items[i]);      // a first chunk of 8 pointers
    EXPECT_EQ(counter, keyed.bytes() + 8 * 8 + sizeof(void*));
  }
  EXPECT_EQ(counter, 0u);
}

// Random pushes, pops, removes and key changes against a std::set reference, with `pool`
// items (more than a ChunkedVector chunk exercises entries across chunk boundaries).
template <typename H>
void RandomOpsMatchReference(int pool_size, int steps) {
  std::mt19937 rng(42);
  std::vector<std::unique_ptr<Item>> pool;
  for (int i = 0; i < pool_size; i++) pool.push_back(std::make_unique<Item>(Item{0, i}));
  auto cmp = [](const Item* a, const Item* b) { return ItemOrder::Less(a, b); };
  std::set<Item*, decltype(cmp)> ref(cmp);
  H h;
  for (int step = 0; step < steps; step++) {
    Item* x = pool[rng() % pool.size()].get();
    bool in = h.Contains(x);
    ASSERT_EQ(in, ref.count(x) == 1);
    switch (rng() % 5) {
      case 0:
      case 1:
        if (!in) {
          x->key = static_cast<int>(rng() % 50);
          h.Push(x);
          ref.insert(x);
        }
        break;
      case 2:
        if (in) {
          h.Remove(x);
          ref.erase(x);
        }
        break;
      case 3:
        if (in) {
          ref.erase(x);
          x->key = static_cast<int>(rng() % 50);
          h.Update(x);
          ref.insert(x);
        }
        break;
      case 4: {
        Item* top = h.Pop();
        if (ref.empty()) {
          ASSERT_EQ(top, nullptr);
        } else {
          ASSERT_EQ(top, *ref.begin());
          ref.erase(ref.begin());
        }
        break;
      }
    }
    ASSERT_EQ(h.size(), ref.size());
    ASSERT_EQ(h.top(), ref.empty() ? nullptr : *ref.begin());
    if (step % 1000 == 0) {
      ASSERT_TRUE(h.IsHeap());
    }
  }
  ASSERT_TRUE(h.IsHeap());
}

TEST(IndexedHeap, RandomOpsMatchReference) { RandomOpsMatchReference<Heap>(300, 60000); }
TEST(IndexedHeap, KeyedRandomOpsMatchReference) { RandomOpsMatchReference<KeyedHeap>(300, 60000); }
TEST(IndexedHeap, LargeRandomOpsMatchReference) { RandomOpsMatchReference<Heap>(20000, 200000); }
TEST(IndexedHeap, KeyedLargeRandomOpsMatchReference) {
  RandomOpsMatchReference<KeyedHeap>(20000, 200000);
}

}  // namespace
}  // namespace stalkd
