// The disk tier's ready jobs (docs/DISK-TIER.md): the ends of the ready queues leave memory
// while it is over the budget; each tube's first ready job is in memory whenever a command
// looks at it, and a tube running low is refilled from its first jobs on disk.

#include <algorithm>

#include "base/check.h"
#include "storage/cold_store.h"

namespace stalkd::storage {

namespace {

using Key = ColdReadyIndex::Key;

Key KeyOf(const engine::Job& j) { return Key::Of(j.pri, j.id); }

}  // namespace

engine::ColdTier::ReadyCounts ColdStore::ReadyOnDisk(const engine::Tube* t) const {
  if (!t) return {ready_.size(), ready_.urgent()};
  return {ready_.Count(t), ready_.Urgent(t)};
}

bool ColdStore::BringReady(const ColdReadyIndex::Entry& e) {
  engine::RestoredJob r;
  if (!ReadBack(e.id, e.tube, &e.pri, &r)) return false;
  // A job put delayed has its delay in its record; it is ready now. Its creation time is
  // the engine's own, kept by the index.
  r.state = engine::JobState::kReady;
  r.deadline = 0;
  r.created = e.created;
  STALKD_CHECK(engine_.Readmit(r));
  promotions_++;
  return true;
}

uint32_t ColdStore::FixReadyFirst(const engine::Tube* t) {
  uint32_t n = 0;
  Key first{};
  while (ready_.First(t, &first)) {
    const engine::Job* hot = t->ready.top();
    if (hot && KeyOf(*hot) < first) break;  // the tube's first is in memory
    ColdReadyIndex::Entry e;
    STALKD_CHECK(ready_.TakeFirst(t, &e));
    n++;
    if (BringReady(e)) break;  // now the first in memory; every other one on disk is later
  }
  return n;
}

void ColdStore::PromoteReadyFirst(const engine::Tube* t, const engine::Job* hot_first) {
  STALKD_DCHECK(hot_first == t->ready.top());
  (void)hot_first;
  waited_reads_ += FixReadyFirst(t);
}

size_t ColdStore::PromoteReady(const engine::Tube* t, size_t n) {
  ColdReadyIndex::Entry e;
  size_t taken = 0;
  for (; taken < n && ready_.TakeFirst(t, &e); taken++) {
    waited_reads_++;
    BringReady(e);
  }
  return taken;
}

bool ColdStore::RefillReady(uint32_t budget) {
  // A tube's first ready job on disk can come before its first in memory, and a tube can fall
  // below the refill mark, only when a ready job leaves its heap in memory (demotion takes
  // neither its first nor it below the mark) or when jobs are restored to disk: the tubes
  // reported so since the last Tick are the ones to look at.
  const size_t mark = std::max<size_t>(1, options_.ready_hot / 2);
  looking_.clear();
  std::swap(looking_, to_look_);  // tubes reported from here on wait for the next Tick
  to_look_set_.clear();
  uint32_t read = 0;
  for (const engine::Tube* t : looking_) {
    looked_tubes_++;
    if (ready_.Count(t) == 0) continue;  // none on disk now (t may even be gone)
    // Before the engine's Tick (one read at most): a tube about to be unpaused serves its
    // waiting sessions from memory within this same Tick.
    read += FixReadyFirst(t);
    const size_t hot = t->ready.size();
    if (hot < mark && hot < options_.ready_hot && refills_set_.insert(t).second) {
      refills_.push_back(t);
    }
  }
  // Refills in turn, within the budget: a tube the budget stops stays first in line.
  while (!refills_.empty() && read < budget) {
    const engine::Tube* t = refills_.front();
    looked_tubes_++;
    // The refill rule as it stands now (the tube may have filled or emptied since).
    if (ready_.Count(t) > 0 && t->ready.size() < mark) {
      ColdReadyIndex::Entry e;
      while (read < budget && t->ready.size() < options_.ready_hot && ready_.TakeFirst(t, &e)) {
        BringReady(e);
        read++;
      }
      if (read >= budget && t->ready.size() < options_.ready_hot && ready_.Count(t) > 0) break;
    }
    refills_set_.erase(t);
    refills_.pop_front();
  }
  return !refills_.empty();
}

}  // namespace stalkd::storage
