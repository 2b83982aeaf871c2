#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "base/check.h"

namespace stalkd {

// A growable array that holds its first N elements inside the object: no heap block until
// it grows beyond N. 16 bytes for one pointer (every session watches at least one tube, and
// almost always exactly one). Like std::vector, clear() keeps the capacity. For trivial T.
template <typename T, uint32_t N>
class SmallVector {
  static_assert(std::is_trivial_v<T> && N > 0);

 public:
  SmallVector() = default;
  ~SmallVector() {
    if (on_heap()) delete[] heap_;
  }
  SmallVector(const SmallVector&) = delete;
  SmallVector& operator=(const SmallVector&) = delete;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return on_heap() ? heap_ : inline_; }
  const T* data() const { return on_heap() ? heap_ : inline_; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }

  T& operator[](size_t i) {
    STALKD_DCHECK(i < size_);
    return data()[i];
  }
  const T& operator[](size_t i) const {
    STALKD_DCHECK(i < size_);
    return data()[i];
  }
  T& back() { return (*this)[size_ - 1]; }

  void push_back(const T& x) {
    if (size_ == capacity_) Grow();
    data()[size_++] = x;
  }
  void pop_back() {
    STALKD_DCHECK(size_ > 0);
    size_--;
  }
  void clear() { size_ = 0; }

 private:
  bool on_heap() const { return capacity_ > N; }

  void Grow() {
    STALKD_CHECK(capacity_ <= UINT32_MAX / 2);
    uint32_t cap = std::max<uint32_t>(capacity_ * 2, 4);
    T* bigger = new T[cap];
    std::memcpy(bigger, data(), size_ * sizeof(T));
    if (on_heap()) delete[] heap_;
    heap_ = bigger;
    capacity_ = cap;
  }

  union {
    T inline_[N];  // while capacity_ == N
    T* heap_;      // once grown
  };
  uint32_t size_ = 0;
  uint32_t capacity_ = N;
};

}  // namespace stalkd
