// Edge cases of the disk tier (docs/DISK-TIER.md) that a review found, each a test that failed
// then: a tube's first ready job on disk when a pause and a TTL end in the same Tick, jobs
// that must stay at the end of a heap hiding the rest from demotion (also after a crash), and
// a start from the checkpoint that read every record before the loop's first turn.
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "command/put_test_util.h"
#include "server/cold_store_test_util.h"
#include "storage/binlog.h"
#include "storage/binlog_test_util.h"
#include "storage/cold_store.h"
#include "store/memory_store.h"

namespace stalkd::storage {
namespace {

using command::Outcome;
using command::Result;
using testing_util::MakeTempDir;
using testing_util::RemoveDir;
constexpr auto Put = command::testing_util::PutThrough;

struct Late final : command::Client {
  void OnResult(const Result& r) override {
    outcomes.push_back(r.outcome);
    ids.push_back(r.outcome == Outcome::kReserved ? r.job.id : 0);
  }
  std::vector<Outcome> outcomes;
  std::vector<uint64_t> ids;
};

// A store with a binlog and, with a budget, the disk tier; a producer and a consumer.
struct Store : testing_util::TierParts {
  Late late[2];
  std::unique_ptr<command::Session> producer, consumer;

  bool keep_dir = false;

  Store(FakeClock& clock, size_t budget, uint32_t ready_hot, const std::string& in = "",
        std::function<bool()> progress = {})
      : TierParts(clock, LogOptions(in, std::move(progress)), TierOptions(budget, ready_hot)) {
    EXPECT_TRUE(ok) << error;
    producer = store->Open(late[0]);
    consumer = store->Open(late[1]);
  }
  static BinlogOptions LogOptions(const std::string& in, std::function<bool()> progress) {
    BinlogOptions o;
    o.dir = in.empty() ? MakeTempDir() : in;
    o.fsync_never = true;
    o.progress = std::move(progress);
    return o;
  }
  static ColdStoreOptions TierOptions(size_t budget, uint32_t ready_hot) {
    ColdStoreOptions co;
    co.budget = budget;
    co.ready_hot = ready_hot;
    return co;
  }
  // A clean stop as the server's: sessions closed, the log closed, the checkpoint written.
  bool Shutdown() {
    producer.reset();
    consumer.reset();
    keep_dir = true;
    return TierParts::Shutdown();
  }
  ~Store() {
    producer.reset();
    consumer.reset();
    Close();
    store.reset();
    if (!keep_dir) RemoveDir(dir);
  }
};

// put-ext with a TTL: such a job stays in memory (the expiry heap indexes it).
Result PutWithTtl(command::Session& s, uint32_t pri, uint32_t ttl_s, const std::string& body) {
  command::PutOptions opts;
  opts.ttl_s = ttl_s;
  command::PutArgs a{pri, 0, 30, static_cast<uint32_t>(body.size())};
  a.verb = command::Verb::kPutExt;
  a.options = &opts;
  command::PutSlot slot = s.BeginPut(a);
  if (!slot.data) return Result::Of(slot.refusal);
  std::memcpy(slot.data, body.data(), body.size());
  std::memcpy(slot.data + body.size(), "\r\n", 2);
  return s.CommitPut();
}

// A tube's first ready job expires (TTL) in the same Tick as the tube's pause ends, with a
// session waiting on it. ColdStore::Tick checks each tube's first before the engine's Tick,
// but the engine's Tick expires the first (ExpireDue) and only then unpauses the tube and
// hands its heap's top (ProcessQueue) to the waiting session: a job that comes after the
// tube's first job on disk. All in memory, the session gets the tube's true first.
TEST(ColdStoreEdgesTest, PauseEndingAsTheFirstJobExpiresServesTheTrueFirst) {
  FakeClock clock;
  Store hot(clock, 0, 0), cold(clock, 1, 0);
  for (Store* side : {&hot, &cold}) {
    command::Session& p = *side->producer;
    command::Session& c = *side->consumer;
    ASSERT_EQ(p.Use("t").outcome, Outcome::kUsing);
    ASSERT_EQ(c.Watch("t").outcome, Outcome::kWatching);
    ASSERT_EQ(c.Ignore("default").outcome, Outcome::kWatching);
    ASSERT_EQ(PutWithTtl(p, 0, 5, "first, expires in 5 s").outcome, Outcome::kInserted);  // 1
    ASSERT_EQ(PutWithTtl(p, 100, 1000, "pri 100, stays").outcome, Outcome::kInserted);    // 2
    for (int i = 0; i < 20; i++) {                                                        // 3..
      ASSERT_EQ(Put(p, 50, 0, "pri 50 #" + std::to_string(i)).outcome, Outcome::kInserted);
    }
    for (int i = 0; i < 4; i++) side->Tick();
  }
  ASSERT_GE(cold.cold->ReadyOnDisk(nullptr).ready, 10u);  // the pri-50 jobs went to disk
  for (Store* side : {&hot, &cold}) {
    ASSERT_EQ(side->producer->PauseTube("t", 5).outcome, Outcome::kPaused);
    ASSERT_EQ(side->consumer->Reserve(100 * kSecond).outcome, Outcome::kPending);
  }
  clock.Advance(5 * kSecond);  // the pause ends as job 1's TTL does
  hot.Tick();
  cold.Tick();
  ASSERT_EQ(hot.late[1].ids.size(), 1u);
  EXPECT_EQ(hot.late[1].ids[0], 3u);  // the first pri-50 job
  ASSERT_EQ(cold.late[1].ids.size(), 1u);
  EXPECT_EQ(cold.late[1].ids[0], hot.late[1].ids[0])
      << "the waiting reserve got a job behind the tube's first on disk";
}

// Demotion looks only at the last 8 entries of each tube's heap (DemoteRound): 8 jobs that
// may not leave memory there (released with a lower priority, so they sit at the heap's
// end and have a state record; or with a TTL) stop every other job of the tube from leaving,
// and memory stays over --hot-memory however many ready jobs could go. Each Tick (twice per
// loop iteration) then goes round every tube for nothing.
TEST(ColdStoreEdgesTest, EightJobsThatMustStayDoNotPinTheRestOfTheBacklogInMemory) {
  FakeClock clock;
  Store cold(clock, 64 * 1024, 64);
  command::Session& p = *cold.producer;
  command::Session& c = *cold.consumer;
  // A backlog put while memory was under the budget (no demotion needed yet: one burst),
  // in "default" and, as a control, the same in "u".
  for (const char* tube : {"u", "default"}) {
    ASSERT_EQ(p.Use(tube).outcome, Outcome::kUsing);
    for (int i = 0; i < 2000; i++) {
      ASSERT_EQ(Put(p, 100, 0, std::string(200, 'x')).outcome, Outcome::kInserted);
    }
  }
  // A worker takes 8 and puts them back at the end of the queue (release with the lowest
  // priority): each gets a state record, so stays in memory, and sits at the heap's end.
  std::vector<uint64_t> taken;
  for (int i = 0; i < 8; i++) {
    Result r = c.Reserve(0);
    ASSERT_EQ(r.outcome, Outcome::kReserved);
    taken.push_back(r.job.id);
  }
  for (uint64_t id : taken) {
    ASSERT_EQ(c.Release(id, 0xFFFFFFFFu, 0).outcome, Outcome::kReleased);
  }
  for (int i = 0; i < 10; i++) cold.Tick();
  const size_t used = cold.store->engine().memory_used();
  // 2000 jobs of ~300 bytes a tube against a 64 KiB budget: all but 64 (+8) could be on
  // disk. The control tube's are; none of "default"'s go.
  EXPECT_GT(cold.cold->ReadyOnDisk(cold.store->engine().FindTube("u")).ready, 1900u);
  EXPECT_GT(cold.cold->ReadyOnDisk(cold.store->engine().FindTube("default")).ready, 1800u);
  EXPECT_LE(used, size_t{64 * 1024} * 2) << "memory-used stays at " << used;
}

// The same after a crash: the restart replays every record into memory, and the tier is to
// demote the jobs again (docs/DISK-TIER.md, "Crashes"). Jobs released to the back of their
// queue (a retry policy) have state records, so must stay; restored in id order, they sink
// to the end of the heap, and the backlog of puts behind them never leaves memory.
TEST(ColdStoreEdgesTest, AfterACrashReleasedJobsAtTheHeapsEndPinTheBacklogInMemory) {
  FakeClock clock;
  std::string dir;
  {
    Store before(clock, 0, 64);
    before.keep_dir = true;
    dir = before.dir;
    command::Session& p = *before.producer;
    command::Session& c = *before.consumer;
    for (int i = 0; i < 3000; i++) {
      ASSERT_EQ(Put(p, 100, 0, std::string(200, 'x')).outcome, Outcome::kInserted);
      if (i % 3 != 0) continue;  // a third of them failed once: to the back of the queue
      Result r = c.Reserve(0);
      ASSERT_EQ(r.outcome, Outcome::kReserved);
      ASSERT_EQ(c.Release(r.job.id, 0xFFFFFFFFu, 0).outcome, Outcome::kReleased);
      before.Tick();
    }
  }  // a crash: no checkpoint
  Store after(clock, 64 * 1024, 64, dir);
  for (int i = 0; i < 20; i++) after.Tick();
  const size_t used = after.store->engine().memory_used();
  // 2000 jobs are whole in their put's record and may go (all but 64 of the tube's).
  EXPECT_GT(after.cold->ReadyOnDisk(nullptr).ready, 1800u) << "memory-used " << used;
}

// Read system calls of this process so far (/proc/self/io).
uint64_t ReadCalls() {
  std::ifstream in("/proc/self/io");
  std::string key;
  uint64_t value = 0;
  while (in >> key >> value) {
    if (key == "syscr:") return value;
  }
  return 0;
}

// docs/BINLOG.md: start-up can be stopped at any point; the loop (SIGTERM, health probes)
// runs between segments and every 16,384 restored jobs. A start from a checkpoint first
// reads the record of every job the checkpoint does not keep cold (LoadCheckpoint ->
// CheckpointedHot: one pread each, ready jobs on disk included) without running the loop:
// with 40,000 such jobs, more than 40,000 reads come before the loop's first turn. (A
// backlog of millions of ready jobs: tens of seconds without a SIGTERM or a probe taken.)
TEST(ColdStoreEdgesTest, AStartFromACheckpointRunsTheLoopWhileItReadsTheJobsRecords) {
  FakeClock clock;
  std::string dir;
  {
    Store before(clock, size_t{1} << 40, 64);  // the tier on, nothing demoted
    dir = before.dir;
    for (int i = 0; i < 40000; i++) {
      ASSERT_EQ(Put(*before.producer, 100, 0, "job").outcome, Outcome::kInserted);
    }
    ASSERT_TRUE(before.Shutdown());
  }
  const uint64_t base = ReadCalls();
  uint64_t at_first = 0;
  Store after(clock, size_t{1} << 40, 64, dir, [&] {
    if (at_first == 0) at_first = ReadCalls();
    return true;
  });
  ASSERT_EQ(after.log->restored(), 40000u);
  ASSERT_NE(at_first, 0u);
  EXPECT_LT(at_first - base, 2u * 16384) << "read calls before the loop's first turn";
}

}  // namespace
}  // namespace stalkd::storage
