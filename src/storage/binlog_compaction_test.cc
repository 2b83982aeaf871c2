// Compaction reads the head segment's records to find its live jobs (docs/BINLOG.md,
// "Compaction"): a job written whole more than once in a segment, jobs only on disk, a
// head whose records are still in memory, the bound on what one Flush reads, a head that
// cannot be read, and kills while it runs.

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "storage/binlog.h"
#include "storage/binlog_test_util.h"
#include "storage/cold_checkpoint.h"
#include "storage/cold_tier_test_util.h"
#include "storage/crc32c.h"
#include "storage/record.h"

namespace stalkd::storage {
namespace {

using engine::ColdReader;
using testing_util::BinlogTest;
using testing_util::Instance;
namespace tu = testing_util;

// Copies the files of `from` into `to` as they are now: what a kill -9 of the process
// between two Flushes leaves (every written byte is in the page cache, hence in the file).
void CopyDir(const std::string& from, const std::string& to) {
  for (const std::string& f : tu::Files(from))
    tu::WriteFile(to + "/" + f, tu::ReadFile(from + "/" + f));
}

std::string Body(const engine::Job* j) { return j ? std::string(j->data(), j->body_size) : ""; }

// Puts and deletes (each flushed) until binlog.1 is gone, at most `rounds` times.
void ChurnUntilTheFirstSegmentGoes(Instance& a, int rounds = 500) {
  for (int i = 0; i < rounds && a.store->stats().oldest_index == 1; i++) {
    ASSERT_TRUE(a.PutAndDelete(100));
  }
  EXPECT_GT(a.store->stats().oldest_index, 1u);
}

// A start on `dir` restores job `id` alone, with `body`.
void ExpectRestoredAlone(FakeClock& clock, const std::string& dir, uint64_t id,
                         const std::string& body) {
  Instance b(clock, dir, 4096);
  ASSERT_TRUE(b.ok) << b.error;
  EXPECT_EQ(b.store->restored(), 1u);
  EXPECT_EQ(Body(b.engine->Find(id)), body);
}

// Job x written whole three times in binlog.1 (its put, then twice again after a release:
// what the disk tier does to a changed job), then job y. Compaction moves each once: x at
// its first record (the later two are then stale), so binlog.1's live count falls to 0 only
// with y moved too; were x counted down at each of its records, binlog.1 would go with y's
// only record in it.
TEST_F(BinlogTest, AJobWrittenWholeThriceInTheHeadIsMovedOnce) {
  uint64_t x = 0, y = 0;
  {
    Instance a(clock_, dir_, 4096, false, false, /*disk_tier=*/true);
    ASSERT_TRUE(a.ok) << a.error;
    x = a.Put("x's body");
    for (uint32_t pri : {11u, 12u}) {
      ASSERT_NE(a.engine->ReserveJob(a.session, x), nullptr);
      ASSERT_TRUE(a.engine->Release(a.session, x, pri, 0));
      ASSERT_EQ(a.store->RewriteWhole(*a.engine->Find(x)), ColdReader::Rewrite::kDone);
    }
    y = a.Put("y's body");
    a.Flush();
    ASSERT_EQ(a.store->stats().current_index, 1u);
    ASSERT_EQ(a.store->stats().records_migrated, 0);
    ASSERT_NO_FATAL_FAILURE(ChurnUntilTheFirstSegmentGoes(a));
    // binlog.1 went in the Flush that moved its last job (its moves durable at once, -f 0).
    EXPECT_EQ(a.store->stats().records_migrated, 2);
    EXPECT_EQ(a.store->stats().compaction_read_errors, 0);
    EXPECT_EQ(a.store->stats().live_bytes,
              static_cast<int64_t>(FullRecordSize(7, 8) + FullRecordSize(7, 8)));
    a.Stop();
  }
  Instance b(clock_, dir_, 4096);
  ASSERT_TRUE(b.ok) << b.error;
  EXPECT_EQ(b.store->restored(), 2u);
  ASSERT_NE(b.engine->Find(x), nullptr);
  EXPECT_EQ(Body(b.engine->Find(x)), "x's body");
  EXPECT_EQ(b.engine->Find(x)->pri, 12u);
  EXPECT_EQ(b.engine->Find(x)->releases(), 2u);
  EXPECT_EQ(Body(b.engine->Find(y)), "y's body");
}

// The head's records are placed but still in memory (a background sync is running under
// -f 0, so they wait): compaction reads what is written and waits for the rest, then moves
// the job whose record was waiting once it is written.
TEST_F(BinlogTest, CompactionWaitsForTheHeadsRecordsStillInMemory) {
  uint64_t keep = 0;
  {
    Instance a(clock_, dir_, 4096, false, /*background=*/true);
    ASSERT_TRUE(a.ok) << a.error;
    uint64_t gone = a.Put("written, then deleted");
    a.Flush();  // written; a sync starts, and is not collected: records now wait
    ASSERT_TRUE(a.engine->Delete(a.session, gone));
    keep = a.Put("kept, placed in binlog.1 while a sync runs");
    for (int i = 0; i < 200 && a.store->stats().current_index < 5; i++) {
      ASSERT_TRUE(a.PutAndDelete(100));  // held in memory too
    }
    Binlog::Stats s = a.store->stats();
    ASSERT_GE(s.current_index, 5u);
    const int64_t written = static_cast<int64_t>(kSegmentHeaderSize + FullRecordSize(7, 21));
    EXPECT_EQ(s.records_migrated, 0);
    EXPECT_EQ(s.compaction_read, written);  // the header and the deleted job's record
    for (int i = 0; i < 3; i++) a.Flush();
    EXPECT_EQ(a.store->stats().compaction_read, written);  // nothing more to read yet
    EXPECT_EQ(a.store->stats().compaction_read_errors, 0);
    // The sync ends: the records are written at the next Flush, read at the one after.
    ASSERT_TRUE(a.FinishSync());
    for (int i = 0; i < 50 && a.store->stats().oldest_index == 1; i++) {
      ASSERT_TRUE(a.PutAndDelete(100));  // its first Flush starts a sync
      ASSERT_TRUE(a.FinishSync());
    }
    EXPECT_GT(a.store->stats().oldest_index, 1u);
    EXPECT_EQ(a.store->stats().records_migrated, 1);
    EXPECT_NE(a.engine->Find(keep), nullptr);
    a.Stop();
  }
  ExpectRestoredAlone(clock_, dir_, keep, "kept, placed in binlog.1 while a sync runs");
}

// No Flush reads more than kCompactReadPerFlush of the head, however many stale records it
// must pass, and a job larger than that is read over several Flushes and moved whole.
TEST_F(BinlogTest, CompactionReadsABoundedAmountPerFlush) {
  const int64_t seg = 4 << 20;
  const std::string big(3 << 20, 'B');
  std::vector<uint64_t> kept;
  uint64_t big_id = 0;
  {
    Instance a(clock_, dir_, seg);
    ASSERT_TRUE(a.ok) << a.error;
    int64_t most = 0, flushes_reading = 0;
    auto flush = [&] {
      const int64_t before = a.store->stats().compaction_read;
      a.Flush();
      const int64_t read = a.store->stats().compaction_read - before;
      most = std::max(most, read);
      if (read > 0) flushes_reading++;
      ASSERT_LE(read, Binlog::kCompactReadPerFlush);
    };
    kept.push_back(a.Put("first"));
    big_id = a.Put(big);
    for (int round = 0; round < 400 && a.store->stats().oldest_index == 1; round++) {
      std::vector<uint64_t> ids;
      for (int i = 0; i < 20; i++) {
        // Small and larger records, with a kept one now and then.
        ids.push_back(a.Put(std::string(i % 4 == 0 ? 30000 : 200, 'a' + i % 26)));
      }
      ASSERT_NO_FATAL_FAILURE(flush());
      for (size_t i = 0; i < ids.size(); i++) {
        if (round % 10 == 0 && i == 3) {
          kept.push_back(ids[i]);
        } else {
          ASSERT_TRUE(a.engine->Delete(a.session, ids[i]));
        }
      }
      ASSERT_NO_FATAL_FAILURE(flush());
    }
    EXPECT_GT(a.store->stats().oldest_index, 1u);
    EXPECT_EQ(most, Binlog::kCompactReadPerFlush);  // the bound was reached, not passed
    EXPECT_GE(flushes_reading, 4);  // binlog.1 (4 MiB, a 3 MiB job in it) took several
    EXPECT_EQ(a.store->stats().compaction_read_errors, 0);
    a.Stop();
  }
  Instance b(clock_, dir_, seg);
  ASSERT_TRUE(b.ok) << b.error;
  EXPECT_EQ(b.store->restored(), kept.size() + 1);
  EXPECT_EQ(Body(b.engine->Find(big_id)), big);
  for (uint64_t id : kept) EXPECT_NE(b.engine->Find(id), nullptr) << id;
}

// A record of the head that does not read back (here: a checksum that no longer matches)
// is logged and compaction leaves the head alone for kCompactRetry: no spinning, the
// segment and its jobs stay. Once it reads again, compaction goes on.
TEST_F(BinlogTest, AHeadThatCannotBeReadIsLeftAloneForAWhile) {
  uint64_t keep = 0;
  const std::string path = dir_ + "/binlog.1";
  const off_t at = static_cast<off_t>(kSegmentHeaderSize + 30);  // in the first job's record
  char was = 0;
  {
    Instance a(clock_, dir_, 4096);
    ASSERT_TRUE(a.ok) << a.error;
    uint64_t gone = a.Put("deleted before compaction");
    keep = a.Put("kept");
    a.Flush();
    ASSERT_TRUE(a.engine->Delete(a.session, gone));
    a.Flush();
    int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pread(fd, &was, 1, at), 1);
    const char flipped = static_cast<char>(was ^ 1);
    ASSERT_EQ(pwrite(fd, &flipped, 1, at), 1);
    for (int i = 0; i < 500 && a.store->stats().compaction_read_errors == 0; i++) {
      ASSERT_TRUE(a.PutAndDelete(100));
    }
    ASSERT_EQ(a.store->stats().compaction_read_errors, 1);
    const int64_t read = a.store->stats().compaction_read;
    for (int i = 0; i < 100; i++) ASSERT_TRUE(a.PutAndDelete(100));
    EXPECT_EQ(a.store->stats().compaction_read_errors, 1);
    EXPECT_EQ(a.store->stats().compaction_read, read);  // not read again meanwhile
    EXPECT_EQ(a.store->stats().oldest_index, 1u);
    EXPECT_EQ(a.store->stats().records_migrated, 0);
    clock_.Advance(Binlog::kCompactRetry);
    ASSERT_TRUE(a.PutAndDelete(100));
    EXPECT_EQ(a.store->stats().compaction_read_errors, 2);  // read again: still damaged
    ASSERT_EQ(pwrite(fd, &was, 1, at), 1);                  // repaired
    close(fd);
    clock_.Advance(Binlog::kCompactRetry);
    ASSERT_NO_FATAL_FAILURE(ChurnUntilTheFirstSegmentGoes(a));
    EXPECT_EQ(a.store->stats().compaction_read_errors, 2);
    EXPECT_EQ(Body(a.engine->Find(keep)), "kept");
    a.Stop();
  }
  ExpectRestoredAlone(clock_, dir_, keep, "kept");
}

// Puts a job with `gone_body`, then one with "kept" (returned), and deletes the first (each
// flushed): binlog.1 holds the deleted job's record at kSegmentHeaderSize, then the kept one.
uint64_t PutAJobAfterADeletedOne(Instance& a, const std::string& gone_body) {
  uint64_t gone = a.Put(gone_body);
  uint64_t keep = a.Put("kept");
  a.Flush();
  EXPECT_TRUE(a.engine->Delete(a.session, gone));
  a.Flush();
  return keep;
}

// Writes `bytes` at `off` of file `path`.
void Overwrite(const std::string& path, int64_t off, std::string_view bytes) {
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(pwrite(fd, bytes.data(), bytes.size(), off), static_cast<ssize_t>(bytes.size()));
  close(fd);
}

// With --binlog-skip-damaged, compaction passes a damaged record of the head as start-up
// does (logged once): it looks for the next valid record and goes on, so the head still goes.
TEST_F(BinlogTest, WithSkipDamagedCompactionPassesADamagedRecord) {
  uint64_t keep = 0;
  {
    Instance a(clock_, dir_, 4096, /*skip_damaged=*/true);
    ASSERT_TRUE(a.ok) << a.error;
    keep = PutAJobAfterADeletedOne(a, std::string(300, 'g'));
    // The deleted job's record: its length made to run past the data, a byte of its body changed.
    const std::string_view junk("\x7f\x7f\x7f\x00", 4);
    ASSERT_NO_FATAL_FAILURE(Overwrite(dir_ + "/binlog.1", kSegmentHeaderSize + 4, junk));
    ASSERT_NO_FATAL_FAILURE(
        Overwrite(dir_ + "/binlog.1", kSegmentHeaderSize + 100, junk.substr(0, 1)));
    ASSERT_NO_FATAL_FAILURE(ChurnUntilTheFirstSegmentGoes(a));
    EXPECT_EQ(a.store->stats().compaction_read_errors, 1);
    EXPECT_EQ(Body(a.engine->Find(keep)), "kept");
    a.Stop();
  }
  ExpectRestoredAlone(clock_, dir_, keep, "kept");
}

// With --binlog-skip-damaged, a run of damage whose lengths all run past the data (here
// 64 KiB of 0xff) is passed in a few Flushes: an offset where no checksum is computed costs
// the search a byte, not the bytes buffered after it (which made it pass ~16 offsets a Flush).
TEST_F(BinlogTest, WithSkipDamagedARunOfGarbageIsPassedInAFewFlushes) {
  const int64_t seg = 256 << 10;
  uint64_t keep = 0;
  {
    Instance a(clock_, dir_, seg, /*skip_damaged=*/true);
    ASSERT_TRUE(a.ok) << a.error;
    keep = PutAJobAfterADeletedOne(a, std::string(64 << 10, 'g'));
    const std::string junk(FullRecordSize(7, 64 << 10), '\xff');  // the deleted job's record
    ASSERT_NO_FATAL_FAILURE(Overwrite(dir_ + "/binlog.1", kSegmentHeaderSize, junk));
    int flushes = 0;  // since compaction first read binlog.1
    for (int i = 0; i < 3000 && a.store->stats().oldest_index == 1; i++) {
      ASSERT_TRUE(a.PutAndDelete(20000));
      if (a.store->stats().compaction_read > 0) flushes += 2;
    }
    EXPECT_GT(a.store->stats().oldest_index, 1u);
    EXPECT_LE(flushes, 20);
    EXPECT_EQ(a.store->stats().compaction_read_errors, 1);
    EXPECT_EQ(Body(a.engine->Find(keep)), "kept");
    a.Stop();
  }
  Instance b(clock_, dir_, seg);
  ASSERT_TRUE(b.ok) << b.error;
  EXPECT_EQ(b.store->restored(), 1u);
  EXPECT_EQ(Body(b.engine->Find(keep)), "kept");
}

// Heads one after the other full of live jobs, each read in several reads (segments of
// 256 KiB, reads of 64 KiB): each is read from its own start (its header first), every job
// moves, and all of them come back.
TEST_F(BinlogTest, ConsecutiveHeadsAreEachReadFromTheirStart) {
  const int64_t seg = 256 << 10;
  const std::string pad(100, 'p');
  std::vector<uint64_t> kept;
  {
    Instance a(clock_, dir_, seg);
    ASSERT_TRUE(a.ok) << a.error;
    for (int i = 0; i < 4000; i++) kept.push_back(a.Put(std::to_string(i) + pad));
    a.Flush();
    const uint32_t last = a.store->stats().current_index;
    ASSERT_GE(last, 3u);
    for (int i = 0; i < 3000 && a.store->stats().oldest_index <= last; i++) {
      ASSERT_TRUE(a.PutAndDelete(20000));
    }
    EXPECT_GT(a.store->stats().oldest_index, last);
    EXPECT_GE(a.store->stats().records_migrated, 4000);
    EXPECT_EQ(a.store->stats().compaction_read_errors, 0);
    a.Stop();
  }
  Instance b(clock_, dir_, seg);
  ASSERT_TRUE(b.ok) << b.error;
  EXPECT_EQ(b.store->restored(), kept.size());
  for (size_t i = 0; i < kept.size(); i++) {
    EXPECT_EQ(Body(b.engine->Find(kept[i])), std::to_string(i) + pad);
  }
}

// Kills (copies of the directory between Flushes) while compaction moves jobs: every copy
// restores every kept job, with its body.
TEST_F(BinlogTest, AKillWhileCompactionRunsLosesNothing) {
  std::vector<uint64_t> kept;
  std::vector<std::string> copies;
  {
    Instance a(clock_, dir_, 4096);
    ASSERT_TRUE(a.ok) << a.error;
    for (int i = 0; i < 40; i++) {
      kept.push_back(a.Put("kept " + std::to_string(i)));
      ASSERT_TRUE(a.PutAndDelete(150));
    }
    int64_t migrated = 0;
    for (int i = 0; i < 3000 && copies.size() < 6; i++) {
      ASSERT_TRUE(a.PutAndDelete(150));
      if (a.store->stats().records_migrated >= migrated + 15) {
        migrated = a.store->stats().records_migrated;
        copies.push_back(tu::MakeTempDir());
        CopyDir(dir_, copies.back());
      }
    }
    ASSERT_EQ(copies.size(), 6u);
    EXPECT_EQ(a.store->stats().compaction_read_errors, 0);  // every head read as it came
  }
  for (const std::string& copy : copies) {
    {
      Instance b(clock_, copy, 4096);
      ASSERT_TRUE(b.ok) << b.error;
      EXPECT_EQ(b.store->restored(), kept.size());
      for (size_t i = 0; i < kept.size(); i++) {
        EXPECT_EQ(Body(b.engine->Find(kept[i])), "kept " + std::to_string(i)) << copy;
      }
    }
    tu::RemoveDir(copy);
  }
}

// Jobs only on disk (the disk tier), some written whole again after a change, are moved by
// compaction copying their latest record, without being read into memory; after a kill they
// are as the same binlog restored before compaction says.
class CompactionColdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tu::MakeTempDir();
    copy_ = tu::MakeTempDir();
    wall0_ = std::chrono::system_clock::now();
  }
  // How far apart wall-clock times may be: a job moved from memory has its times written
  // again from the fake clock, which the wall clock has left behind meanwhile.
  double Drift() const {
    return std::chrono::duration<double>(std::chrono::system_clock::now() - wall0_).count() + 1;
  }
  void TearDown() override {
    tu::RemoveDir(dir_);
    tu::RemoveDir(copy_);
  }
  std::string dir_, copy_;
  FakeClock clock_;
  std::chrono::system_clock::time_point wall0_;
};

