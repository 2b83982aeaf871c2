#pragma once

#include <cstddef>
#include <cstdint>

#include "base/check.h"
#include "base/chunked_vector.h"

namespace stalkd {

// A binary min-heap of pointers whose elements remember their own slot, so any element can be
// removed or re-sifted in O(log n) given only the pointer. `Traits` provides:
//   static bool Less(const T* a, const T* b);
//   static uint32_t& Slot(T* x);   // where the heap stores x's index
template <typename T, typename Traits>
class IndexedHeap {
 public:
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  T* top() const { return items_.empty() ? nullptr : items_[0]; }
  T* at(size_t i) const { return items_[i]; }

  void Push(T* x) {
    items_.push_back(x);
    Set(items_.size() - 1, x);
    SiftUp(items_.size() - 1);
  }

  T* Pop() { return items_.empty() ? nullptr : Remove(items_[0]); }

  // Removes x, which must be in this heap.
  T* Remove(T* x) {
    size_t k = Traits::Slot(x);
    STALKD_DCHECK(k < items_.size() && items_[k] == x);
    T* last = items_.back();
    items_.pop_back();
    if (k < items_.size()) {
      Set(k, last);
      Fix(k);
    }
    Traits::Slot(x) = kNoSlot;
    return x;
  }

  // Restores order after x's key changed.
  void Update(T* x) { Fix(Traits::Slot(x)); }

  bool Contains(const T* x) const {
    uint32_t k = Traits::Slot(const_cast<T*>(x));
    return k < items_.size() && items_[k] == x;
  }

  // For invariant checks: every parent is not greater than its children.
  bool IsHeap() const {
    for (size_t i = 1; i < items_.size(); i++) {
      if (Traits::Less(items_[i], items_[(i - 1) / 2])) return false;
      if (Traits::Slot(items_[i]) != i) return false;
    }
    return true;
  }

  static constexpr uint32_t kNoSlot = UINT32_MAX;

 private:
  void Set(size_t k, T* x) {
    items_[k] = x;
    Traits::Slot(x) = static_cast<uint32_t>(k);
  }
  void Fix(size_t k) {
    if (k > 0 && Traits::Less(items_[k], items_[(k - 1) / 2])) {
      SiftUp(k);
    } else {
      SiftDown(k);
    }
  }
  void SiftUp(size_t k) {
    T* x = items_[k];
    while (k > 0) {
      size_t p = (k - 1) / 2;
      if (!Traits::Less(x, items_[p])) break;
      Set(k, items_[p]);
      k = p;
    }
    Set(k, x);
  }
  void SiftDown(size_t k) {
    T* x = items_[k];
    size_t n = items_.size();
    for (;;) {
      size_t c = 2 * k + 1;
      if (c >= n) break;
      if (c + 1 < n && Traits::Less(items_[c + 1], items_[c])) c++;
      if (!Traits::Less(items_[c], x)) break;
      Set(k, items_[c]);
      k = c;
    }
    Set(k, x);
  }

  ChunkedVector<T*> items_;  // never relocated as it grows: no stall at millions of jobs
};

}  // namespace stalkd
