// The disk tier and jobs changed since their put (docs/DISK-TIER.md, "Which jobs go"): a job
// released, released with a delay or put back by its TTR has a state record after its kFull
// record; the tier has its kFull record written again in its current state and then lets it
// go. Such jobs come back exactly as an all-in-memory store has them, on time; a kill -9 at
// any step brings every one back once, as last acknowledged; the rewrites count in the
// tier's budget per Tick.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "command/put_test_util.h"
#include "storage/binlog.h"
#include "storage/binlog_test_util.h"
#include "storage/cold_store.h"
#include "storage/cold_store_test_util.h"

namespace stalkd::storage {
namespace {

using cold_test_util::ExpectSame;
using cold_test_util::Side;
using command::Outcome;
using command::Result;
constexpr auto Put = command::testing_util::PutThrough;

// What becomes of the i-th job: released at once with another priority, released with a delay
// (beyond the tier's horizon), or left reserved until its TTR (30 s) ends.
enum class Fate { kReleased, kReleasedDelayed, kTimedOut };
Fate FateOf(size_t i) { return static_cast<Fate>(i % 3); }
uint32_t DelayOf(size_t i) { return static_cast<uint32_t>(60 + i % 120); }
const char* TubeOf(size_t i) {
  if (FateOf(i) == Fate::kTimedOut) return "t";
  return i % 4 == 0 ? "b" : "default";
}

// Puts n jobs on every side in three tubes; session 2 (watching `t`) reserves those whose
// TTR is to end, and it ends; then session 1 (watching `default` and `b`) reserves the
// others and releases them, at once or with a delay. Only the log is flushed (the tier does
// nothing yet). Session 1 then watches `t` too. Returns the ids.
std::vector<uint64_t> Churn(FakeClock& clock, const std::vector<Side*>& sides, size_t n) {
  std::vector<uint64_t> ids;
  for (Side* side : sides) {
    EXPECT_EQ(side->sessions[1]->Watch("b").outcome, Outcome::kWatching);
    EXPECT_EQ(side->sessions[2]->Watch("t").outcome, Outcome::kWatching);
    EXPECT_EQ(side->sessions[2]->Ignore("default").outcome, Outcome::kWatching);
  }
  for (size_t i = 0; i < n; i++) {
    const std::string body = "job " + std::to_string(i) + std::string(i % 50, 'x');
    for (Side* side : sides) {
      command::Session& s = *side->sessions[0];
      EXPECT_EQ(s.Use(TubeOf(i)).outcome, Outcome::kUsing);
      Result r = Put(s, static_cast<uint32_t>(100 + i % 7), 0, body);
      EXPECT_EQ(r.outcome, Outcome::kInserted);
      if (side == sides[0]) ids.push_back(r.number);
    }
  }
  // Each session reserves as many as its tubes hold, the same ones on every side.
  auto reserve = [&](int session, size_t count, auto then) {
    for (size_t i = 0; i < count; i++) {
      std::vector<Result> got;
      for (Side* side : sides) got.push_back(side->sessions[session]->Reserve(0));
      for (size_t x = 0; x < sides.size(); x++) {
        ExpectSame(got[0], got[x], "reserve " + std::to_string(i));
        if (got[x].outcome == Outcome::kReserved) then(*sides[x], got[x].job.id);
      }
    }
  };
  reserve(2, n / 3, [](Side&, uint64_t) {});
  for (Side* side : sides) side->log->Flush();
  clock.Advance(31 * kSecond);  // their TTR ends
  for (Side* side : sides) side->store->engine().Tick();
  reserve(1, n - n / 3, [&](Side& side, uint64_t id) {
    const size_t k = static_cast<size_t>(id - ids[0]);  // the k-th put
    const uint32_t pri = static_cast<uint32_t>(5000 - k % 11);
    const uint32_t delay = FateOf(k) == Fate::kReleased ? 0 : DelayOf(k);
    EXPECT_EQ(side.sessions[1]->Release(id, pri, delay).outcome, Outcome::kReleased);
  });
  for (Side* side : sides) {
    side->log->Flush();
    EXPECT_EQ(side->sessions[1]->Watch("t").outcome, Outcome::kWatching);
  }
  return ids;
}

// A job as stats-job and peek show it.
struct Seen {
  std::string state;
  uint32_t pri, delay_s, reserves, releases, timeouts, buries, kicks;
  int64_t time_left_s;
  std::string body;
};

std::map<uint64_t, Seen> SeeAll(Side& side, const std::vector<uint64_t>& ids) {
  std::map<uint64_t, Seen> out;
  for (uint64_t id : ids) {
    Result r = side.sessions[2]->StatsJob(id);
    EXPECT_EQ(r.outcome, Outcome::kJobStats) << "job " << id;
    if (r.outcome != Outcome::kJobStats) continue;
    const command::JobStats& x = *r.job_stats;
    Seen s{std::string(x.state), x.pri,    x.delay_s, x.reserves,    x.releases,
           x.timeouts,           x.buries, x.kicks,   x.time_left_s, ""};
    Result p = side.sessions[2]->Peek(id);
    EXPECT_EQ(p.outcome, Outcome::kFound) << "job " << id;
    s.body = std::string(p.job.body);
    out[id] = s;
  }
  return out;
}

TEST(ColdStoreChangedTest, ReleasedAndTimedOutJobsGoToDiskAndComeBackAsInMemory) {
  FakeClock clock;
  // Segments of 1 MiB: no compaction moves a job (which would write it whole too).
  Side hot(clock, 0, 0, "", 1000, 1 << 20), cold(clock, 1, 16, "", 1000, 1 << 20);
  const size_t n = 900;
  const std::vector<uint64_t> ids = Churn(clock, {&hot, &cold}, n);
  const int64_t live = cold.log->stats().live_bytes;
  for (int i = 0; i < 20; i++) {
    hot.Tick();
    cold.Tick();
  }
  const engine::ColdTier::Stats st = cold.cold->stats();
  // Every delayed one (due beyond the horizon) and every ready one but the 16 kept per
  // tube (three tubes) went, each written whole again first.
  EXPECT_EQ(cold.cold->Count(), n / 3);
  EXPECT_EQ(cold.cold->ReadyOnDisk(nullptr).ready, 2 * n / 3 - 3 * 16);
  EXPECT_EQ(st.rewrites, n - 3 * 16);
  EXPECT_EQ(st.demotions, n - 3 * 16);
  EXPECT_EQ(cold.log->RewritesUnwritten(), 0u);
  // Each rewrite took its job's place in the live data (the same size: plain jobs).
  EXPECT_EQ(cold.log->stats().live_bytes, live);
  // (What stays is mostly the containers' capacity, which memory_used counts too.)
  EXPECT_LT(cold.store->engine().memory_used(), hot.store->engine().memory_used() / 3);
  ExpectSame(hot.sessions[0]->Stats(), cold.sessions[0]->Stats(), "stats");
  for (const char* t : {"default", "b"}) {
    ExpectSame(hot.sessions[0]->StatsTube(t), cold.sessions[0]->StatsTube(t), "stats-tube");
  }
  // Half of them named while on disk: read back with their state, priority, delay, time
  // left, counters (and body).
  for (size_t i = 0; i < n; i += 2) {
    const std::string what = "job " + std::to_string(ids[i]);
    ExpectSame(hot.sessions[2]->StatsJob(ids[i]), cold.sessions[2]->StatsJob(ids[i]), what, false);
    ExpectSame(hot.sessions[2]->Peek(ids[i]), cold.sessions[2]->Peek(ids[i]), what);
  }
  // On time and in order: every second, both give out the same jobs (the ready backlog
  // at once, then each delayed job when due), each with its counters.
  size_t got = 0;
  for (int second = 0; second <= 200 && got < n; second++) {
    for (;;) {
      Result a = hot.sessions[1]->Reserve(0);
      Result b = cold.sessions[1]->Reserve(0);
      ExpectSame(a, b, "second " + std::to_string(second));
      if (a.outcome != Outcome::kReserved || HasFatalFailure()) break;
      ExpectSame(hot.sessions[1]->StatsJob(a.job.id), cold.sessions[1]->StatsJob(b.job.id),
                 "reserved", false);
      EXPECT_EQ(hot.sessions[1]->Delete(a.job.id).outcome, Outcome::kDeleted);
      EXPECT_EQ(cold.sessions[1]->Delete(b.job.id).outcome, Outcome::kDeleted);
      got++;
    }
    if (HasFatalFailure()) return;
    clock.Advance(kSecond);
    hot.Tick();
    cold.Tick();
  }
  EXPECT_EQ(got, n);
  EXPECT_EQ(cold.cold->stats().read_errors, 0u);
}

// The same after a kill -9 at each step: with the rewrites placed and not yet written, just
// written (the jobs still in memory), and once the jobs went to disk. Every job comes back
// once, in the state the all-in-memory store shows, with its counters and body.
TEST(ColdStoreChangedTest, AKillAtAnyStepOfTheRewritesLosesNothing) {
  for (int stage = 0; stage < 3; stage++) {
    const std::string dir = testing_util::MakeTempDir();
    FakeClock clock;
    const size_t n = 300;
    std::map<uint64_t, Seen> want;
    std::vector<uint64_t> ids;
    {
      Side hot(clock, 0);
      Side cold(clock, 1, 0, dir);
      ids = Churn(clock, {&hot, &cold}, n);
      cold.store->Tick();  // rewrites the released ones (the timed-out ones too)
      ASSERT_GT(cold.log->RewritesUnwritten(), 0u);
      if (stage >= 1) cold.log->Flush();
      if (stage == 1) {
        EXPECT_EQ(cold.log->RewritesUnwritten(), 0u);
        EXPECT_EQ(cold.cold->stats().demotions, 0u);  // written, not gone yet
      }
      if (stage == 2) {
        for (int i = 0; i < 10; i++) cold.Tick();
        EXPECT_EQ(cold.cold->stats().demotions, n - 3);  // all but each tube's first ready
      }
      EXPECT_GT(cold.cold->stats().rewrites, 0u);
      want = SeeAll(hot, ids);
      cold.Crash();
    }
    std::map<uint64_t, Seen> got;
    size_t jobs = 0;
    {
      Side back(clock, 0, 0, dir);  // every record replayed into memory
      got = SeeAll(back, ids);
      Result s = back.sessions[0]->Stats();
      jobs = s.stats->ready + s.stats->delayed + s.stats->reserved + s.stats->buried;
    }
    EXPECT_EQ(jobs, n) << "stage " << stage;  // each once: no more jobs than these
    ASSERT_EQ(got.size(), want.size()) << "stage " << stage;
    for (uint64_t id : ids) {
      const Seen &w = want[id], &g = got[id];
      const std::string what = "stage " + std::to_string(stage) + " job " + std::to_string(id);
      EXPECT_EQ(g.state, w.state) << what;
      EXPECT_EQ(g.pri, w.pri) << what;
      EXPECT_EQ(g.delay_s, w.delay_s) << what;
      EXPECT_EQ(g.reserves, w.reserves) << what;
      EXPECT_EQ(g.releases, w.releases) << what;
      EXPECT_EQ(g.timeouts, w.timeouts) << what;
      EXPECT_EQ(g.buries, w.buries) << what;
      EXPECT_EQ(g.kicks, w.kicks) << what;
      EXPECT_NEAR(g.time_left_s, w.time_left_s, 1) << what;  // through the wall clock
      EXPECT_EQ(g.body, w.body) << what;
    }
    testing_util::RemoveDir(dir);
  }
}

// Rewrites count in the tier's budget per Tick, and those not yet written count against the
// next Tick's: the log's buffer holds at most one budget of them.
TEST(ColdStoreChangedTest, RewritesAreBoundedPerTick) {
  FakeClock clock;
  Side cold(clock, 1, 0, "", 50, 1 << 20);  // segments of 1 MiB: no compaction
  const std::vector<uint64_t> ids = Churn(clock, {&cold}, 600);
  cold.store->Tick();
  EXPECT_EQ(cold.cold->stats().rewrites, 50u);
  EXPECT_EQ(cold.log->RewritesUnwritten(), 50u);
  cold.store->Tick();  // not written yet: nothing more, and none of them goes
  EXPECT_EQ(cold.cold->stats().rewrites, 50u);
  EXPECT_EQ(cold.cold->stats().demotions, 0u);
  engine::ColdTier::Stats last = cold.cold->stats();
  for (int i = 0; i < 60; i++) {
    cold.log->Flush();
    cold.store->Tick();
    const engine::ColdTier::Stats st = cold.cold->stats();
    EXPECT_LE(st.rewrites - last.rewrites + st.demotions - last.demotions, 50u) << "tick " << i;
    EXPECT_LE(cold.log->RewritesUnwritten(), 50u);
    last = st;
  }
  EXPECT_EQ(last.demotions, ids.size() - 3);  // each tube keeps its first
  EXPECT_EQ(last.rewrites, ids.size() - 3);
}

// The log as the tier reads it, but with no free space for rewrites while `full`.
struct FullDiskReader final : engine::ColdReader {
  Binlog& log;
  bool full = true;
  int refused = 0;
  explicit FullDiskReader(Binlog& l) : log(l) {}
  bool Demotable(const engine::Job& j) const override { return log.Demotable(j); }
  bool Read(uint64_t id, std::string* buf, engine::RestoredJob* out) override {
    return log.Read(id, buf, out);
  }
  Rewrite RewriteWhole(const engine::Job& j) override {
    if (!full) return log.RewriteWhole(j);
    refused++;
    return Rewrite::kNoRoom;
  }
  size_t RewritesUnwritten() const override { return log.RewritesUnwritten(); }
};

// No room to rewrite: the changed jobs stay in memory (the others go), nothing fails, the
// lack is noted once (not per job, nor per Tick), tried again a second later, and once there
// is room they go.
TEST(ColdStoreChangedTest, WithoutRoomToRewriteChangedJobsStayInMemory) {
  FakeClock clock;
  std::unique_ptr<FullDiskReader> full;  // outlives the tier that reads through it
  Side hot(clock, 0, 0, "", 1000, 1 << 20), cold(clock, 1, 0, "", 1000, 1 << 20);
  full = std::make_unique<FullDiskReader>(*cold.log);
  FullDiskReader& reader = *full;
  ColdStoreOptions co;
  co.budget = 1;
  co.ready_hot = 0;
  cold.ReadThrough(reader, co);
  const size_t n = 300;
  Churn(clock, {&hot, &cold}, n);
  for (Side* side : {&hot, &cold}) {  // and jobs never changed, which may go
    ASSERT_EQ(side->sessions[0]->Use("u").outcome, Outcome::kUsing);
    for (int i = 0; i < 100; i++) {
      ASSERT_EQ(Put(*side->sessions[0], 7, 3600, "unchanged").outcome, Outcome::kInserted);
    }
  }
  for (int i = 0; i < 30; i++) {
    cold.Tick();
    clock.Advance(kSecond / 10);
  }
  engine::ColdTier::Stats st = cold.cold->stats();
  EXPECT_EQ(st.rewrites, 0u);
  EXPECT_EQ(st.demotions, 100u);  // the unchanged ones
  EXPECT_EQ(cold.cold->no_room_episodes(), 1u);
  EXPECT_GE(reader.refused, 2);  // tried again after a second...
  EXPECT_LE(reader.refused, 4);  // ...not at every Tick, nor for every job
  ExpectSame(hot.sessions[0]->Stats(), cold.sessions[0]->Stats(), "stats");
  reader.full = false;
  for (int i = 0; i < 30; i++) {
    cold.Tick();
    clock.Advance(kSecond / 10);
  }
  st = cold.cold->stats();
  EXPECT_EQ(st.rewrites, n - 3);
  EXPECT_EQ(st.demotions, 100u + n - 3);
  EXPECT_EQ(cold.cold->no_room_episodes(), 1u);
  ExpectSame(hot.sessions[0]->Stats(), cold.sessions[0]->Stats(), "stats");
}

}  // namespace
}  // namespace stalkd::storage