// Puts a job with `body` through t's session (delay `delay`); its id (0: refused).
uint64_t PutOn(tu::Tier& t, std::string_view body, uint32_t delay = 0) {
  command::PutSlot slot = t.session->BeginPut({5, delay, 30, static_cast<uint32_t>(body.size())});
  if (!slot.data) return 0;
  std::copy(body.begin(), body.end(), slot.data);
  std::copy_n("\r\n", 2, slot.data + body.size());
  command::Result r = t.session->CommitPut();
  return r.outcome == command::Outcome::kInserted ? r.number : 0;
}

TEST_F(CompactionColdTest, ColdJobsAreMovedFromTheirRecordsAndSurviveAKill) {
  const int puts = 600;
  size_t jobs = 0;
  {
    tu::Tier t(clock_, dir_, 1);
    ASSERT_TRUE(t.ok) << t.error;
    tu::MakeHistory(t, 7, puts, true);
    for (int i = 0; i < 5; i++) t.Tick();
    jobs = t.Jobs();
    ASSERT_GT(t.cold->Count(), jobs / 2);
    CopyDir(dir_, copy_);  // before compaction
    const uint32_t last = t.log->stats().current_index;
    const size_t cold = t.cold->Count();
    t.session->Use("churn");
    const std::string body(300, 'c');
    for (int i = 0; i < 5000 && t.log->stats().oldest_index <= last; i++) {
      const uint64_t id = PutOn(t, body);
      ASSERT_NE(id, 0u);
      ASSERT_EQ(t.session->Delete(id).outcome, command::Outcome::kDeleted);
      if (i % 5 == 0) t.Tick();
    }
    EXPECT_GT(t.log->stats().oldest_index, last);  // every segment of the history went
    EXPECT_GE(t.log->stats().records_migrated, static_cast<int64_t>(jobs));
    EXPECT_EQ(t.cold->Count(), cold);  // none read into memory to be moved
    EXPECT_EQ(t.log->stats().compaction_read_errors, 0);
    EXPECT_EQ(t.Jobs(), jobs);
    t.Crash();
  }
  tu::Tier c(clock_, dir_, 0), b(clock_, copy_, 0);
  ASSERT_TRUE(c.ok && b.ok);
  EXPECT_EQ(c.Jobs(), jobs);
  command::testing_util::ExpectSameCounts(*c.session->Stats().stats, *b.session->Stats().stats,
                                          "stats");
  for (uint64_t id = 1; id <= static_cast<uint64_t>(puts); id++) {
    command::Result x = c.session->StatsJob(id), y = b.session->StatsJob(id);
    ASSERT_EQ(x.outcome, y.outcome) << id;
    if (x.outcome != command::Outcome::kJobStats) continue;
    // The same job but for its file: compaction moved it.
    command::testing_util::ExpectSameJob(*x.job_stats, *y.job_stats, std::to_string(id),
                                         {true, Drift()});
    EXPECT_EQ(c.session->Peek(id).job.body, b.session->Peek(id).job.body) << id;
  }
}

