#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/indexed_heap.h"
#include "base/intrusive_list.h"
#include "engine/job.h"

namespace stalkd::engine {

class Session;
struct WaitTag;

// A session waiting in `reserve` is linked into the waiter list of every tube it watches,
// through one WaitNode per watched tube.
struct WaitNode : ListNode<WaitTag> {
  Session* session = nullptr;
  Tube* tube = nullptr;
};

struct ReadyOrder {
  static bool Less(const Job* a, const Job* b) {
    return a->pri != b->pri ? a->pri < b->pri : a->id < b->id;
  }
  static uint32_t& Slot(Job* j) { return j->heap_slot; }
};

// Delayed and reserved jobs (they have a cold part), by deadline. The heap keeps each
// deadline beside its pointer: a million delayed jobs falling due would otherwise cost two
// cache misses (job, cold part) per comparison.
struct DeadlineOrder {
  using Key = Nanos;
  static Key KeyOf(const Job* j) { return j->cold->deadline; }
  static bool Less(Nanos da, const Job* a, Nanos db, const Job* b) {
    return da != db ? da < db : a->id < b->id;
  }
  static bool Less(const Job* a, const Job* b) { return Less(KeyOf(a), a, KeyOf(b), b); }
  static uint32_t& Slot(Job* j) { return j->heap_slot; }
};

using ReadyHeap = IndexedHeap<Job, ReadyOrder>;
using DeadlineHeap = IndexedHeap<Job, DeadlineOrder>;

struct TubeCounters {
  uint64_t urgent = 0;  // ready jobs with pri < kUrgentPriority
  uint64_t reserved = 0;
  uint64_t total_jobs = 0;
  uint64_t deletes = 0;
  uint64_t pauses = 0;
  uint32_t using_ct = 0;
  uint32_t watching_ct = 0;
  uint64_t expired = 0;          // jobs deleted by their TTL
  uint64_t tries_exhausted = 0;  // jobs buried for having no tries left
};

class Tube {
 public:
  // `heap_bytes` counts the storage of the ready and delayed heaps (see ChunkedVector).
  Tube(std::string name, size_t* heap_bytes)
      : ready(heap_bytes), delayed(heap_bytes), name_(std::move(name)) {}
  Tube(const Tube&) = delete;
  Tube& operator=(const Tube&) = delete;

  const std::string& name() const { return name_; }

  ReadyHeap ready;
  DeadlineHeap delayed;
  JobList buried;
  IntrusiveList<WaitNode, WaitTag> waiters;
  TubeCounters stat;
  // Unique keys of the tube's living jobs (put-ext key=); the views point into the jobs.
  std::unordered_map<std::string_view, Job*> keys;
  uint32_t default_tries = 0;  // for jobs put without tries (Engine::SetTubeTries); 0: none

  Nanos pause_ns = 0;                   // the pause duration while paused, 0 when not paused
  Nanos unpause_at = 0;                 // valid while pause_ns > 0
  uint64_t refs = 0;                    // jobs + sessions using/watching (+1 for "default")
  uint32_t list_pos = 0;                // index in Engine::tube_list_
  uint32_t eligible_slot = UINT32_MAX;  // slot in Engine's eligible-tube heap
  uint32_t delay_slot = UINT32_MAX;     // slot in Engine's delayed-tube heap
  uint32_t awaited_slot = UINT32_MAX;   // slot in Engine's heap of awaited delayed tubes
  uint32_t pause_slot = UINT32_MAX;     // slot in Engine's paused-tube heap

  bool paused() const { return pause_ns > 0; }
  size_t job_count() const { return ready.size() + delayed.size() + buried.size() + stat.reserved; }

 private:
  std::string name_;
};

}  // namespace stalkd::engine
