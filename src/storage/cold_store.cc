#include "storage/cold_store.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "base/check.h"

namespace stalkd::storage {

ColdStore::ColdStore(engine::Engine& engine, engine::ColdReader& reader, ColdStoreOptions options)
    : engine_(engine), reader_(reader), options_(options) {}

bool ColdStore::ReadBack(uint64_t id, engine::RestoredJob* r) {
  if (reader_.Read(id, &buf_, r)) return true;
  // The job stays in the binlog (a restart brings it back) but is lost to this run.
  read_errors_++;
  fprintf(stderr, "stalkd: disk tier: job %" PRIu64 " could not be read back\n", id);
  return false;
}

void ColdStore::Bring(const ColdIndex::Entry& e) {
  engine::RestoredJob r;
  if (!ReadBack(e.id, &r)) return;
  // The record's times are wall-clock; the index kept the engine's own, exactly.
  r.state = engine::JobState::kDelayed;
  r.deadline = e.deadline;
  r.created = e.created;
  STALKD_CHECK(engine_.Readmit(r));
  promotions_++;
}

void ColdStore::Promote(uint64_t id) {
  ColdIndex::Entry e;
  ColdReadyIndex::Entry r;
  if (index_.Remove(id, &e)) {
    waited_reads_++;
    Bring(e);
  } else if (ready_.Remove(id, &r)) {
    waited_reads_++;
    BringReady(r);
  }
}

void ColdStore::PromoteEarliest(const engine::Tube* t, size_t n) {
  if (index_.Count(t) == 0) return;
  scratch_.clear();
  index_.TakeEarliest(t, n, &scratch_);
  waited_reads_ += scratch_.size();
  for (const ColdIndex::Entry& e : scratch_) Bring(e);
}

bool ColdStore::MayPrecede(const engine::Tube* t, const engine::Job* hot_first) const {
  if (index_.Count(t) == 0) return false;
  return !hot_first || hot_first->deadline() >= index_.Floor(t);
}

Nanos ColdStore::Tick() {
  const Nanos now = engine_.clock().Now();
  scratch_.clear();
  bool more = index_.NextDeadline() < now + options_.lead &&
              index_.TakeDue(now + options_.lead, options_.tick_budget, &scratch_);
  for (const ColdIndex::Entry& e : scratch_) Bring(e);
  if (ready_.size() > 0 && RefillReady(options_.tick_budget)) more = true;
  if (Demote(now, options_.tick_budget)) more = true;
  if (more) return now;
  Nanos next = index_.NextDeadline();
  return next == kForever ? kForever : std::max(now, next - options_.lead);
}

bool ColdStore::Demote(Nanos now, uint32_t budget) {
  if (engine_.memory_used() <= options_.budget) return false;
  const size_t goal = options_.budget - options_.budget / 16;  // some room before the next
  // Delayed jobs due last first, then the ends of the ready queues.
  uint32_t demoted = DemoteDelayed(now, budget, goal);
  if (demoted < budget && engine_.memory_used() > goal) {
    demoted += DemoteReady(budget - demoted, goal);
  }
  demotions_ += demoted;
  return demoted > 0 && engine_.memory_used() > goal;
}

namespace {

// Goes round the tubes from *cursor, looking at up to 8 jobs a visit from the end of each
// tube's heap (leaves of a min-heap: mostly the jobs needed last) and never at its first
// `keep_first` entries; take(t, j) demotes j if it may go. Stops once `budget` went, memory
// is down to `goal`, or a whole round found nothing.
template <typename HeapOf, typename Take>
uint32_t DemoteRound(const engine::Engine& engine, size_t* cursor, uint32_t budget, size_t goal,
                     size_t keep_first, HeapOf heap_of, Take take) {
  const auto& tubes = engine.tubes();
  uint32_t demoted = 0;
  size_t idle = 0;  // tubes in a row with nothing to demote
  while (demoted < budget && engine.memory_used() > goal && idle < tubes.size()) {
    engine::Tube* t = tubes[(*cursor)++ % tubes.size()];
    auto& heap = heap_of(t);
    size_t looked = 0;
    const uint32_t before = demoted;
    for (size_t k = heap.size(); k > keep_first && looked < 8 && demoted < budget; looked++) {
      if (!take(t, heap.at(--k))) continue;
      demoted++;
      k = std::min(k, heap.size());
    }
    idle = demoted > before ? 0 : idle + 1;
  }
  return demoted;
}

}  // namespace

uint32_t ColdStore::DemoteDelayed(Nanos now, uint32_t budget, size_t goal) {
  const Nanos horizon = now + 2 * options_.lead;
  return DemoteRound(
      engine_, &tube_cursor_, budget, goal, 0,
      [](engine::Tube* t) -> engine::DeadlineHeap& { return t->delayed; },
      [&](engine::Tube* t, engine::Job* j) {
        if (j->deadline() <= horizon || !engine::Engine::Evictable(*j) || !reader_.Demotable(*j)) {
          return false;
        }
        index_.Add({j->id, j->deadline(), j->created(), t});
        engine_.Evict(j);
        return true;
      });
}

uint32_t ColdStore::DemoteReady(uint32_t budget, size_t goal) {
  // The first (the heap's top) always stays, and ready_hot with it.
  const size_t keep = std::max<size_t>(1, options_.ready_hot);
  return DemoteRound(
      engine_, &ready_cursor_, budget, goal, 1,
      [](engine::Tube* t) -> engine::ReadyHeap& { return t->ready; },
      [&](engine::Tube* t, engine::Job* j) {
        if (t->ready.size() <= keep || !engine::Engine::Evictable(*j) || !reader_.Demotable(*j)) {
          return false;
        }
        ready_.Add({j->id, j->pri, j->created(), t});
        engine_.Evict(j);
        return true;
      });
}

engine::ColdTier::Stats ColdStore::stats() const {
  Stats s;
  s.cold = index_.size() + ready_.size();
  s.index_bytes = index_.bytes() + ready_.bytes();
  s.promotions = promotions_;
  s.demotions = demotions_;
  s.waited_reads = waited_reads_;
  s.read_errors = read_errors_;
  s.budget = options_.budget;
  return s;
}

}  // namespace stalkd::storage
