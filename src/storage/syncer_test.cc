#include "storage/syncer.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

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

TEST(SyncerTest, DestroyingItWaitsForTheRunningRequest) {
  int dir = open("/tmp", O_RDONLY | O_DIRECTORY);
  ASSERT_GE(dir, 0);
  {
    Syncer s;
    s.Start({{dir, true, 1}});
  }
  close(dir);
}

}  // namespace
}  // namespace stalkd::storage