// Adds to DIR a last segment (sparse) whose records run to `end`, past 4 GiB, and to DIR's
// checkpoint: the next start writes on in it there, as after a long run with a large -s.
void AddASegmentEndingAt(const std::string& dir, int64_t end) {
  CheckpointReader in;
  std::string why;
  ASSERT_TRUE(in.Open(dir + "/" + kCheckpointName, &why)) << why;
  CheckpointMeta meta = in.meta();
  std::vector<CheckpointJob> jobs;
  for (CheckpointJob j; in.Next(&j, &why);) jobs.push_back(j);
  ASSERT_EQ(jobs.size(), meta.jobs) << why;
  const uint32_t seq = meta.segments.back().seq + 1;
  const std::string tail(kCheckpointTailBytes, 'r');  // the bytes of its last records
  meta.segments.push_back({seq, end + (1 << 20), end, Crc32c(tail.data(), tail.size())});
  const std::string path = dir + "/binlog." + std::to_string(seq);
  ASSERT_NO_FATAL_FAILURE(tu::WriteFile(path, tu::ReadFile(dir + "/binlog.1").substr(0, 32)));
  ASSERT_EQ(truncate(path.c_str(), meta.segments.back().size), 0);
  ASSERT_NO_FATAL_FAILURE(Overwrite(path, end - kCheckpointTailBytes, tail));
  int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dir_fd, 0);
  CheckpointWriter out;
  EXPECT_TRUE(out.Begin(dir, dir_fd, meta, &why)) << why;
  for (const CheckpointJob& j : jobs) EXPECT_TRUE(out.Add(j, &why)) << why;
  EXPECT_TRUE(out.Finish(&why)) << why;
  close(dir_fd);
}

