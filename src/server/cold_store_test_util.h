// The disk tier's tests' store: a MemoryStore with a binlog and, with a budget, the disk
// tier, built as the server builds them (so it lives with the server, the layer that may
// wire store/ and storage/ together). Tests derive their fixture from it (their sessions,
// their clients, what a crash means to them).
#pragma once

#include <memory>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "base/clock.h"
#include "storage/binlog.h"
#include "storage/cold_store.h"
#include "store/memory_store.h"

namespace stalkd::storage {
namespace testing_util {

// A client of the tests' sessions whose asynchronous results (a waiting reserve's) are not
// looked at.
struct IgnoredClient final : command::Client {
  void OnResult(const command::Result&) override {}
};

struct TierParts {
  std::string dir;
  std::unique_ptr<store::MemoryStore> store;
  std::unique_ptr<Binlog> log;
  std::unique_ptr<ColdStore> cold;
  std::string error;
  bool ok = false;  // the log locked and recovered (else `error` says why)

  // The binlog on o.dir; the tier if co.budget is not 0. As the server: the tier exists
  // before recovery and takes a checkpoint's cold jobs, and the jobs a replay starts on disk.
  TierParts(FakeClock& clock, BinlogOptions o, const ColdStoreOptions& co) : dir(o.dir) {
    store = std::make_unique<store::MemoryStore>(clock, store::MemoryStoreOptions{}, nullptr);
    o.disk_tier = co.budget != 0;
    if (co.budget != 0) {
      o.restore_cold = [this](const ColdIndex::Entry& e) { cold->AddRestored(e); };
      o.restore_cold_ready = [this](const ColdReadyIndex::Entry& e) { cold->AddRestoredReady(e); };
    }
    log = std::make_unique<Binlog>(std::move(o), clock);
    if (co.budget != 0) cold = std::make_unique<ColdStore>(store->engine(), *log, co);
    ok = log->Lock(&error) && log->Recover(&store->engine(), &error);
    store->engine().set_log(log.get());
    if (cold) store->set_cold(cold.get());
  }
  TierParts(const TierParts&) = delete;
  TierParts& operator=(const TierParts&) = delete;

  void Tick() {
    store->Tick();
    log->Flush();
  }
  // A clean stop as the server's (sessions closed first): the log closed, the checkpoint
  // written (false: no tier, or it failed), the log gone.
  bool Shutdown() {
    store->set_cold(nullptr);
    log->Close();
    const bool written = cold && log->WriteCheckpoint(cold->index(), cold->ready_index());
    store->engine().set_log(nullptr);
    log.reset();
    return written;
  }
  // The tier and the log taken down, the log closed first if it is still there.
  void Close() {
    store->set_cold(nullptr);
    if (log) {
      log->Close();
      store->engine().set_log(nullptr);
    }
    cold.reset();
    log.reset();
  }
};

// TierParts with one session of a client C, for tests of commands; a binlog that never
// syncs; the engine's invariants checked at the end.
template <typename C = IgnoredClient>
struct SessionTier : TierParts {
  C client;
  std::unique_ptr<command::Session> s;
  SessionTier(FakeClock& clock, const std::string& in, const ColdStoreOptions& co)
      : TierParts(clock, Unsynced(in), co) {
    EXPECT_TRUE(ok) << error;
    s = store->Open(client);
  }
  ~SessionTier() {
    s.reset();
    store->engine().CheckInvariants();
    Close();
  }
  static BinlogOptions Unsynced(const std::string& dir) {
    BinlogOptions o;
    o.dir = dir;
    o.fsync_never = true;
    return o;
  }
};

}  // namespace testing_util
}  // namespace stalkd::storage
