// Binlog's entry for a live job (BinlogJobMeta, 20 bytes) and the rebuild of a job's mark
// from the low 32 bits the entry keeps (MarkFromLow).

#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "engine/cold_hooks.h"
#include "storage/binlog.h"
#include "storage/binlog_test_util.h"
#include "storage/record.h"

namespace stalkd::storage {
namespace {

using engine::ColdReader;
using testing_util::BinlogTest;
using testing_util::Instance;

constexpr int64_t k4G = int64_t{1} << 32;

// The rebuilt mark, checked against the true one: never below it (a reply never goes out
// early), never above what is placed, the same low bits, and exact within 4 GiB of writes.
void ExpectRebuilt(int64_t mark, int64_t placed) {
  SCOPED_TRACE("mark " + std::to_string(mark) + ", placed " + std::to_string(placed));
  const int64_t got = MarkFromLow(placed, static_cast<uint32_t>(mark));
  EXPECT_GE(got, mark);
  EXPECT_LE(got, placed);
  EXPECT_EQ(static_cast<uint32_t>(got), static_cast<uint32_t>(mark));
  if (placed - mark < k4G) {
    EXPECT_EQ(got, mark);
  }
}

TEST(MarkFromLowTest, IsExactWithin4GiB) {
  static_assert(MarkFromLow(1000, 900) == 900);
  static_assert(MarkFromLow(0, 0) == 0);
  EXPECT_EQ(MarkFromLow(1000, 1000), 1000);
  EXPECT_EQ(MarkFromLow(5 * k4G + 7, 3), 5 * k4G + 3);
  EXPECT_EQ(MarkFromLow(k4G + 5, static_cast<uint32_t>(k4G - 10)), k4G - 10);  // across a wrap
  EXPECT_EQ(MarkFromLow(k4G - 1 + k4G, UINT32_MAX), 2 * k4G - 1);
  EXPECT_EQ(MarkFromLow(3 * k4G, 0), 3 * k4G);  // the wrap itself
  EXPECT_EQ(MarkFromLow(3 * k4G, 1), 2 * k4G + 1);
}

// More than 4 GiB of writes since its record: a later mark with the same low bits, one that
// the next sync covers (not above what is placed), never an earlier one.
TEST(MarkFromLowTest, IsNeverBelowTheTrueMarkPastOneWrap) {
  EXPECT_EQ(MarkFromLow(k4G + 200, 100), k4G + 100);
  EXPECT_EQ(MarkFromLow(7 * k4G + 50, 100), 6 * k4G + 100);
  const int64_t marks[] = {0, 1, 4095, k4G - 1, k4G, k4G + 1, 3 * k4G - 17, int64_t{1} << 40};
  const int64_t gaps[] = {0, 1, 12345, k4G - 1, k4G, k4G + 1, 2 * k4G + 99, int64_t{1} << 36};
  for (int64_t m : marks) {
    for (int64_t g : gaps) ExpectRebuilt(m, m + g);
  }
}

TEST(BinlogJobMetaTest, TwentyBytesAndTheFieldsStayApart) {
  EXPECT_EQ(sizeof(BinlogJobMeta), 20u);
  BinlogJobMeta m{7, 1u << 30, uint32_t(kExtraStateRecordSize + kDeleteRecordSize), 9};
  EXPECT_EQ(m.full_seq, 7u);
  EXPECT_EQ(m.full_size, 1u << 30);  // a big job keeps its full size
  EXPECT_EQ(m.last_seq(), 9u);
  EXPECT_EQ(m.full_off(), nullptr);
  // The reservation's largest value, used up and topped up, never touches the flag.
  m.resv -= kExtraStateRecordSize;
  EXPECT_EQ(m.resv, kDeleteRecordSize);
  EXPECT_FALSE(m.whole);
  m.set_last_seq(7);
  m.set_full_off(4096);
  m.resv = (1u << 31) - 1;
  EXPECT_TRUE(m.whole);
  ASSERT_NE(m.full_off(), nullptr);
  EXPECT_EQ(*m.full_off(), 4096u);
  m.resv = 0;
  EXPECT_TRUE(m.whole);
  m.mark_lo = UINT32_MAX;
  EXPECT_EQ(*m.full_off(), 4096u);
}

// While the kFull record is the latest one, the entry's last segment is the kFull record's
// and the offset takes its place; a later record gives the last segment back.
TEST(BinlogJobMetaTest, TheOffsetStandsInForTheLastSegment) {
  BinlogJobMeta m{3, 100, 0, 3};
  m.set_full_off(UINT32_MAX);  // the largest offset that fits
  EXPECT_EQ(m.last_seq(), 3u);
  EXPECT_EQ(*m.full_off(), UINT32_MAX);
  m.clear_full_off();  // e.g. a state record dropped for want of space: still in segment 3
  EXPECT_EQ(m.full_off(), nullptr);
  EXPECT_EQ(m.last_seq(), 3u);
  m.clear_full_off();  // again: nothing changes
  EXPECT_EQ(m.last_seq(), 3u);
  m.set_full_off(64);
  m.set_last_seq(5);  // a state record in segment 5
  EXPECT_EQ(m.full_off(), nullptr);
  EXPECT_EQ(m.last_seq(), 5u);
  EXPECT_EQ(m.full_seq, 3u);
  // A job whose kFull record lies past 4 GiB in its segment never gets an offset: the disk
  // tier leaves it in memory, and its entry says only where its records are.
  BinlogJobMeta far{4, 100, 0, 4};
  EXPECT_EQ(far.full_off(), nullptr);
  EXPECT_EQ(far.last_seq(), 4u);
}

// Through the binlog with the disk tier's offsets: a put is readable from its record; a
// state change makes the kFull record stale (not readable, "file" the state record's
// segment); written whole again it is readable again; and a restart keeps exactly that.
TEST_F(BinlogTest, TheEntryFollowsTheJobsLatestRecordAcrossARestart) {
  uint64_t x = 0, y = 0;
  uint32_t file_x = 0, file_y = 0;
  {
    Instance a(clock_, dir_, 4096, false, false, /*disk_tier=*/true);
    ASSERT_TRUE(a.ok) << a.error;
    x = a.Put("x's body");
    y = a.Put("y's body");
    a.Flush();
    EXPECT_TRUE(a.store->Demotable(*a.engine->Find(x)));
    EXPECT_EQ(a.store->FileOf(*a.engine->Find(x)), a.store->stats().current_index);
    std::string buf;
    engine::RestoredJob r;
    ASSERT_TRUE(a.store->Read(x, &buf, &r));
    EXPECT_EQ(r.id, x);
    EXPECT_TRUE(a.store->Covers(a.store->MarkOf(*a.engine->Find(x))));
    // Enough puts for a few more segments, then a state change of each: stale kFull records.
    for (int i = 0; i < 200; i++) a.Put("filler");
    for (uint64_t id : {x, y}) {
      ASSERT_NE(a.engine->ReserveJob(a.session, id), nullptr);
      ASSERT_TRUE(a.engine->Release(a.session, id, 20, 0));
    }
    ASSERT_GT(a.store->stats().current_index, 1u);
    for (uint64_t id : {x, y}) {
      EXPECT_FALSE(a.store->Demotable(*a.engine->Find(id)));
      EXPECT_FALSE(a.store->RewritePending(*a.engine->Find(id)));
      EXPECT_FALSE(a.store->Read(id, &buf, &r));
      EXPECT_EQ(a.store->FileOf(*a.engine->Find(id)), a.store->stats().current_index);
      // x's state record is followed by y's.
      const int64_t after = id == x ? int64_t{kStateRecordSize} : 0;
      EXPECT_EQ(a.store->MarkOf(*a.engine->Find(id)), a.store->Mark() - after);
    }
    ASSERT_EQ(a.store->RewriteWhole(*a.engine->Find(x)), ColdReader::Rewrite::kDone);
    EXPECT_TRUE(a.store->RewritePending(*a.engine->Find(x)));  // not written yet
    a.Flush();
    EXPECT_TRUE(a.store->Demotable(*a.engine->Find(x)));
    ASSERT_TRUE(a.store->Read(x, &buf, &r));
    EXPECT_EQ(r.pri, 20u);
    EXPECT_TRUE(a.store->Covers(a.store->MarkOf(*a.engine->Find(x))));
    file_x = a.store->FileOf(*a.engine->Find(x));
    file_y = a.store->FileOf(*a.engine->Find(y));
  }
  Instance b(clock_, dir_, 4096, false, false, /*disk_tier=*/true);
  ASSERT_TRUE(b.ok) << b.error;
  EXPECT_TRUE(b.store->Demotable(*b.engine->Find(x)));
  EXPECT_FALSE(b.store->Demotable(*b.engine->Find(y)));
  EXPECT_EQ(b.store->FileOf(*b.engine->Find(x)), file_x);
  EXPECT_EQ(b.store->FileOf(*b.engine->Find(y)), file_y);
  for (uint64_t id : {x, y}) EXPECT_TRUE(b.store->Covers(b.store->MarkOf(*b.engine->Find(id))));
}

}  // namespace
}  // namespace stalkd::storage
