#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

namespace stalkd {

// A map from ids (job ids) to values of T, like IdMap (pages of kSlots consecutive ids,
// found through a hash map of the pages), but a page keeps only its present entries, in id
// order, found by the rank of their presence bit: an id costs sizeof(T) (and a bit) however
// sparse the ids of a page are, where IdMap's page costs kSlots * sizeof(T) for one id.
// Lookup is O(1) (a hash lookup and a few popcounts); insert and erase move up to kSlots
// entries within one page. A pointer to an entry lasts until the next insert or erase.
template <typename T, int kPageBits = 8>
class SparseIdMap {
 public:
  static constexpr uint64_t kSlots = uint64_t{1} << kPageBits;

  SparseIdMap() = default;
  SparseIdMap(const SparseIdMap&) = delete;
  SparseIdMap& operator=(const SparseIdMap&) = delete;

  T* Find(uint64_t id) {
    auto it = pages_.find(id >> kPageBits);
    if (it == pages_.end()) return nullptr;
    Page& p = it->second;
    const uint64_t s = id & kMask;
    return p.Has(s) ? &p.entries[p.Rank(s)] : nullptr;
  }
  const T* Find(uint64_t id) const { return const_cast<SparseIdMap*>(this)->Find(id); }

  // Inserts (id, value) unless id is present; returns its entry and whether it was inserted.
  std::pair<T*, bool> Emplace(uint64_t id, const T& value) {
    auto [it, made] = pages_.try_emplace(id >> kPageBits);
    if (made) bytes_ += kPageBytes;
    Page& p = it->second;
    const uint64_t s = id & kMask;
    const size_t at = p.Rank(s);
    if (p.Has(s)) return {&p.entries[at], false};
    if (p.entries.size() == p.entries.capacity()) {  // grow by a quarter, up to a full page
      const size_t capacity = p.entries.capacity();
      p.entries.reserve(std::min<size_t>(kSlots, capacity + capacity / 4 + 4));
      bytes_ += (p.entries.capacity() - capacity) * sizeof(T);
    }
    p.entries.insert(p.entries.begin() + static_cast<ptrdiff_t>(at), value);
    p.present[s / 64] |= uint64_t{1} << (s % 64);
    size_++;
    lo_ = std::min(lo_, id);
    hi_ = std::max(hi_, id);
    return {&p.entries[at], true};
  }

  // Removes id if present; returns whether it was.
  bool Erase(uint64_t id) {
    auto it = pages_.find(id >> kPageBits);
    const uint64_t s = id & kMask;
    if (it == pages_.end() || !it->second.Has(s)) return false;
    Page& p = it->second;
    p.entries.erase(p.entries.begin() + static_cast<ptrdiff_t>(p.Rank(s)));
    p.present[s / 64] &= ~(uint64_t{1} << (s % 64));
    size_--;
    if (size_ == 0) {
      lo_ = UINT64_MAX;
      hi_ = 0;
    } else if ((id == lo_ || id == hi_) && !p.entries.empty()) {  // the next one in its page
      const uint64_t base = id & ~kMask;
      if (id == lo_) lo_ = base | p.First();
      if (id == hi_) hi_ = base | p.Last();
    }
    if (p.entries.empty()) {
      bytes_ -= kPageBytes + p.entries.capacity() * sizeof(T);
      pages_.erase(it);
    } else if (p.entries.capacity() >= 16 && p.entries.size() < p.entries.capacity() / 2) {
      const size_t capacity = p.entries.capacity();  // a drained page gives its room back
      p.entries.shrink_to_fit();
      bytes_ -= (capacity - p.entries.capacity()) * sizeof(T);
    }
    return true;
  }

  size_t size() const { return size_; }
  // Bounds of the ids present: none is below lo() or above hi() (lo() > hi() if none). Exact
  // but after an erase that empties the page of the lowest or highest id: then they stay
  // where they were (until the map is empty).
  uint64_t lo() const { return lo_; }
  uint64_t hi() const { return hi_; }
  // Memory held: the entries' capacity, the pages (presence bits, a hash node and the
  // allocations' headers) and the page map's buckets. O(1).
  size_t bytes() const { return bytes_ + pages_.bucket_count() * sizeof(void*); }
  // The same, summed over the pages (tests).
  size_t BytesByWalk() const {
    size_t n = pages_.bucket_count() * sizeof(void*);
    for (const auto& [page, p] : pages_) n += kPageBytes + p.entries.capacity() * sizeof(T);
    return n;
  }

  // fn(id, const T&) for every entry with from <= id < below, in id order: one page lookup
  // per kSlots ids of the range, present or not.
  template <typename Fn>
  void ForRange(uint64_t from, uint64_t below, Fn fn) const {
    if (from >= below) return;
    for (uint64_t page = from >> kPageBits; page <= (below - 1) >> kPageBits; page++) {
      auto it = pages_.find(page);
      if (it == pages_.end()) continue;
      const Page& p = it->second;
      const uint64_t first = page == from >> kPageBits ? (from & kMask) : 0;
      const uint64_t last = page == (below - 1) >> kPageBits ? ((below - 1) & kMask) : kMask;
      size_t i = p.Rank(first);
      for (uint64_t s = first; s <= last; s++) {
        if (p.Has(s)) fn((page << kPageBits) | s, p.entries[i++]);
      }
    }
  }
  // fn(id, T&) for every entry, in no particular order.
  template <typename Fn>
  void ForEach(Fn fn) {
    for (auto& [page, p] : pages_) {
      size_t i = 0;
      for (uint64_t s = 0; s < kSlots; s++) {
        if (p.Has(s)) fn((page << kPageBits) | s, p.entries[i++]);
      }
    }
  }

 private:
  static constexpr uint64_t kMask = kSlots - 1;
  struct Page {
    uint64_t present[kSlots / 64] = {};
    std::vector<T> entries;  // of the present slots, in slot order
    bool Has(uint64_t s) const { return (present[s / 64] >> (s % 64)) & 1; }
    // How many present slots come before s.
    size_t Rank(uint64_t s) const {
      size_t n = 0;
      for (uint64_t w = 0; w < s / 64; w++) n += static_cast<size_t>(std::popcount(present[w]));
      const uint64_t below = (uint64_t{1} << (s % 64)) - 1;
      return n + static_cast<size_t>(std::popcount(present[s / 64] & below));
    }
    // The first and last present slots (the page has one).
    uint64_t First() const {
      uint64_t w = 0;
      while (present[w] == 0) w++;
      return w * 64 + static_cast<uint64_t>(std::countr_zero(present[w]));
    }
    uint64_t Last() const {
      uint64_t w = kSlots / 64 - 1;
      while (present[w] == 0) w--;
      return w * 64 + 63 - static_cast<uint64_t>(std::countl_zero(present[w]));
    }
  };
  static_assert(kSlots >= 64, "a page's presence bits come in words of 64");
  // A hash node (next, key, Page) and the headers of it and of the entries' allocation.
  static constexpr size_t kPageBytes = sizeof(void*) + sizeof(uint64_t) + sizeof(Page) + 24;

  std::unordered_map<uint64_t, Page> pages_;
  size_t size_ = 0;
  size_t bytes_ = 0;                   // entries' capacity and kPageBytes a page
  uint64_t lo_ = UINT64_MAX, hi_ = 0;  // lo() and hi()
};

}  // namespace stalkd
