// The Redis store's partitioning of tubes on a cluster (no Redis needed).
#include "redis/store.h"

#include <gtest/gtest.h>

#include "redis/cluster.h"

namespace stalkd::redis {
namespace {

TEST(TubePartition, OnePartitionOnOneRedis) {
  EXPECT_EQ(TubePartition("default", 1), 0u);
  EXPECT_EQ(TubePartition("(a)b", 1), 0u);
}

TEST(TubePartition, ByCrc16OfTheName) {
  // CRC16-XMODEM of "123456789" is 0x31C3 (the check value of the algorithm).
  EXPECT_EQ(TubePartition("123456789", 1024), 0x31C3u % 1024);
  EXPECT_EQ(TubePartition("default", 1024), Crc16("default") % 1024);
  EXPECT_EQ(TubePartition("default", 7), Crc16("default") % 7);
}

TEST(TubePartition, AGroupInParenthesesColocates) {
  uint32_t billing = Crc16("billing") % 1024;
  EXPECT_EQ(TubePartition("(billing)high", 1024), billing);
  EXPECT_EQ(TubePartition("(billing)low", 1024), billing);
  EXPECT_EQ(TubePartition("x(billing)retry(other)", 1024), billing);  // the first group
  EXPECT_EQ(TubePartition("(billing)", 1024), billing);
}

TEST(TubePartition, NoGroupMeansTheWholeName) {
  EXPECT_EQ(TubePartition("()x", 1024), Crc16("()x") % 1024);    // empty group
  EXPECT_EQ(TubePartition("a(b", 1024), Crc16("a(b") % 1024);    // not closed
  EXPECT_EQ(TubePartition("a)b(", 1024), Crc16("a)b(") % 1024);  // closed before opened
}

}  // namespace
}  // namespace stalkd::redis
