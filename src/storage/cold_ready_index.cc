#include "storage/cold_ready_index.h"

#include <algorithm>

#include "base/check.h"
#include "engine/stats.h"

namespace stalkd::storage {

namespace {

bool IsUrgent(uint32_t pri) { return pri < engine::kUrgentPriority; }

}  // namespace

size_t ColdReadyIndex::Chunk::UpperBound(const Key& k) const {
  auto it = std::upper_bound(keys.begin(), keys.end(), k, [this](const Key& x, const Slot& s) {
    return x < Key{s.pri, hi, s.lo};
  });
  return static_cast<size_t>(it - keys.begin());
}

size_t ColdReadyIndex::Chunk::LowerBound(const Key& k) const {
  auto it = std::lower_bound(keys.begin(), keys.end(), k, [this](const Slot& s, const Key& x) {
    return Key{s.pri, hi, s.lo} < x;
  });
  return static_cast<size_t>(it - keys.begin());
}

size_t ColdReadyIndex::ChunkOf(const PerTube& pt, const Key& k) {
  auto it = std::lower_bound(pt.chunks.begin(), pt.chunks.end(), k,
                             [](const Chunk& c, const Key& x) { return c.Last() < x; });
  return it == pt.chunks.end() ? pt.chunks.size() - 1 : static_cast<size_t>(it - pt.chunks.begin());
}

// Inserts s at `at` in chunk c; a chunk past kChunk keys is split in two halves.
void ColdReadyIndex::Insert(PerTube* pt, size_t c, size_t at, Slot s) {
  Chunk& ch = pt->chunks[c];
  const size_t capacity = ch.keys.capacity();
  ch.keys.insert(ch.keys.begin() + static_cast<ptrdiff_t>(at), s);
  tube_bytes_ += (ch.keys.capacity() - capacity) * sizeof(Slot);
  if (ch.keys.size() > kChunk) InsertChunk(pt, c + 1, Cut(&ch, kChunk / 2));
}

// Moves ch's keys from `at` on into a new chunk.
ColdReadyIndex::Chunk ColdReadyIndex::Cut(Chunk* ch, size_t at) {
  Chunk upper{ch->hi,
              std::vector<Slot>(ch->keys.begin() + static_cast<ptrdiff_t>(at), ch->keys.end())};
  const size_t capacity = ch->keys.capacity();
  ch->keys.resize(at);
  ch->keys.shrink_to_fit();
  tube_bytes_ += (ch->keys.capacity() + upper.keys.capacity() - capacity) * sizeof(Slot);
  return upper;
}

// Puts ch (its keys counted already) at index c of the tube's chunks.
void ColdReadyIndex::InsertChunk(PerTube* pt, size_t c, Chunk ch) {
  const size_t capacity = pt->chunks.capacity();
  pt->chunks.insert(pt->chunks.begin() + static_cast<ptrdiff_t>(c), std::move(ch));
  tube_bytes_ += (pt->chunks.capacity() - capacity) * sizeof(Chunk);
}

void ColdReadyIndex::Add(const Entry& e) {
  STALKD_CHECK(!Contains(e.id));
  auto [it, fresh] = tubes_.try_emplace(e.tube);
  PerTube& pt = it->second;
  if (fresh) {
    pt.number = numbers_.Take(e.tube);
    tube_bytes_ += kTubeNode;
  }
  if (pt.number == TubeNumbers::kNone) wide_tubes_.emplace(e.id, e.tube);
  live_.Emplace(e.id, Meta{e.created, e.pri, pt.number});
  const Key k = Key::Of(e.pri, e.id);
  const Slot s{e.pri, k.id_lo};
  const size_t c = pt.chunks.empty() ? 0 : ChunkOf(pt, k);
  const size_t at = pt.chunks.empty() ? 0 : pt.chunks[c].UpperBound(k);
  if (!pt.chunks.empty() && pt.chunks[c].hi == k.id_hi) {
    Insert(&pt, c, at, s);
  } else if (at == 0 && c > 0 && pt.chunks[c - 1].hi == k.id_hi) {
    Insert(&pt, c - 1, pt.chunks[c - 1].keys.size(), s);  // after all of c - 1 (ChunkOf)
  } else {  // a chunk of its own, there (cutting c in two if k falls inside it)
    size_t to = c;
    if (!pt.chunks.empty() && at > 0) {
      to = c + 1;
      if (at < pt.chunks[c].keys.size()) InsertChunk(&pt, c + 1, Cut(&pt.chunks[c], at));
    }
    InsertChunk(&pt, to, Chunk{k.id_hi, {s}});
    tube_bytes_ += pt.chunks[to].keys.capacity() * sizeof(Slot);
  }
  pt.count++;
  if (IsUrgent(e.pri)) {
    pt.urgent++;
    urgent_++;
  }
}

void ColdReadyIndex::Dropped(PerTube* pt, const engine::Tube* t, uint32_t pri) {
  if (IsUrgent(pri)) {
    pt->urgent--;
    urgent_--;
  }
  if (--pt->count == 0) {  // its number goes back
    tube_bytes_ -= TubeBytes(*pt);
    numbers_.Give(pt->number);
    tubes_.erase(t);
  }
}

bool ColdReadyIndex::Remove(uint64_t id, Entry* out) {
  const Meta* m = live_.Find(id);
  if (!m) return false;
  const Meta copy = *m;
  const engine::Tube* t = TubeOf(id, copy);
  if (out) *out = Entry{id, copy.pri, copy.created, t};
  if (copy.tube == TubeNumbers::kNone) wide_tubes_.erase(id);
  live_.Erase(id);
  auto it = tubes_.find(t);
  STALKD_CHECK(it != tubes_.end());
  PerTube& pt = it->second;
  const Key k = Key::Of(copy.pri, id);
  const size_t c = ChunkOf(pt, k);
  std::vector<Slot>& keys = pt.chunks[c].keys;
  const size_t at = pt.chunks[c].LowerBound(k);
  STALKD_CHECK(at < keys.size() && pt.chunks[c].At(at) == k);
  keys.erase(keys.begin() + static_cast<ptrdiff_t>(at));
  const size_t capacity = keys.capacity();
  if (keys.empty()) {
    tube_bytes_ -= capacity * sizeof(Slot);
    pt.chunks.erase(pt.chunks.begin() + static_cast<ptrdiff_t>(c));
  } else if (capacity > 64 && keys.size() < capacity / 4) {
    keys.shrink_to_fit();  // a drained chunk gives its room back
    tube_bytes_ -= (capacity - keys.capacity()) * sizeof(Slot);
  }
  Dropped(&pt, t, copy.pri);
  return true;
}

size_t ColdReadyIndex::Count(const engine::Tube* t) const {
  auto it = tubes_.find(t);
  return it == tubes_.end() ? 0 : it->second.count;
}

size_t ColdReadyIndex::Urgent(const engine::Tube* t) const {
  auto it = tubes_.find(t);
  return it == tubes_.end() ? 0 : it->second.urgent;
}

bool ColdReadyIndex::First(const engine::Tube* t, Key* out) const {
  auto it = tubes_.find(t);
  if (it == tubes_.end()) return false;
  *out = it->second.chunks.front().At(0);
  return true;
}

bool ColdReadyIndex::TakeFirst(const engine::Tube* t, Entry* out) {
  Key k{};
  return First(t, &k) && Remove(k.id(), out);
}

size_t ColdReadyIndex::TubeBytes(const PerTube& pt) {
  size_t n = kTubeNode + pt.chunks.capacity() * sizeof(Chunk);
  for (const Chunk& c : pt.chunks) n += c.keys.capacity() * sizeof(Slot);
  return n;
}

size_t ColdReadyIndex::bytes() const {
  // SparseIdMap: 16 bytes an id and its pages; a tube: a hash node, its chunk
  // list and chunks' capacity (kept as they change: O(1)); a job of a tube with no number:
  // a hash node.
  return live_.bytes() + tube_bytes_ + tubes_.bucket_count() * sizeof(void*) +
         wide_tubes_.size() * kHashNode + wide_tubes_.bucket_count() * sizeof(void*) +
         numbers_.bytes();
}

size_t ColdReadyIndex::BytesByWalk() const {
  size_t tubes = 0;
  for (const auto& [t, pt] : tubes_) tubes += TubeBytes(pt);
  return bytes() - tube_bytes_ + tubes - live_.bytes() + live_.BytesByWalk();
}

}  // namespace stalkd::storage
