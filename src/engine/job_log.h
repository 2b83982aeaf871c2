#pragma once

#include <cstdint>
#include <string_view>

#include "engine/job.h"

namespace stalkd::engine {

// Where the engine reports every change that a durable store must keep. The calls happen
// inside engine operations, so an implementation only records them (no I/O, no calls back
// into the engine); the server writes them out once per loop iteration, before any reply
// of that iteration is sent.
//
// Not reported, because a restart does not need them: a reserve (as in beanstalkd: the
// reserves counter goes out with the job's next reported change, and a crash undoes the
// reserve, bringing the job back as of that change: ready unless reserve-job took it from
// buried or delayed; a store that rewrites live jobs, as compaction does, writes their
// current state, so after such a rewrite it comes back ready), delayed jobs becoming ready (the
// deadline is in the record), touch (the reservation it extends is not kept either), pauses.
class JobLog {
 public:
  virtual ~JobLog() = default;
  // Asked before a put is committed. false: the job cannot be made durable, and the put is
  // refused (OUT_OF_MEMORY) without the job ever existing.
  virtual bool Admit(const Job& j) = 0;
  // A new job, with its body, in its first state.
  virtual void Put(const Job& j) = 0;
  // The job's state, priority, delay, deadline or counters changed.
  virtual void Update(const Job& j) = 0;
  // Asked before a command changes j (release, bury, kick, a dead-letter respawn): whether
  // the log can record that change now. false (a full disk): the command is refused
  // (OUT_OF_MEMORY) and j stays as it is, so no change a client was told of is lost by a
  // restart. Changes the engine makes on its own (a TTR expiry, a closed session's jobs
  // going back) are not asked: Update records them if it can.
  virtual bool CanUpdate(const Job& j) {
    (void)j;
    return true;
  }
  // The job is deleted (by a command, a purge or its TTL); `j` is still intact during the
  // call.
  virtual void Delete(const Job& j) = 0;
  // A tube's default tries (docs/EXTENSIONS.md `tube-tries`) changed; 0 clears it. It lives
  // apart from any job: a store keeps the latest value per tube name.
  virtual void TubeTries(std::string_view tube, uint32_t tries) {
    (void)tube;
    (void)tries;
  }
  // Asked before a tube's default tries is changed: whether the log can record it now (as
  // CanUpdate for a job; false: the command is refused).
  virtual bool CanRecordTubeTries(std::string_view tube, uint32_t tries) {
    (void)tube;
    (void)tries;
    return true;
  }
  // A query, not a change: the log's own number for the file holding j's latest record,
  // shown as stats-job "file"; 0 if it has none.
  virtual uint32_t FileOf(const Job& j) const {
    (void)j;
    return 0;
  }
  // Queries for replies: positions in the log, which only grow. A reply that shows job j
  // (RESERVED, FOUND) depends on the records up to MarkOf(j): its latest reported change.
  // Any other reply may reflect every change so far, up to Mark(). The server sends a reply
  // once the log has written (under -f 0: synced) that far.
  virtual int64_t Mark() const { return 0; }
  virtual int64_t MarkOf(const Job& j) const {
    (void)j;
    return 0;
  }
  // Whether the log has written (under -f 0: synced) everything up to `mark`.
  virtual bool Covers(int64_t mark) const {
    (void)mark;
    return true;
  }
};

// A job as a store brings it back at start-up.
struct RestoredJob {
  uint64_t id = 0;
  std::string_view tube;
  JobState state = JobState::kReady;  // kReady, kDelayed or kBuried (reserved comes back ready)
  uint32_t pri = 0;
  uint32_t delay_s = 0;
  uint32_t ttr_s = 1;
  Nanos created = 0;   // on the engine's clock
  Nanos deadline = 0;  // kDelayed: when it becomes ready, on the engine's clock
  JobCounts counts;
  std::string_view body;  // without the trailing CRLF

  // The lifecycle extensions (see JobExtra); with has_extra false the rest is ignored.
  bool has_extra = false;
  bool limited = false;  // tries_left counts
  uint32_t tries_left = 0;
  Nanos expires_at = kForever;  // TTL deadline on the engine's clock; kForever: none
  BuryReason bury_reason = BuryReason::kNone;
  uint16_t key_len = 0;
  uint8_t attr_count = 0;
  std::string_view blob;  // key and attributes, laid out as JobExtra's blob
};

}  // namespace stalkd::engine