// A job only on disk is found again by where its record is, in 4 bytes: compaction does not
// copy it where that cannot be kept (past 4 GiB in a segment of a large -s), as the disk
// tier's rewrites do not, but waits for a segment where it can. Copied there, the job would
// lose its place: neither readable any more nor movable (its segment kept for ever).
TEST_F(CompactionColdTest, AColdJobIsNotMovedWhereItsPlaceCannotBeKept) {
  std::vector<uint64_t> ids;
  {
    tu::Tier t(clock_, dir_, 1);
    ASSERT_TRUE(t.ok) << t.error;
    for (int i = 0; i < 10; i++) {
      ids.push_back(PutOn(t, "cold", /*delay=*/100000));
      ASSERT_NE(ids.back(), 0u);
    }
    for (int i = 0; i < 5; i++) t.Tick();
    ASSERT_EQ(t.cold->Count(), ids.size());
    ASSERT_TRUE(t.Shutdown());
  }
  ASSERT_NO_FATAL_FAILURE(AddASegmentEndingAt(dir_, (int64_t{1} << 32) + 4096));
  tu::Tier t(clock_, dir_, 1);
  ASSERT_TRUE(t.ok) << t.error;
  ASSERT_EQ(t.log->restored_cold(), ids.size());
  for (int i = 0; i < 5; i++) t.Tick();  // compaction would move them now (4 GiB used)
  EXPECT_EQ(t.log->stats().records_migrated, 0);
  EXPECT_EQ(t.log->stats().oldest_index, 1u);
  const uint32_t big = t.log->stats().current_index;
  // Puts (deleted) until the writing goes on in the next segment: they move then.
  t.session->Use("churn");
  const std::string body(1000, 'c');
  for (int i = 0; i < 3000 && t.log->stats().oldest_index == 1; i++) {
    const uint64_t id = PutOn(t, body);
    ASSERT_NE(id, 0u);
    ASSERT_EQ(t.session->Delete(id).outcome, command::Outcome::kDeleted);
    t.Tick();
  }
  EXPECT_GT(t.log->stats().current_index, big);
  EXPECT_GT(t.log->stats().oldest_index, 1u);
  EXPECT_EQ(t.log->stats().records_migrated, static_cast<int64_t>(ids.size()));
  EXPECT_EQ(t.cold->Count(), ids.size());  // moved without being read into memory
  for (uint64_t id : ids) {
    command::Result r = t.session->Peek(id);
    ASSERT_EQ(r.outcome, command::Outcome::kFound) << id;
    EXPECT_EQ(r.job.body, "cold");
  }
}

}  // namespace
}  // namespace stalkd::storage
