#include "server/heap_prefault.h"

#include <unistd.h>

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
  for (size_t i = 0; i < kBlocks; i++) {
    auto* b = static_cast<unsigned char*>(malloc(kBlock));
    ASSERT_NE(b, nullptr);
    memset(b, static_cast<int>(i & 0xff), kBlock);
    blocks.push_back(b);
    used += kBlock;
    if (i % 100 == 0) p.Note(used);
  }
  for (size_t i = 0; i < kBlocks; i++) {
    unsigned char want = static_cast<unsigned char>(i & 0xff);
    ASSERT_EQ(blocks[i][0], want) << i;
    ASSERT_EQ(blocks[i][kBlock - 1], want) << i;
  }
  // The thread works on its own time; give it a moment before asking.
  for (int i = 0; i < 200 && p.populated_bytes() == 0; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (p.enabled()) {
    EXPECT_GT(p.populated_bytes(), 0u);
  }
  for (unsigned char* b : blocks) free(b);
  p.Note(0);
}

}  // namespace
}  // namespace stalkd::server
