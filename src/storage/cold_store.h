#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/clock.h"
#include "engine/cold_hooks.h"
#include "engine/engine.h"
#include "storage/cold_index.h"

namespace stalkd::storage {

struct ColdStoreOptions {
  size_t budget = SIZE_MAX;     // memory for jobs (Engine::memory_used) to stay under
  Nanos lead = 2 * kSecond;     // a job on disk is read back this long before it is due
  uint32_t tick_budget = 1000;  // jobs moved either way per Tick
};

// The disk tier (docs/DISK-TIER.md), first slice: while the engine's memory for jobs is over
// the budget, delayed jobs not due within twice the lead time leave memory (the binlog
// already holds their whole record) and are listed in a ColdIndex; they are read back,
// synchronously, `lead` before they are due, and at once when a command needs them.
class ColdStore final : public engine::ColdTier {
 public:
  // engine and reader must outlive the store.
  ColdStore(engine::Engine& engine, engine::ColdReader& reader, ColdStoreOptions options);

  void Promote(uint64_t id) override;
  void PromoteEarliest(const engine::Tube* t, size_t n) override;
  bool MayPrecede(const engine::Tube* t, const engine::Job* hot_first) const override;
  size_t Count(const engine::Tube* t) const override { return index_.Count(t); }
  size_t Count() const override { return index_.size(); }
  Nanos Tick() override;
  Stats stats() const override;

  const ColdIndex& index() const { return index_; }
  // A job the binlog restored from its checkpoint as kept on disk only (never in memory).
  void AddRestored(const ColdIndex::Entry& e) { index_.Add(e); }

 private:
  // Reads e's job back into the engine.
  void Bring(const ColdIndex::Entry& e);
  // Demotes up to `budget` jobs while over the budget; true if it demoted any.
  bool Demote(Nanos now, uint32_t budget);

  engine::Engine& engine_;
  engine::ColdReader& reader_;
  ColdStoreOptions options_;
  ColdIndex index_;
  std::vector<ColdIndex::Entry> scratch_;
  std::string buf_;
  size_t tube_cursor_ = 0;
  uint64_t promotions_ = 0;
  uint64_t demotions_ = 0;
  uint64_t waited_reads_ = 0;
  uint64_t read_errors_ = 0;
};

}  // namespace stalkd::storage
