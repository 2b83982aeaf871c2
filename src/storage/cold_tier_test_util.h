#pragma once

// The disk tier's restart tests' fixture (cold_checkpoint_test.cc, cold_replay_test.cc): a
// store with a binlog and the tier, restored as the server does it.

#include <dirent.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "command/stats_compare_test_util.h"
#include "server/cold_store_test_util.h"
#include "storage/binlog.h"
#include "storage/binlog_test_util.h"
#include "storage/cold_store.h"
#include "store/memory_store.h"

namespace stalkd::storage::testing_util {

inline std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') out.push_back(e->d_name);
    }
    closedir(d);
  }
  return out;
}

inline bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// A store with a binlog on `dir` (small segments: many, rotation and compaction) and, with a
// budget, the disk tier (TierParts, as the server builds them), with a session.
struct Tier : TierParts {
  IgnoredClient rec;
  std::unique_ptr<command::Session> session;

  Tier(FakeClock& clock, const std::string& in, size_t budget, std::function<bool()> progress = {})
      : TierParts(clock, LogOptions(in, std::move(progress)), TierOptions(budget)) {
    EXPECT_TRUE(ok || log->stopped()) << error;
    session = store->Open(rec);
  }
  static BinlogOptions LogOptions(const std::string& in, std::function<bool()> progress) {
    BinlogOptions o;
    o.dir = in;
    o.segment_size = 8192;
    o.fsync_ms = 0;
    o.progress = std::move(progress);
    return o;
  }
  static ColdStoreOptions TierOptions(size_t budget) {
    ColdStoreOptions co;
    co.budget = budget;
    return co;
  }
  ~Tier() {
    session.reset();
    if (ok) store->engine().CheckInvariants();
    Close();
  }
  // A clean shutdown as the server's: sessions closed, the log closed, the checkpoint.
  bool Shutdown() {
    session.reset();
    return TierParts::Shutdown();
  }
  // A crash: what was written stays, nothing else happens.
  void Crash() {
    session.reset();
    log->Close();
    store->engine().set_log(nullptr);
    log.reset();
  }
  size_t Jobs() {
    command::Result r = session->Stats();
    const command::ServerStats& s = *r.stats;
    return s.ready + s.delayed + s.buried + s.reserved;
  }
};

// A history of `puts` jobs under t's tier (a budget of 1 byte sends every job that may go
// to disk): tubes "default", "a" (a default of 3 tries) and "b", most jobs long-delayed,
// some ready; with `extensions`, one in 20 with a key or a TTL (they stay in memory). Then
// changes after the puts: deletes, kicks (from disk: a state record after the put),
// releases with and without a delay, buries, peeks (read back, whole in its record). The
// session watches the three tubes afterwards.
inline void MakeHistory(Tier& t, uint32_t seed, int puts, bool extensions) {
  using command::Outcome;
  using command::Result;
  std::mt19937_64 rng(seed);
  auto rand = [&](uint64_t n) { return rng() % n; };
  command::Session& s = *t.session;
  EXPECT_EQ(s.TubeTries("a", 3).outcome, Outcome::kTubeTries);
  const char* tubes[] = {"default", "a", "b"};
  std::vector<uint64_t> ids;
  for (int i = 0; i < puts; i++) {
    s.Use(tubes[rand(3)]);
    const std::string body = "job " + std::to_string(i) + std::string(rand(60), 'x');
    const uint32_t delay = rand(5) == 0 ? 0 : static_cast<uint32_t>(100 + rand(100000));
    command::PutOptions o;
    const std::string key = "k" + std::to_string(i);
    command::PutArgs a{static_cast<uint32_t>(rand(3)), delay, 30,
                       static_cast<uint32_t>(body.size())};
    if (extensions && rand(20) == 0) {
      if (rand(2) == 0) o.key = key;
      o.ttl_s = rand(2) == 0 ? 0 : 900000;
      a.options = &o;
    }
    command::PutSlot slot = s.BeginPut(a);
    ASSERT_NE(slot.data, nullptr);
    std::memcpy(slot.data, body.data(), body.size());
    std::memcpy(slot.data + body.size(), "\r\n", 2);
    Result r = s.CommitPut();
    EXPECT_EQ(r.outcome, Outcome::kInserted);
    ids.push_back(r.number);
    if (i % 7 == 0) t.Tick();
  }
  for (int i = 0; i < 5; i++) t.Tick();
  for (const char* tube : tubes) s.Watch(tube);
  for (int i = 0; i < puts / 4; i++) {
    const uint64_t id = ids[rand(ids.size())];
    switch (rand(5)) {
      case 0:
        s.Delete(id);
        break;
      case 1:
        s.KickJob(id);
        break;
      case 2: {
        Result r = s.Reserve(0);
        if (r.outcome == Outcome::kReserved) s.Release(r.job.id, 7, rand(2) * 5000);
        break;
      }
      case 3: {
        Result r = s.Reserve(0);
        if (r.outcome == Outcome::kReserved) s.Bury(r.job.id, 9);
        break;
      }
      default:
        s.Peek(id);
        break;
    }
    t.Tick();
  }
}

