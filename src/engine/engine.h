#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "base/indexed_heap.h"
#include "base/string_map.h"
#include "engine/job.h"
#include "engine/job_log.h"
#include "engine/job_table.h"
#include "engine/session.h"
#include "engine/stats.h"
#include "engine/tube.h"

namespace stalkd::engine {

class ColdTier;

// What the engine tells a session asynchronously: the outcome of a `reserve` that waited.
struct Event {
  enum class Kind : uint8_t { kReserved, kTimedOut, kDeadlineSoon };
  Kind kind;
  Session* session;
  Job* job;  // kReserved only; reserved by `session`, valid until that session acts on it
};

// Heap orders over tubes and sessions (the job orders live in tube.h).
struct TubeEligibleOrder {  // by the best ready job
  static bool Less(const Tube* a, const Tube* b) {
    return ReadyOrder::Less(a->ready.top(), b->ready.top());
  }
  static uint32_t& Slot(Tube* t) { return t->eligible_slot; }
};
struct TubeDelayOrder {  // by the soonest delayed job
  static bool Less(const Tube* a, const Tube* b) {
    return DeadlineOrder::Less(a->delayed.top(), b->delayed.top());
  }
  static uint32_t& Slot(Tube* t) { return t->delay_slot; }
};
struct TubeAwaitedOrder : TubeDelayOrder {  // the same order, in a heap of its own
  static uint32_t& Slot(Tube* t) { return t->awaited_slot; }
};
struct TubePauseOrder {
  static bool Less(const Tube* a, const Tube* b) { return a->unpause_at < b->unpause_at; }
  static uint32_t& Slot(Tube* t) { return t->pause_slot; }
};
struct ExpiryOrder {  // jobs with a TTL (they have a JobExtra), by expiry
  using Key = Nanos;
  static const JobExtra* X(const Job* j) { return static_cast<const JobExtra*>(j->cold); }
  static Key KeyOf(const Job* j) { return X(j)->expires_at; }
  static bool Less(Nanos ka, const Job* a, Nanos kb, const Job* b) {
    return ka != kb ? ka < kb : a->id < b->id;
  }
  static bool Less(const Job* a, const Job* b) { return Less(KeyOf(a), a, KeyOf(b), b); }
  static uint32_t& Slot(Job* j) { return static_cast<JobExtra*>(j->cold)->expiry_slot; }
};
struct SessionWakeOrder {
  static bool Less(const Session* a, const Session* b) { return a->wake_at_ < b->wake_at_; }
  static uint32_t& Slot(Session* s) { return s->timer_slot_; }
};

// What a put may carry beyond beanstalkd's arguments (docs/EXTENSIONS.md).
struct JobOptions {
  uint32_t tries = 0;  // 0: the tube's default tries, or unlimited
  uint32_t ttl_s = 0;  // 0: no TTL
  std::string_view key;
  const JobAttribute* attrs = nullptr;
  size_t attr_count = 0;

