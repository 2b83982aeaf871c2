// A segment is visible only once whole, and recovery drops what a process killed while
// making one left behind (docs/BINLOG.md, "Files"). The kills themselves, at random
// instants of real processes, are tests/blackbox/test_binlog_kill.py.

#include <string>

#include <gtest/gtest.h>

#include "storage/binlog.h"
#include "storage/binlog_test_util.h"
#include "storage/record.h"

namespace stalkd::storage {
namespace {

using testing_util::BinlogTest;
using testing_util::Instance;
using testing_util::ReadFile;
using testing_util::Segments;
using testing_util::WriteFile;

std::string Header() {
  std::string h;
  AppendSegmentHeader(&h);
  return h;
}

// Every binlog.N in dir starts with a header, and no binlog.N.tmp is there.
void ExpectOnlyWholeSegments(const std::string& dir) {
  for (const std::string& name : Segments(dir)) {
    EXPECT_EQ(name.find(".tmp"), std::string::npos) << name;
    EXPECT_EQ(ReadFile(dir + "/" + name).substr(0, kSegmentHeaderSize), Header()) << name;
  }
}

uint32_t NewestSeq(const std::string& dir) {
  uint32_t max = 0;
  for (const std::string& name : Segments(dir)) {
    max = std::max<uint32_t>(max, static_cast<uint32_t>(std::stoul(name.substr(7))));
  }
  return max;
}

TEST_F(BinlogTest, SegmentsAreMadeWholeBeforeTheyHaveTheirName) {
  Instance a(clock_, dir_, 4096);
  ASSERT_TRUE(a.ok) << a.error;
  for (int i = 0; i < 300; i++) ASSERT_TRUE(a.PutAndDelete(200));  // rotations, removals
  EXPECT_GT(a.store->stats().current_index, 10u);
  ExpectOnlyWholeSegments(dir_);
}

// The reported case: a first start killed after creating binlog.1 and before writing its
// header (an older stalkd preallocated first) left 10 MB of zeros, which the next start took
// for beanstalkd's format and refused.
TEST_F(BinlogTest, AZeroFilledFirstSegmentIsDroppedNotTakenForBeanstalkds) {
  WriteFile(dir_ + "/binlog.1", std::string(10485760, '\0'));
  Instance a(clock_, dir_, 4096);
  ASSERT_TRUE(a.ok) << a.error;
  EXPECT_EQ(a.Put("after"), 1u);
  a.Flush();
  ExpectOnlyWholeSegments(dir_);
}

// Beside segments with records: zeros, an empty file, the start of a header and a .tmp
// left by CreateSegmentFile hold no record and are removed; the jobs come back.
TEST_F(BinlogTest, FilesThatNeverGotTheirHeaderAreDropped) {
  {
    Instance a(clock_, dir_, 4096);
    ASSERT_TRUE(a.ok) << a.error;
    for (int i = 0; i < 40; i++) a.Put(std::string(100, 'a' + i % 26));
    a.Flush();
  }
  uint32_t n = NewestSeq(dir_);
  ASSERT_GT(n, 1u);
  auto path = [&](uint32_t seq) { return dir_ + "/binlog." + std::to_string(seq); };
  WriteFile(path(n + 1), std::string(4096, '\0'));
  WriteFile(path(n + 2), "");
  WriteFile(path(n + 3), Header().substr(0, 11));
  WriteFile(path(n + 4) + ".tmp", Header() + std::string(100, '\0'));
  Instance b(clock_, dir_, 4096);
  ASSERT_TRUE(b.ok) << b.error;
  EXPECT_EQ(b.store->restored(), 40u);
  ExpectOnlyWholeSegments(dir_);
  for (uint64_t id = 1; id <= 40; id++) ASSERT_NE(b.engine->Find(id), nullptr) << id;
  EXPECT_EQ(b.Put("more"), 41u);
}

// Zeros where the header belongs but data after them is damage, not a segment that never got
// its header (the header is written first, and synced with any record): start-up stops.
TEST_F(BinlogTest, AZeroHeaderBeforeDataStillStopsStartUp) {
  {
    Instance a(clock_, dir_, 4096);
    ASSERT_TRUE(a.ok) << a.error;
    a.Put("job");
    a.Flush();
  }
  std::string path = dir_ + "/binlog.1";  // the job's (binlog.2 is empty, made ahead)
  std::string data = ReadFile(path);
  ASSERT_GT(data.size(), kSegmentHeaderSize);
  data.replace(0, kSegmentHeaderSize, std::string(kSegmentHeaderSize, '\0'));
  WriteFile(path, data);
  Instance b(clock_, dir_, 4096);
  EXPECT_FALSE(b.ok);
  EXPECT_NE(b.error.find(path), std::string::npos) << b.error;
}

// A progress hook that asks recovery to stop (a SIGTERM during start-up): Recover returns
// false with stopped(), and the directory is as it was, so the next start recovers it all.
TEST_F(BinlogTest, RecoveryStopsWhenAskedAndTheNextStartHasEverything) {
  {
    Instance a(clock_, dir_, 4096);
    ASSERT_TRUE(a.ok) << a.error;
    for (int i = 0; i < 100; i++) a.Put(std::string(100, 'x'));
    a.Flush();
  }
  {
    engine::Engine e(clock_);
    BinlogOptions o;
    o.dir = dir_;
    o.segment_size = 4096;
    int calls = 0;
    o.progress = [&] { return ++calls < 3; };
    Binlog b(o, clock_);
    std::string error;
    ASSERT_TRUE(b.Lock(&error)) << error;
    EXPECT_FALSE(b.Recover(&e, &error));
    EXPECT_TRUE(b.stopped());
    EXPECT_EQ(calls, 3);
  }
  Instance c(clock_, dir_, 4096);
  ASSERT_TRUE(c.ok) << c.error;
  EXPECT_EQ(c.store->restored(), 100u);
}

}  // namespace
}  // namespace stalkd::storage
