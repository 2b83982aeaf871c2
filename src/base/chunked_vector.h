#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "base/check.h"

namespace stalkd {

// A growable array whose elements are never moved once it holds more than one chunk:
// indexing is O(1) (chunk table, then chunk), the first chunk starts small and doubles up to
// kChunk elements (every tube and session has heaps, most of them tiny), and beyond that
// fixed-size chunks are added. A plain std::vector of millions of entries copies all of them
// each time it doubles, which stalled the server for 100+ ms at 2^22 and 2^23 ready jobs;
// here at most one chunk (4096 elements: 32 KiB of pointers) is ever copied. For trivially copyable
// T.
template <typename T, size_t kChunkBits = 12>
class ChunkedVector {
  static_assert(std::is_trivially_copyable_v<T>);
  static constexpr size_t kChunk = size_t{1} << kChunkBits;
  static constexpr size_t kMask = kChunk - 1;

 public:
  ChunkedVector() = default;
  ChunkedVector(const ChunkedVector&) = delete;
  ChunkedVector& operator=(const ChunkedVector&) = delete;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  T& operator[](size_t i) {
    STALKD_DCHECK(i < size_);
    return chunks_[i >> kChunkBits][i & kMask];
  }
  const T& operator[](size_t i) const {
    STALKD_DCHECK(i < size_);
    return chunks_[i >> kChunkBits][i & kMask];
  }
  T& back() { return (*this)[size_ - 1]; }

  void push_back(const T& x) {
    STALKD_CHECK(size_ < UINT32_MAX);
    if (size_ < kChunk) {
      if (size_ == first_capacity_) GrowFirst();
    } else if ((size_ >> kChunkBits) == chunks_.size()) {
      chunks_.push_back(std::make_unique<T[]>(kChunk));
    }
    chunks_[size_ >> kChunkBits][size_ & kMask] = x;
    size_++;
  }

  void pop_back() {
    STALKD_DCHECK(size_ > 0);
    size_--;
    // Keep one spare chunk (and always the first, as a std::vector keeps its capacity), so
    // push/pop at a boundary does not allocate every time.
    size_t used = (size_ >> kChunkBits) + 1;
    if (chunks_.size() > used + 1) chunks_.pop_back();
  }

 private:
  void GrowFirst() {
    uint32_t cap = first_capacity_ ? first_capacity_ * 2 : 4;
    if (cap > kChunk) cap = static_cast<uint32_t>(kChunk);
    auto bigger = std::make_unique<T[]>(cap);
    if (size_) std::memcpy(bigger.get(), chunks_[0].get(), size_ * sizeof(T));
    if (chunks_.empty()) {
      chunks_.push_back(std::move(bigger));
    } else {
      chunks_[0] = std::move(bigger);
    }
    first_capacity_ = cap;
  }

  std::vector<std::unique_ptr<T[]>> chunks_;
  // 32 bits each (heap slots are 32-bit too): every tube and session holds these.
  uint32_t first_capacity_ = 0;
  uint32_t size_ = 0;
};

}  // namespace stalkd
