// The binlog and the lifecycle extensions (docs/EXTENSIONS.md): a job's tries, TTL, key,
// attributes and bury reason, and a tube's default tries, through restarts and compaction;
// reading version 1 directories.

#include <time.h>

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "storage/binlog.h"
#include "storage/binlog_test_util.h"
#include "storage/crc32c.h"
#include "storage/record.h"

namespace stalkd::storage {
namespace {

using engine::BuryReason;
using engine::Engine;
using engine::Job;
using engine::JobAttribute;
using engine::JobExtra;
using engine::JobOptions;
using engine::JobState;
using testing_util::BinlogTest;
using testing_util::Instance;
using testing_util::ReadFile;
using testing_util::Segments;
using testing_util::WriteFile;

class BinlogExtTest : public BinlogTest {
 protected:
  // A segment file of format `version` holding `records`.
  void WriteSegment(uint32_t seq, uint32_t version, const std::string& records) {
    std::string h("STALKDWL");
    for (int i = 0; i < 4; i++) h.push_back(static_cast<char>(version >> (8 * i)));
    uint32_t crc = Crc32c(h.data(), 12);
    for (int i = 0; i < 4; i++) h.push_back(static_cast<char>(crc >> (8 * i)));
    WriteFile(dir_ + "/binlog." + std::to_string(seq), h + records);
  }
  uint32_t VersionOf(uint32_t seq) {
    std::string data = ReadFile(dir_ + "/binlog." + std::to_string(seq));
    uint32_t version = 0;
    std::string why;
    EXPECT_TRUE(CheckSegmentHeader(data.data(), data.size(), &why, &version)) << why;
    return version;
  }
};

int64_t WallNow() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * kSecond + ts.tv_nsec;
}

// A plain job record of the default tube.
JobRecord Plain(uint64_t id, std::string_view body) {
  JobRecord r;
  r.id = id;
  r.pri = 1;
  r.ttr_s = 60;
  r.created_wall = WallNow();
  r.tube = "default";
  r.body = body;
  return r;
}

// A job with a TTL ending at expires_wall.
JobRecord WithTtl(uint64_t id, int64_t expires_wall) {
  JobRecord r = Plain(id, "ttl");
  r.extra.present = true;
  r.extra.has_ttl = true;
  r.extra.expires_wall = expires_wall;
  return r;
}

// "key name=value..." of a job's extension.
std::string KeyAndAttributes(const JobExtra& x) {
  std::string out(x.key());
  x.ForEachAttribute(
      [&out](JobAttribute a) { out += " " + std::string(a.name) + "=" + std::string(a.value); });
  return out;
}

JobOptions Tries(uint32_t n) {
  JobOptions o;
  o.tries = n;
  return o;
}

TEST_F(BinlogExtTest, TriesTtlKeyAttributesAndBuryReasonsSurviveARestart) {
  const JobAttribute attrs[] = {{"lang", "en"}, {"empty", ""}};
  JobOptions full = Tries(3);
  full.ttl_s = 3600;
  full.key = "order-17";
  full.attrs = attrs;
  full.attr_count = 2;
  {
    Instance a(clock_, dir_);
    ASSERT_TRUE(a.ok) << a.error;
    ASSERT_EQ(a.Put("full", 1, 0, "default", full), 1u);
    ASSERT_EQ(a.Put("released", 1, 0, "default", Tries(1)), 2u);
    ASSERT_EQ(a.Put("kicked", 1, 0, "default", Tries(1)), 3u);
    ASSERT_EQ(a.Put("timed-out", 1, 0, "default", Tries(1)), 4u);
    ASSERT_EQ(a.Put("plain"), 5u);
    // Job 4's TTR runs out on its only try.
    ASSERT_NE(a.engine->ReserveJob(a.session, 4), nullptr);
    clock_.Advance(100 * kSecond);
    a.engine->Tick();
    ASSERT_EQ(a.engine->Find(4)->state(), JobState::kBuried);
    // Job 1: two tries used (3 -> 1), then buried by command, 100 s into its TTL.
    ASSERT_NE(a.engine->ReserveJob(a.session, 1), nullptr);
    ASSERT_TRUE(a.engine->Release(a.session, 1, 1, 0));
    ASSERT_NE(a.engine->ReserveJob(a.session, 1), nullptr);
    ASSERT_TRUE(a.engine->Bury(a.session, 1, 1));
    // Jobs 2 and 3 use their only try and are buried by their release; 3 is kicked (a
    // respawn: one more try).
    for (uint64_t id : {2u, 3u}) {
      ASSERT_NE(a.engine->ReserveJob(a.session, id), nullptr);
      ASSERT_TRUE(a.engine->Release(a.session, id, 1, 0));
    }
    ASSERT_TRUE(a.engine->KickJob(3));
    a.Flush();
  }
  Instance b(clock_, dir_);
  ASSERT_TRUE(b.ok) << b.error;
  EXPECT_EQ(b.store->restored(), 5u);
  struct Want {
    uint64_t id;
    JobState state;
    uint32_t tries_left;
    BuryReason reason;
  };
  for (Want w : {Want{1, JobState::kBuried, 1, BuryReason::kCommand},
                 Want{2, JobState::kBuried, 0, BuryReason::kRelease},
                 Want{3, JobState::kReady, 1, BuryReason::kNone},
                 Want{4, JobState::kBuried, 0, BuryReason::kTimeout}}) {
    Job* j = b.engine->Find(w.id);
    ASSERT_NE(j, nullptr) << w.id;
    ASSERT_NE(j->extra(), nullptr) << w.id;
    EXPECT_EQ(j->state(), w.state) << w.id;
    EXPECT_TRUE(j->extra()->limited) << w.id;
    EXPECT_EQ(j->extra()->tries_left, w.tries_left) << w.id;
    EXPECT_EQ(j->extra()->bury_reason, w.reason) << w.id;
  }
  const JobExtra* x = b.engine->Find(1)->extra();
  EXPECT_EQ(KeyAndAttributes(*x), "order-17 lang=en empty=");
  EXPECT_NEAR(static_cast<double>(x->expires_at - clock_.Now()) / kSecond, 3500, 1.5);
  EXPECT_FALSE(b.engine->Find(2)->extra()->has_ttl());
  EXPECT_EQ(b.engine->Find(5)->extra(), nullptr);  // a plain job stays plain
  // The key is taken again: a put with it creates nothing.
  b.engine->Use(b.session, "default");
  JobOptions same;
  same.key = "order-17";
  Job* j = b.engine->NewJob(b.session, 1, 0, 60, 0, same);
  memcpy(j->data(), "\r\n", 2);
  uint64_t existing = 0;
  EXPECT_EQ(b.engine->Put(b.session, j, &existing), Engine::PutResult::kExists);
  EXPECT_EQ(existing, 1u);
}

TEST_F(BinlogExtTest, OnlyJobsWithExtensionsPayForThemOnDisk) {
  const JobAttribute attr[] = {{"a", "bc"}};
  JobOptions o = Tries(2);
  o.key = "k";
  o.attrs = attr;
  o.attr_count = 1;
  Instance a(clock_, dir_);
  ASSERT_TRUE(a.ok) << a.error;
  int64_t mark = a.store->Mark();
  ASSERT_EQ(a.Put("plain"), 1u);
  EXPECT_EQ(a.store->Mark() - mark, static_cast<int64_t>(FullRecordSize(7, 5)));
  mark = a.store->Mark();
  ASSERT_EQ(a.Put("extra", 1, 0, "default", o), 2u);
  EXPECT_EQ(a.store->Mark() - mark, static_cast<int64_t>(FullRecordSize(7, 5, 1 + 2 + 1 + 2)));
  for (uint64_t id : {1u, 2u}) {
    mark = a.store->Mark();
    ASSERT_NE(a.engine->ReserveJob(a.session, id), nullptr);
    ASSERT_TRUE(a.engine->Release(a.session, id, 1, 0));
    EXPECT_EQ(a.store->Mark() - mark, static_cast<int64_t>(StateRecordSize(id == 2))) << id;
  }
  // A reservation's own TTR gives the job an extension the log does not keep: its records
  // stay a plain job's.
  engine::ReserveOptions ttr;
  ttr.ttr_s = 5;
  ASSERT_EQ(a.engine->ReserveReady(a.session, ttr)->id, 1u);
  ASSERT_NE(a.engine->Find(1)->extra(), nullptr);
  mark = a.store->Mark();
  ASSERT_TRUE(a.engine->Release(a.session, 1, 1, 0));
  EXPECT_EQ(a.store->Mark() - mark, static_cast<int64_t>(kStateRecordSize));
  a.Flush();
  a.Stop();
  Instance b(clock_, dir_);
  ASSERT_TRUE(b.ok) << b.error;
  EXPECT_EQ(b.engine->Find(1)->extra(), nullptr);
  EXPECT_EQ(b.engine->Find(1)->releases(), 2u);
  EXPECT_EQ(b.engine->Find(2)->extra()->tries_left, 1u);
}

TEST_F(BinlogExtTest, ATtlThatPassedWhileDownDeletesTheJobAtTheFirstTick) {
  std::string records;
  AppendFull(&records, WithTtl(1, WallNow() - 5 * kSecond));
  AppendFull(&records, WithTtl(2, WallNow() + 3600 * kSecond));
  WriteSegment(1, kFormatVersion, records);
  {
    Instance a(clock_, dir_);
    ASSERT_TRUE(a.ok) << a.error;
    EXPECT_EQ(a.store->restored(), 2u);  // restored as expired...
    int64_t written = a.store->stats().records_written;
    a.engine->Tick();  // ...and deleted as any expiry, with a delete record
    EXPECT_EQ(a.engine->Find(1), nullptr);
    ASSERT_NE(a.engine->Find(2), nullptr);
    EXPECT_EQ(a.engine->counters().expired, 1u);
    EXPECT_EQ(a.store->stats().records_written, written + 1);
    a.Flush();
  }
  Instance b(clock_, dir_);
  ASSERT_TRUE(b.ok) << b.error;
  EXPECT_EQ(b.store->restored(), 1u);
  EXPECT_EQ(b.Put("next"), 3u);
}

TEST_F(BinlogExtTest, AVersion1DirectoryIsReadAndWrittenOnInVersion2) {
  std::string v1;
  AppendFull(&v1, Plain(1, "old-ready"));
  AppendFull(&v1, Plain(2, "old-buried"));
  JobRecord buried = Plain(2, "");
  buried.state = DiskState::kBuried;
  buried.counts.buries = 1;
  AppendState(&v1, buried);
  AppendFull(&v1, Plain(3, "old-deleted"));
  AppendDelete(&v1, 3);
  WriteSegment(1, 1, v1);
  {
    Instance a(clock_, dir_);
    ASSERT_TRUE(a.ok) << a.error;
    EXPECT_EQ(a.store->restored(), 2u);
    EXPECT_EQ(a.engine->Find(2)->state(), JobState::kBuried);
    EXPECT_EQ(a.store->stats().current_index, 2u);
    EXPECT_EQ(VersionOf(1), 1u);  // left as it is
    EXPECT_EQ(VersionOf(2), 2u);  // new segments are version 2
    ASSERT_EQ(a.Put("new", 1, 0, "default", Tries(4)), 4u);
    a.Flush();
  }
  {
    Instance b(clock_, dir_);  // a mixed directory
    ASSERT_TRUE(b.ok) << b.error;
    EXPECT_EQ(b.store->restored(), 3u);
    EXPECT_EQ(b.engine->Find(4)->extra()->tries_left, 4u);
    // Compaction moves the old jobs on: the version 1 segment goes.
    for (int i = 0; i < 200 && b.store->stats().oldest_index == 1; i++) {
      ASSERT_TRUE(b.PutAndDelete(200));
    }
    EXPECT_GT(b.store->stats().oldest_index, 1u);
  }
  Instance c(clock_, dir_);
  ASSERT_TRUE(c.ok) << c.error;
  EXPECT_EQ(c.store->restored(), 3u);
  EXPECT_EQ(c.engine->Find(2)->buries(), 1u);
}

TEST_F(BinlogExtTest, Version2RecordsInAVersion1SegmentAreDamage) {
  std::string v1;
  AppendFull(&v1, WithTtl(1, WallNow() + kSecond));
  AppendFull(&v1, Plain(2, "plain"));
  WriteSegment(1, 1, v1);
  {
    Instance a(clock_, dir_);
    EXPECT_FALSE(a.ok);
    EXPECT_NE(a.error.find("binlog.1: offset 16: damaged record"), std::string::npos) << a.error;
  }
  Instance b(clock_, dir_, 4096, /*skip_damaged=*/true);
  ASSERT_TRUE(b.ok) << b.error;
  EXPECT_EQ(b.store->restored(), 1u);
  EXPECT_NE(b.engine->Find(2), nullptr);
}

TEST_F(BinlogExtTest, AMalformedExtensionFieldIsADamagedRecord) {
  std::string records;
  JobRecord bad = WithTtl(1, WallNow() + kSecond);
  AppendFull(&records, bad);
  records[kRecordHeaderSize + kJobFixedSize + 13] = 7;  // no such bury reason
  uint32_t crc = Crc32c(records.data() + 4, records.size() - 4);
  for (int i = 0; i < 4; i++) records[static_cast<size_t>(i)] = static_cast<char>(crc >> (8 * i));
  AppendFull(&records, Plain(2, "after"));
  WriteSegment(1, kFormatVersion, records);
  Instance a(clock_, dir_);
  EXPECT_FALSE(a.ok);
  EXPECT_NE(a.error.find("binlog.1: offset 16: damaged record (malformed record of type 1)"),
            std::string::npos)
      << a.error;
}

TEST_F(BinlogExtTest, TubeTriesSurviveRestartsAndCompaction) {
  {
    Instance a(clock_, dir_);
    ASSERT_TRUE(a.ok) << a.error;
    a.engine->SetTubeTries("emails", 5);
    a.engine->SetTubeTries("cleared", 7);
    a.engine->SetTubeTries("changed", 2);
    a.engine->SetTubeTries("cleared", 0);
    a.engine->SetTubeTries("changed", 3);
    a.engine->SetTubeTries("never-set", 0);
    int64_t written = a.store->stats().records_written;
    a.engine->SetTubeTries("emails", 5);  // unchanged: nothing to write
    EXPECT_EQ(a.store->stats().records_written, written);
    a.Flush();
    EXPECT_EQ(a.store->stats().oldest_index, 1u);
  }
  {
    Instance b(clock_, dir_);
    ASSERT_TRUE(b.ok) << b.error;
    EXPECT_EQ(b.engine->TubeTries("emails"), 5u);
    EXPECT_EQ(b.engine->TubeTries("cleared"), 0u);
    EXPECT_EQ(b.engine->TubeTries("changed"), 3u);
    // binlog.1 holds only the tube defaults: compaction writes them again before it goes,
    // and they keep no segment from going.
    for (int i = 0; i < 3000; i++) {
      ASSERT_TRUE(b.PutAndDelete(100));
      ASSERT_LE(Segments(dir_).size(), 6u) << "after " << i;
    }
    EXPECT_GT(b.store->stats().oldest_index, 2u);
    EXPECT_GT(b.store->stats().records_migrated, 0);
    b.engine->SetTubeTries("changed", 0);
    b.Flush();
  }
  Instance c(clock_, dir_);
  ASSERT_TRUE(c.ok) << c.error;
  EXPECT_EQ(c.store->restored(), 0u);
  EXPECT_EQ(c.engine->TubeTries("emails"), 5u);
  EXPECT_EQ(c.engine->TubeTries("changed"), 0u);
  std::vector<std::pair<std::string, uint32_t>> all;
  c.engine->ForEachTubeTries([&all](std::string_view t, uint32_t n) { all.emplace_back(t, n); });
  EXPECT_EQ(all, (std::vector<std::pair<std::string, uint32_t>>{{"emails", 5}}));
}

}  // namespace
}  // namespace stalkd::storage
