#include "storage/cold_store.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "base/check.h"

namespace stalkd::storage {

ColdStore::ColdStore(engine::Engine& engine, engine::ColdReader& reader, ColdStoreOptions options)
    : engine_(engine), reader_(reader), options_(options) {}

bool ColdStore::ReadBack(uint64_t id, const engine::Tube* t, const uint32_t* pri,
                         engine::RestoredJob* r) {
  const bool read = reader_.Read(id, &buf_, r);
  // The record must be of the job the index lists: an entry restored from a checkpoint was
  // not checked against it at the start (its record was not read), and a job of another tube
  // or priority would break the tube's references or the ready order.
  if (read && r->tube == t->name() && (!pri || r->pri == *pri)) return true;
  // The job stays in the binlog (a restart brings it back) but is lost to this run. The
  // reference it held on its tube goes at the next Tick: the caller may still use the tube.
  read_errors_++;
  lost_tubes_.push_back(t);
  fprintf(stderr, "stalkd: disk tier: job %" PRIu64 " could not be read back%s\n", id,
          read ? " (its record is not of the tube or priority the disk tier lists)" : "");
  return false;
}

void ColdStore::Bring(const ColdIndex::Entry& e) {
  engine::RestoredJob r;
  if (!ReadBack(e.id, e.tube, nullptr, &r)) return;
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
  } else if (PromoteBuriedId(id)) {
    waited_reads_++;
  }
}

size_t ColdStore::PromoteEarliest(const engine::Tube* t, size_t n) {
  if (index_.Count(t) == 0) return 0;
  scratch_.clear();
  index_.TakeEarliest(t, n, &scratch_);
  const size_t taken = scratch_.size();
  waited_reads_ += taken;
  for (const ColdIndex::Entry& e : scratch_) Bring(e);
  return taken;
}

void ColdStore::ListIds(const engine::Tube* t, engine::JobState state, uint64_t from,
                        uint64_t below, std::vector<uint64_t>* out) const {
  if (state == engine::JobState::kDelayed && index_.Count(t) > 0) {
    index_.ListIds(t, from, below, out);
  } else if (state == engine::JobState::kReady && ready_.Count(t) > 0) {
    ready_.ListIds(t, from, below, out);
  } else if (state == engine::JobState::kBuried && buried_.Count(t) > 0) {
    buried_.ListIds(t, from, below, out);
  }
}

bool ColdStore::MayPrecede(const engine::Tube* t, const engine::Job* hot_first) const {
  if (index_.Count(t) == 0) return false;
  return !hot_first || hot_first->deadline() >= index_.Floor(t);
}

Nanos ColdStore::Tick() {
  for (const engine::Tube* t : lost_tubes_) engine_.ForgetCold(t);
  lost_tubes_.clear();
  const Nanos now = engine_.clock().Now();
  scratch_.clear();
  bool more = index_.NextDeadline() < now + options_.lead &&
              index_.TakeDue(now + options_.lead, options_.tick_budget, &scratch_);
  for (const ColdIndex::Entry& e : scratch_) Bring(e);
  if ((!to_look_.empty() || !refills_.empty()) && RefillReady(options_.tick_budget)) more = true;
  if (!to_look_buried_.empty() && RefillBuried(options_.tick_budget)) more = true;
  if (Demote(now, options_.tick_budget)) more = true;
  if (more) return now;
  Nanos next = index_.NextDeadline();
  return next == kForever ? kForever : std::max(now, next - options_.lead);
}

bool ColdStore::Demote(Nanos now, uint32_t budget) {
  if (engine_.memory_used() <= options_.budget) return false;
  const size_t goal = options_.budget - options_.budget / 16;  // some room before the next
  // Rewrites count in the budget, and so do those still waiting in the log's buffer; after
  // a lack of space they wait a second. The jobs rewritten count as gone for the goal until
  // their records are written (they then go first: they are at the ends of the heaps).
  const size_t unwritten = reader_.RewritesUnwritten();
  if (unwritten == 0) rewritten_bytes_ = 0;
  rewrites_left_ = now < rewrite_retry_at_ || unwritten >= budget
                       ? 0
                       : budget - static_cast<uint32_t>(unwritten);
  rewrite_goal_ = goal;
  // Delayed jobs due last first, then the newest buried jobs (dead letters: no consumer
  // takes them, only a kick), then the ends of the ready queues (the next reserves').
  uint32_t work = DemoteDelayed(now, budget, goal);
  if (work < budget && engine_.memory_used() > goal) {
    work += DemoteBuried(now, budget - work, goal);
  }
  if (work < budget && engine_.memory_used() > goal) {
    work += DemoteReady(now, budget - work, goal);
  }
  return work > 0 && engine_.memory_used() > goal;
}

bool ColdStore::Rewrite(const engine::Job& j, Nanos now) {
  // No more than would take memory down to the goal once they go.
  if (rewrites_left_ == 0 || engine_.memory_used() <= rewrite_goal_ + rewritten_bytes_) {
    return false;
  }
  switch (reader_.RewriteWhole(j)) {
    case engine::ColdReader::Rewrite::kDone:
      rewrites_++;
      rewrites_left_--;
      rewritten_bytes_ += j.footprint();
      if (no_room_) {
        no_room_ = false;
        fprintf(stderr, "stalkd: disk tier: space again to write changed jobs whole\n");
      }
      return true;
    case engine::ColdReader::Rewrite::kNoRoom:
      rewrites_left_ = 0;  // none more in this Tick
      rewrite_retry_at_ = now + kSecond;
      if (!no_room_) {  // once, not per job
        no_room_ = true;
        no_room_episodes_++;
        fprintf(stderr,
                "stalkd: disk tier: no free space in the binlog to write changed jobs whole "
                "again; jobs released or timed out since their put stay in memory until there "
                "is\n");
      }
      return false;
    case engine::ColdReader::Rewrite::kNo:
      break;
  }
  return false;
}

