#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "base/clock.h"
#include "base/small_vector.h"
#include "engine/tube.h"

namespace stalkd::engine {

struct Event;
struct SessionTag;

// How a reserve reserves (reserve-ext; the defaults are beanstalkd's reserve).
struct ReserveOptions {
  uint32_t ttr_s = 0;         // 0: each job's own TTR
  bool freeze_tries = false;  // the reservation uses no try
  bool detached = false;      // the reservation belongs to no session (Engine::detached())
  // Not the engine's: a batch reserve (reserve-ext) whose store takes up to `count` jobs, the
  // first through Reserve, the rest through Engine::ReserveReady.
  bool batch = false;
  uint32_t count = 1;
};

// Whoever opened a session: the engine keeps it so that whoever drains the engine's events
// (TakeEvents) can hand each to the owner of its session. The engine itself never calls it.
class SessionOwner {
 public:
  virtual void OnEngineEvent(const Event& ev) = 0;

 protected:
  ~SessionOwner() = default;
};

// The engine's view of one client: the tube it uses, the tubes it watches, the jobs it has
// reserved and whether it is waiting in `reserve`.

class Session : public ListNode<SessionTag> {
 public:
  // `heap_bytes` counts the storage of the reserved heap (see ChunkedVector).
  Session(SessionOwner* owner, size_t* heap_bytes) : owner_(owner), reserved_(heap_bytes) {}
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  SessionOwner* owner() const { return owner_; }
  Tube* use() const { return use_; }
  // In beanstalkd's order: appended on watch, last element moved into the gap on ignore.
  std::span<Tube* const> watch() const { return {watch_.data(), watch_.size()}; }
  size_t reserved_count() const { return reserved_.size(); }
  bool waiting() const { return waiting_; }
  bool closed() const { return closed_; }
  bool is_producer() const { return producer_; }
  bool is_worker() const { return worker_; }
  // The options of the latest reserve.
  const ReserveOptions& reserve_options() const { return reserve_opts_; }

 private:
  friend class Engine;
  friend struct SessionWakeOrder;

  // One per open connection, so kept small: the usual single watched tube is held inline.
  SessionOwner* owner_;
  Tube* use_ = nullptr;
  SmallVector<Tube*, 1> watch_;
  DeadlineHeap reserved_;   // by TTR deadline
  JobList reserved_order_;  // the same jobs, in reservation order
  // While waiting: wait_nodes_[0, watch_.size()), one per watched tube. Allocated by the
  // first reserve and kept (like a cleared vector's capacity, so that reserve after reserve
  // allocates nothing), but as a pointer and a 32-bit capacity: 16 bytes less than a
  // std::vector in every session.
  std::unique_ptr<WaitNode[]> wait_nodes_;
  Nanos wait_until_ = kForever;  // reserve-with-timeout deadline while waiting
  Nanos wake_at_ = kForever;     // key in Engine's session timer heap
  ReserveOptions reserve_opts_;  // of the reserve in progress
  uint32_t wait_capacity_ = 0;   // the nodes wait_nodes_ holds
  uint32_t timer_slot_ = UINT32_MAX;
  bool waiting_ = false;
  bool closed_ = false;
  bool producer_ = false;
  bool worker_ = false;
};

}  // namespace stalkd::engine
