#include "storage/cold_buried_index.h"

#include <algorithm>

#include "base/check.h"

namespace stalkd::storage {

namespace {

// libstdc++'s deque: blocks of 512 bytes and a map of block pointers (at least 8).
constexpr size_t kDequeBlock = 512;

}  // namespace

const engine::Tube* ColdBuriedIndex::TubeOf(uint64_t id, const Meta& m) const {
  return m.tube() == TubeNumbers::kNone ? wide_tubes_.at(id) : numbers_.TubeOf(m.tube());
}

bool ColdBuriedIndex::Get(uint64_t id, Entry* out) const {
  const Meta* m = live_.Find(id);
  if (m) *out = Entry{id, m->seq(), m->created, TubeOf(id, *m)};
  return m != nullptr;
}

size_t ColdBuriedIndex::TubeBytes(const PerTube& pt) {
  const size_t per_block = kDequeBlock / sizeof(Slot);
  auto deque = [](size_t blocks) {
    return blocks * kDequeBlock + std::max<size_t>(8, blocks + 2) * sizeof(void*);
  };
  return kTubeNode + deque(pt.slots.size() / per_block + 1) +
         deque(pt.newer.size() / per_block + 1);
}

void ColdBuriedIndex::Insert(std::deque<Slot>* q, const Slot& s) {
  if (q->empty() || q->back().seq <= s.seq) {
    q->push_back(s);
  } else if (s.seq < q->front().seq) {
    q->push_front(s);
  } else {
    auto at = std::upper_bound(q->begin(), q->end(), s.seq,
                               [](uint64_t seq, const Slot& x) { return seq < x.seq; });
    moved_ += static_cast<uint64_t>(std::min(at - q->begin(), q->end() - at));
    q->insert(at, s);
  }
}

void ColdBuriedIndex::Merge(PerTube* pt) {
  moved_ += pt->newer.size();
  pt->slots.insert(pt->slots.end(), pt->newer.begin(), pt->newer.end());
  pt->newer.clear();
}

void ColdBuriedIndex::Add(const Entry& e) {
  STALKD_CHECK(!Contains(e.id));
  STALKD_CHECK(e.seq <= kSeqMask);
  auto [it, fresh] = tubes_.try_emplace(e.tube);
  PerTube& pt = it->second;
  if (fresh) pt.number = numbers_.Take(e.tube);
  if (!fresh) tube_bytes_ -= TubeBytes(pt);
  if (pt.number == TubeNumbers::kNone) wide_tubes_.emplace(e.id, e.tube);
  live_.Emplace(e.id, Meta{e.created, e.seq | uint64_t{pt.number} << 48});
  const Slot s{e.seq, e.id};
  if (!pt.slots.empty() && e.seq <= pt.slots.back().seq) {
    Insert(&pt.slots, s);  // below the newest of slots: demotion going on towards the front
  } else {
    // Above every slot of `slots`: a pile demoted newest first goes in at newer's front. A
    // slot above every one of newer starts it again (the ones there join slots: each slot
    // moves there once), so the next pile does not go in below the last one's top.
    if (!pt.newer.empty() && e.seq > pt.newer.back().seq) Merge(&pt);
    Insert(&pt.newer, s);
  }
  pt.count++;
  tube_bytes_ += TubeBytes(pt);
}

void ColdBuriedIndex::Compact(PerTube* pt) {
  Merge(pt);
  std::deque<Slot> kept;
  for (const Slot& s : pt->slots) {
    // A job taken out and put back (with its same number) may have a slot left behind just
    // before its own: keep one.
    if (Live(s) && (kept.empty() || kept.back().id != s.id)) kept.push_back(s);
  }
  STALKD_CHECK(kept.size() == pt->count);
  moved_ += kept.size();
  pt->slots.swap(kept);
}

void ColdBuriedIndex::Removed(PerTube* pt, const engine::Tube* t) {
  tube_bytes_ -= TubeBytes(*pt);
  if (--pt->count == 0) {  // its slots go, and its number goes back
    numbers_.Give(pt->number);
    tubes_.erase(t);
    return;
  }
  const size_t slots = pt->slots.size() + pt->newer.size();
  if (slots >= 64 && slots > 2 * pt->count) Compact(pt);
  tube_bytes_ += TubeBytes(*pt);
}

bool ColdBuriedIndex::Remove(uint64_t id, Entry* out) {
  const Meta* m = live_.Find(id);
  if (!m) return false;
  const Meta copy = *m;
  const engine::Tube* t = TubeOf(id, copy);
  if (out) *out = Entry{id, copy.seq(), copy.created, t};
  if (copy.tube() == TubeNumbers::kNone) wide_tubes_.erase(id);
  live_.Erase(id);  // its slot stays behind, skipped from now on
  auto it = tubes_.find(t);
  STALKD_CHECK(it != tubes_.end());
  Removed(&it->second, t);
  return true;
}

size_t ColdBuriedIndex::Count(const engine::Tube* t) const {
  auto it = tubes_.find(t);
  return it == tubes_.end() ? 0 : it->second.count;
}

bool ColdBuriedIndex::First(const engine::Tube* t, Entry* out) {
  auto it = tubes_.find(t);
  if (it == tubes_.end()) return false;
  PerTube& pt = it->second;
  tube_bytes_ -= TubeBytes(pt);
  for (;;) {  // count > 0: a live one follows
    if (pt.slots.empty()) pt.slots.swap(pt.newer);
    if (Live(pt.slots.front())) break;
    pt.slots.pop_front();
  }
  tube_bytes_ += TubeBytes(pt);
  return Get(pt.slots.front().id, out);
}

bool ColdBuriedIndex::TakeFirst(const engine::Tube* t, Entry* out) {
  Entry e;
  if (!First(t, &e)) return false;
  return Remove(e.id, out);  // its slot, now at the front, is dropped by the next First
}

size_t ColdBuriedIndex::bytes() const {
  // SparseIdMap: 16 bytes an id and its pages; a tube: a hash node and its deque (kept as
  // they change: O(1)); a job of a tube with no number: a hash node.
  return live_.bytes() + tube_bytes_ + tubes_.bucket_count() * sizeof(void*) +
         wide_tubes_.size() * kHashNode + wide_tubes_.bucket_count() * sizeof(void*) +
         numbers_.bytes();
}

size_t ColdBuriedIndex::BytesByWalk() const {
  size_t tubes = 0;
  for (const auto& [t, pt] : tubes_) tubes += TubeBytes(pt);
  return bytes() - tube_bytes_ + tubes - live_.bytes() + live_.BytesByWalk();
}

}  // namespace stalkd::storage