ColdStore::Took ColdStore::Changed(const engine::Job& j, Nanos now) {
  if (reader_.RewritePending(j)) return Took::kPending;
  return Rewrite(j, now) ? Took::kRewrote : Took::kLater;
}

namespace {

using Took = ColdStore::Took;

// Goes round the tubes from *cursor, looking at up to 8 jobs a visit from the end of each
// tube's heap (leaves of a min-heap: mostly the jobs needed last) and never at its first
// `keep_first` entries; take(t, j, k) demotes j (at k in the heap) if it may go, or has its
// record rewritten. A visit goes on where the tube's last one stopped (*depth: jobs from
// the end that had to stay), so jobs that must stay at the end of a heap (a key, a TTL, due
// soon) do not hide the rest of it; after the first entries it starts from the end again.
// Jobs that wait for their record to be written whole again are not passed: they go first
// once it is. Stops once `budget` (demotions and rewrites) is used, memory is down
// to `goal`, a whole round found nothing, or kMaxVisits tubes were visited (so a Tick's cost
// does not grow with the number of tubes; the next call goes on from *cursor). Returns the
// budget used.
constexpr size_t kMaxVisits = 4096;

template <typename HeapOf, typename Take>
uint32_t DemoteRound(const engine::Engine& engine, size_t* cursor, ColdStore::Depths* depth,
                     uint32_t budget, size_t goal, size_t keep_first, HeapOf heap_of, Take take) {
  const auto& tubes = engine.tubes();
  // Entries of tubes gone since: their addresses are only keys, never followed.
  if (depth->size() > 2 * tubes.size() + 64) depth->clear();
  uint32_t work = 0;
  size_t idle = 0;  // tubes in a row with nothing to demote
  for (size_t visits = 0;
       work < budget && engine.memory_used() > goal && idle < tubes.size() && visits < kMaxVisits;
       visits++) {
    engine::Tube* t = tubes[(*cursor)++ % tubes.size()];
    auto& heap = heap_of(t);
    if (heap.size() <= keep_first) {
      idle++;
      continue;
    }
    auto it = depth->find(t);
    size_t d = it == depth->end() ? 0 : it->second;
    if (d >= heap.size() - keep_first) d = 0;  // looked at them all: from the end again
    size_t looked = 0;
    const uint32_t before = work;
    for (size_t k = heap.size() - d; k > keep_first && looked < 8 && work < budget;) {
      --k;
      const Took took = take(t, heap.at(k), k);
      if (took != Took::kRewrote && took != Took::kPending) looked++;
      if (took == Took::kNo) d++;  // it stays: the next visit goes past it
      if (took == Took::kNo || took == Took::kLater || took == Took::kPending) continue;
      work++;
      k = std::min(k, heap.size());
    }
    if (d == 0) {
      if (it != depth->end()) depth->erase(it);
    } else {
      (*depth)[t] = d;
    }
    idle = work > before ? 0 : idle + 1;
  }
  return work;
}

}  // namespace

uint32_t ColdStore::DemoteDelayed(Nanos now, uint32_t budget, size_t goal) {
  const Nanos horizon = now + 2 * options_.lead;
  return DemoteRound(
      engine_, &tube_cursor_, &delayed_depth_, budget, goal, 0,
      [](engine::Tube* t) -> engine::DeadlineHeap& { return t->delayed; },
      [&](engine::Tube* t, engine::Job* j, size_t) {
        if (j->deadline() <= horizon || !engine::Engine::Evictable(*j)) return Took::kNo;
        if (!reader_.Demotable(*j)) return Changed(*j, now);
        index_.Add({j->id, j->deadline(), j->created(), t});
        engine_.Evict(j);
        demotions_++;
        return Took::kYes;
      });
}

uint32_t ColdStore::DemoteReady(Nanos now, uint32_t budget, size_t goal) {
  // The first (the heap's top) always stays, and ready_hot with it.
  const size_t keep = std::max<size_t>(1, options_.ready_hot);
  return DemoteRound(
      engine_, &ready_cursor_, &ready_depth_, budget, goal, 1,
      [](engine::Tube* t) -> engine::ReadyHeap& { return t->ready; },
      [&](engine::Tube* t, engine::Job* j, size_t k) {
        if (t->ready.size() <= keep || !engine::Engine::Evictable(*j)) return Took::kNo;
        // The first `keep` places of the heap are those that stay: no rewrite for them.
        if (!reader_.Demotable(*j)) {
          if (k < keep) return Took::kNo;
          return Changed(*j, now);
        }
        ready_.Add({j->id, j->pri, j->created(), t});
        evicting_ = true;  // neither its first nor below the refill mark: nothing to look at
        engine_.Evict(j);
        evicting_ = false;
        demotions_++;
        return Took::kYes;
      });
}

engine::ColdTier::Stats ColdStore::stats() const {
  Stats s;
  s.cold = index_.size() + ready_.size() + buried_.size();
  s.index_bytes = index_.bytes() + ready_.bytes() + buried_.bytes();
  s.promotions = promotions_;
  s.demotions = demotions_;
  s.waited_reads = waited_reads_;
  s.read_errors = read_errors_;
  s.rewrites = rewrites_;
  s.budget = options_.budget;
  return s;
}

}  // namespace stalkd::storage
