#include "server/heap_prefault.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace stalkd::server {
namespace {

// The heap grows while the thread faults in what it grows into: every allocation keeps what
// was written to it, and the thread did fault pages in.
TEST(HeapPrefaulterTest, FaultsInTheHeapsGrowthAndDisturbsNothing) {
  HeapPrefaulter p;
  constexpr size_t kBlock = 150;
  constexpr size_t kBlocks = 400'000;  // 60 MB, past several top pads
  std::vector<unsigned char*> blocks;
  blocks.reserve(kBlocks);
  size_t used = 0;
  auto grow = [&](size_t n) {
    for (size_t i = 0; i < n; i++) {
      auto* b = static_cast<unsigned char*>(malloc(kBlock));
      ASSERT_NE(b, nullptr);
      memset(b, static_cast<int>(blocks.size() & 0xff), kBlock);
      blocks.push_back(b);
      used += kBlock;
      if (i % 100 == 0) p.Note(used);
    }
  };
  grow(kBlocks);
  // The thread works on its own time, and stays away for a while when it had to wait for a
  // CPU (a busy machine): keep growing the heap a little until it has faulted some in.
  for (int i = 0; i < 500 && p.enabled() && p.populated_bytes() == 0; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    grow(1000);
  }
  for (size_t i = 0; i < blocks.size(); i++) {
    unsigned char want = static_cast<unsigned char>(i & 0xff);
    ASSERT_EQ(blocks[i][0], want) << i;
    ASSERT_EQ(blocks[i][kBlock - 1], want) << i;
  }
  if (p.enabled()) {
    EXPECT_GT(p.populated_bytes(), 0u);
  }
  for (unsigned char* b : blocks) free(b);
  p.Note(0);
}

// A heap grown while the jobs' memory stays the same (connections opening) is not faulted
// in ahead of its use: only the growth made while the jobs' memory grew is.
TEST(HeapPrefaulterTest, FaultsInOnlyWhatTheJobsGrow) {
  HeapPrefaulter p;
  if (!p.enabled()) GTEST_SKIP() << "no prefaulter here";
  constexpr size_t kBlock = 200;
  std::vector<void*> blocks;
  auto grow = [&](size_t n, size_t* used) {
    for (size_t i = 0; i < n; i++) {
      void* b = malloc(kBlock);
      ASSERT_NE(b, nullptr);
      memset(b, 1, kBlock);
      blocks.push_back(b);
      if (used) *used += kBlock;
      if (i % 100 == 0) p.Note(used ? *used : 0);
    }
  };
  // 20 MB without the jobs growing: nothing to populate.
  grow(100'000, nullptr);
  p.Note(0);
  auto brk0 = reinterpret_cast<uintptr_t>(sbrk(0));
  // Then the jobs grow, until the thread has populated some of it (it may back off on a
  // busy machine: keep growing until it has worked).
  size_t used = 0;
  for (int i = 0; i < 1500 && p.populated_bytes() == 0; i++) {
    grow(1000, &used);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GT(p.populated_bytes(), 0u);
  // Everything populated lies above the break the connections' growth left.
  auto brk1 = reinterpret_cast<uintptr_t>(sbrk(0));
  EXPECT_LE(p.populated_bytes(), brk1 - brk0 + 4096);
  for (void* b : blocks) free(b);
  p.Note(0);
}

// A wait for a CPU under the limit changes nothing; a longer one keeps the thread away for ten
// times as long, at most a second.
TEST(HeapPrefaulterTest, BacksOffForTenTimesALongWaitForACpu) {
  EXPECT_EQ(HeapPrefaulter::BackOffNs(0), 0);
  EXPECT_EQ(HeapPrefaulter::BackOffNs(HeapPrefaulter::kMaxRunDelayNs - 1), 0);
  EXPECT_EQ(HeapPrefaulter::BackOffNs(HeapPrefaulter::kMaxRunDelayNs),
            10 * HeapPrefaulter::kMaxRunDelayNs);
  EXPECT_EQ(HeapPrefaulter::BackOffNs(20'000'000), 200'000'000);
  EXPECT_EQ(HeapPrefaulter::BackOffNs(5'000'000'000), HeapPrefaulter::kMaxBackOffNs);
}

// Constructed on a thread that may run on one CPU only (as the loop of a stalkd started with
// taskset -c N), it is off: its thread could only run in the loop's place. Its heap growth is
// then not faulted in ahead, and nothing else changes.
TEST(HeapPrefaulterTest, IsOffOnASingleCpu) {
  int allowed = -1;
  bool enabled = true;
  uint64_t populated = 1;
  std::thread pinned([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    int cpu = sched_getcpu();
    CPU_SET(cpu < 0 ? 0 : cpu, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) return;
    allowed = HeapPrefaulter::CpusAllowed();
    HeapPrefaulter p;
    enabled = p.enabled();
    std::vector<void*> blocks;
    size_t used = 0;
    p.Note(used);
    for (int i = 0; i < 20'000; i++) {
      blocks.push_back(malloc(150));
      used += 150;
      if (i % 1000 == 0) p.Note(used);
    }
    populated = p.populated_bytes();
    for (void* b : blocks) free(b);
  });
  pinned.join();
  ASSERT_EQ(allowed, 1) << "could not pin a thread to one CPU";
  EXPECT_FALSE(enabled);
  EXPECT_EQ(populated, 0u);
}

// With every CPU kept busy by twice as many spinning threads, the thread is made to wait for a
// CPU and backs off, and the heap's contents are still intact.
TEST(HeapPrefaulterTest, BacksOffWhileTheCpusAreBusy) {
  HeapPrefaulter p;
  if (!p.enabled()) GTEST_SKIP() << "no prefaulter here";
  std::atomic<bool> stop{false};
  std::vector<std::thread> spinners;
  unsigned n = 2 * std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 0; i < n; i++) {
    spinners.emplace_back([&stop] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  }
  constexpr size_t kBlock = 150;
  std::vector<unsigned char*> blocks;
  size_t used = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  // Until it has backed off (or 5 s), 2 MB at a time, each block filled by the "loop".
  while (p.back_offs() == 0 && std::chrono::steady_clock::now() < deadline) {
    for (int i = 0; i < 14'000; i++) {
      auto* b = static_cast<unsigned char*>(malloc(kBlock));
      ASSERT_NE(b, nullptr);
      memset(b, static_cast<int>(blocks.size() & 0xff), kBlock);
      blocks.push_back(b);
      used += kBlock;
    }
    p.Note(used);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  stop = true;
  for (auto& t : spinners) t.join();
  EXPECT_GT(p.back_offs(), 0u);
  for (size_t i = 0; i < blocks.size(); i++) {
    ASSERT_EQ(blocks[i][kBlock - 1], static_cast<unsigned char>(i & 0xff)) << i;
  }
  for (unsigned char* b : blocks) free(b);
  p.Note(0);
}

}  // namespace
}  // namespace stalkd::server
