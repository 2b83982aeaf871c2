#include "storage/record.h"

#include <string>
#include <vector>

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

// A key and two attributes, laid out as JobExtra's blob.
const std::string kBlob = std::string("order-17") + std::string("\x04\x02", 2) + "lang" + "en" +
                          std::string("\x01\x00", 2) + "x";

JobRecord SampleExtra() {
  JobRecord r = Sample();
  r.extra.present = true;
  r.extra.limited = true;
  r.extra.has_ttl = true;
  r.extra.tries_left = 3;
  r.extra.expires_wall = 1700000900000000000;
  r.extra.bury_reason = engine::BuryReason::kTimeout;
  r.extra.key_len = 8;
  r.extra.attr_count = 2;
  r.extra.blob = kBlob;
  return r;
}

// What a kState record carries of the extension fields: not the key and attributes.
ExtraRecord WithoutBlob(ExtraRecord x) {
  x.key_len = 0;
  x.attr_count = 0;
  x.blob = {};
  return x;
}

// Recomputes a record's CRC after its payload was changed on purpose.
void Recrc(std::string* rec) {
  uint32_t crc = Crc32c(rec->data() + 4, rec->size() - 4);
  for (int i = 0; i < 4; i++) (*rec)[static_cast<size_t>(i)] = static_cast<char>(crc >> (8 * i));
}

Parse ParseOne(const std::string& buf, Record* r, uint32_t version = kFormatVersion) {
  size_t size = 0;
  std::string why;
  Parse p = ParseRecord(buf.data(), buf.size(), r, &size, &why, version);
  if (p == Parse::kOk) {
    EXPECT_EQ(size, buf.size());
  } else if (p == Parse::kBad) {
    EXPECT_FALSE(why.empty());
  }
  return p;
}

// A header of format `version`, with its checksum.
std::string Header(uint32_t version) {
  std::string h("STALKDWL");
  for (int i = 0; i < 4; i++) h.push_back(static_cast<char>(version >> (8 * i)));
  uint32_t crc = Crc32c(h.data(), 12);
  for (int i = 0; i < 4; i++) h.push_back(static_cast<char>(crc >> (8 * i)));
  return h;
}

// One record of every shape.
std::vector<std::string> EveryShape() {
  std::vector<std::string> out(5);
  AppendFull(&out[0], Sample());
  AppendFull(&out[1], SampleExtra());
  AppendState(&out[2], SampleExtra());
  AppendTubeTries(&out[3], "emails", 5);
  AppendState(&out[4], Sample());
  return out;
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
  EXPECT_EQ(hdr.substr(0, 12), std::string("STALKDWL\x02\0\0\0", 12));
  std::string why;
  uint32_t version = 0;
  EXPECT_TRUE(CheckSegmentHeader(hdr.data(), hdr.size(), &why, &version));
  EXPECT_EQ(version, 2u);
  EXPECT_EQ(hdr, Header(2));
  hdr[8] = 1;  // the checksum no longer matches
  EXPECT_FALSE(CheckSegmentHeader(hdr.data(), hdr.size(), &why));
  EXPECT_NE(why.find("checksum"), std::string::npos) << why;
  // Version 1 is still read; versions never written are not.
  hdr = Header(1);
  EXPECT_TRUE(CheckSegmentHeader(hdr.data(), hdr.size(), &why, &version));
  EXPECT_EQ(version, 1u);
  for (uint32_t v : {0u, 3u, 0x01000000u}) {
    hdr = Header(v);
    EXPECT_FALSE(CheckSegmentHeader(hdr.data(), hdr.size(), &why)) << v;
    EXPECT_EQ(why, "unsupported format version " + std::to_string(v));
  }
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
  for (const std::string& good : EveryShape()) {
    for (size_t i = 0; i < good.size(); i++) {
      for (int bit = 0; bit < 8; bit++) {
        std::string bad = good;
        bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
        Record r;
        size_t size;
        std::string why;
        EXPECT_EQ(ParseRecord(bad.data(), bad.size(), &r, &size, &why), Parse::kBad)
            << "type " << int{good[8]} << " byte " << i << " bit " << bit;
      }
    }
  }
}

TEST(RecordTest, EveryCutIsDetected) {
  for (const std::string& good : EveryShape()) {
    for (size_t n = 1; n < good.size(); n++) {
      Record r;
      size_t size;
      std::string why;
      EXPECT_EQ(ParseRecord(good.data(), n, &r, &size, &why), Parse::kBad)
          << "type " << int{good[8]} << " cut " << n;
    }
  }
}

TEST(RecordTest, PlainJobsKeepTheirVersion1Sizes) {
  // A job without extensions costs what it did in version 1, on disk and in reservations.
  static_assert(kStateRecordSize == 66);
  EXPECT_EQ(FullRecordSize(6, 8), 9u + 57 + 1 + 6 + 4 + 8);
  std::string full, state;
  AppendFull(&full, Sample());
  AppendState(&state, Sample());
  EXPECT_EQ(full.size(), FullRecordSize(6, 8));
  EXPECT_EQ(state.size(), kStateRecordSize);
  EXPECT_EQ(static_cast<uint8_t>(full[9 + 8]), 4u);  // the state byte, without the flag
}