// Every job a reserve of t's session hands out now, in order (each deleted).
inline std::vector<uint64_t> Drain(Tier& t) {
  std::vector<uint64_t> out;
  for (;;) {
    t.Tick();
    command::Result r = t.session->Reserve(0);
    if (r.outcome != command::Outcome::kReserved) return out;
    out.push_back(r.job.id);
    EXPECT_EQ(t.session->Delete(r.job.id).outcome, command::Outcome::kDeleted);
  }
}

// a and b (the tier, or not) hand out the same jobs in the same order to a reserve of every
// tube "default", "a" and "b": the ready ones now, then the delayed ones once due (clock
// advanced past every delay), then the buried ones once kicked; none is left. Returns how
// many were ready, then due.
inline std::pair<size_t, size_t> ExpectSameOrder(Tier& a, Tier& b, FakeClock& clock) {
  for (Tier* t : {&a, &b}) {
    for (const char* tube : {"default", "a", "b"}) t->session->Watch(tube);
  }
  const std::vector<uint64_t> ready = Drain(a);
  EXPECT_EQ(ready, Drain(b));
  clock.Advance(200000 * kSecond);
  const std::vector<uint64_t> due = Drain(a);
  EXPECT_EQ(due, Drain(b));
  for (Tier* t : {&a, &b}) {
    for (const char* tube : {"default", "a", "b"}) {
      t->session->Use(tube);
      t->session->Kick(1000);
    }
  }
  EXPECT_EQ(Drain(a), Drain(b));
  EXPECT_EQ(a.Jobs(), 0u);
  EXPECT_EQ(b.Jobs(), 0u);
  return {ready.size(), due.size()};
}

// list-tubes of t's session, in its order.
inline std::vector<std::string> TubeList(Tier& t) {
  command::Result r = t.session->ListTubes();
  EXPECT_EQ(r.outcome, command::Outcome::kTubeList);
  if (r.outcome != command::Outcome::kTubeList) return {};
  return std::vector<std::string>(r.tubes->begin(), r.tubes->end());
}

// a and b answer alike: stats, list-tubes (the same tubes in the same order: a start makes
// them in the order of their lowest live id), stats-tube of the tubes "default", "a" and
// "b", and stats-job and peek of ids 1..max_id. Times are equal but for `drift_s`: the two were
// restored from wall-clock times a moment apart (or a fake clock and the wall clock drifted apart).
inline void ExpectSameAnswers(Tier& a, Tier& b, uint64_t max_id, double drift_s) {
  using command::Outcome;
  command::testing_util::ExpectSameCounts(*a.session->Stats().stats, *b.session->Stats().stats,
                                          "stats");
  EXPECT_EQ(TubeList(a), TubeList(b));
  for (const char* tube : {"default", "a", "b"}) {  // each result valid until its store's next call
    command::Result x = a.session->StatsTube(tube), y = b.session->StatsTube(tube);
    command::testing_util::ExpectSameCounts(*x.tube_stats, *y.tube_stats, tube);
  }
  for (uint64_t id = 1; id <= max_id; id++) {
    command::Result x = a.session->StatsJob(id), y = b.session->StatsJob(id);
    ASSERT_EQ(x.outcome, y.outcome) << id;
    if (x.outcome != Outcome::kJobStats) continue;
    command::testing_util::ExpectSameJob(*x.job_stats, *y.job_stats, std::to_string(id),
                                         {false, drift_s});
    EXPECT_EQ(a.session->Peek(id).job.body, b.session->Peek(id).job.body) << id;
  }
}

// The same reply, field by field, as far as the outcome defines fields. stats-job's `file`
// too, unless !same_file (a disk tier writing changed jobs whole again writes records the
// other store does not, so its segments differ).
inline void ExpectSame(const command::Result& a, const command::Result& b, const std::string& what,
                       bool same_file = true) {
  using command::Outcome;
  ASSERT_EQ(a.outcome, b.outcome) << what;
  EXPECT_EQ(a.number, b.number) << what;
  switch (a.outcome) {
    case Outcome::kReserved:
    case Outcome::kFound:
      EXPECT_EQ(a.job.id, b.job.id) << what;
      EXPECT_EQ(a.job.body, b.job.body) << what;
      break;
    case Outcome::kJobStats:
      command::testing_util::ExpectSameJob(*a.job_stats, *b.job_stats, what, {!same_file});
      break;
    case Outcome::kTubeStats:
      command::testing_util::ExpectSameCounts(*a.tube_stats, *b.tube_stats, what);
      break;
    case Outcome::kStats:
      command::testing_util::ExpectSameCounts(*a.stats, *b.stats, what);
      break;
    case Outcome::kJobList:
      EXPECT_EQ(*a.ids, *b.ids) << what;
      break;
    default:
      break;
  }
}

// The ids up to max_id that t answers stats-job for.
inline std::set<uint64_t> LiveIds(Tier& t, uint64_t max_id) {
  std::set<uint64_t> out;
  for (uint64_t id = 1; id <= max_id; id++) {
    if (t.session->StatsJob(id).outcome == command::Outcome::kJobStats) out.insert(id);
  }
  return out;
}

}  // namespace stalkd::storage::testing_util
