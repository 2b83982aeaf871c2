// The disk tier's buried jobs (docs/DISK-TIER.md): while memory is over the budget, the
// newest buried jobs of each tube leave memory (written whole again first: a bury is a state
// record), listed in a ColdBuriedIndex by their bury number; a command that looks at a
// tube's first buried jobs brings back those of them that are on disk, and Tick reads a
// tube's next ones back ahead once kicks or deletes have taken its first ones.

#include <algorithm>

#include "base/check.h"
#include "storage/cold_store.h"

namespace stalkd::storage {

namespace {

constexpr size_t kMaxVisits = 4096;      // tubes visited per DemoteBuried, as DemoteRound
constexpr size_t kMaxSteps = 64 * 1024;  // list entries walked per DemoteBuried
constexpr size_t kLooksPerVisit = 8;

uint64_t Seq(const engine::Job& j) { return engine::Engine::BurySeq(j); }

}  // namespace

bool ColdStore::BringBuried(const ColdBuriedIndex::Entry& e, const engine::Job* before) {
  engine::RestoredJob r;
  if (!ReadBack(e.id, e.tube, nullptr, &r)) return false;
  r.state = engine::JobState::kBuried;
  r.deadline = 0;
  r.created = e.created;  // the engine's own, kept by the index
  STALKD_CHECK(engine_.ReadmitBuried(r, e.seq, before));
  promotions_++;
  return true;
}

bool ColdStore::PromoteBuriedId(uint64_t id) {
  ColdBuriedIndex::Entry e;
  if (!buried_.Remove(id, &e)) return false;
  // Its place: before the first job in memory buried after it (the list is in bury order),
  // looked for from both ends at once: the jobs that must stay at one end (a TTL, a key) or
  // the first buried_hot at the other are not all walked past.
  const engine::JobList& list = e.tube->buried;
  const engine::Job* front = list.front();  // every one before it is older than e
  const engine::Job* back = list.back();    // every one after it is newer than e
  while (front && Seq(*front) < e.seq && back && Seq(*back) > e.seq) {
    front = list.Next(front);
    back = list.Prev(back);
    buried_steps_ += 2;
  }
  // The front walk stopped at the first newer one, or the back walk at the last older one.
  const engine::Job* before = !front || Seq(*front) > e.seq ? front : list.Next(back);
  BringBuried(e, before);
  return true;
}

size_t ColdStore::PromoteBuried(const engine::Tube* t, size_t n) {
  if (buried_.Count(t) == 0) return 0;
  // Merges the list in memory with the tube's jobs on disk, in bury order, over the first n:
  // each one on disk is read back at its place.
  const engine::Job* cur = t->buried.front();  // the first in memory not yet passed
  size_t seen = 0, taken = 0;
  ColdBuriedIndex::Entry e;
  while (seen < n && buried_.First(t, &e)) {
    if (cur && Seq(*cur) < e.seq) {
      cur = t->buried.Next(cur);
      seen++;
      continue;
    }
    STALKD_CHECK(buried_.TakeFirst(t, &e));
    taken++;
    if (BringBuried(e, cur)) seen++;
  }
  waited_reads_ += taken;
  return taken;
}

ColdStore::Took ColdStore::TakeBuried(const engine::Tube& t, engine::Job* j, Nanos now) {
  if (!engine::Engine::Evictable(*j)) return Took::kNo;  // a key or a TTL
  if (!reader_.Demotable(*j)) return Changed(*j, now);   // buried since: its record first
  buried_.Add({j->id, Seq(*j), j->created(), &t});
  evicting_ = true;  // the tube's first ones stay: nothing to look at
  engine_.Evict(j);
  evicting_ = false;
  demotions_++;
  return Took::kYes;
}

uint32_t ColdStore::DemoteBuried(Nanos now, uint32_t budget, size_t goal) {
  // As DemoteRound over the heaps, from the end of each tube's list (its newest), never its
  // first `keep` (nor a rewrite there); a visit goes on where the last one had to stop: at
  // the job it remembered (by id: a list has no index to count a depth by, and walking to a
  // depth would cost as many steps as jobs had to stay), if that job is still there.
  const size_t keep = std::max<size_t>(1, options_.buried_hot);
  const auto& tubes = engine_.tubes();
  if (buried_resume_.size() > 2 * tubes.size() + 64) buried_resume_.clear();
  uint32_t work = 0;
  size_t idle = 0, steps = 0;
  for (size_t visits = 0; work < budget && engine_.memory_used() > goal && idle < tubes.size() &&
                          visits < kMaxVisits && steps < kMaxSteps;
       visits++) {
    engine::Tube* t = tubes[buried_cursor_++ % tubes.size()];
    const engine::JobList& list = t->buried;
    if (list.size() <= keep) {
      idle++;
      continue;
    }
    // The last of the first `keep`: only jobs buried after it may go.
    const engine::Job* last_kept = list.front();
    for (size_t i = 1; i < keep; i++) last_kept = list.Next(last_kept);
    steps += keep;
    const uint64_t floor = Seq(*last_kept);
    engine::Job* j = list.back();
    auto it = buried_resume_.find(t);
    bool stayed = false;  // passed a job that must stay (here or, resuming, before)
    if (it != buried_resume_.end()) {
      engine::Job* r = engine_.FindMutable(it->second);
      if (r && r->state() == engine::JobState::kBuried && r->tube == t && Seq(*r) > floor) {
        j = r;
        stayed = true;
      }
    }
    size_t looked = 0;
    const engine::Job* rewrote = nullptr;  // the first job written whole again or waiting
    const uint32_t before = work;
    while (j && Seq(*j) > floor && looked < kLooksPerVisit && work < budget) {
      engine::Job* prev = list.Prev(j);
      steps++;
      const Took took = TakeBuried(*t, j, now);
      if (took != Took::kRewrote && took != Took::kPending) looked++;
      if (took == Took::kNo) stayed = true;  // the next visit goes past it
      if (!rewrote && (took == Took::kRewrote || took == Took::kPending)) rewrote = j;
      if (took == Took::kYes || took == Took::kRewrote) work++;
      j = prev;
    }
    // From the first rewritten (it goes once written), else past those that stay, else (or
    // once every one was looked at) from the end again.
    const engine::Job* next = rewrote ? rewrote : stayed && j && Seq(*j) > floor ? j : nullptr;
    if (next) {
      buried_resume_[t] = next->id;
    } else if (it != buried_resume_.end()) {
      buried_resume_.erase(it);
    }
    idle = work > before ? 0 : idle + 1;
  }
  buried_steps_ += steps;
  return work;
}

bool ColdStore::RefillBuried(uint32_t budget) {
  const size_t hot = std::max<size_t>(1, options_.buried_hot);
  const size_t mark = std::max<size_t>(1, hot / 2);
  uint32_t read = 0;
  size_t done = 0;
  for (; done < to_look_buried_.size() && read < budget; done++) {
    const engine::Tube* t = to_look_buried_[done];
    to_look_buried_set_.erase(t);
    // None on disk now (t may even be gone: then its address is only a key), or enough left.
    if (buried_.Count(t) == 0 || t->buried.size() >= mark) continue;
    const size_t got = PromoteBuried(t, hot);  // at most `hot` reads
    waited_reads_ -= got;                      // read ahead, not waited for
    read += static_cast<uint32_t>(got);
  }
  to_look_buried_.erase(to_look_buried_.begin(),
                        to_look_buried_.begin() + static_cast<ptrdiff_t>(done));
  return !to_look_buried_.empty();
}

}  // namespace stalkd::storage
