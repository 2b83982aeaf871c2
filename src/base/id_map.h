#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>

namespace stalkd {

// A map from ids that are handed out in increasing order (job ids) to values of T, kept in
// pages of kSlots consecutive ids, found through a hash map of the pages. Lookup, insert
// and erase are O(1), and growing never moves all entries at once: a std::unordered_map
// of millions of entries rehashes them all in one call (780 ms at 8.8 million), while this
// one's page map holds one entry per kSlots ids (35,000 at 8.8 million). Dense ids cost
// sizeof(T) each plus a bit; a page is freed when its last entry goes, so an id that stays
// while the ids around it go costs a page (kSlots * sizeof(T)) until it goes too.
template <typename T, int kPageBits = 8>
class IdMap {
 public:
  static constexpr uint64_t kSlots = uint64_t{1} << kPageBits;

  IdMap() = default;
  IdMap(const IdMap&) = delete;
  IdMap& operator=(const IdMap&) = delete;

  T* Find(uint64_t id) {
    auto it = pages_.find(id >> kPageBits);
    if (it == pages_.end() || !it->second->Has(id & kMask)) return nullptr;
    return &it->second->slots[id & kMask];
  }
  const T* Find(uint64_t id) const { return const_cast<IdMap*>(this)->Find(id); }

  // Inserts (id, value) unless id is present; returns its entry and whether it was inserted.
  std::pair<T*, bool> Emplace(uint64_t id, const T& value) {
    std::unique_ptr<Page>& p = pages_[id >> kPageBits];
    if (!p) p = std::make_unique<Page>();
    const uint64_t s = id & kMask;
    if (p->Has(s)) return {&p->slots[s], false};
    p->present[s / 64] |= uint64_t{1} << (s % 64);
    p->live++;
    p->slots[s] = value;
    size_++;
    return {&p->slots[s], true};
  }

  // Removes id if present; returns whether it was.
  bool Erase(uint64_t id) {
    auto it = pages_.find(id >> kPageBits);
    const uint64_t s = id & kMask;
    if (it == pages_.end() || !it->second->Has(s)) return false;
    it->second->present[s / 64] &= ~(uint64_t{1} << (s % 64));
    size_--;
    if (--it->second->live == 0) pages_.erase(it);
    return true;
  }

  size_t size() const { return size_; }
  // Room for n more ids handed out in order.
  void Reserve(size_t n) { pages_.reserve(pages_.size() + n / kSlots + 1); }

  // fn(id, T&) for every entry, in no particular order.
  template <typename Fn>
  void ForEach(Fn fn) {
    for (auto& [page, p] : pages_) {
      for (uint64_t s = 0; s < kSlots; s++) {
        if (p->Has(s)) fn((page << kPageBits) | s, p->slots[s]);
      }
    }
  }

 private:
  static constexpr uint64_t kMask = kSlots - 1;
  struct Page {
    uint32_t live = 0;
    uint64_t present[kSlots / 64] = {};
    T slots[kSlots] = {};
    bool Has(uint64_t s) const { return (present[s / 64] >> (s % 64)) & 1; }
  };
  static_assert(kSlots >= 64, "a page's presence bits come in words of 64");

  std::unordered_map<uint64_t, std::unique_ptr<Page>> pages_;
  size_t size_ = 0;
};

}  // namespace stalkd