TEST(RecordTest, FullWithExtensionsRoundTrip) {
  std::string buf;
  AppendFull(&buf, SampleExtra());
  ASSERT_EQ(buf.size(), FullRecordSize(6, 8, kBlob.size()));
  EXPECT_EQ(static_cast<uint8_t>(buf[9 + 8]), 0x84u);  // buried, extension fields follow
  Record r;
  ASSERT_EQ(ParseOne(buf, &r), Parse::kOk);
  EXPECT_EQ(r.type, RecordType::kFull);
  ExpectSameFixed(r.job, SampleExtra());
  EXPECT_TRUE(r.job.extra == SampleExtra().extra);
  EXPECT_EQ(r.job.tube, "emails");
  EXPECT_EQ(r.job.body, Sample().body);
  // Without key, attributes, TTL or a limit: the fields are still there, empty.
  JobRecord bare = Sample();
  bare.extra.present = true;
  buf.clear();
  AppendFull(&buf, bare);
  ASSERT_EQ(buf.size(), FullRecordSize(6, 8, 0));
  ASSERT_EQ(ParseOne(buf, &r), Parse::kOk);
  EXPECT_TRUE(r.job.extra == bare.extra);
}

TEST(RecordTest, StateWithExtensionsCarriesNoBlob) {
  std::string buf;
  AppendState(&buf, SampleExtra());
  ASSERT_EQ(buf.size(), kExtraStateRecordSize);
  EXPECT_EQ(kMaxSmallRecord, kExtraStateRecordSize);
  Record r;
  ASSERT_EQ(ParseOne(buf, &r), Parse::kOk);
  EXPECT_EQ(r.type, RecordType::kState);
  ExpectSameFixed(r.job, SampleExtra());
  EXPECT_TRUE(r.job.extra == WithoutBlob(SampleExtra().extra));
}

TEST(RecordTest, TubeTriesRoundTrip) {
  std::string buf;
  AppendTubeTries(&buf, "emails", 0xfffffffeu);
  ASSERT_EQ(buf.size(), TubeTriesRecordSize(6));
  EXPECT_EQ(buf.substr(4, 5), std::string("\x0b\0\0\0\x05", 5));
  Record r;
  ASSERT_EQ(ParseOne(buf, &r), Parse::kOk);
  EXPECT_EQ(r.type, RecordType::kTubeTries);
  EXPECT_EQ(r.job.tube, "emails");
  EXPECT_EQ(r.tries, 0xfffffffeu);
  buf.clear();
  AppendTubeTries(&buf, std::string(kMaxTubeName, 't'), 0);
  ASSERT_EQ(ParseOne(buf, &r), Parse::kOk);
  EXPECT_EQ(r.job.tube.size(), kMaxTubeName);
  EXPECT_EQ(r.tries, 0u);
  buf.clear();
  AppendTubeTries(&buf, "", 1);  // a tube has a name
  EXPECT_EQ(ParseOne(buf, &r), Parse::kBad);
}

TEST(RecordTest, Version1SegmentsParseAndKnowNoVersion2Shapes) {
  // Plain job records are the same bytes in both versions.
  std::vector<std::string> shapes = EveryShape();
  for (size_t i : {0u, 4u}) {
    Record r;
    EXPECT_EQ(ParseOne(shapes[i], &r, 1), Parse::kOk) << i;
  }
  std::string del;
  AppendDelete(&del, 5);
  AppendAdoptDone(&del);
  EXPECT_EQ(FindNextRecord(del.data(), del.size(), 0, 1), 0u);
  // Extension fields and tube tries do not exist in version 1: damage there.
  for (size_t i : {1u, 2u, 3u}) {
    Record r;
    EXPECT_EQ(ParseOne(shapes[i], &r, 1), Parse::kBad) << i;
    EXPECT_EQ(FindNextRecord(shapes[i].data(), shapes[i].size(), 0, 1), shapes[i].size()) << i;
  }
}

// Extension fields that are wrong although the checksum matches (a bug, or a file made by
// hand) are a damaged record: the engine never sees them.
TEST(RecordTest, MalformedExtensionFieldsAreBadRecords) {
  std::string good;
  AppendFull(&good, SampleExtra());
  const size_t ext = kRecordHeaderSize + kJobFixedSize;  // the flags byte
  const size_t key_len = ext + kExtraFixedSize, attr_count = key_len + 2, blob_len = key_len + 3;
  const size_t blob = key_len + kExtraBlobHeaderSize;
  struct Case {
    const char* what;
    size_t at;
    char value;
  };
  const Case cases[] = {
      {"unknown flag", ext, 0x07},
      {"bury reason", ext + 13, 4},
      {"key longer than the blob", key_len, 0x7f},
      {"key too long", key_len + 1, 0x01},
      {"attribute count too high", attr_count, 3},
      {"attribute count too low", attr_count, 1},
      {"too many attributes", attr_count, 17},
      {"blob length", blob_len, static_cast<char>(kBlob.size() - 1)},
      {"empty attribute name", blob + 8, 0},
      {"attribute value past the blob", blob + 9, 9},
  };
  for (const Case& c : cases) {
    std::string bad = good;
    bad[c.at] = c.value;
    Recrc(&bad);
    Record r;
    EXPECT_EQ(ParseOne(bad, &r), Parse::kBad) << c.what;
  }
  std::string state;
  AppendState(&state, SampleExtra());
  state[kRecordHeaderSize + kJobFixedSize + 13] = 9;  // bury reason
  Recrc(&state);
  Record r;
  EXPECT_EQ(ParseOne(state, &r), Parse::kBad);
  // A plain state record with extension fields after it is too long.
  state.clear();
  AppendState(&state, SampleExtra());
  state[kRecordHeaderSize + 8] = 4;
  Recrc(&state);
  EXPECT_EQ(ParseOne(state, &r), Parse::kBad);
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
