#include "storage/binlog.h"

#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "storage/binlog_test_util.h"
#include "storage/record.h"

namespace stalkd::storage {
namespace {

using engine::Engine;
using engine::Job;
using engine::JobState;
using testing_util::BinlogTest;
using testing_util::Instance;
using testing_util::ReadFile;
using testing_util::RemoveDir;
using testing_util::Segments;
using testing_util::WriteFile;

// Whether part of [from, to) of the file is allocated but unwritten (reads as zeros, and
// the first write there changes file-system metadata); nullopt if the file system cannot say.
std::optional<bool> HasUnwritten(const std::string& path, int64_t from, int64_t to) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  constexpr uint32_t kMax = 64;
  std::vector<char> buf(sizeof(fiemap) + kMax * sizeof(fiemap_extent));
  auto* fm = reinterpret_cast<fiemap*>(buf.data());
  fm->fm_start = static_cast<uint64_t>(from);
  fm->fm_length = static_cast<uint64_t>(to - from);
  fm->fm_flags = FIEMAP_FLAG_SYNC;
  fm->fm_extent_count = kMax;
  int r = ioctl(fd, FS_IOC_FIEMAP, fm);
  close(fd);
  if (r != 0 || fm->fm_mapped_extents == 0) return std::nullopt;
  for (uint32_t i = 0; i < fm->fm_mapped_extents; i++) {
    if (fm->fm_extents[i].fe_flags & FIEMAP_EXTENT_UNWRITTEN) return true;
  }
  return false;
}

TEST_F(BinlogTest, EveryStateSurvivesARestart) {
  uint32_t file3 = 0;  // stats-job "file" of job 3: the segment of its latest record
  {
    Instance a(clock_, dir_);
    ASSERT_TRUE(a.ok) << a.error;
    ASSERT_EQ(a.Put("ready", 5), 1u);
    ASSERT_EQ(a.Put("delayed", 6, 100, "t2"), 2u);
    ASSERT_EQ(a.Put("to-bury", 7), 3u);
    ASSERT_EQ(a.Put("gone", 8), 4u);
    ASSERT_EQ(a.Put("reserved", 9), 5u);
    ASSERT_TRUE(a.engine->Delete(a.session, 4));
    ASSERT_EQ(a.engine->ReserveJob(a.session, 3)->id, 3u);
    clock_.Advance(30 * kSecond);  // job 3's latest record (the bury) is written at age 30 s
    ASSERT_TRUE(a.engine->Bury(a.session, 3, 77));
    file3 = a.engine->LogFile(*a.engine->Find(3));
    EXPECT_GT(file3, 0u);
    ASSERT_NE(a.engine->ReserveJob(a.session, 5), nullptr);
    a.Flush();
  }
  clock_.Advance(30 * kSecond);
  Instance b(clock_, dir_);
  ASSERT_TRUE(b.ok) << b.error;
  EXPECT_EQ(b.store->restored(), 4u);
  Job* j = b.engine->Find(1);
  ASSERT_NE(j, nullptr);
  EXPECT_EQ(j->state(), JobState::kReady);
  EXPECT_EQ(std::string(j->data(), j->data_size()), "ready\r\n");
  j = b.engine->Find(2);
  ASSERT_NE(j, nullptr);
  EXPECT_EQ(j->state(), JobState::kDelayed);
  EXPECT_EQ(j->tube->name(), "t2");
  EXPECT_NEAR(static_cast<double>(j->deadline() - clock_.Now()) / kSecond, 100, 1.5);
  j = b.engine->Find(3);
  ASSERT_NE(j, nullptr);
  EXPECT_EQ(j->state(), JobState::kBuried);
  EXPECT_EQ(j->pri, 77u);
  EXPECT_EQ(j->buries(), 1u);
  EXPECT_EQ(j->reserves(), 1u);  // reserved, then buried: the bury's record carries it
  EXPECT_EQ(b.engine->LogFile(*j), file3);
  EXPECT_NEAR(static_cast<double>(clock_.Now() - j->created()) / kSecond, 30, 1.5);  // age
  EXPECT_GE(clock_.Now() - j->created(), 30 * kSecond);
  EXPECT_EQ(b.engine->Find(4), nullptr);
  j = b.engine->Find(5);
  ASSERT_NE(j, nullptr);
  EXPECT_EQ(j->state(), JobState::kReady);  // reserved comes back ready
  EXPECT_EQ(std::string(j->data(), j->data_size()), "reserved\r\n");
  EXPECT_EQ(j->reserves(), 0u);  // a reserve writes no record: the count of its put
}

TEST_F(BinlogTest, AReserveWritesNothingAndIsShownWithoutWaiting) {
  Instance a(clock_, dir_);
  ASSERT_TRUE(a.ok) << a.error;
  ASSERT_EQ(a.Put("job"), 1u);
  a.Flush();
  int64_t put_mark = a.store->Mark();
  EXPECT_EQ(a.store->MarkOf(*a.engine->Find(1)), put_mark);
  int64_t written = a.store->stats().records_written;
  ASSERT_NE(a.engine->ReserveJob(a.session, 1), nullptr);
  EXPECT_EQ(a.store->Mark(), put_mark);
  EXPECT_EQ(a.store->stats().records_written, written);
  EXPECT_TRUE(a.store->Covers(a.store->MarkOf(*a.engine->Find(1))));
  // The release is a record of its own, and a reply showing the job waits for it.
  ASSERT_TRUE(a.engine->Release(a.session, 1, 3, 0));
  EXPECT_EQ(a.store->stats().records_written, written + 1);
  EXPECT_EQ(a.store->Mark(), put_mark + int64_t{kStateRecordSize});
  EXPECT_EQ(a.store->MarkOf(*a.engine->Find(1)), a.store->Mark());
  EXPECT_FALSE(a.store->Covers(a.store->MarkOf(*a.engine->Find(1))));
  a.Flush();
  EXPECT_TRUE(a.store->Covers(a.store->MarkOf(*a.engine->Find(1))));
  // Reserved again: it still shows the release, nothing newer.
  ASSERT_NE(a.engine->ReserveJob(a.session, 1), nullptr);
  EXPECT_EQ(a.store->MarkOf(*a.engine->Find(1)), a.store->Mark());
  EXPECT_EQ(a.store->stats().records_written, written + 1);
}

TEST_F(BinlogTest, SecondBinlogOnTheDirectoryIsRefused) {
  Instance a(clock_, dir_);
  ASSERT_TRUE(a.ok);
  Instance b(clock_, dir_);
  EXPECT_FALSE(b.ok);
  EXPECT_NE(b.error.find("another server"), std::string::npos) << b.error;
}

// Writes jobs 1..3 then cuts the newest segment at every byte offset inside the last two
// records, with zeros or garbage after the cut: recovery keeps exactly the whole records.
TEST_F(BinlogTest, TornTailAtEveryOffsetIsCleared) {
  std::string seg_path;
  std::string full;
  size_t end2 = 0, end3 = 0;  // offsets after job 2's and job 3's records
  {
    Instance a(clock_, dir_);
    ASSERT_TRUE(a.ok);
    a.Put("one");
    a.Flush();
    a.Put("two");
    a.Flush();
    a.Put("three");
    a.Flush();
    seg_path = dir_ + "/binlog.1";
    full = ReadFile(seg_path);
    size_t rec = FullRecordSize(7, 3);
    end2 = kSegmentHeaderSize + rec + FullRecordSize(7, 3);
    end3 = end2 + FullRecordSize(7, 5);
  }
  for (int garbage = 0; garbage < 2; garbage++) {
    for (size_t cut = end2 - FullRecordSize(7, 3) + 1; cut <= end3; cut++) {
      std::string data = full;
      for (size_t k = cut; k < end3 + 40; k++)
        data[k] = garbage ? static_cast<char>(k * 37 + 1) : 0;
      // Only binlog.1: later segments of the first run are empty preallocations.
      RemoveDir(dir_);
      mkdir(dir_.c_str(), 0700);
      WriteFile(seg_path, data);
      Instance b(clock_, dir_);
      ASSERT_TRUE(b.ok) << "cut " << cut << ": " << b.error;
      size_t expect = cut >= end3 ? 3 : cut >= end2 ? 2 : 1;
      if (garbage && cut == end3) expect = 3;
      EXPECT_EQ(b.store->restored(), expect) << "cut " << cut << " garbage " << garbage;
      // New jobs are written after the truncated tail and survive another restart.
      uint64_t id = b.Put("after");
      b.Flush();
      b.Stop();
      Instance c(clock_, dir_);
      ASSERT_TRUE(c.ok) << c.error;
      EXPECT_NE(c.engine->Find(id), nullptr);
      EXPECT_EQ(c.store->restored(), expect + 1);
    }
  }
}

TEST_F(BinlogTest, ARestartWritesOnInTheSegmentsTheLastRunLeft) {
  std::vector<uint64_t> ids;
  size_t files = 0;
  {
    Instance a(clock_, dir_);
    ASSERT_TRUE(a.ok);
    for (int i = 0; i < 30; i++) ids.push_back(a.Put(std::string(100, 'a')));
    ASSERT_TRUE(a.engine->ReserveJob(a.session, ids[0]));
    ASSERT_TRUE(a.engine->Bury(a.session, ids[0], 3));
    a.Flush();
    files = Segments(dir_).size();
    EXPECT_GT(a.store->stats().current_index, 1u);
  }
  for (int run = 0; run < 3; run++) {
    Instance b(clock_, dir_);
    ASSERT_TRUE(b.ok) << b.error;
    Binlog::Stats st = b.store->stats();
    // The newest segment with records is the current one again, and no file was added.
    EXPECT_EQ(Segments(dir_).size(), files) << run;
    EXPECT_EQ(b.store->restored(), ids.size());
    EXPECT_EQ(b.engine->Find(ids[0])->state(), engine::JobState::kBuried);
    ASSERT_TRUE(b.engine->KickJob(ids[0]));
    ASSERT_TRUE(b.engine->ReserveJob(b.session, ids[0]));
    ASSERT_TRUE(b.engine->Bury(b.session, ids[0], 3));
    uint64_t id = b.Put("more");
    ASSERT_NE(id, 0u);
    ids.push_back(id);
    b.Flush();
    EXPECT_GE(b.store->stats().current_index, st.current_index);
    files = Segments(dir_).size();
  }
}

TEST_F(BinlogTest, DamageBeforeTheTailStopsStartUpUnlessSkipped) {
  {
    Instance a(clock_, dir_);
    ASSERT_TRUE(a.ok);
    a.Put("first");
    a.Put("second");
    a.Put("third");
    a.Flush();
  }
  std::string path = dir_ + "/binlog.1";
  std::string data = ReadFile(path);
  size_t second = kSegmentHeaderSize + FullRecordSize(7, 5);
  data[second + 30] ^= 1;  // inside job 2's record, with job 3's record after it
  WriteFile(path, data);
  {
    Instance b(clock_, dir_);
    EXPECT_FALSE(b.ok);
    EXPECT_NE(b.error.find("binlog.1: offset " + std::to_string(second)), std::string::npos)
        << b.error;
  }
  Instance c(clock_, dir_, 4096, /*skip_damaged=*/true);
  ASSERT_TRUE(c.ok) << c.error;
  EXPECT_EQ(c.store->skipped(), 1u);
  EXPECT_EQ(c.store->restored(), 2u);
  EXPECT_EQ(c.engine->Find(2), nullptr);
  EXPECT_NE(c.engine->Find(3), nullptr);
}

TEST_F(BinlogTest, PutAndDeleteForeverKeepsFewSegments) {
  Instance a(clock_, dir_, 4096);
  ASSERT_TRUE(a.ok);
  uint64_t keep = a.Put("long-lived");
  for (int i = 0; i < 5000; i++) {
    ASSERT_TRUE(a.PutAndDelete(100));
    ASSERT_LE(Segments(dir_).size(), 6u) << "after " << i;
  }
  EXPECT_GT(a.store->stats().records_migrated, 0);
  EXPECT_GT(a.store->stats().oldest_index, 1u);
  a.Stop();
  Instance b(clock_, dir_, 4096);
  ASSERT_TRUE(b.ok) << b.error;
  EXPECT_EQ(b.store->restored(), 1u);
  EXPECT_NE(b.engine->Find(keep), nullptr);
}

TEST_F(BinlogTest, BackgroundSyncMakesTheWrittenMarkDurable) {
  Instance a(clock_, dir_, 4096, false, /*background=*/true);
  ASSERT_TRUE(a.ok) << a.error;
  ASSERT_GE(a.store->sync_fd(), 0);
  EXPECT_EQ(a.store->written_mark(), a.store->durable_mark());
  ASSERT_NE(a.Put("one"), 0u);
  a.Flush();  // writes, and starts a sync on the other thread
  int64_t first = a.store->written_mark();
  EXPECT_GT(first, a.store->durable_mark());
  ASSERT_NE(a.Put("two"), 0u);
  a.Flush();  // under -f 0 no reply waits for a write alone: kept until the next sync
  EXPECT_EQ(a.store->written_mark(), first);
  ASSERT_TRUE(a.FinishSync());
  EXPECT_EQ(a.store->durable_mark(), first);
  a.Flush();  // writes "two" and starts the next sync
  int64_t second = a.store->written_mark();
  EXPECT_GT(second, first);
  EXPECT_EQ(second, a.store->Mark());
  ASSERT_TRUE(a.FinishSync());
  EXPECT_EQ(a.store->durable_mark(), second);
  EXPECT_TRUE(a.store->replies_wait_for_sync());
}

TEST_F(BinlogTest, BackgroundSyncWaitsForAnIdleLoopAtMostMaxSyncDefer) {
  Instance a(clock_, dir_, 4096, false, /*background=*/true);
  ASSERT_TRUE(a.ok) << a.error;
  const int64_t start = a.store->written_mark();
  ASSERT_NE(a.Put("one"), 0u);
  // The loop is busy: no write, no sync, and the store asks to be flushed again at once.
  EXPECT_EQ(a.store->Flush(/*idle=*/false), clock_.Now());
  EXPECT_EQ(a.store->written_mark(), start);
  clock_.Advance(Binlog::kMaxSyncDefer - 1);
  ASSERT_NE(a.Put("two"), 0u);
  EXPECT_EQ(a.store->Flush(false), clock_.Now());
  EXPECT_EQ(a.store->written_mark(), start);
  clock_.Advance(1);  // held back long enough: both go out with one sync, busy or not
  a.store->Flush(false);
  EXPECT_EQ(a.store->written_mark(), a.store->Mark());
  ASSERT_TRUE(a.FinishSync());
  EXPECT_EQ(a.store->durable_mark(), a.store->Mark());
  // An idle loop starts the sync at once, and the wait starts afresh for the next one.
  ASSERT_NE(a.Put("three"), 0u);
  EXPECT_EQ(a.store->Flush(false), clock_.Now());
  EXPECT_LT(a.store->written_mark(), a.store->Mark());
  a.store->Flush(/*idle=*/true);
  EXPECT_EQ(a.store->written_mark(), a.store->Mark());
  ASSERT_TRUE(a.FinishSync());
  EXPECT_EQ(a.store->durable_mark(), a.store->Mark());
  // With nothing pending, a busy loop is not asked back.
  EXPECT_EQ(a.store->Flush(false), kForever);
}

TEST_F(BinlogTest, FreshCurrentSegmentIsZeroFilledAheadOfItsFirstRecords) {
  constexpr int64_t kSeg = 4 << 20;
  Instance a(clock_, dir_, kSeg, false, /*background=*/true);
  ASSERT_TRUE(a.ok) << a.error;
  for (int i = 0; i < 1000 && a.store->fills_pending() > 0; i++) usleep(10'000);
  ASSERT_EQ(a.store->fills_pending(), 0u);
  // Without the fill the whole preallocated file would be unwritten, and every sync of
  // the first segment of a fresh server would commit an extent conversion too.
  std::optional<bool> ahead = HasUnwritten(dir_ + "/binlog.1", Binlog::kFillLead + 4096, kSeg);
  if (!ahead) GTEST_SKIP() << "this file system does not map extents (FIEMAP)";
  EXPECT_FALSE(*ahead);
}

TEST_F(BinlogTest, RecordsThatCatchUpWithTheFillOfTheirSegmentAreKept) {
  constexpr int64_t kSeg = 4 << 20;
  constexpr int kJobs = 200;  // 8 KiB each: past kFillLead while the fill may still run
  const std::string body(8192, 'b');
  {
    Instance a(clock_, dir_, kSeg, false, /*background=*/true);
    ASSERT_TRUE(a.ok) << a.error;
    for (int i = 1; i <= kJobs; i++) {
      ASSERT_EQ(a.Put(body + std::to_string(i)), static_cast<uint64_t>(i));
      a.Flush();
      ASSERT_TRUE(a.FinishSync());
    }
    EXPECT_GT(a.store->written_mark(), Binlog::kFillLead);
  }
  Instance b(clock_, dir_, kSeg);
  ASSERT_TRUE(b.ok) << b.error;
  EXPECT_EQ(b.store->restored(), static_cast<size_t>(kJobs));
  for (int i = 1; i <= kJobs; i++) {
    Job* j = b.engine->Find(static_cast<uint64_t>(i));
    ASSERT_NE(j, nullptr) << i;
    EXPECT_EQ(std::string(j->data(), j->body_size), body + std::to_string(i)) << i;
  }
}

TEST_F(BinlogTest, SegmentLeftDuringASyncKeepsItsFileUntilItsLastRecordsAreWritten) {
  size_t n = 0;
  {
    Instance a(clock_, dir_, 4096, false, /*background=*/true);
    ASSERT_TRUE(a.ok) << a.error;
    ASSERT_NE(a.Put("first"), 0u);
    n++;
    a.Flush();  // sync 1 starts; under -f 0 later records wait in memory
    // Fill binlog.1 to the end and move on: its last records are not written yet, and
    // binlog.1 is a finished segment once sync 1 is collected.
    while (a.store->stats().current_index == 1) {
      ASSERT_NE(a.Put(std::string(200, 'y')), 0u);
      n++;
    }
    ASSERT_TRUE(a.FinishSync());
    a.Flush();
    ASSERT_TRUE(a.FinishSync());
    EXPECT_FALSE(a.store->failed());
    EXPECT_EQ(a.store->durable_mark(), a.store->Mark());
  }
  Instance b(clock_, dir_, 4096);
  ASSERT_TRUE(b.ok) << b.error;
  EXPECT_EQ(b.store->restored(), n);
}

TEST_F(BinlogTest, BackgroundSyncRemovesASegmentOnlyOnceItsDeletesAreDurable) {
  Instance a(clock_, dir_, 4096, false, /*background=*/true);
  ASSERT_TRUE(a.ok) << a.error;
  std::vector<uint64_t> ids;
  while (a.store->stats().current_index == 1) ids.push_back(a.Put(std::string(200, 'x')));
  a.Flush();  // sync 1 starts
  for (uint64_t id : ids) ASSERT_TRUE(a.engine->Delete(a.session, id));
  a.Flush();  // the deletes that empty binlog.1 are written during sync 1
  ASSERT_TRUE(a.FinishSync());
  // Sync 1 did not cover the deletes. Removing binlog.1 now would let a crash bring back a
  // state that no prefix of the log describes: the jobs gone, their deletes not durable.
  EXPECT_EQ(a.store->stats().oldest_index, 1u);
  a.Flush();  // sync 2 starts, and covers them
  ASSERT_TRUE(a.FinishSync());
  EXPECT_EQ(a.store->durable_mark(), a.store->written_mark());
  EXPECT_GT(a.store->stats().oldest_index, 1u);
}

// A job larger than a segment of -s goes into the current segment, grown by its size; it
// comes back after a restart with its body and state, among smaller jobs on either side.
TEST_F(BinlogTest, JobLargerThanASegmentIsKeptAndComesBack) {
  std::string big(50000, 'b');
  big[0] = 'B';
  big[49999] = 'E';
  {
    Instance a(clock_, dir_, 4096);
    ASSERT_TRUE(a.ok);
    ASSERT_EQ(a.Put("small"), 1u);
    ASSERT_EQ(a.Put(big), 2u);
    ASSERT_EQ(a.Put(std::string(3000, 's')), 3u);
    ASSERT_EQ(a.Put(big, 5), 4u);
    a.Flush();
    ASSERT_NE(a.engine->ReserveJob(a.session, 2), nullptr);
    ASSERT_TRUE(a.engine->Bury(a.session, 2, 9));
    ASSERT_TRUE(a.engine->Delete(a.session, 4));
    a.Flush();
  }
  Instance b(clock_, dir_, 4096);
  ASSERT_TRUE(b.ok) << b.error;
  EXPECT_EQ(b.store->restored(), 3u);
  const Job* j = b.engine->Find(2);
  ASSERT_NE(j, nullptr);
  EXPECT_EQ(std::string(j->data(), j->body_size), big);
  EXPECT_EQ(j->state(), engine::JobState::kBuried);
  EXPECT_EQ(j->pri, 9u);
  EXPECT_EQ(b.engine->Find(4), nullptr);
  ASSERT_NE(b.engine->Find(3), nullptr);
  EXPECT_EQ(b.engine->Find(3)->body_size, 3000u);
}

// Compaction moves a large job forward like any other (growing the current segment for it),
// so the segments behind it go and their number stays bounded.
TEST_F(BinlogTest, CompactionMovesAJobLargerThanASegment) {
  std::string big(20000, 'g');
  uint64_t id;
  {
    Instance a(clock_, dir_, 4096);
    ASSERT_TRUE(a.ok);
    id = a.Put(big);
    ASSERT_NE(id, 0u);
    for (int i = 0; i < 3000; i++) {
      ASSERT_TRUE(a.PutAndDelete(100));
      ASSERT_LE(Segments(dir_).size(), 8u) << "after " << i;
    }
    EXPECT_GT(a.store->stats().records_migrated, 0);
    EXPECT_GT(a.store->stats().oldest_index, 1u);
  }
  Instance b(clock_, dir_, 4096);
  ASSERT_TRUE(b.ok) << b.error;
  EXPECT_EQ(b.store->restored(), 1u);
  const Job* j = b.engine->Find(id);
  ASSERT_NE(j, nullptr);
  EXPECT_EQ(std::string(j->data(), j->body_size), big);
}

TEST_F(BinlogTest, ManyUpdatesRotateSegmentsAndReplayInOrder) {
  {
    Instance a(clock_, dir_, 4096);
    ASSERT_TRUE(a.ok);
    for (int i = 0; i < 50; i++) a.Put("job");
    for (int round = 0; round < 20; round++) {
      for (uint64_t id = 1; id <= 50; id++) {
        ASSERT_NE(a.engine->ReserveJob(a.session, id), nullptr);
        ASSERT_TRUE(a.engine->Release(a.session, id, static_cast<uint32_t>(round), 0));
      }
      a.Flush();
    }
    ASSERT_TRUE(a.engine->ReserveJob(a.session, 7));
    ASSERT_TRUE(a.engine->Bury(a.session, 7, 1234));
    a.Flush();
  }
  Instance b(clock_, dir_, 4096);
  ASSERT_TRUE(b.ok) << b.error;
  EXPECT_EQ(b.store->restored(), 50u);
  EXPECT_EQ(b.engine->Find(1)->pri, 19u);
  EXPECT_EQ(b.engine->Find(1)->releases(), 20u);
  EXPECT_EQ(b.engine->Find(7)->state(), JobState::kBuried);
  EXPECT_EQ(b.engine->Find(7)->pri, 1234u);
}

}  // namespace
}  // namespace stalkd::storage
