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
// A first touch of fresh memory costs 1-50 µs here (the hypervisor backs the page), and now
// and then many milliseconds: while 10,000,000 jobs were put, single loop iterations took
// 5-35 ms on the CPU, in page faults, and the slowest put and `stats` waited that long.
//
// The heap keeps a top pad (M_TOP_PAD) that grows with the job memory (1/128 of it, 1 to
// 32 MiB), so each brk reaches that far ahead; when the loop sees the break move up while
// the jobs' memory grows (Note), this thread populates the new part (MADV_POPULATE_WRITE:
// the pages are allocated as a write would, and nothing is written, so it cannot disturb
// what malloc puts there). The resident memory grows by at most the pad before the jobs use
// it; a heap grown by anything else (connections) is left to fault in as it is used.
//
// The thread must not make the loop wait. MADV_POPULATE_WRITE holds the address space's lock
// for reading while it faults a range in, and the kernel may preempt it there (at the
// cond_resched between pages); the loop's next brk needs that lock for writing, so it waits
// until the thread has had a CPU again: up to 190 ms when other processes kept both CPUs busy.
// So the thread works in small steps (kStep) and only while it gets a CPU at once: before and
// after each step it reads how long it has waited for one so far (its run delay, from
// /proc/thread-self/schedstat); after a wait of kMaxRunDelayNs or more (woken late, or
// preempted in a step) it takes no step for kBackOffFactor times that wait (at most
// kMaxBackOffNs) and leaves the heap's growth meanwhile to the loop's own page faults.
// Preemption cannot be foreseen, so a step that starts just before the machine fills up can
// still make one brk wait; the back-off keeps that from repeating while the machine stays
// busy. Where the run delay cannot be read, the prefaulter is off, and so it is where the loop
// may run on one CPU only: there the thread could only ever run in the loop's place, holding
// it off the CPU for a scheduler slice at a time (stalkd pinned with taskset, run beside a
// pinned load generator: the loop was switched out to the thread for up to 141 ms).
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
  static constexpr size_t kStep = size_t{64} << 10;        // one madvise call
  static constexpr int64_t kMaxRunDelayNs = 1'000'000;     // a wait for a CPU that stops the work
  static constexpr int64_t kBackOffFactor = 10;            // for 10 times as long as it waited,
  static constexpr int64_t kMaxBackOffNs = 1'000'000'000;  // at most 1 s
  // How long the thread stays away after waiting waited_ns for a CPU (0: it does not).
  static int64_t BackOffNs(int64_t waited_ns);
  // Whether it works here (glibc's malloc, no sanitizer, Linux 5.14 or later, the run delay
  // readable: /proc/thread-self/schedstat, Linux 3.17 or later with CONFIG_SCHED_INFO) and
  // can help: the constructing thread (the loop's, which the prefaulter's inherits) may run
  // on more than one CPU.
  bool enabled() const { return enabled_; }
  // How many CPUs the calling thread may run on (0 if unknown: more than 1024, say).
  static int CpusAllowed();
  // Pages faulted in by the thread so far, and how often it backed off (for tests).
  uint64_t populated_bytes() const;
  uint64_t back_offs() const;

 private:
  void StartThread();
  void Run(int schedstat_fd);

  bool enabled_ = false;
  size_t pad_ = 0;          // the top pad set
  uintptr_t last_brk_ = 0;  // the break at the last Note (0: none yet)
  size_t last_used_ = 0;    // the jobs' memory at the last Note

  mutable std::mutex mu_;
  std::condition_variable cv_;
  uintptr_t from_ = 0, to_ = 0;  // to populate; from_ == to_: nothing
  bool stop_ = false;
  uint64_t populated_ = 0;
  uint64_t back_offs_ = 0;
  std::thread thread_;
};

}  // namespace stalkd::server
