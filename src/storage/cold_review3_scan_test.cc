// Review: what TakeEarliest (peek-delayed, kick on delayed jobs) costs for a tube whose
// only job on disk shares a coarse bucket with a million of another tube's jobs.
#include <chrono>
#include <cstdio>
#include <vector>

#include <gtest/gtest.h>

#include "storage/cold_index.h"

namespace stalkd::storage {
namespace {

const engine::Tube* TubeNo(int i) { return reinterpret_cast<const engine::Tube*>(0x1000 + 16 * i); }

TEST(ColdReview3Scan, TakeEarliestOfATubeWithOneJobInACoarseBucket) {
  ColdIndex index;
  std::vector<ColdIndex::Entry> out;
  index.TakeDue(0, 1, &out);  // the horizon: now
  const Nanos day = 86400 * kSecond;
  // The coarse window (2^48 ns, 3.3 days) after 10 days.
  const Nanos start = ((10 * day) >> 48 << 48) + (Nanos{1} << 48);
  const size_t n = 1000000;
  for (size_t i = 0; i < n; i++) {
    const Nanos d =
        start + 1 + static_cast<Nanos>(i) * ((Nanos{1} << 48) / static_cast<Nanos>(n + 1));
    index.Add({i + 2, d, d - 3600 * kSecond, TubeNo(0)});
  }
  index.Add({1, start, start - 3600 * kSecond, TubeNo(1)});  // tube 1: due first of all
  const auto t0 = std::chrono::steady_clock::now();
  index.TakeEarliest(TubeNo(1), 1, &out);
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  ASSERT_EQ(out.size(), 1u);
  printf("TakeEarliest of 1 job among %zu in its bucket: %lld us\n", n, static_cast<long long>(us));
}

}  // namespace
}  // namespace stalkd::storage

namespace stalkd::storage {
namespace {

// Jobs released with a delay: created at their put, their deadline at the release plus the
// delay, so (deadline - created) has any nanoseconds: how many fit in 16 bytes?
TEST(ColdReview3Scan, BytesPerJobReleasedWithADelay) {
  ColdIndex index;
  std::vector<ColdIndex::Entry> out;
  index.TakeDue(0, 1, &out);
  const size_t n = 200000;
  uint64_t x = 12345;
  for (size_t i = 0; i < n; i++) {
    x = x * 6364136223846793005u + 1442695040888963407u;
    const Nanos put = static_cast<Nanos>(i) * 50000;                        // 20,000 puts a second
    const Nanos release = put + 5 * kSecond + static_cast<Nanos>(x >> 34);  // 0-1 s later
    const Nanos deadline = release + 3600 * kSecond;
    index.Add({i + 1, deadline, put, TubeNo(0)});
  }
  printf("released with a delay: %zu of %zu kept wide, %.1f bytes a job\n", index.wide(), n,
         static_cast<double>(index.bytes()) / static_cast<double>(n));
  EXPECT_LT(index.wide(), n / 10);
}

}  // namespace
}  // namespace stalkd::storage
