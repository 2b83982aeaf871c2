#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>

namespace stalkd::server {

// Faults in the pages that the malloc heap grows into, from a thread of its own, before the
// loop touches them. Jobs, the id table's pages and the heaps' chunks come from glibc's main
// heap, which grows with brk; the loop used to take every page fault of that growth itself.
// A first touch of fresh memory costs 1-5 µs, and now and then (the hypervisor backing a
// page, the kernel finding one) many milliseconds: while 10,000,000 jobs were put, single
// loop iterations took 5-35 ms on the CPU, in page faults, and the slowest put and `stats`
// waited that long.
//
// The heap keeps a top pad (M_TOP_PAD) that grows with the job memory (1/128 of it, 1 to
// 32 MiB), so each brk reaches that far ahead; when the loop sees the break move up
// (Note), this thread populates the new part (MADV_POPULATE_WRITE: the pages are allocated
// as a write would, and nothing is written, so it cannot disturb what malloc puts there).
// The resident memory grows by at most the pad before the jobs use it.
//
// Setting M_TOP_PAD freezes glibc's dynamic mmap threshold, so it is set to the dynamic
// scheme's ceiling (32 MiB, which a server that has freed large buffers reaches anyway).
class HeapPrefaulter {
 public:
  HeapPrefaulter();
  ~HeapPrefaulter();
  HeapPrefaulter(const HeapPrefaulter&) = delete;
  HeapPrefaulter& operator=(const HeapPrefaulter&) = delete;

  // Called by the loop once per iteration with the memory the jobs hold.
  void Note(size_t memory_used);

  static constexpr size_t kMinPad = size_t{1} << 20;
  static constexpr size_t kMaxPad = size_t{32} << 20;
  static constexpr size_t kStep = size_t{256} << 10;  // one madvise call
  // Whether it works here (glibc's malloc, no sanitizer, Linux 5.14 or later).
  bool enabled() const { return enabled_; }
  // Pages faulted in by the thread so far (for tests).
  uint64_t populated_bytes() const;

 private:
  void Run();

  bool enabled_ = false;
  size_t pad_ = 0;          // the top pad set
  uintptr_t last_brk_ = 0;  // the break at the last Note

  mutable std::mutex mu_;
  std::condition_variable cv_;
  uintptr_t from_ = 0, to_ = 0;  // to populate; from_ == to_: nothing
  bool stop_ = false;
  uint64_t populated_ = 0;
  std::thread thread_;
};

}  // namespace stalkd::server
