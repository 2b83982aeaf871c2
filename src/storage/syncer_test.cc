#include "storage/syncer.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

namespace stalkd::storage {
namespace {

TEST(SyncerTest, SyncsInTheBackgroundAndSignalsWhenDone) {
  Syncer s;
  ASSERT_TRUE(s.ok());
  Syncer::Result r;
  EXPECT_FALSE(s.Collect(&r));  // nothing started
  char path[] = "/tmp/stalkd_syncer_test.XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "x", 1), 1);
  s.Start({{fd, false, 7}});
  EXPECT_TRUE(s.busy());
  pollfd p{s.notify_fd(), POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 10'000), 1);
  ASSERT_TRUE(s.Collect(&r));
  EXPECT_EQ(r.err, 0);
  EXPECT_FALSE(s.busy());
  EXPECT_FALSE(s.Collect(&r));
  EXPECT_EQ(poll(&p, 1, 0), 0);  // the notification was consumed
  close(fd);
  unlink(path);
}

TEST(SyncerTest, StopsAtTheFirstFailureAndNamesIt) {
  Syncer s;
  ASSERT_TRUE(s.ok());
  int dir = open("/tmp", O_RDONLY | O_DIRECTORY);
  ASSERT_GE(dir, 0);
  s.Start({{dir, true, 1}, {-1, false, 2}, {-1, false, 3}});
  Syncer::Result r;
  ASSERT_TRUE(s.Wait(&r));
  EXPECT_EQ(r.err, EBADF);
  EXPECT_EQ(r.failed_id, 2u);
  // The next request runs normally.
  s.Start({{dir, true, 1}});
  ASSERT_TRUE(s.Wait(&r));
  EXPECT_EQ(r.err, 0);
  close(dir);
}

class FillTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fd_ = mkstemp(path_);
    ASSERT_GE(fd_, 0);
    ASSERT_EQ(posix_fallocate(fd_, 0, kSize), 0);
    ASSERT_EQ(pwrite(fd_, "head", 4, 0), 4);
  }
  void TearDown() override {
    close(fd_);
    unlink(path_);
  }
  std::string Read(int64_t off, size_t n) {
    std::string b(n, '?');
    EXPECT_EQ(pread(fd_, b.data(), n, off), static_cast<ssize_t>(n));
    return b;
  }
  static constexpr int64_t kSize = 8 << 20;
  char path_[64] = "/tmp/stalkd_fill_test.XXXXXX";
  int fd_ = -1;
};

TEST_F(FillTest, ZeroFillsTheRangeBetweenSyncs) {
  Syncer s;
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(pwrite(fd_, "junk", 4, kSize - 4), 4);
  s.Fill(fd_, 1, 4096, kSize);
  s.Start({{fd_, false, 1}});  // a sync goes first; the fill goes on after it
  Syncer::Result r;
  ASSERT_TRUE(s.Wait(&r));
  EXPECT_EQ(r.err, 0);
  for (int i = 0; i < 1000 && s.fills_pending() > 0; i++) usleep(10'000);
  ASSERT_EQ(s.fills_pending(), 0u);
  EXPECT_EQ(Read(0, 4), "head");  // before the range: untouched
  EXPECT_EQ(Read(kSize - 4, 4), std::string(4, '\0'));
  struct stat st;
  ASSERT_EQ(fstat(fd_, &st), 0);
  EXPECT_EQ(st.st_size, kSize);
}

TEST_F(FillTest, AfterStopFillTheFileIsTheOwnersAlone) {
  // Non-zero bytes everywhere, so the fill's progress shows.
  std::string ones(kSize - 4096, '1');
  ASSERT_EQ(pwrite(fd_, ones.data(), ones.size(), 4096), static_cast<ssize_t>(ones.size()));
  Syncer s;
  ASSERT_TRUE(s.ok());
  s.Fill(fd_, 7, 4096, kSize);
  // Stop it mid-way: once its first chunk is written, likely while it writes another.
  for (int i = 0; i < 1000 && Read(4096, 1) != std::string(1, '\0'); i++) usleep(1000);
  ASSERT_EQ(Read(4096, 1), std::string(1, '\0'));
  s.StopFill(7);
  EXPECT_EQ(s.fills_pending(), 0u);
  // Whatever the thread had done, it writes nothing more: the owner's bytes stay.
  for (int64_t off = 4096; off < kSize; off += Syncer::kFillChunk / 2) {
    ASSERT_EQ(pwrite(fd_, "mine", 4, off), 4);
  }
  s.Start({{fd_, false, 7}});
  Syncer::Result r;
  ASSERT_TRUE(s.Wait(&r));
  usleep(20'000);
  for (int64_t off = 4096; off < kSize; off += Syncer::kFillChunk / 2) {
    ASSERT_EQ(Read(off, 4), "mine") << off;
  }
  s.StopFill(99);  // unknown: nothing to do
}

}  // namespace
}  // namespace stalkd::storage
