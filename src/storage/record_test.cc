#include "storage/record.h"

#include <gtest/gtest.h>

#include "storage/crc32c.h"

namespace stalkd::storage {
namespace {

TEST(Crc32cTest, KnownValues) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32c("", 0), 0u);
  std::string zeros(32, '\0');
  EXPECT_EQ(Crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  // Extending is the same as one pass.
  EXPECT_EQ(Crc32cExtend(Crc32c("12345", 5), "6789", 4), 0xE3069283u);
}

JobRecord Sample() {
  JobRecord r;
  r.id = 0x0102030405060708ull;
  r.state = DiskState::kBuried;
  r.pri = 4000000000u;
  r.delay_s = 7;
  r.ttr_s = 120;
  r.created_wall = 1700000000123456789;
  r.deadline_wall = -5;
  r.counts.reserves = 1;
  r.counts.timeouts = 2;
  r.counts.releases = 3;
  r.counts.buries = 4;
  r.counts.kicks = 5;
  r.tube = "emails";
  r.body = std::string_view("he\0llo\r\n", 8);
  return r;
}

void ExpectSameFixed(const JobRecord& a, const JobRecord& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.state, b.state);
  EXPECT_EQ(a.pri, b.pri);
  EXPECT_EQ(a.delay_s, b.delay_s);
  EXPECT_EQ(a.ttr_s, b.ttr_s);
  EXPECT_EQ(a.created_wall, b.created_wall);
  EXPECT_EQ(a.deadline_wall, b.deadline_wall);
  EXPECT_EQ(a.counts.reserves, b.counts.reserves);
  EXPECT_EQ(a.counts.timeouts, b.counts.timeouts);
  EXPECT_EQ(a.counts.releases, b.counts.releases);
  EXPECT_EQ(a.counts.buries, b.counts.buries);
  EXPECT_EQ(a.counts.kicks, b.counts.kicks);
}

TEST(RecordTest, FullRoundTrip) {
  std::string buf;
  AppendFull(&buf, Sample());
  ASSERT_EQ(buf.size(), FullRecordSize(6, 8));
  Record r;
  size_t size = 0;
  std::string why;
  ASSERT_EQ(ParseRecord(buf.data(), buf.size(), &r, &size, &why), Parse::kOk) << why;
  EXPECT_EQ(size, buf.size());
  EXPECT_EQ(r.type, RecordType::kFull);
  ExpectSameFixed(r.job, Sample());
  EXPECT_EQ(r.job.tube, "emails");
  EXPECT_EQ(r.job.body, Sample().body);
}

TEST(RecordTest, StateAndDeleteRoundTrip) {
  std::string buf;
  AppendState(&buf, Sample());
  AppendDelete(&buf, 42);
  AppendAdoptDone(&buf);
  ASSERT_EQ(buf.size(), kStateRecordSize + kDeleteRecordSize + kAdoptDoneRecordSize);
  Record r;
  size_t size = 0;
  std::string why;
  ASSERT_EQ(ParseRecord(buf.data(), buf.size(), &r, &size, &why), Parse::kOk);
  EXPECT_EQ(r.type, RecordType::kState);
  ExpectSameFixed(r.job, Sample());
  EXPECT_TRUE(r.job.body.empty());
  size_t off = size;
  ASSERT_EQ(ParseRecord(buf.data() + off, buf.size() - off, &r, &size, &why), Parse::kOk);
  EXPECT_EQ(r.type, RecordType::kDelete);
  EXPECT_EQ(r.job.id, 42u);
  off += size;
  ASSERT_EQ(ParseRecord(buf.data() + off, buf.size() - off, &r, &size, &why), Parse::kOk);
  EXPECT_EQ(r.type, RecordType::kAdoptDone);
}

TEST(RecordTest, ExplicitLittleEndianLayout) {
  std::string buf;
  AppendDelete(&buf, 0x1122334455667788ull);
  ASSERT_EQ(buf.size(), 17u);
  EXPECT_EQ(buf.substr(4, 5), std::string("\x08\0\0\0\x03", 5));  // len 8, type kDelete
  EXPECT_EQ(buf.substr(9), std::string("\x88\x77\x66\x55\x44\x33\x22\x11", 8));
  std::string hdr;
  AppendSegmentHeader(&hdr);
  ASSERT_EQ(hdr.size(), kSegmentHeaderSize);
  EXPECT_EQ(hdr.substr(0, 12), std::string("STALKDWL\x01\0\0\0", 12));
  std::string why;
  EXPECT_TRUE(CheckSegmentHeader(hdr.data(), hdr.size(), &why));
  hdr[8] = 2;
  EXPECT_FALSE(CheckSegmentHeader(hdr.data(), hdr.size(), &why));
}

TEST(RecordTest, ZerosEndTheData) {
  std::string zeros(100, '\0');
  Record r;
  size_t size;
  std::string why;
  EXPECT_EQ(ParseRecord(zeros.data(), zeros.size(), &r, &size, &why), Parse::kEnd);
  EXPECT_EQ(ParseRecord(zeros.data(), 3, &r, &size, &why), Parse::kEnd);
}

TEST(RecordTest, EveryFlippedBitIsDetected) {
  std::string good;
  AppendFull(&good, Sample());
  for (size_t i = 0; i < good.size(); i++) {
    for (int bit = 0; bit < 8; bit++) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
      Record r;
      size_t size;
      std::string why;
      EXPECT_EQ(ParseRecord(bad.data(), bad.size(), &r, &size, &why), Parse::kBad)
          << "byte " << i << " bit " << bit;
    }
  }
}

TEST(RecordTest, EveryCutIsDetected) {
  std::string good;
  AppendFull(&good, Sample());
  for (size_t n = 1; n < good.size(); n++) {
    Record r;
    size_t size;
    std::string why;
    EXPECT_EQ(ParseRecord(good.data(), n, &r, &size, &why), Parse::kBad) << n;
  }
}

TEST(RecordTest, FindNextRecordSkipsGarbage) {
  std::string buf(37, '\x5a');
  size_t at = buf.size();
  AppendDelete(&buf, 9);
  EXPECT_EQ(FindNextRecord(buf.data(), buf.size(), 0), at);
  EXPECT_EQ(FindNextRecord(buf.data(), buf.size(), at + 1), buf.size());
}

}  // namespace
}  // namespace stalkd::storage
