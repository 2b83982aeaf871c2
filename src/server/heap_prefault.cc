#include "server/heap_prefault.h"

#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

namespace stalkd::server {

namespace {

constexpr uintptr_t kPage = 4096;
// glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit systems: where its dynamic threshold ends.
constexpr int kMmapThreshold = 32 << 20;

uintptr_t Break() { return reinterpret_cast<uintptr_t>(sbrk(0)); }

// Whether the kernel knows MADV_POPULATE_WRITE (5.14 and later).
[[maybe_unused]] bool CanPopulate() {  // unused under a sanitizer (below)
  void* p = mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  bool ok = madvise(p, kPage, MADV_POPULATE_WRITE) == 0;
  munmap(p, kPage);
  return ok;
}

constexpr const char* kSchedStat = "/proc/thread-self/schedstat";

// How long the thread that opened fd (kSchedStat) has waited for a CPU so far, in ns: the
// second field ("on the CPU, waiting for it, time slices"); -1 if it cannot be read.
int64_t RunDelay(int fd) {
  char buf[96];
  ssize_t n = fd < 0 ? -1 : pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return -1;
  buf[n] = 0;
  unsigned long long on_cpu = 0, waited = 0;
  if (sscanf(buf, "%llu %llu", &on_cpu, &waited) != 2) return -1;
  return static_cast<int64_t>(waited);
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// glibc's heap only: a sanitizer's allocator takes its memory elsewhere.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define STALKD_FOREIGN_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define STALKD_FOREIGN_MALLOC 1
#endif
#endif

int HeapPrefaulter::CpusAllowed() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  return CPU_COUNT(&set);
}

HeapPrefaulter::HeapPrefaulter() {
#if defined(__GLIBC__) && !defined(STALKD_FOREIGN_MALLOC)
  // On a single CPU (stalkd pinned with taskset, a container of one CPU) the thread could only
  // ever run in the loop's place: each step would hold the loop off the CPU for a scheduler
  // slice, and a step preempted holding the address space's lock would make the loop's next
  // brk wait for its return (141 ms at worst in 3,000,000 pinned puts, where the loop taking
  // its own faults cost 2-3 us a page). The loop faults its pages in itself there.
  enabled_ = CpusAllowed() != 1 && CanPopulate();  // unknown (0): as if more than one
#endif
  if (enabled_) {  // the thread opens its own; this checks that the kernel has the file
    int fd = open(kSchedStat, O_RDONLY | O_CLOEXEC);
    enabled_ = RunDelay(fd) >= 0;
    if (fd >= 0) close(fd);
  }
}

// The thread starts at the heap's first growth after the loop's first Note, not with the
// server: a server whose heap does not grow needs none, and at start-up a new thread
// competes with the loop for a CPU before the first reply (docs/PERFORMANCE.md, "Start-up").
void HeapPrefaulter::StartThread() {
  // Signals go to the loop's signalfd (Server::HandleSignals blocks them in the thread that
  // runs the loop): this thread must never take one.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  thread_ = std::thread([this] {
    int fd = open(kSchedStat, O_RDONLY | O_CLOEXEC);
    Run(fd);
    if (fd >= 0) close(fd);
  });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

HeapPrefaulter::~HeapPrefaulter() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void HeapPrefaulter::Note(size_t memory_used) {
  if (!enabled_) return;
  size_t pad = (memory_used / 128 + kMinPad - 1) / kMinPad * kMinPad;
  pad = std::clamp(pad, kMinPad, kMaxPad);
  if (pad != pad_) {
    if (pad_ == 0) mallopt(M_MMAP_THRESHOLD, kMmapThreshold);
    mallopt(M_TOP_PAD, static_cast<int>(pad));
    pad_ = pad;
  }
  uintptr_t brk = Break();
  // Only growth the jobs made: a heap grown by other things (10,000 connections opening)
  // gets no pad of populated pages ahead of it, which would count in the resident memory
  // with nothing in it.
  bool jobs_grew = memory_used > last_used_;
  last_used_ = memory_used;
  if (last_brk_ == 0) {  // the first Note: growth is counted from here
    last_brk_ = brk;
    return;
  }
  if (brk > last_brk_ && jobs_grew) {
    if (!thread_.joinable()) StartThread();
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (from_ == to_) from_ = last_brk_;
      to_ = brk;
    }
    cv_.notify_one();
  }
  last_brk_ = brk;
}

uint64_t HeapPrefaulter::populated_bytes() const {
  std::lock_guard<std::mutex> lk(mu_);
  return populated_;
}

uint64_t HeapPrefaulter::back_offs() const {
  std::lock_guard<std::mutex> lk(mu_);
  return back_offs_;
}

int64_t HeapPrefaulter::BackOffNs(int64_t waited_ns) {
  if (waited_ns < kMaxRunDelayNs) return 0;
  return std::min(waited_ns * kBackOffFactor, kMaxBackOffNs);
}

void HeapPrefaulter::Run(int schedstat_fd) {
  int64_t seen = RunDelay(schedstat_fd);  // the run delay at the last look
  int64_t resume = 0;                     // no steps before this time (ns) after a back-off
  // After a wait for a CPU: no steps for a while (the loop faults that part of the heap in
  // itself). Unknown counts as a long wait.
  auto after_look = [&](int64_t delay) {
    int64_t off = delay < 0 || seen < 0 ? kMaxBackOffNs : BackOffNs(delay - seen);
    seen = delay;
    if (off == 0) return;
    back_offs_++;
    resume = std::max(resume, NowNs() + off);
  };
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [this] { return stop_ || from_ != to_; });
    if (stop_) return;
    // Look before each step: the wait after a wake-up (or between steps) says whether the
    // machine has a CPU to spare now.
    lk.unlock();
    int64_t delay = RunDelay(schedstat_fd);
    lk.lock();
    after_look(delay);
    if (NowNs() < resume) {
      from_ = to_;
      continue;
    }
    // A small step at a time: the loop's next brk waits for the step in progress.
    uintptr_t a = from_ & ~(kPage - 1);
    uintptr_t end = to_ & ~(kPage - 1);
    if (end <= a) {
      from_ = to_;
      continue;
    }
    uintptr_t b = std::min(end, a + kStep);
    from_ = b == end ? to_ : b;
    lk.unlock();
    // Fails harmlessly (ENOMEM) if the heap was trimmed meanwhile.
    bool ok = madvise(reinterpret_cast<void*>(a), b - a, MADV_POPULATE_WRITE) == 0;
    delay = RunDelay(schedstat_fd);  // and after it: was it preempted, holding the lock?
    lk.lock();
    after_look(delay);
    if (ok) populated_ += b - a;
  }
}

}  // namespace stalkd::server
