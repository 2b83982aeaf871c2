#pragma once

// What the disk tier's store tests share (cold_store_test.cc, cold_store_changed_test.cc): a
// store with a binlog and, with a budget, the disk tier; and replies compared field by field.

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/clock.h"
#include "storage/binlog.h"
#include "storage/binlog_test_util.h"
#include "storage/cold_store.h"
#include "store/memory_store.h"

namespace stalkd::storage::cold_test_util {

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
       uint32_t tick_budget = 1000, int64_t segment_size = 8192)
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
      ColdStoreOptions co;
      co.budget = budget;
      co.ready_hot = ready_hot;
      co.tick_budget = tick_budget;
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
  // From now on the tier reads through `reader` (a test's wrapper around the log).
  void ReadThrough(engine::ColdReader& reader, ColdStoreOptions co) {
    store->set_cold(nullptr);
    cold = std::make_unique<ColdStore>(store->engine(), reader, co);
    store->set_cold(cold.get());
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
    case Outcome::kJobStats: {
      const command::JobStats &x = *a.job_stats, &y = *b.job_stats;
      EXPECT_EQ(x.id, y.id) << what;
      EXPECT_EQ(x.tube, y.tube) << what;
      EXPECT_EQ(x.state, y.state) << what;
      EXPECT_EQ(x.pri, y.pri) << what;
      EXPECT_EQ(x.age_ms, y.age_ms) << what;
      EXPECT_EQ(x.delay_s, y.delay_s) << what;
      EXPECT_EQ(x.ttr_s, y.ttr_s) << what;
      EXPECT_EQ(x.time_left_s, y.time_left_s) << what;
      if (same_file) {
        EXPECT_EQ(x.file, y.file) << what;
      }
      EXPECT_EQ(x.reserves, y.reserves) << what;
      EXPECT_EQ(x.releases, y.releases) << what;
      EXPECT_EQ(x.buries, y.buries) << what;
      EXPECT_EQ(x.kicks, y.kicks) << what;
      EXPECT_EQ(x.timeouts, y.timeouts) << what;
      break;
    }
    case Outcome::kTubeStats: {
      const command::TubeStats &x = *a.tube_stats, &y = *b.tube_stats;
      EXPECT_EQ(x.ready, y.ready) << what;
      EXPECT_EQ(x.delayed, y.delayed) << what;
      EXPECT_EQ(x.buried, y.buried) << what;
      EXPECT_EQ(x.reserved, y.reserved) << what;
      EXPECT_EQ(x.urgent, y.urgent) << what;
      EXPECT_EQ(x.total_jobs, y.total_jobs) << what;
      break;
    }
    case Outcome::kStats: {
      const command::ServerStats &x = *a.stats, &y = *b.stats;
      EXPECT_EQ(x.ready, y.ready) << what;
      EXPECT_EQ(x.urgent, y.urgent) << what;
      EXPECT_EQ(x.delayed, y.delayed) << what;
      EXPECT_EQ(x.buried, y.buried) << what;
      EXPECT_EQ(x.reserved, y.reserved) << what;
      EXPECT_EQ(x.total_jobs, y.total_jobs) << what;
      EXPECT_EQ(x.tubes, y.tubes) << what;
      EXPECT_EQ(x.waiting, y.waiting) << what;
      break;
    }
    case Outcome::kJobList:
      EXPECT_EQ(*a.ids, *b.ids) << what;
      break;
    default:
      break;
  }
}

}  // namespace stalkd::storage::cold_test_util
