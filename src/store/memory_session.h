#pragma once

// MemorySession: the command::Session of MemoryStore (memory_store.cc; the extensions in
// memory_extensions.cc). Private to the store.
#include <span>
#include <string_view>

#include "command/store.h"
#include "engine/engine.h"
#include "store/memory_store.h"

namespace stalkd::store {

using command::Outcome;
using command::Result;
using command::Verb;
using engine::Job;
using engine::Tube;

inline Result JobResult(Outcome o, const Job& j) {
  Result r = Result::Of(o);
  r.job = {j.id, std::string_view(j.data(), j.body_size)};
  return r;
}

// One client's session: the engine's Session plus what a command needs around it (a put
// whose body is arriving, a kick in progress) and where its late results go.
class MemorySession final : public command::Session, public engine::SessionOwner {
 public:
  MemorySession(MemoryStore& store, command::Client& client)
      : store_(store), client_(client), s_(store.engine_.OpenSession(this)) {}
  // One per connection, so kept small: what a long kick needs is in MemoryStore::Kick.
  ~MemorySession() override;

  command::PutSlot BeginPut(const command::PutArgs& args) override;
  Result CommitPut() override;
  void AbandonPut() override;
  Result Reserve(Nanos timeout) override;
  Result AbandonReserve() override;
  Result ReserveJob(uint64_t id) override;
  Result Peek(uint64_t id) override;
  Result PeekReady() override;
  Result PeekDelayed() override;
  Result PeekBuried() override;
  Result Delete(uint64_t id) override;
  Result Release(uint64_t id, uint32_t pri, uint32_t delay_s) override;
  Result Bury(uint64_t id, uint32_t pri) override;
  Result Touch(uint64_t id) override;
  Result Kick(uint32_t count) override;
  Result KickJob(uint64_t id) override;
  Result Use(std::string_view tube) override;
  Result Watch(std::string_view tube) override;
  Result Ignore(std::string_view tube) override;
  Result ListTubeUsed() override;
  Result ListTubesWatched() override;
  Result ListTubes() override;
  Result PauseTube(std::string_view tube, uint32_t delay_s) override;
  Result Stats() override;
  Result StatsJob(uint64_t id) override;
  Result StatsTube(std::string_view tube) override;
  Result JobTube(uint64_t id) override;
  // The extensions (memory_extensions.cc).
  void CountBatch(Verb v) override { store_.Count(v); }
  Result ReserveExt(const command::ReserveArgs& args) override;
  Result DeleteMany(std::span<const uint64_t> ids) override;
  Result Purge(std::string_view tube, command::StateFilter which) override;
  Result ListJobs(std::string_view tube, command::StateFilter state, uint64_t from,
                  uint32_t count) override;
  Result TubeTries(std::string_view tube, uint32_t tries) override;
  Result Respawn(std::string_view tube, uint32_t count, uint32_t ttl_s) override;
  Result Purged(uint64_t n) { return All(Outcome::kPurged, n); }

  void OnEngineEvent(const engine::Event& ev) override;
  Result Kicked(uint32_t n) { return All(Outcome::kKicked, n); }
  Result Refused() { return All(Outcome::kOutOfMemory); }
  command::Client& client() { return client_; }
  engine::Tube* use() const { return s_->use(); }

 private:
  // A result that may reflect any change so far depends on every log record so far.
  Result All(Outcome o, uint64_t n = 0) {
    DependOnAll();
    return Result::Of(o, n);
  }
  void DependOnAll() { NeedMark(store_.engine_.LogMark()); }
  // A result showing a job depends only on that job's latest record.
  Result Shows(Outcome o, const Job& j) {
    NeedMark(store_.engine_.LogMarkOf(j));
    return JobResult(o, j);
  }
  Result Found(const Job* j) { return j ? Shows(Outcome::kFound, *j) : NotFound(); }
  Result NotFound() { return All(Outcome::kNotFound); }
  Result Done(bool ok, Outcome o) { return ok ? All(o) : NotFound(); }
  // A change the binlog cannot record (a full disk) is refused: OUT_OF_MEMORY.
  Result Done(engine::Engine::Changed c, Outcome o) {
    return c.result == engine::Engine::Changed::kNoRoom ? Refused() : Done(static_cast<bool>(c), o);
  }
  Result TubeList(std::span<Tube* const> tubes);
  Result Using();
  // put-ext's job: the engine's NewJob with the put's options.
  Job* NewExtendedJob(const command::PutArgs& a);
  // reserve-ext's reply: `first`, then up to count - 1 more ready jobs.
  Result ReservedMany(Job* first);

  MemoryStore& store_;
  command::Client& client_;
  engine::Session* s_;
  Job* in_job_ = nullptr;  // a put whose body is arriving
};

}  // namespace stalkd::store
