// The checkpoint's tail, its bounds (docs/DISK-TIER.md, "Restarts: the checkpoint"): what a
// start from it holds for the jobs put and deleted after it (nothing, as a replay), and a
// position that is not where a record starts (not used, nothing erased).
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "storage/cold_checkpoint_tail_review_test_util.h"
#include "storage/crc32c.h"

namespace stalkd::storage::tail_review {
namespace {

TEST_F(CheckpointTailReviewTest, JobsPutAndDeletedAfterItCostTheStartNothing) {
  {
    Tier t(clock_, dir_, 1);
    for (int i = 0; i < 1000; i++) {
      t.session->Use(i % 2 ? "a" : "b");
      ASSERT_EQ(Put(*t.session, 1, 90000, std::string(2000, 'k')).outcome, Outcome::kInserted);
      if (i % 100 == 0) t.Tick();
    }
    ASSERT_TRUE(t.Shutdown());
  }
  const CheckpointMeta meta = Meta();
  {
    Tier t(clock_, dir_, 1);
    ASSERT_TRUE(t.log->checkpoint_used());
    for (int i = 0; i < 10000; i++) {
      Result r = Put(*t.session, 1, 0, "c");
      ASSERT_EQ(r.outcome, Outcome::kInserted);
      ASSERT_EQ(t.session->Delete(r.number).outcome, Outcome::kDeleted);
      if (i % 500 == 0) t.Tick();
    }
    t.Tick();
    t.Crash();
  }
  ASSERT_EQ(ListedGone(meta), 0u);  // no compaction: the tail is all the churn
  const std::string copy = CopyWithoutCheckpoint(dir_);
  auto peak = [&](const std::string& dir, bool* used) {
    const size_t before = mallinfo2().uordblks;
    size_t top = before;
    {
      Tier t(clock_, dir, 1, [&] {
        top = std::max(top, mallinfo2().uordblks);
        return true;
      });
      EXPECT_TRUE(t.ok) << t.error;
      *used = t.log->checkpoint_used();
      EXPECT_EQ(t.Jobs(), 1000u);
    }
    return top - before;
  };
  bool used = false, replayed = true;
  const size_t from_it = peak(dir_, &used);
  const size_t full = peak(copy, &replayed);
  EXPECT_TRUE(used);
  EXPECT_FALSE(replayed);
  const size_t file = ReadFile(Path(kCheckpointName)).size();
  EXPECT_LE(from_it, full + file) << "from the checkpoint " << from_it << " bytes, full replay "
                                  << full << ", checkpoint " << file;
}

// A checkpoint with a good CRC whose position is not where a record starts (its tail CRC
// taken over the bytes before it, as if so written): the bytes there are no record, but
// neither a torn tail to clear (that erased the acknowledged record they are part of) nor
// damage that stops every start (it stayed, so every start stopped). It is not used: a
// full replay, every job back, the binlog unchanged.
TEST_F(CheckpointTailReviewTest, APositionInsideARecordIsNotUsedAndErasesNothing) {
  Fill(36);
  if (HasFatalFailure()) return;
  std::set<uint64_t> live;
  for (int puts : {1, 3}) {
    SCOPED_TRACE(puts);
    {
      Tier t(clock_, dir_, 1);
      ASSERT_TRUE(t.log->checkpoint_used());
      live = Live(t);
      for (int i = 0; i < puts; i++) {
        Result r = Put(*t.session, 1, 0, "after it " + std::to_string(i));
        ASSERT_EQ(r.outcome, Outcome::kInserted);
        live.insert(r.number);
      }
      t.Tick();
      t.Crash();
    }
    // Its position moved 5 bytes on, into the first record after it: the segment's end and
    // tail CRC patched in the file (cold_checkpoint.h), then the file's CRC.
    static_assert(std::endian::native == std::endian::little);
    std::string bytes = ReadFile(Path(kCheckpointName));
    const CheckpointMeta meta = Meta();
    size_t k = 0;  // the position's segment, in its list
    for (size_t i = 0; i < meta.segments.size(); i++) {
      if (meta.segments[i].end > int64_t{kSegmentHeaderSize}) k = i;
    }
    const std::string path = dir_ + "/binlog." + std::to_string(meta.segments[k].seq);
    const std::string segment = ReadFile(path);
    const int64_t end = meta.segments[k].end + 5;
    const uint32_t tail = SegmentTailCrc(segment.data(), end);
    const size_t at = 8 + 4 + 8 + 4 + 24 * k + 4 + 8;  // magic .. n of segments; seq, size
    std::memcpy(&bytes[at], &end, 8);
    std::memcpy(&bytes[at + 8], &tail, 4);
    const uint32_t crc = Crc32c(bytes.data(), bytes.size() - 4);
    std::memcpy(&bytes[bytes.size() - 4], &crc, 4);
    WriteFile(Path(kCheckpointName), bytes);
    {
      Tier t(clock_, dir_, 1);
      ASSERT_TRUE(t.ok) << t.error;
      EXPECT_FALSE(t.log->checkpoint_used());
      EXPECT_EQ(Live(t), live);
      t.Crash();
    }
    EXPECT_TRUE(ReadFile(path).substr(0, static_cast<size_t>(end) + 200) ==
                segment.substr(0, static_cast<size_t>(end) + 200));
    // Again from a checkpoint of a clean stop, for the next round.
    {
      Tier t(clock_, dir_, 1);
      ASSERT_TRUE(t.ok) << t.error;
      live = Live(t);
      ASSERT_TRUE(t.Shutdown());
    }
  }
  // A record torn at its position (the first write after it cut by a kill) is left to a
  // full replay as well, which clears it: every job back.
  uint32_t seq = 0;
  int64_t end = 0;
  for (const CheckpointSegment& c : Meta().segments) {
    if (c.end > int64_t{kSegmentHeaderSize}) {
      seq = c.seq;
      end = c.end;
    }
  }
  const int fd = open((dir_ + "/binlog." + std::to_string(seq)).c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  const std::string torn("\x31\x32\x33\x34\x40\x00\x00\x00\x01torn", 13);
  ASSERT_EQ(pwrite(fd, torn.data(), torn.size(), end), static_cast<ssize_t>(torn.size()));
  close(fd);
  Tier t(clock_, dir_, 1);
  ASSERT_TRUE(t.ok) << t.error;
  EXPECT_FALSE(t.log->checkpoint_used());
  EXPECT_EQ(Live(t), live);
}

}  // namespace
}  // namespace stalkd::storage::tail_review
