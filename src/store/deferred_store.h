#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "command/owned_result.h"
#include "command/store.h"

namespace stalkd::store {

class DeferredSession;

// A test double of a store whose every answer is late, as a store across a network (Redis)
// answers: a decorator over any Store that makes each session call but use, watch, ignore,
// list-tube-used and list-tubes-watched answer Outcome::kPending, and delivers the inner
// store's result (deep-copied, command::OwnedResult) through the session's Client on the
// next Tick(). A result the inner store itself delivers later (a reserve that waited, a
// kick in slices) is delivered on the Tick after it arrived. Busy() while results wait.
// Like the Redis store it lets calls go ahead of pending results (Session::CanPipeline),
// but for behind a wait of the inner store; their results come on the Tick, in order.
//
// AbandonReserve ends a reserve whose result has not been delivered yet: the inner store's
// wait, or, when the inner store had answered already, the delivery (what it reserved
// stays reserved, as with a Redis reserve whose reply is lost: until the session closes,
// or a detached job's TTR).
class DeferredStore final : public command::Store {
 public:
  explicit DeferredStore(command::Store& inner) : inner_(inner) {}
  ~DeferredStore() override;

  std::unique_ptr<command::Session> Open(command::Client& client) override;
  // The inner store's Tick, then every result that was waiting.
  Nanos Tick() override;
  bool Busy() const override { return !ready_.empty() || inner_.Busy(); }
  bool Covers(int64_t mark) const override { return inner_.Covers(mark); }
  void SetDraining(bool on) override { inner_.SetDraining(on); }
  void SetObserver(command::Observer* o) override {
    observer_ = o;
    inner_.SetObserver(o);
  }

  // Sessions with a result to deliver.
  size_t ready() const { return ready_.size(); }
  // While on, every late result is delivered as Outcome::kInternalError instead (the call
  // was made: as a store whose connection was lost before the reply).
  void set_failing(bool on) { failing_ = on; }

 private:
  friend class DeferredSession;
  command::Store& inner_;
  std::vector<DeferredSession*> ready_;
  bool failing_ = false;
};

}  // namespace stalkd::store
