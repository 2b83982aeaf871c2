#pragma once

#include <cstddef>
#include <cstdint>

#include "base/check.h"
#include "base/chunked_vector.h"

namespace stalkd {

// Traits that keep a copy of each element's sort key in the heap itself (see IndexedHeap).
template <typename Traits>
concept KeyedHeapTraits = requires {
  typename Traits::Key;
};

namespace heap_detail {
struct NoKey {};
template <typename Traits>
struct KeyOf {
  using type = NoKey;
};
template <KeyedHeapTraits Traits>
struct KeyOf<Traits> {
  using type = typename Traits::Key;
};
}  // namespace heap_detail

// A 4-ary min-heap of pointers whose elements remember their own slot, so any element can be
// removed or re-sifted in O(log n) given only the pointer. `Traits` provides:
//   static bool Less(const T* a, const T* b);
//   static uint32_t& Slot(T* x);   // where the heap stores x's index
// and, for a heap large enough that reading the elements while sifting is what costs (a
// million delayed jobs, each comparison two cache misses), optionally a key kept beside each
// pointer, so sifting reads only the heap's own array:
//   using Key = ...;                               // trivially copyable
//   static Key KeyOf(const T* x);
//   static bool Less(Key ka, const T* a, Key kb, const T* b);  // may read a, b on a tie
// With a key, the caller must call Update(x) after x's key changes, as it must anyway.
// Four children per node halve the depth of a binary heap; their entries lie side by side.
template <typename T, typename Traits>
class IndexedHeap {
  using Key = typename heap_detail::KeyOf<Traits>::type;
  static constexpr bool kKeyed = KeyedHeapTraits<Traits>;
  static constexpr size_t kArity = 4;

  struct Entry {
    [[no_unique_address]] Key key;
    T* item;
  };
  static_assert(kKeyed || sizeof(Entry) == sizeof(T*), "an unkeyed heap holds bare pointers");

 public:
  IndexedHeap() = default;
  // Keeps *bytes_counter up to date with bytes() (see ChunkedVector); it must outlive the heap.
  explicit IndexedHeap(size_t* bytes_counter) : items_(bytes_counter) {}

  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  T* top() const { return items_.empty() ? nullptr : items_[0].item; }
  T* at(size_t i) const { return items_[i].item; }

  void Push(T* x) {
    items_.push_back(MakeEntry(x));
    SiftUp(items_.size() - 1);  // sets x's slot where it comes to rest
  }

  T* Pop() { return items_.empty() ? nullptr : Remove(items_[0].item); }

  // Removes x, which must be in this heap.
  T* Remove(T* x) {
    size_t k = Traits::Slot(x);
    STALKD_DCHECK(k < items_.size() && items_[k].item == x);
    Entry last = items_.back();
    items_.pop_back();
    if (k < items_.size()) {
      Place(k, last);
      Fix(k);
    }
    Traits::Slot(x) = kNoSlot;
    return x;
  }

  // Restores order after x's key changed.
  void Update(T* x) {
    size_t k = Traits::Slot(x);
    STALKD_DCHECK(k < items_.size() && items_[k].item == x);
    items_[k] = MakeEntry(x);
    Fix(k);
  }

  // The bytes of the heap's storage, and how much a Push now would add to them.
  size_t bytes() const { return items_.bytes(); }
  size_t push_growth() const { return items_.push_growth(); }

  bool Contains(const T* x) const {
    uint32_t k = Traits::Slot(const_cast<T*>(x));
    return k < items_.size() && items_[k].item == x;
  }

  // For invariant checks: every parent is not greater than its children, every slot is
  // right, and every kept key is the element's current key.
  bool IsHeap() const {
    for (size_t i = 0; i < items_.size(); i++) {
      const Entry& e = items_[i];
      if (i > 0 && Less(e, items_[(i - 1) / kArity])) return false;
      if (Traits::Slot(e.item) != i) return false;
      if constexpr (kKeyed) {
        if (Traits::Less(e.key, e.item, Traits::KeyOf(e.item), e.item) ||
            Traits::Less(Traits::KeyOf(e.item), e.item, e.key, e.item)) {
          return false;
        }
      }
    }
    return true;
  }

  static constexpr uint32_t kNoSlot = UINT32_MAX;

 private:
  static Entry MakeEntry(T* x) {
    if constexpr (kKeyed) {
      return Entry{Traits::KeyOf(x), x};
    } else {
      return Entry{{}, x};
    }
  }
  static bool Less(const Entry& a, const Entry& b) {
    if constexpr (kKeyed) {
      return Traits::Less(a.key, a.item, b.key, b.item);
    } else {
      return Traits::Less(a.item, b.item);
    }
  }
  void Place(size_t k, const Entry& e) {
    items_[k] = e;
    Traits::Slot(e.item) = static_cast<uint32_t>(k);
  }
  void Fix(size_t k) {
    if (k > 0 && Less(items_[k], items_[(k - 1) / kArity])) {
      SiftUp(k);
    } else {
      SiftDown(k);
    }
  }
  void SiftUp(size_t k) {
    Entry x = items_[k];
    while (k > 0) {
      size_t p = (k - 1) / kArity;
      if (!Less(x, items_[p])) break;
      Place(k, items_[p]);
      k = p;
    }
    Place(k, x);
  }
  void SiftDown(size_t k) {
    Entry x = items_[k];
    size_t n = items_.size();
    for (;;) {
      size_t first = kArity * k + 1;
      if (first >= n) break;
      size_t last = first + kArity < n ? first + kArity : n;
      size_t c = first;
      for (size_t i = first + 1; i < last; i++) {
        if (Less(items_[i], items_[c])) c = i;
      }
      if (!Less(items_[c], x)) break;
      Place(k, items_[c]);
      k = c;
    }
    Place(k, x);
  }

  ChunkedVector<Entry> items_;  // never relocated as it grows: no stall at millions of jobs
};

}  // namespace stalkd
