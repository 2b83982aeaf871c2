#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "command/store.h"
#include "engine/cold_hooks.h"
#include "engine/engine.h"

namespace stalkd::store {

class MemorySession;

struct MemoryStoreOptions {
  engine::EngineOptions engine;
  size_t max_job_size = 65535;  // -z
};

// The embedded store: the command interface over one in-process engine::Engine (and, with
// -b, the binlog the server attaches to it as its JobLog). Everything a command means that
// is not the engine's state machine lives here: the cmd-* counters, the job size limit,
// tube name checks, kick's choice between buried and delayed jobs and its slicing, stats
// assembled from the engine's counters, and the durability marks of each result.
//
// Results are immediate except a reserve that waits and a kick of more than kKickSlice
// jobs; those complete from a later call (another session's put, Tick) through the
// session's Client.
class MemoryStore final : public command::Store, private engine::Engine::Observer {
 public:
  // `clock` and `host` (may be null: no process stats) must outlive the store.
  MemoryStore(const Clock& clock, MemoryStoreOptions options, const command::Host* host);
  ~MemoryStore() override;
  MemoryStore(const MemoryStore&) = delete;
  MemoryStore& operator=(const MemoryStore&) = delete;

  std::unique_ptr<command::Session> Open(command::Client& client) override;
  Nanos Tick() override;
  // Long work in progress: a kick or purge between slices, or timer work (expiries, delays,
  // TTRs) the engine's last Tick left for the next, so that the loop does one slice of it
  // per iteration instead of ticking again before it polls.
  bool Busy() const override { return !kicking_.empty() || !purging_.empty() || timer_backlog_; }
  bool Covers(int64_t mark) const override { return engine_.LogCovers(mark); }
  void SetDraining(bool on) override { engine_.set_draining(on); }
  void SetObserver(command::Observer* o) override {
    observer_ = o;
    engine_.set_observer(o ? this : nullptr);
  }

  // For the binlog (recovery, compaction), memory trimming and tests.
  engine::Engine& engine() { return engine_; }
  const engine::Engine& engine() const { return engine_; }
  uint64_t count(command::Verb v) const { return cmds_[static_cast<size_t>(v)]; }
  void set_max_job_size(size_t n) { max_job_size_ = n; }
  // The disk tier (docs/DISK-TIER.md), or nullptr (the default): every job in memory. Set
  // before the first command; it must outlive the store's use of it.
  void set_cold(engine::ColdTier* cold) {
    cold_ = cold;
    engine_.set_cold(cold);
  }
  const engine::ColdTier* cold() const { return cold_; }

  // Jobs kicked (purged) per slice; a larger kick (purge) is spread over several Ticks.
  static constexpr uint32_t kKickSlice = 1000;
  static constexpr uint32_t kPurgeSlice = 1000;

 private:
  // engine::Engine::Observer: passed on to the command::Observer, with the tube's name.
  void OnFirstReserve(const engine::Tube& t, Nanos waited) override {
    observer_->OnFirstReserve(t.name(), waited);
  }
  void OnRunDone(const engine::Tube& t, Nanos ran) override { observer_->OnRunDone(t.name(), ran); }

  friend class MemorySession;

  void Count(command::Verb v) { cmds_[static_cast<size_t>(v)]++; }
  // Hands the engine's pending events (reserves that waited) to their sessions. Called
  // after every engine call that can hand a job to a waiting session.
  void DeliverEvents() {
    if (engine_.has_events()) DeliverPendingEvents();
  }
  void DeliverPendingEvents();
  // A kick in progress: kept here rather than in every session.
  struct Kick {
    MemorySession* session;
    uint32_t left;    // jobs still to kick
    uint32_t kicked;  // so far
    bool buried;      // which list it started on
    bool no_room;     // stopped at a job whose change the binlog cannot record
    // KICKED with the count, or OUT_OF_MEMORY if a full disk stopped it before any job.
    command::Result Outcome();
  };
  // One slice of `k`; true once it is done.
  bool KickStep(Kick& k);
  // One slice of every kick in progress; true if some are still in progress.
  bool KickSlices();
  // A purge in progress, continued by Tick like a kick.
  struct Purge {
    MemorySession* session;
    std::string tube;
    engine::PurgeWhat what;
    uint64_t purged;
  };
  bool PurgeStep(Purge& p);
  bool PurgeSlices();

  // Before a command names job id: brings it back from the disk tier if it is there.
  void Warm(uint64_t id) {
    if (cold_) cold_->Promote(id);
  }
  // Before a command looks at t's first n delayed jobs (SIZE_MAX: all of them).
  void WarmDelayed(const engine::Tube* t, size_t n) {
    if (cold_) cold_->PromoteEarliest(t, n);
  }
  // Before a command looks at t's first ready job: it is in memory afterwards.
  void WarmReadyFirst(const engine::Tube* t) {
    if (cold_) cold_->PromoteReadyFirst(t, engine_.PeekReady(t));
  }
  // Before a reserve of s: the first ready job of every tube s watches is in memory, and
  // sessions served meanwhile (a job read back goes to a waiting session) are told.
  void WarmReady(const engine::Session* s) {
    if (cold_) WarmWatched(s);
  }
  void WarmWatched(const engine::Session* s);
  // Before a command looks at t's first n buried jobs (peek-buried, kick, respawn).
  void WarmBuried(const engine::Tube* t, size_t n) {
    if (cold_) cold_->PromoteBuried(t, n);
  }
  // t's buried jobs, in memory and on disk.
  size_t BuriedCount(const engine::Tube* t) const {
    return t->buried.size() + (cold_ ? cold_->BuriedOnDisk(t) : 0);
  }
  // Before a purge slice that found no more of t's jobs in memory: brings back up to n of
  // t's jobs on disk that it purges (buried first, then delayed due first, then ready in
  // order); returns how many.
  size_t WarmForPurge(const engine::Tube* t, engine::PurgeWhat what, size_t n);
  // list-jobs: the ids of t's jobs in `state` in memory and on disk from `from`, at most
  // `count`, into ids_, scanned as the all-in-memory store scans; returns where to continue
  // (0: no more).
  uint64_t ListWithCold(const engine::Tube* t, engine::JobState state, uint64_t from, size_t count);

  const command::ServerStats& FillStats();
  const command::TubeStats& FillTubeStats(const engine::Tube& t);
  const command::JobStats& FillJobStats(const engine::Job& j);

  engine::Engine engine_;
  engine::ColdTier* cold_ = nullptr;
  const command::Host* host_;
  size_t max_job_size_;
  uint64_t cmds_[command::kVerbCount] = {};
  std::vector<Kick> kicking_;          // at most one per session
  std::vector<Purge> purging_;         // at most one per session
  bool timer_backlog_ = false;         // the engine's last Tick ran out of budget
  std::vector<engine::Event> events_;  // DeliverEvents' scratch
  // What results point to, valid until the next call.
  command::ServerStats stats_;
  command::TubeStats tube_stats_;
  command::JobStats job_stats_;
  std::vector<std::string_view> names_;
  // Scratch of the extensions' results (valid until the next call, as every view).
  std::vector<command::JobView> jobs_;
  std::vector<uint64_t> ids_;
  std::vector<command::Attribute> attributes_;
  command::JobExtensionStats job_extension_;
};

}  // namespace stalkd::store
