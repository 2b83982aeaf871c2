// The disk tier against the all-in-memory store: the same random commands on a store whose
// memory budget sends every long-delayed job and every ready job it may to disk (released,
// released with a delay and timed-out ones too, written whole again) and on one without a
// budget; every reply must be the same, those of waiting reserves included.
#include "storage/cold_store.h"

#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "command/put_test_util.h"
#include "command/stats_compare_test_util.h"
#include "storage/binlog.h"
#include "storage/binlog_test_util.h"
#include "storage/cold_tier_test_util.h"
#include "store/memory_store.h"

namespace stalkd::storage {
namespace {

using command::Outcome;
using command::Result;
using command::StateFilter;
constexpr auto Put = command::testing_util::PutThrough;

// The results that arrive later (a reserve that waited, a kick or purge in slices).
struct Recorder final : command::Client {
  void OnResult(const command::Result& r) override {
    const bool reserved = r.outcome == command::Outcome::kReserved;
    late.push_back(
        {r.outcome, reserved ? r.job.id : r.number, reserved ? std::string(r.job.body) : ""});
  }
  struct Late {
    command::Outcome outcome;
    uint64_t number;
    std::string body;
    bool operator==(const Late&) const = default;
  };
  std::vector<Late> late;
};

// A store with a binlog in a directory (its own, removed at the end, unless `dir` is given),
// and a disk tier if `budget` is given.
struct Side {
  static constexpr int kSessions = 3;
  std::string dir;
  bool own_dir;
  std::unique_ptr<store::MemoryStore> store;
  std::unique_ptr<Binlog> log;
  std::unique_ptr<ColdStore> cold;
  Recorder rec[kSessions];
  std::vector<std::unique_ptr<command::Session>> sessions;
  bool crashed = false;

