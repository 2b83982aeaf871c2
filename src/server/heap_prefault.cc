#include "server/heap_prefault.h"

#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

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

HeapPrefaulter::HeapPrefaulter() {
#if defined(__GLIBC__) && !defined(STALKD_FOREIGN_MALLOC)
  enabled_ = CanPopulate();
#endif
  if (!enabled_) return;
  last_brk_ = Break();
  // Signals go to the loop's signalfd (Server::HandleSignals blocks them in the thread that
  // runs the loop, later): this thread must never take one.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  thread_ = std::thread([this] { Run(); });
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
  if (brk > last_brk_) {
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

void HeapPrefaulter::Run() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [this] { return stop_ || from_ != to_; });
    if (stop_) return;
    // A step at a time: the loop's next brk waits for the step in progress (it holds the
    // address space's lock for reading), never for the whole range.
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
    lk.lock();
    if (ok) populated_ += b - a;
  }
}

}  // namespace stalkd::server