  // Whether a job put with these options and `effective_tries` (its own or its tube's) needs a
  // JobExtra.
  bool Extended(uint32_t effective_tries) const {
    return (effective_tries | ttl_s) != 0 || !key.empty() || attr_count != 0;
  }
};

enum class PurgeWhat : uint8_t { kReady, kDelayed, kBuried, kAll };

struct EngineOptions {
  // Upper bound on job moves (promotions, TTR expiries, releases of a closed session's jobs)
  // done by one Tick(); the rest waits for the next Tick so other clients are served between.
  uint32_t tick_budget = 1000;
  // Cap on the bytes held by jobs and their indexes; a put that would exceed it is refused.
  size_t max_memory = SIZE_MAX;
  // Tick reports the deadlines that nobody waits for (delayed jobs of tubes no session waits
  // on, TTL expiries) no sooner than this after it ran, so a steady stream of them (a
  // million delayed jobs falling due over 10 s) is handled in batches, not one wake-up each.
  // The others (delayed jobs of tubes a session waits on, reserve timeouts, TTRs, pauses)
  // it reports exactly.
  Nanos batch_wait = 0;
};

// The beanstalk state machine: jobs, tubes, sessions, timers and counters. It does no I/O
// and reads time only from `clock`. Results of `reserve` arrive as Events (see TakeEvents).
// Cost: every operation is O(log n) in jobs and tubes, except those the protocol makes
// proportional to their output (list-tubes) or to one session's watch list.
class Engine {
 public:
  // `clock` must outlive the Engine.
  explicit Engine(const Clock& clock, EngineOptions options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // --- sessions ---
  // `owner` (may be null) must outlive the session's events.
  Session* OpenSession(SessionOwner* owner);
  // Forgets the session: stops its waiting, drops its tube references, drops its pending
  // events, and returns its reserved jobs to their ready queues: at once if it holds at most
  // kImmediateRelease, else tick_budget of them per later Tick.
  // The pointer must not be used afterwards.
  void CloseSession(Session* s);
  static constexpr size_t kImmediateRelease = 64;

  // --- tubes ---
  Tube* FindTube(std::string_view name) const;
  void Use(Session* s, std::string_view name);
  // Returns the number of watched tubes afterwards.
  size_t Watch(Session* s, std::string_view name);
  // Returns the number of watched tubes afterwards, or 0 (NOT_IGNORED) when `name` is the
  // only watched tube.
  size_t Ignore(Session* s, std::string_view name);
  // Returns false if the tube does not exist. A delay of 0 ends a pause.
  bool PauseTube(std::string_view name, uint32_t delay_s);
  const std::vector<Tube*>& tubes() const { return tube_list_; }

  // --- put ---
  // Builds a job in s's used tube and takes its id; the caller fills data() (body + CRLF)
  // and then calls Put or Discard. Returns nullptr when the memory cap would be exceeded.
  // `opts` must be within the limits of job.h.
  Job* NewJob(Session* s, uint32_t pri, uint32_t delay_s, uint32_t ttr_s, uint32_t body_size,
              const JobOptions& opts = {});
  void Discard(Job* j);
  // kNotDurable: the job log refused it (OUT_OF_MEMORY); the job does not exist.
  // kExists: a job with the same key lives in the tube; its id is in *existing, and j is
  // discarded.
  enum class PutResult { kInserted, kDraining, kNotDurable, kExists };
  PutResult Put(Session* s, Job* j, uint64_t* existing = nullptr);
  void set_draining(bool on) { draining_ = on; }
  bool draining() const { return draining_; }

  // --- reserve ---
  // Starts a reserve for s; its outcome arrives as an Event for s (possibly at once).
  // timeout: kForever for `reserve`, else the reserve-with-timeout duration.
  // Returns false with no event when s has a reserved job within a second of its deadline
  // and no ready job in its watch list (DEADLINE_SOON).
  bool Reserve(Session* s, Nanos timeout, const ReserveOptions& opts = {});
  // Reserves the best ready job of s's watched tubes now, or returns nullptr: how a batch
  // reserve takes more jobs after the first.
  Job* ReserveReady(Session* s, const ReserveOptions& opts = {});
  // The session holding detached reservations: never closed, counted nowhere; any session
  // may delete, release, bury or touch its jobs.
  const Session* detached() const { return detached_; }
  // Abandons a waiting reserve (the client went away); no event follows.
  void CancelReserve(Session* s) {
    if (s->waiting_) StopWaiting(s);
  }
  // reserve-job: reserves job id if it is ready, delayed or buried. Returns it or nullptr.
  Job* ReserveJob(Session* s, uint64_t id);

  // --- commands on a job ---
  // Delete and Touch return false for NOT_FOUND.
  bool Delete(Session* s, uint64_t id);
  bool Touch(Session* s, uint64_t id);
  // What a command that changes a job did: true when done; else NOT_FOUND, or refused
  // because the job log cannot record the change (JobLog::CanUpdate false: a full disk),
  // which leaves the job as it was.
  struct Changed {
    enum Result : uint8_t { kDone, kNotFound, kNoRoom } result;
    explicit operator bool() const { return result == kDone; }
  };
  Changed Release(Session* s, uint64_t id, uint32_t pri, uint32_t delay_s);
  Changed Bury(Session* s, uint64_t id, uint32_t pri);
  Changed KickJob(uint64_t id);
  // Kick up to n buried jobs of t (oldest buried first), or n delayed ones (soonest first).
  // They stop early, with *no_room set, at a job whose change the log cannot record.
  uint32_t KickBuried(Tube* t, uint32_t n, bool* no_room = nullptr);
  uint32_t KickDelayed(Tube* t, uint32_t n, bool* no_room = nullptr);
  // lmstfy's dead-letter respawn: kicks up to n buried jobs of t (oldest buried first),
  // each with one try and a new TTL of ttl_s seconds from now (0: none). Stops early at a
  // job whose change the log cannot record.
  uint32_t Respawn(Tube* t, uint32_t n, uint32_t ttl_s);

  // Deletes up to `budget` of t's jobs in the given states (buried, then delayed, then
  // ready for kAll); returns how many. t may be gone afterwards (FindTube again).
  uint32_t Purge(Tube* t, PurgeWhat what, uint32_t budget);
  // Appends to *out the ids of t's jobs in `state`, from id `from` in id order, at most
  // `count`, looking at no more than kListScan ids. Returns the id to continue from, or 0
  // when there are no more.
  uint64_t ListJobs(const Tube* t, JobState state, uint64_t from, size_t count,
                    std::vector<uint64_t>* out) const;
  static constexpr uint64_t kListScan = 65536;
  // ListJobs' scan as if the ids lo..hi (the disk tier's bounds) were live too: returns the
  // id it starts at from `from`, and in *end where the ids end (the end of the page of the
  // highest live id): a window is [start, min(start + kListScan, *end)), none if start >= *end.
  uint64_t ListSpan(uint64_t from, uint64_t lo, uint64_t hi, uint64_t* end) const;

  // A tube's default tries, kept by name apart from the tube (0: none). Set logs the change,
  // or returns false and changes nothing if the log cannot record it (a full disk); Restore
  // (at start-up) does not log.
  bool SetTubeTries(std::string_view tube, uint32_t tries);
  void RestoreTubeTries(std::string_view tube, uint32_t tries);
  uint32_t TubeTries(std::string_view tube) const;
  template <typename Fn>
  void ForEachTubeTries(Fn fn) const {
    for (const auto& [name, tries] : tube_tries_) fn(std::string_view(name), tries);
  }

  Job* Find(uint64_t id) const { return jobs_.Find(id); }
  Job* PeekReady(const Tube* t) const { return t->ready.top(); }
  Job* PeekDelayed(const Tube* t) const { return t->delayed.top(); }
  Job* PeekBuried(const Tube* t) const { return t->buried.front(); }

  // --- time ---
  // Expires TTRs and reserve timeouts, promotes due delayed jobs, ends pauses, and returns
  // reserved jobs of closed sessions: at most tick_budget job moves of each kind. Returns
  // the time of the next work (Now() if a budget ran out).
  Nanos Tick();

  // Takes the newest pending event if it is for s: how a caller collects the outcome of a
  // Reserve that completed at once (reserved or timed out) without waiting for a drain.
  bool TakeOwnEvent(const Session* s, Event* out) {
    if (events_.empty() || events_.back().session != s) return false;
    *out = events_.back();
    events_.pop_back();
    return true;
  }
  // Appends pending events to *out and clears them.
  void TakeEvents(std::vector<Event>* out);
  bool has_events() const { return !events_.empty(); }

  // --- durability ---
  // Reports every later change to `log` (nullptr: none). `log` must outlive the Engine.
  void set_log(JobLog* log) { log_ = log; }
  // Told of first reservations and of deletes of reserved jobs, for metrics; may be null.
  class Observer {
   public:
    virtual void OnFirstReserve(const Tube& t, Nanos waited) = 0;
    virtual void OnRunDone(const Tube& t, Nanos ran) = 0;

   protected:
    ~Observer() = default;
  };
  void set_observer(Observer* o) { observer_ = o; }
  // Recreates a job from a store at start-up, without reporting it to the log. Later ids
  // continue above the highest restored id. Returns false if the id is 0, already exists, or
  // lies absurdly far from the other live ids (JobTable::Fits).
  bool Restore(const RestoredJob& r);
  // Calls fn(job) for every job (ready, delayed, buried, reserved); for compaction.
  template <typename Fn>
  void ForEachJob(Fn fn) const {
    for (const Tube* t : tube_list_) {
      for (size_t k = 0; k < t->ready.size(); k++) fn(*t->ready.at(k));
      for (size_t k = 0; k < t->delayed.size(); k++) fn(*t->delayed.at(k));
      for (const Job* j : t->buried) fn(*j);
    }
    auto reserved = [&fn](const Session* s) {
      for (const Job* j : s->reserved_order_) fn(*j);
    };
    for (const Session* s : sessions_) reserved(s);
    for (const Session* s : closing_) reserved(s);
    reserved(detached_);
  }
  Job* FindMutable(uint64_t id) { return jobs_.Find(id); }

  // The disk tier (engine_cold.cc, docs/DISK-TIER.md). Evict frees a delayed, ready or buried job
  // without a key or TTL that the log holds whole (ColdReader::Demotable), reporting nothing: the
  // job lives on in the log and keeps its tube alive (its reference stays). Readmit brings
  // it back from its record, taking over that reference; it counts as no new job.
  static bool Evictable(const Job& j);
  void Evict(Job* j);
  bool Readmit(const RestoredJob& r);
  // A buried job's place in its tube's bury order: a number taken at each bury, rising (a
  // tube's buried list is in this order). The disk tier keeps it for a buried job on disk,
  // and ReadmitBuried puts the job back at its place (r.state kBuried), before `before` (a
  // buried job of its tube in memory, the first with a higher number; null: at the end).
  static uint64_t BurySeq(const Job& j) { return static_cast<uint64_t>(j.cold->deadline); }
  bool ReadmitBuried(const RestoredJob& r, uint64_t seq, const Job* before);
  // A job restored at start-up as kept on disk only (a checkpoint of the tier's index):
  // counted and holding a reference to its tube (made if new), as an evicted job does.
  // Returns the tube, or nullptr if the id is 0 or in memory.
  const Tube* RestoreCold(uint64_t id, std::string_view tube);
  // A job on disk whose record could not be read back: this run no longer sees it (it
  // stays in the log for the next start), so the reference it kept on its tube goes (the
  // tube is freed if nothing else holds it). t must not be in use by the caller after.
  void ForgetCold(const Tube* t);

  // The disk tier's ready jobs (may be null): when a reservation takes a tube's first ready
  // job, the tier may bring back the tube's next one (ColdTier::PromoteReadyFirst), so that
  // several reservations in a row (waiting sessions served at once, a batch reserve) each
  // get the tube's first ready job, in memory or not.
  void set_cold(ColdTier* cold) { cold_ = cold; }
  // New ids will be above `id`: a store calls this with the highest id in any of its
  // records (deleted jobs included), so an id is never handed out twice across restarts.
  void ReserveIdsThrough(uint64_t id) { next_id_ = std::max(next_id_, id + 1); }

  // --- stats ---
  // The job log's file holding j's latest record (stats-job "file"); 0 without a log.
  uint32_t LogFile(const Job& j) const { return log_ ? log_->FileOf(j) : 0; }
  // See JobLog::Mark and MarkOf; 0 without a log.
  int64_t LogMark() const { return log_ ? log_->Mark() : 0; }
  int64_t LogMarkOf(const Job& j) const { return log_ ? log_->MarkOf(j) : 0; }
  bool LogCovers(int64_t mark) const { return !log_ || log_->Covers(mark); }
  const GlobalCounters& counters() const { return counters_; }
  // Jobs (header, body, cold part), the id table, and the heaps that hold jobs.
  size_t memory_used() const { return memory_used_ + jobs_.bytes() + heap_bytes_; }
  size_t max_memory() const { return options_.max_memory; }
  const Clock& clock() const { return clock_; }

  // Aborts if any internal invariant is broken. For tests and fuzzers; O(everything).
  void CheckInvariants() const;

 private:
  static bool IsUrgent(const Job* j) { return j->pri < kUrgentPriority; }
  Tube* FindOrMakeTube(std::string_view name);
  void Ref(Tube* t) { t->refs++; }
  void Unref(Tube* t);

  void MakeReady(Job* j);
  void MakeDelayed(Job* j, Nanos deadline);
  void MakeBuried(Job* j);
  void TakeOut(Job* j);  // removes j from wherever it is and fixes the counters
  void ReserveFor(Session* s, Job* j, const ReserveOptions& opts);
  // A buried or delayed job to ready; false (nothing done) if the log cannot record it.
  bool Kick(Job* j);
  void MarkWorker(Session* s);  // counted in current-workers from its first reserve
  // j's cold part, allocated (and accounted in memory_used_) on first use.
  JobCold& ColdOf(Job* j);
  void FreeJob(Job* j);
  Job* OwnReserved(Session* s, uint64_t id) const;

  // The lifecycle extensions (engine_lifecycle.cc).
  // Gives j (unlinked) a JobExtra with blob_size bytes of blob, accounting the change.
  JobExtra* GrowExtra(Job* j, uint32_t blob_size);
  // Memory a job with these options (Extended) costs beyond a plain one's header and body.
  // `blob` is JobExtra::BlobSize of the options' key and attributes.
  size_t ExtraCost(const JobOptions& o, size_t blob, uint32_t delay_s) const;
  void FillExtra(Job* j, const JobOptions& o, size_t blob, uint32_t tries);
  // Indexes a put or restored job's key and TTL (Untrack: forgets them); j has a JobExtra.
  void Track(Job* j);
  void Untrack(Job* j);
  // A reserved job whose reservation ended without delete or bury (release, TTR, its
  // session closing), taken out: deleted if its TTL passed meanwhile, buried (`dead`) if it
  // has no tries left, else made ready or delayed; logged and offered to waiters.
  void Return(Job* j, uint32_t delay_s, BuryReason dead);
  // Deletes j (taken out) because its TTL passed.
  void Expire(Job* j);
  // j, taken out of a reservation, if its TTL passed meanwhile: expires it and returns true.
  bool ExpireIfPending(Job* j);
  // Expires up to `budget` jobs whose TTL is due; *more if some are left.
  void ExpireDue(Nanos now, uint32_t budget, bool* more);
  Job* BestReady(const Session* s) const;
  void StartWaiting(Session* s, Nanos timeout);
  void StopWaiting(Session* s);
  void ProcessQueue();
  void NextReadyFromDisk(Tube* t);  // engine_cold.cc
  void ReadyLeft(Tube* t);          // engine_cold.cc: tells the tier (ColdTier::ReadyLeft)
  void BuriedLeft(Tube* t);         // engine_cold.cc: tells the tier (ColdTier::BuriedLeft)
  void RefreshEligible(Tube* t);
  void RefreshDelayed(Tube* t);
  void RefreshAwaited(Tube* t);
  void Promote(Job* j);  // a due delayed job to ready, offered to waiters at once
  void RefreshTimer(Session* s);
  uint32_t ExpireSession(Session* s, Nanos now, uint32_t budget);
  uint32_t ReleaseClosed(uint32_t budget);
  bool DeadlineSoon(const Session* s, Nanos now) const;

  void Logged(const Job* j) {
    if (log_) log_->Update(*j);
  }
  // Whether a command may change j: the log can record it (JobLog::CanUpdate), or j is
  // deleted instead (its TTL passed while it was reserved), which the log always records.
  bool Recordable(const Job& j) const {
    const JobExtra* x = j.extra();
    return !log_ || (x && x->expire_pending) || log_->CanUpdate(j);
  }

  const Clock& clock_;
  EngineOptions options_;
  JobLog* log_ = nullptr;
  Observer* observer_ = nullptr;
  ColdTier* cold_ = nullptr;
  bool in_queue_ = false;  // in ProcessQueue: a job brought back waits for its loop
  bool draining_ = false;
  uint64_t next_id_ = 1;
  uint64_t bury_seq_ = 0;  // the last BurySeq taken
  size_t memory_used_ = 0;
  // The storage of every heap that holds jobs: each tube's ready and delayed heaps and each
  // session's reserved heap, kept by the heaps themselves (ChunkedVector). Declared before
  // tubes_ so it outlives them. The heaps below order tubes and sessions, not jobs, and are
  // not counted.
  size_t heap_bytes_ = 0;

  JobTable jobs_;
  StringMap<std::unique_ptr<Tube>> tubes_;
  std::vector<Tube*> tube_list_;  // beanstalkd's order: appended, swap-removed
  Tube* default_tube_ = nullptr;

  IndexedHeap<Tube, TubeEligibleOrder> eligible_;  // tubes with waiters, ready jobs, no pause
  IndexedHeap<Tube, TubeDelayOrder> delay_tubes_;  // tubes with delayed jobs, by soonest
  // The delay tubes that a session waits on (not paused): their due jobs are promoted first,
  // so a backlog of due jobs in tubes nobody waits on never delays a waiting consumer.
  IndexedHeap<Tube, TubeAwaitedOrder> awaited_;
  IndexedHeap<Tube, TubePauseOrder> paused_;              // paused tubes, by unpause time
  IndexedHeap<Session, SessionWakeOrder> timers_;         // sessions with a TTR or reserve deadline
  IndexedHeap<Job, ExpiryOrder> expiries_{&heap_bytes_};  // jobs with a TTL, not reserved
  StringMap<uint32_t> tube_tries_;
  Session* detached_ = nullptr;  // holds detached reservations; owned

  IntrusiveList<Session, SessionTag> sessions_;  // open sessions, owned
  IntrusiveList<Session, SessionTag> closing_;   // closed, still holding reserved jobs, owned
  std::vector<Event> events_;
  GlobalCounters counters_;
};

}  // namespace stalkd::engine