  // Segments of 8 KiB by default: rotation and compaction happen, cold jobs move.
  Side(FakeClock& clock, size_t budget, uint32_t ready_hot = 0, const std::string& at = "",
       uint32_t tick_budget = 1000, int64_t segment_size = 8192, uint32_t buried_hot = 64)
      : dir(at.empty() ? testing_util::MakeTempDir() : at), own_dir(at.empty()) {
    store = std::make_unique<store::MemoryStore>(clock, store::MemoryStoreOptions{}, nullptr);
    BinlogOptions o;
    o.dir = dir;
    o.segment_size = segment_size;
    o.fsync_never = true;
    o.disk_tier = budget != 0;
    log = std::make_unique<Binlog>(o, clock);
    std::string error;
    EXPECT_TRUE(log->Lock(&error) && log->Recover(&store->engine(), &error)) << error;
    store->engine().set_log(log.get());
    if (budget != 0) {
      const ColdStoreOptions co{budget, 2 * kSecond, tick_budget, ready_hot, buried_hot};
      cold = std::make_unique<ColdStore>(store->engine(), *log, co);
      store->set_cold(cold.get());
    }
    for (Recorder& r : rec) sessions.push_back(store->Open(r));
  }
  ~Side() {
    if (!crashed) {
      sessions.clear();
      store->engine().CheckInvariants();
      store->set_cold(nullptr);
      cold.reset();
      log->Close();
      store->engine().set_log(nullptr);
    }
    sessions.clear();
    log.reset();
    store.reset();
    if (own_dir) testing_util::RemoveDir(dir);
  }
  void Tick() {
    store->Tick();
    log->Flush();
  }
  // A kill -9: what the log wrote to its files stays, what it still buffered is lost, and
  // nothing more is written (a session closed later writes nothing).
  void Crash() {
    crashed = true;
    store->engine().set_log(nullptr);
    store->set_cold(nullptr);
    cold.reset();
    log.reset();  // without Close
  }
};

using testing_util::ExpectSame;

TEST(ColdStoreTest, RepliesMatchTheAllInMemoryStore) {
  for (uint32_t seed = 1; seed <= 8; seed++) {
    FakeClock clock;
    // A budget of 1 byte: every job that may go, goes. Odd seeds keep only each tube's first
    // ready job in memory (the rest come back one at a time, when a reserve reaches them);
    // even ones keep 4 and refill below 2 (Tick reads ahead). Buried jobs likewise: each
    // tube's first one only, or its first 2 (refilled below 1).
    const uint32_t ready_hot = seed % 2 == 1 ? 0 : 4;
    const uint32_t buried_hot = seed % 2 == 1 ? 0 : 2;
    Side hot(clock, 0), cold(clock, 1, ready_hot, "", 1000, 8192, buried_hot);
    std::mt19937_64 rng(seed);
    auto rand = [&](uint64_t n) { return rng() % n; };
    const char* tubes[] = {"default", "a", "b"};
    // Urgent and not, equal ones (so ids decide), the extremes.
    const uint32_t pris[] = {0, 1, 7, 9, 1023, 1024, 1024, 5000, 0xFFFFFFFFu};
    const StateFilter purges[] = {StateFilter::kReady, StateFilter::kDelayed, StateFilter::kBuried,
                                  StateFilter::kAll};
    uint64_t ids = 1;
    // A session whose reserve waits sends nothing until its answer arrives (as a client).
    size_t answered[Side::kSessions] = {};
    size_t buried_on_disk = 0, buried_went = 0;  // buried jobs on disk; how many went (at least)
    bool waiting[Side::kSessions] = {};
    for (int step = 0; step < 4000; step++) {
      const int si = static_cast<int>(rand(Side::kSessions));
      for (int i = 0; i < Side::kSessions; i++) {
        ASSERT_EQ(hot.rec[i].late, cold.rec[i].late) << "seed " << seed << " step " << step;
        if (hot.rec[i].late.size() > answered[i]) waiting[i] = false;
        answered[i] = hot.rec[i].late.size();
      }
      command::Session& h = *hot.sessions[si];
      command::Session& c = *cold.sessions[si];
      const uint64_t id = 1 + rand(ids + 1);
      const std::string what = "seed " + std::to_string(seed) + " step " + std::to_string(step);
      auto both = [&](auto fn, const std::string& op) {
        Result a = fn(h);
        Result b = fn(c);
        // The tier writes changed jobs whole again: its segments are not the other's.
        ExpectSame(a, b, what + " " + op, false);
        if (b.outcome == Outcome::kJobStats) {
          const Binlog::Stats ls = cold.log->stats();
          EXPECT_GE(b.job_stats->file, ls.oldest_index) << what;
          EXPECT_LE(b.job_stats->file, ls.current_index) << what;
        }
        return a;
      };
      const uint64_t op = rand(20);
      if (waiting[si] && op < 18) continue;  // its reserve still waits; time may pass
      switch (op) {
        case 0:
        case 1:
        case 2:
        case 3: {
          const uint32_t pri = pris[rand(std::size(pris))];
          const uint32_t delay = rand(3) != 0 ? 0 : static_cast<uint32_t>(rand(200));
          const std::string body = "job " + std::to_string(ids) + std::string(rand(40), 'x');
          Result r = both([&](command::Session& s) { return Put(s, pri, delay, body); }, "put");
          if (r.outcome == Outcome::kInserted) ids = r.number + 1;
          break;
        }
        case 4: {
          const char* t = tubes[rand(3)];
          both([&](command::Session& s) { return s.Use(t); }, "use");
          both([&](command::Session& s) { return s.Watch(t); }, "watch");
          if (rand(3) == 0) {
            const char* u = tubes[rand(3)];
            both([&](command::Session& s) { return s.Ignore(u); }, "ignore");
          }
          break;
        }
        case 5:
        case 6: {
          Result r = both([&](command::Session& s) { return s.Reserve(0); }, "reserve");
          if (r.outcome == Outcome::kReserved && rand(3) == 0) {  // a dead letter
            both([&](command::Session& s) { return s.Bury(r.job.id, 3); }, "bury");
          } else if (r.outcome == Outcome::kReserved &&
                     rand(2) == 0) {  // a retry, maybe backed off
            const uint32_t delay = rand(2) == 0 ? 0 : static_cast<uint32_t>(5 + rand(200));
            const uint32_t pri = pris[rand(std::size(pris))];
            both([&](command::Session& s) { return s.Release(r.job.id, pri, delay); }, "release");
          }
          break;
        }
        case 7: {  // a reserve that may wait: answered by a later put, kick, unpause or time
          Result r = both([&](command::Session& s) { return s.Reserve(3 * kSecond); }, "reserve");
          waiting[si] = r.outcome == Outcome::kPending;
          break;
        }
        case 8:
          both([&](command::Session& s) { return s.Delete(id); }, "delete");
          break;
        case 9:
          both([&](command::Session& s) { return s.KickJob(id); }, "kick-job");
          both([&](command::Session& s) { return s.Peek(id); }, "peek");
          break;
        case 10:
          both([&](command::Session& s) { return s.StatsJob(id); }, "stats-job");
          break;
        case 11:
          both([&](command::Session& s) { return s.PeekDelayed(); }, "peek-delayed");
          both([&](command::Session& s) { return s.PeekReady(); }, "peek-ready");
          both([&](command::Session& s) { return s.PeekBuried(); }, "peek-buried");
          break;
        case 12: {
          const uint32_t n = static_cast<uint32_t>(1 + rand(4));
          both([&](command::Session& s) { return s.Kick(n); }, "kick");
          break;
        }
        case 13: {
          const uint32_t delay = rand(2) == 0 ? 0 : static_cast<uint32_t>(rand(100));
          const uint32_t pri = pris[rand(std::size(pris))];
          both([&](command::Session& s) { return s.Release(id, pri, delay); }, "release");
          break;
        }
        case 14:
          both([&](command::Session& s) { return s.Bury(id, 9); }, "bury");
          both([&](command::Session& s) { return s.ReserveJob(id + 1); }, "reserve-job");
          break;
        case 15: {
          const char* t = tubes[rand(3)];
          both([&](command::Session& s) { return s.StatsTube(t); }, "stats-tube");
          both([&](command::Session& s) { return s.Stats(); }, "stats");
          const StateFilter states[] = {StateFilter::kReady, StateFilter::kDelayed,
                                        StateFilter::kBuried};
          const StateFilter st = states[rand(std::size(states))];  // from 0 or an id
          const uint64_t from = rand(2) ? 0 : rand(ids + 1);
          const auto n = static_cast<uint32_t>(rand(2) ? 1000 : 1 + rand(3));
          both([&](command::Session& s) { return s.ListJobs(t, st, from, n); }, "list-jobs");
          break;
        }
        case 16: {
          const char* t = tubes[rand(3)];
          const uint32_t delay = static_cast<uint32_t>(rand(3));
          both([&](command::Session& s) { return s.PauseTube(t, delay); }, "pause-tube");
          break;
        }
        case 17:
          if (rand(10) == 0) {  // now and then a purge (ready, delayed or all)
            const char* t = tubes[rand(3)];
            const StateFilter st = purges[rand(std::size(purges))];
            both([&](command::Session& s) { return s.Purge(t, st); }, "purge");
          } else {
            const uint64_t many[] = {id, id + 1, id + 5};
            both([&](command::Session& s) { return s.DeleteMany(many); }, "delete-many");
          }
          break;
        default:
          clock.Advance(static_cast<Nanos>(rand(4 * kSecond)));
          break;
      }
      if (HasFatalFailure()) return;
      hot.Tick();
      cold.Tick();
      if (step % 500 == 0) cold.store->engine().CheckInvariants();
      const size_t on_disk = cold.cold->BuriedOnDisk(nullptr);
      buried_went += on_disk > buried_on_disk ? on_disk - buried_on_disk : 0;
      buried_on_disk = on_disk;
    }
    for (int i = 0; i < Side::kSessions; i++) EXPECT_EQ(hot.rec[i].late, cold.rec[i].late);
    const engine::ColdTier::Stats st = cold.cold->stats();
    EXPECT_GT(st.demotions, 100u) << "seed " << seed;  // the test did exercise the tier
    EXPECT_GT(st.promotions, 100u) << "seed " << seed;
    EXPECT_GT(st.rewrites, 10u) << "seed " << seed;  // released and timed-out jobs went too
    EXPECT_GT(buried_went, 10u) << "seed " << seed;  // and buried ones
    EXPECT_EQ(st.read_errors, 0u);
  }
}

// A backlog of ready jobs (mixed priorities, equal ones among them, two tubes watched)
// mostly on disk comes back in exactly beanstalkd's order, each with its body, and the
// counts include the jobs on disk all along.
TEST(ColdStoreTest, ReadyBacklogOnDiskIsReservedInOrder) {
  for (uint32_t ready_hot : {0u, 16u}) {
    FakeClock clock;
    Side hot(clock, 0), cold(clock, 1, ready_hot);
    std::mt19937_64 rng(ready_hot + 7);
    for (Side* side : {&hot, &cold}) {
      command::Session& s = *side->sessions[0];
      ASSERT_EQ(s.Watch("other").outcome, Outcome::kWatching);
    }
    for (int i = 0; i < 3000; i++) {
      const uint32_t pri = static_cast<uint32_t>(rng() % 4 == 0 ? 1000 + rng() % 50 : 2000);
      const char* tube = rng() % 3 == 0 ? "other" : "default";
      const std::string body = "backlog " + std::to_string(i);
      for (Side* side : {&hot, &cold}) {
        command::Session& s = *side->sessions[1];
        ASSERT_EQ(s.Use(tube).outcome, Outcome::kUsing);
        ASSERT_EQ(Put(s, pri, 0, body).outcome, Outcome::kInserted);
      }
      if (i % 100 == 0) {
        hot.Tick();
        cold.Tick();
      }
    }
    for (int i = 0; i < 5; i++) cold.Tick();
    const engine::ColdTier::ReadyCounts on_disk = cold.cold->ReadyOnDisk(nullptr);
    EXPECT_GT(on_disk.ready, 2500u);
    EXPECT_GT(on_disk.urgent, 0u);  // pri 1000..1049: some urgent ones went too
    ExpectSame(hot.sessions[0]->Stats(), cold.sessions[0]->Stats(), "stats");
    // A job's tube (a namespace check asks it before a command naming the job): on disk too.
    for (uint64_t id = 1; id <= 3000; id += 7) {
      Result a = hot.sessions[0]->JobTube(id), b = cold.sessions[0]->JobTube(id);
      ASSERT_EQ(b.outcome, Outcome::kFound) << "job-tube " << id;
      EXPECT_EQ(a.name, b.name) << "job-tube " << id;
    }
    for (int i = 0; i < 3000; i++) {
      Result a = hot.sessions[0]->Reserve(0);
      Result b = cold.sessions[0]->Reserve(0);
      ExpectSame(a, b, "reserve " + std::to_string(i));
      ASSERT_EQ(b.outcome, Outcome::kReserved);
      ASSERT_EQ(cold.sessions[0]->Delete(b.job.id).outcome, Outcome::kDeleted);
      ASSERT_EQ(hot.sessions[0]->Delete(a.job.id).outcome, Outcome::kDeleted);
      if (i % 50 == 0) {
        ExpectSame(hot.sessions[0]->StatsTube("default"), cold.sessions[0]->StatsTube("default"),
                   "stats-tube");
        cold.Tick();
      }
      if (HasFatalFailure()) return;
    }
    EXPECT_EQ(cold.sessions[0]->Reserve(0).outcome, Outcome::kTimedOut);
    EXPECT_EQ(cold.cold->stats().read_errors, 0u);
  }
}

// A job on disk comes back from its record exactly (body, priority, times, counters), and
// compaction, moving it by copying its record, keeps it readable.
TEST(ColdStoreTest, ColdJobsSurviveCompactionAndComeBackOnTime) {
  FakeClock clock;
  Side cold(clock, 1);
  command::Session& s = *cold.sessions[0];
  std::vector<uint64_t> keep;
  for (int i = 0; i < 200; i++) {
    Result r = Put(s, 5, 3600, "long " + std::to_string(i));
    ASSERT_EQ(r.outcome, Outcome::kInserted);
    keep.push_back(r.number);
    cold.Tick();
  }
  cold.Tick();
  EXPECT_EQ(cold.cold->Count(), keep.size());
  // Churn: put and delete many ready jobs so the head segments die and get compacted.
  for (int i = 0; i < 3000; i++) {
    Result r = Put(s, 1, 0, std::string(200, 'z'));
    ASSERT_EQ(r.outcome, Outcome::kInserted);
    ASSERT_EQ(s.Delete(r.number).outcome, Outcome::kDeleted);
    cold.Tick();
  }
  EXPECT_GT(cold.log->stats().records_migrated, 0);
  EXPECT_LE(cold.log->stats().segments, 12u);  // the cold jobs did not pin their segments
  EXPECT_EQ(cold.cold->Count(), keep.size());  // nothing was read back for compaction
  clock.Advance(3600 * kSecond);
  for (int i = 0; i < 5; i++) cold.Tick();
  EXPECT_EQ(cold.cold->Count(), 0u);
  for (size_t i = 0; i < keep.size(); i++) {
    Result r = s.Reserve(0);
    ASSERT_EQ(r.outcome, Outcome::kReserved);
    EXPECT_EQ(r.job.id, keep[i]);
    EXPECT_EQ(r.job.body, "long " + std::to_string(i));
    ASSERT_EQ(s.Delete(r.job.id).outcome, Outcome::kDeleted);
  }
}

// ---- Jobs changed since their put (docs/DISK-TIER.md, "Which jobs go"): written whole
// again, then sent to disk; back as in memory, on time, and after a kill -9 at any step.

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

// A job as stats-job and peek show it: state, pri, delay, reserves, releases, timeouts,
// buries, kicks, body; and apart, time-left (at a restart it goes through the wall clock).
using Seen = std::tuple<std::string, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t,
                        uint32_t, std::string>;

std::map<uint64_t, std::pair<Seen, int64_t>> SeeAll(Side& side, const std::vector<uint64_t>& ids) {
  std::map<uint64_t, std::pair<Seen, int64_t>> out;
  for (uint64_t id : ids) {
    Result p = side.sessions[2]->Peek(id);
    EXPECT_EQ(p.outcome, Outcome::kFound) << "job " << id;
    const std::string body(p.job.body);
    Result r = side.sessions[2]->StatsJob(id);
    if (r.outcome != Outcome::kJobStats) continue;
    const command::JobStats& x = *r.job_stats;
    out[id] = {Seen{std::string(x.state), x.pri, x.delay_s, x.reserves, x.releases, x.timeouts,
                    x.buries, x.kicks, body},
               x.time_left_s};
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
  EXPECT_GE(st.rewrites, n - 3 * 16);  // at most once each: a few rewritten then stayed
  EXPECT_LE(st.rewrites, n);
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
    std::map<uint64_t, std::pair<Seen, int64_t>> want, got;
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
      const std::string what = "stage " + std::to_string(stage) + " job " + std::to_string(id);
      EXPECT_EQ(got[id].first, want[id].first) << what;
      EXPECT_NEAR(got[id].second, want[id].second, 1) << what;
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
  bool RewritePending(const engine::Job& j) const override { return log.RewritePending(j); }
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
  cold.store->set_cold(nullptr);  // the tier reads through `reader` (budget 1, ready_hot 0)
  cold.cold = std::make_unique<ColdStore>(cold.store->engine(), reader,
                                          ColdStoreOptions{1, 2 * kSecond, 1000, 0});
  cold.store->set_cold(cold.cold.get());
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
