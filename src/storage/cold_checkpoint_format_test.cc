// The disk tier's checkpoint file (docs/DISK-TIER.md, storage/cold_checkpoint.h): its format
// round trips (jobs in memory, delayed and ready ones on disk), every cut and every flipped
// byte is refused, version 1 is still read and knows no ready job on disk, other flags and
// versions are refused; and its match against the segments finds every difference. The
// restarts that use it: cold_checkpoint_test.cc.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "storage/binlog_test_util.h"
#include "storage/cold_checkpoint.h"
#include "storage/cold_tier_test_util.h"
#include "storage/crc32c.h"
#include "storage/record.h"

namespace stalkd::storage {
namespace {

using testing_util::Exists;
using testing_util::MakeTempDir;
using testing_util::ReadFile;
using testing_util::RemoveDir;
using testing_util::WriteFile;

class CheckpointFormatTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir(); }
  void TearDown() override { RemoveDir(dir_); }
  std::string Path(const char* name) const { return dir_ + "/" + name; }
  std::string dir_;
};

CheckpointMeta SampleMeta() {
  CheckpointMeta m;
  m.max_id = 99;
  m.segments = {{3, 8192, 4000, 0x1234}, {4, 8192, 16, 0}};
  m.tubes = {"default", "a"};
  m.tube_tries = {{"a", 3, 3, 20}};
  m.jobs = 4;
  return m;
}

