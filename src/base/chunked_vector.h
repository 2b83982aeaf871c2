#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "base/check.h"

namespace stalkd {

// A growable array whose elements are never moved once it holds more than one chunk:
// indexing is O(1) (chunk table, then chunk), the first chunk starts small and doubles up to
// kChunk elements (every tube and session has heaps, most of them tiny), and beyond that
// fixed-size chunks are added. A plain std::vector of millions of entries copies all of them
// each time it doubles, which stalled the server for 100+ ms at 2^22 and 2^23 ready jobs;
// here at most one chunk (4096 elements: 32 KiB of pointers, 64 KiB of keyed heap entries) is
// ever copied. For trivially copyable T.
//
// bytes() is what the vector holds from the allocator. A counter given at construction
// follows it exactly: each allocation adds its bytes as it happens and each free subtracts
// them, so a counter shared by many vectors holds the sum of their bytes() at all times.
template <typename T, size_t kChunkBits = 12>
class ChunkedVector {
  static_assert(std::is_trivially_copyable_v<T>);
  static constexpr size_t kChunk = size_t{1} << kChunkBits;
  static constexpr size_t kMask = kChunk - 1;

 public:
  ChunkedVector() = default;
  // `counter` must outlive the vector.
  explicit ChunkedVector(size_t* counter) : counter_(counter) {}
  ChunkedVector(const ChunkedVector&) = delete;
  ChunkedVector& operator=(const ChunkedVector&) = delete;
  ~ChunkedVector() {
    for (uint32_t c = 0; c < chunk_count_; c++) Free(chunks_[c], ChunkCapacity(c));
    Free(chunks_, table_capacity_);
  }

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
    if (size_ == capacity()) Grow();
    chunks_[size_ >> kChunkBits][size_ & kMask] = x;
    size_++;
  }

  void pop_back() {
    STALKD_DCHECK(size_ > 0);
    size_--;
    // Keep one spare chunk (and always the first, as a std::vector keeps its capacity), so
    // push/pop at a boundary does not allocate every time.
    size_t used = (size_ >> kChunkBits) + 1;
    if (chunk_count_ > used + 1) {
      chunk_count_--;
      Free(chunks_[chunk_count_], kChunk);
    }
  }

  // The bytes held from the allocator: the element storage (the first chunk's capacity, then
  // whole chunks, the spare one included) and the chunk table (its capacity in pointers).
  // Neither the vector object itself nor the allocator's own overhead.
  size_t bytes() const { return capacity() * sizeof(T) + table_capacity_ * sizeof(T*); }
  // How much bytes() grows by if push_back is called now: 0 while there is room.
  size_t push_growth() const {
    if (size_ < capacity()) return 0;
    size_t table = NeedsTableSlot() ? (NextTableCapacity() - table_capacity_) * sizeof(T*) : 0;
    size_t elements = size_ < kChunk ? NextFirstCapacity() - first_capacity_ : kChunk;
    return elements * sizeof(T) + table;
  }

 private:
  size_t capacity() const {
    return chunk_count_ == 0 ? 0 : first_capacity_ + (chunk_count_ - 1) * kChunk;
  }
  size_t ChunkCapacity(uint32_t c) const { return c == 0 ? first_capacity_ : kChunk; }
  uint32_t NextFirstCapacity() const {
    uint32_t cap = first_capacity_ ? first_capacity_ * 2 : 4;
    return cap > kChunk ? static_cast<uint32_t>(kChunk) : cap;
  }
  uint32_t NextTableCapacity() const { return table_capacity_ ? table_capacity_ * 2 : 1; }
  // Whether growing now adds a chunk (the first one, or one past the first), and the table
  // is full.
  bool NeedsTableSlot() const {
    return (chunk_count_ == 0 || size_ >= kChunk) && chunk_count_ == table_capacity_;
  }

  // Called when full: doubles the first chunk while it is below kChunk, else adds a chunk.
  void Grow() {
    if (NeedsTableSlot()) {
      uint32_t cap = NextTableCapacity();
      T** table = Allocate<T*>(cap);
      if (chunk_count_) std::memcpy(table, chunks_, chunk_count_ * sizeof(T*));
      Free(chunks_, table_capacity_);
      chunks_ = table;
      table_capacity_ = cap;
    }
    if (size_ >= kChunk) {
      chunks_[chunk_count_] = Allocate<T>(kChunk);
      chunk_count_++;
      return;
    }
    uint32_t cap = NextFirstCapacity();
    T* bigger = Allocate<T>(cap);
    if (chunk_count_ == 0) {
      chunk_count_ = 1;
    } else {
      if (size_) std::memcpy(bigger, chunks_[0], size_ * sizeof(T));
      Free(chunks_[0], first_capacity_);
    }
    chunks_[0] = bigger;
    first_capacity_ = cap;
  }

  // Every allocation and free of the vector goes through these two, which keep the counter.
  template <typename U>
  U* Allocate(size_t n) {
    U* p = new U[n]();
    if (counter_) *counter_ += n * sizeof(U);
    return p;
  }
  template <typename U>
  void Free(U* p, size_t n) {
    delete[] p;
    if (counter_) *counter_ -= n * sizeof(U);
  }

  T** chunks_ = nullptr;       // the chunk table: table_capacity_ slots, chunk_count_ used
  size_t* counter_ = nullptr;  // see the class comment; may be null
  // 32 bits each (heap slots are 32-bit too): every tube and session holds these.
  uint32_t table_capacity_ = 0;
  uint32_t chunk_count_ = 0;
  uint32_t first_capacity_ = 0;
  uint32_t size_ = 0;
};

}  // namespace stalkd
