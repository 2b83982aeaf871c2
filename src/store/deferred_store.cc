#include "store/deferred_store.h"

#include <algorithm>
#include <deque>
#include <utility>

#include "base/check.h"

namespace stalkd::store {

using command::Outcome;
using command::Result;

// One session of a DeferredStore: the inner store's session, whose late results come to it
// (it is their Client), and the results waiting for the next Tick.
class DeferredSession final : public command::Session, private command::Client {
 public:
  DeferredSession(DeferredStore& store, command::Client& client)
      : store_(store), client_(client), inner_(store.inner_.Open(*this)) {}
  ~DeferredSession() override {
    std::erase(store_.ready_, this);
    inner_.reset();
  }

  // Delivers the waiting results, in call order (DeferredStore::Tick).
  void Deliver() {
    STALKD_CHECK(!results_.empty());
    std::deque<command::OwnedResult> results;
    results.swap(results_);
    for (const command::OwnedResult& r : results) {
      client_.OnResult(store_.failing_ ? Result::Of(Outcome::kInternalError) : r.result());
    }
  }

  // Anything may go ahead of results that wait for a Tick: the inner store has answered
  // the calls before it already, in order (as a Redis store's single calls); never
  // behind an inner wait (a reserve), which may end in any later Tick.
  bool CanPipeline(command::Verb) const override { return !inner_waiting_; }

  command::PutSlot BeginPut(const command::PutArgs& args) override {
    return Now(inner_->BeginPut(args));
  }
  Result CommitPut() override { return Later(inner_->CommitPut()); }
  void AbandonPut() override {
    inner_->AbandonPut();
    Mark();
  }
  Result Reserve(Nanos timeout) override { return Later(inner_->Reserve(timeout)); }
  Result AbandonReserve() override {
    if (inner_waiting_) {
      inner_waiting_ = false;
      return Now(inner_->AbandonReserve());
    }
    if (!results_.empty()) {
      results_.clear();
      std::erase(store_.ready_, this);
    }
    return Result::Of(Outcome::kTimedOut);
  }
  Result ReserveJob(uint64_t id) override { return Later(inner_->ReserveJob(id)); }
  Result Peek(uint64_t id) override { return Later(inner_->Peek(id)); }
  Result PeekReady() override { return Later(inner_->PeekReady()); }
  Result PeekDelayed() override { return Later(inner_->PeekDelayed()); }
  Result PeekBuried() override { return Later(inner_->PeekBuried()); }
  Result Delete(uint64_t id) override { return Later(inner_->Delete(id)); }
  Result Release(uint64_t id, uint32_t pri, uint32_t delay_s) override {
    return Later(inner_->Release(id, pri, delay_s));
  }
  Result Bury(uint64_t id, uint32_t pri) override { return Later(inner_->Bury(id, pri)); }
  Result Touch(uint64_t id) override { return Later(inner_->Touch(id)); }
  Result Kick(uint32_t count) override { return Later(inner_->Kick(count)); }
  Result KickJob(uint64_t id) override { return Later(inner_->KickJob(id)); }
  // The session's own state: answered at once, as a Redis store keeps it in the process.
  Result Use(std::string_view tube) override { return Now(inner_->Use(tube)); }
  Result Watch(std::string_view tube) override { return Now(inner_->Watch(tube)); }
  Result Ignore(std::string_view tube) override { return Now(inner_->Ignore(tube)); }
  Result ListTubeUsed() override { return Now(inner_->ListTubeUsed()); }
  Result ListTubesWatched() override { return Now(inner_->ListTubesWatched()); }
  Result ListTubes() override { return Later(inner_->ListTubes()); }
  Result PauseTube(std::string_view tube, uint32_t delay_s) override {
    return Later(inner_->PauseTube(tube, delay_s));
  }
  Result Stats() override { return Later(inner_->Stats()); }
  Result StatsJob(uint64_t id) override { return Later(inner_->StatsJob(id)); }
  Result JobTube(uint64_t id) override { return Later(inner_->JobTube(id)); }
  Result StatsTube(std::string_view tube) override { return Later(inner_->StatsTube(tube)); }
  void CountBatch(command::Verb v) override { inner_->CountBatch(v); }
  Result ReserveExt(const command::ReserveArgs& args) override {
    return Later(inner_->ReserveExt(args));
  }
  Result DeleteMany(std::span<const uint64_t> ids) override {
    return Later(inner_->DeleteMany(ids));
  }
  Result Purge(std::string_view tube, command::StateFilter which) override {
    return Later(inner_->Purge(tube, which));
  }
  Result ListJobs(std::string_view tube, command::StateFilter state, uint64_t from,
                  uint32_t count) override {
    return Later(inner_->ListJobs(tube, state, from, count));
  }
  Result TubeTries(std::string_view tube, uint32_t tries) override {
    return Later(inner_->TubeTries(tube, tries));
  }
  Result Respawn(std::string_view tube, uint32_t count, uint32_t ttl_s) override {
    return Later(inner_->Respawn(tube, count, ttl_s));
  }

 private:
  void Mark() { NeedMark(inner_->need_mark()); }
  template <class T>
  T Now(T r) {
    Mark();
    return r;
  }
  // The inner store's answer, kept for the next Tick; kPending either way.
  Result Later(const Result& r) {
    // A session runs one command at a time (store.h), but for what CanPipeline allows.
    STALKD_CHECK(!inner_waiting_);
    Mark();
    if (r.outcome == Outcome::kPending) {
      inner_waiting_ = true;
    } else {
      Keep(r);
    }
    return Result::Of(Outcome::kPending);
  }
  void Keep(const Result& r) {
    if (results_.empty()) store_.ready_.push_back(this);
    results_.emplace_back().Assign(r);
  }
  // command::Client: the inner store's late result.
  void OnResult(const Result& r) override {
    STALKD_CHECK(inner_waiting_ && r.outcome != Outcome::kPending);
    inner_waiting_ = false;
    Mark();
    Keep(r);
  }

  DeferredStore& store_;
  command::Client& client_;
  std::unique_ptr<command::Session> inner_;
  std::deque<command::OwnedResult> results_;  // wait for the next Tick
  bool inner_waiting_ = false;                // the inner store's result has not arrived yet
};

DeferredStore::~DeferredStore() { STALKD_CHECK(ready_.empty()); }

std::unique_ptr<command::Session> DeferredStore::Open(command::Client& client) {
  return std::make_unique<DeferredSession>(*this, client);
}

Nanos DeferredStore::Tick() {
  Nanos next = inner_.Tick();
  std::vector<DeferredSession*> ready;
  ready.swap(ready_);
  // OnResult calls no store, so nothing is added or destroyed meanwhile.
  for (DeferredSession* s : ready) s->Deliver();
  return ready_.empty() ? next : 0;
}

}  // namespace stalkd::store