std::vector<CheckpointJob> SampleJobs() {
  CheckpointJob hot{5, 3, 16, 80};
  CheckpointJob cold{7, 3, 96, 90, true, 83, 1, 1'700'000'000'000'000'000, 1'600'000'000};
  CheckpointJob ready{8, 3, 186, 70, true, 17, 1, 0, -7, true, 4'000'000'000};
  CheckpointJob last{99, 3, 256, 70, true, 17, 0, -5, 6};
  return {hot, cold, ready, last};
}

// bytes with their CRC (the last 4) made good again.
std::string Resealed(std::string bytes) {
  const uint32_t crc = Crc32c(bytes.data(), bytes.size() - 4);
  for (size_t i = 0; i < 4; i++) bytes[bytes.size() - 4 + i] = static_cast<char>(crc >> (8 * i));
  return bytes;
}

TEST_F(CheckpointFormatTest, FormatRoundTripsAndRefusesEveryCutAndFlippedByte) {
  int dfd = open(dir_.c_str(), O_RDONLY | O_DIRECTORY);
  CheckpointWriter w;
  std::string why;
  ASSERT_TRUE(w.Begin(dir_, dfd, SampleMeta(), &why));
  for (const CheckpointJob& j : SampleJobs()) ASSERT_TRUE(w.Add(j, &why));
  ASSERT_TRUE(w.Finish(&why)) << why;
  EXPECT_FALSE(Exists(Path(kCheckpointTmpName)));
  // Read back, twice (Rewind).
  CheckpointReader r;
  ASSERT_TRUE(r.Open(Path(kCheckpointName), &why)) << why;
  EXPECT_EQ(r.meta(), SampleMeta());
  for (int pass = 0; pass < 2; pass++) {
    std::vector<CheckpointJob> got;
    CheckpointJob j;
    while (r.Next(&j, &why)) got.push_back(j);
    EXPECT_EQ(why, "");
    EXPECT_EQ(got, SampleJobs());
    ASSERT_TRUE(r.Rewind(&why));
  }
  // Order and count are the writer's to keep.
  CheckpointWriter bad;
  ASSERT_TRUE(bad.Begin(dir_, dfd, SampleMeta(), &why));
  ASSERT_TRUE(bad.Add(SampleJobs()[1], &why));
  EXPECT_FALSE(bad.Add(SampleJobs()[0], &why));
  EXPECT_FALSE(bad.Finish(&why));
  close(dfd);

  const std::string good = ReadFile(Path(kCheckpointName));
  for (size_t n = 0; n < good.size(); n++) {  // every cut
    WriteFile(Path(kCheckpointName), good.substr(0, n));
    CheckpointReader c;
    EXPECT_FALSE(c.Open(Path(kCheckpointName), &why)) << n;
  }
  for (size_t i = 0; i < good.size(); i++) {  // every flipped byte
    std::string bytes = good;
    bytes[i] ^= 0x20;
    WriteFile(Path(kCheckpointName), bytes);
    CheckpointReader c;
    EXPECT_FALSE(c.Open(Path(kCheckpointName), &why)) << i;
  }
  int err = 0;
  CheckpointReader none;
  EXPECT_FALSE(none.Open(dir_ + "/none", &why, &err));
  EXPECT_EQ(err, ENOENT);
}

// Version 2 lists ready jobs on disk (flags 2); version 1, which had none, is still read,
// and a ready job in it is refused, as is any other flag value.
TEST_F(CheckpointFormatTest, VersionOneIsReadAndKnowsNoReadyJobOnDisk) {
  int dfd = open(dir_.c_str(), O_RDONLY | O_DIRECTORY);
  std::string why;
  auto write = [&](const CheckpointMeta& m, const std::vector<CheckpointJob>& jobs) {
    CheckpointWriter w;
    bool ok = w.Begin(dir_, dfd, m, &why);
    for (const CheckpointJob& j : jobs) ok = ok && w.Add(j, &why);
    return ok && w.Finish(&why);
  };
  // Read each job of the file; what stopped it (empty: it was read whole).
  auto read = [&](std::vector<CheckpointJob>* got) {
    CheckpointReader r;
    std::string e;
    if (!r.Open(Path(kCheckpointName), &e)) return "open: " + e;
    CheckpointJob j;
    while (r.Next(&j, &e)) got->push_back(j);
    return e;
  };
  CheckpointMeta v1 = SampleMeta();
  v1.version = 1;
  std::vector<CheckpointJob> jobs = SampleJobs();
  EXPECT_FALSE(write(v1, jobs));  // version 1 cannot list a ready job on disk
  EXPECT_NE(why.find("version 1"), std::string::npos) << why;
  jobs.erase(jobs.begin() + 2);
  v1.jobs = jobs.size();
  ASSERT_TRUE(write(v1, jobs)) << why;
  const std::string old = ReadFile(Path(kCheckpointName));
  ASSERT_EQ(old[8], 1);  // the version, after the magic
  {
    CheckpointReader r;
    ASSERT_TRUE(r.Open(Path(kCheckpointName), &why)) << why;
    EXPECT_EQ(r.meta(), v1);
  }
  std::vector<CheckpointJob> got;
  EXPECT_EQ(read(&got), "");
  EXPECT_EQ(got, jobs);

  // One ready job on disk, last: its flags byte is 41 + 4 bytes from the end.
  CheckpointMeta m = SampleMeta();
  m.jobs = 1;
  ASSERT_TRUE(write(m, {SampleJobs()[2]})) << why;
  const std::string good = ReadFile(Path(kCheckpointName));
  const size_t flags = good.size() - 4 - 41 + 20;
  ASSERT_EQ(good[flags], 2);
  got.clear();
  EXPECT_EQ(read(&got), "");
  EXPECT_EQ(got, std::vector<CheckpointJob>{SampleJobs()[2]});
  std::string as_v1 = good;
  as_v1[8] = 1;
  WriteFile(Path(kCheckpointName), Resealed(as_v1));
  got.clear();
  EXPECT_NE(read(&got).find("unknown flags"), std::string::npos);
  EXPECT_TRUE(got.empty());
  for (int f : {3, 4, 0x42, 0x80}) {
    std::string bad = good;
    bad[flags] = static_cast<char>(f);
    WriteFile(Path(kCheckpointName), Resealed(bad));
    got.clear();
    EXPECT_NE(read(&got).find("unknown flags"), std::string::npos) << f;
  }
  // A ready job's tube must be one of the file's; its fields must be whole.
  std::string no_tube = good;
  no_tube[flags + 1 + 4] = 2;  // tube 2 of 2
  WriteFile(Path(kCheckpointName), Resealed(no_tube));
  got.clear();
  EXPECT_NE(read(&got).find("no such tube"), std::string::npos);
  std::string cut = good.substr(0, good.size() - 4 - 10) + "CRC!";
  WriteFile(Path(kCheckpointName), Resealed(cut));
  got.clear();
  EXPECT_EQ(read(&got), "cut short");
  // Version 3 is not known.
  std::string v3 = good;
  v3[8] = 3;
  WriteFile(Path(kCheckpointName), Resealed(v3));
  got.clear();
  EXPECT_NE(read(&got).find("unsupported version 3"), std::string::npos);
  close(dfd);
}

// The writer never writes what the reader refuses: a tube with no name (or a name over a
// length byte) is refused at Begin, as the reader refuses it.
TEST_F(CheckpointFormatTest, ATubeWithNoNameIsNeitherWrittenNorRead) {
  int dfd = open(dir_.c_str(), O_RDONLY | O_DIRECTORY);
  std::string why;
  for (int k = 0; k < 3; k++) {
    CheckpointMeta m = SampleMeta();
    if (k == 0) m.tubes[0].clear();
    if (k == 1) m.tube_tries[0].tube.clear();
    if (k == 2) m.tubes[0] = std::string(256, 'x');
    CheckpointWriter w;
    EXPECT_FALSE(w.Begin(dir_, dfd, m, &why)) << k;
    EXPECT_NE(why.find("tube name"), std::string::npos) << why;
  }
  // A file whose first tube has no name (its length byte 0, its bytes gone), CRC good.
  const CheckpointMeta m = SampleMeta();
  CheckpointWriter w;
  ASSERT_TRUE(w.Begin(dir_, dfd, m, &why)) << why;
  for (const CheckpointJob& j : SampleJobs()) ASSERT_TRUE(w.Add(j, &why));
  ASSERT_TRUE(w.Finish(&why)) << why;
  const std::string good = ReadFile(Path(kCheckpointName));
  const size_t at = 8 + 4 + 8 + 4 + 24 * m.segments.size() + 4;  // the first tube's length
  ASSERT_EQ(static_cast<size_t>(good[at]), m.tubes[0].size());
  const std::string nameless =
      good.substr(0, at) + std::string(1, '\0') + good.substr(at + 1 + m.tubes[0].size());
  WriteFile(Path(kCheckpointName), Resealed(nameless));
  CheckpointReader r;
  EXPECT_FALSE(r.Open(Path(kCheckpointName), &why));
  EXPECT_EQ(why, "a tube with no name");
  close(dfd);
}

// The segments found continue those the checkpoint covers: records after its position
// (in the segment it ends in, in later ones, in segments made since) are the tail's; the
// removal of a head segment with records, or of an empty one, is allowed; anything else
// (a segment it does not list among its own, the position's segment gone, one gone after
// one that is there, a cut segment, other bytes before the position) is not.
TEST_F(CheckpointFormatTest, MatchPrefixFindsTheTailAndEveryDifference) {
  std::string seg;
  AppendSegmentHeader(&seg);
  AppendDelete(&seg, 1);
  AppendDelete(&seg, 2);
  const int64_t end = static_cast<int64_t>(seg.size());
  seg.resize(4096, '\0');
  std::string empty;
  AppendSegmentHeader(&empty);
  empty.resize(4096, '\0');
  const int64_t header = int64_t{kSegmentHeaderSize};
  CheckpointMeta m;
  m.segments = {{1, 4096, end, SegmentTailCrc(seg.data(), end)},
                {2, 4096, end, SegmentTailCrc(seg.data(), end)},
                {3, 4096, header, 0}};
  auto views = [](std::vector<std::pair<uint32_t, const std::string*>> list) {
    std::vector<SegmentView> out;
    for (const auto& [seq, bytes] : list) out.push_back({seq, bytes->data(), bytes->size()});
    return out;
  };
  PrefixMatch p;
  std::string why;
  EXPECT_TRUE(MatchPrefix(m, views({{1, &seg}, {2, &seg}, {3, &empty}}), &p, &why)) << why;
  EXPECT_EQ(p.from, (std::vector<int64_t>{end, end, header}));
  EXPECT_TRUE(p.removed.empty());
  // Records after the position, in its segment, in a later one and in one made since; a
  // longer segment (grown for a large job).
  std::string more = seg;
  std::string rec;
  AppendDelete(&rec, 3);
  more.replace(static_cast<size_t>(end), rec.size(), rec);
  std::string filled = empty;
  filled.replace(kSegmentHeaderSize, rec.size(), rec);
  const std::string longer = more + std::string(4096, '\0');
  EXPECT_TRUE(MatchPrefix(
      m, views({{1, &seg}, {2, &longer}, {3, &filled}, {4, &filled}, {6, &empty}}), &p, &why))
      << why;
  EXPECT_EQ(p.from, (std::vector<int64_t>{end, end, header, header, header}));
  // The head segment removed (by compaction): listed as removed; an empty one dropped.
  EXPECT_TRUE(MatchPrefix(m, views({{2, &seg}, {4, &filled}}), &p, &why)) << why;
  EXPECT_EQ(p.from, (std::vector<int64_t>{end, header}));
  EXPECT_EQ(p.removed, std::vector<uint32_t>{1});
  // The position's segment gone; one with records gone after one that is there.
  EXPECT_FALSE(MatchPrefix(m, views({{1, &seg}, {3, &empty}}), &p, &why));
  EXPECT_NE(why.find("binlog.2"), std::string::npos) << why;
  CheckpointMeta three = m;
  three.segments.insert(three.segments.begin() + 1, {5, 0, 0, 0});  // out of order
  EXPECT_FALSE(MatchPrefix(three, views({{1, &seg}, {2, &seg}}), &p, &why));
  three = m;
  three.segments[2] = {3, 4096, end, SegmentTailCrc(seg.data(), end)};
  EXPECT_TRUE(MatchPrefix(three, views({{2, &seg}, {3, &seg}}), &p, &why)) << why;
  EXPECT_EQ(p.removed, std::vector<uint32_t>{1});
  EXPECT_FALSE(MatchPrefix(three, views({{1, &seg}, {2, &seg}}), &p, &why));  // the position
  EXPECT_TRUE(MatchPrefix(three, views({{1, &seg}, {2, &seg}, {3, &seg}}), &p, &why)) << why;
  EXPECT_FALSE(MatchPrefix(three, views({{1, &seg}, {3, &seg}}), &p, &why));
  EXPECT_NE(why.find("binlog.2"), std::string::npos) << why;
  // A segment among its own that it does not list.
  std::vector<SegmentView> other = views({{1, &seg}, {2, &seg}, {3, &empty}});
  other.insert(other.begin() + 1, other[0]);
  other[1].seq = 1;  // twice
  EXPECT_FALSE(MatchPrefix(m, other, &p, &why));
  CheckpointMeta gap = m;
  gap.segments[2].seq = 5;
  EXPECT_FALSE(MatchPrefix(gap, views({{1, &seg}, {2, &seg}, {4, &empty}}), &p, &why));
  EXPECT_NE(why.find("binlog.4"), std::string::npos) << why;
  // Cut before the position; other bytes before it.
  const std::string cut = seg.substr(0, static_cast<size_t>(end) - 1);
  EXPECT_FALSE(MatchPrefix(m, views({{1, &seg}, {2, &cut}}), &p, &why));
  std::string changed = seg;
  changed[static_cast<size_t>(end) - 3] ^= 1;
  EXPECT_FALSE(MatchPrefix(m, views({{1, &seg}, {2, &changed}}), &p, &why));
  EXPECT_NE(why.find("tail CRC"), std::string::npos) << why;
  EXPECT_FALSE(MatchPrefix(m, views({{1, &changed}, {2, &seg}}), &p, &why));
  // A position past a segment's size, as its meta says.
  CheckpointMeta past = m;
  past.segments[0].end = 5000;
  EXPECT_FALSE(MatchPrefix(past, views({{1, &seg}, {2, &seg}}), &p, &why));
}

}  // namespace
}  // namespace stalkd::storage
