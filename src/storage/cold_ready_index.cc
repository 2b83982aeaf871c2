#include "storage/cold_ready_index.h"

#include <algorithm>

#include "base/check.h"
#include "engine/stats.h"

namespace stalkd::storage {

namespace {

bool IsUrgent(uint32_t pri) { return pri < engine::kUrgentPriority; }

}  // namespace

size_t ColdReadyIndex::ChunkOf(const PerTube& pt, const Key& k) {
  auto it = std::lower_bound(pt.chunks.begin(), pt.chunks.end(), k,
                             [](const std::vector<Key>& c, const Key& x) { return c.back() < x; });
  return it == pt.chunks.end() ? pt.chunks.size() - 1 : static_cast<size_t>(it - pt.chunks.begin());
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
  const size_t list_capacity = pt.chunks.capacity();
  if (pt.chunks.empty()) {
    pt.chunks.push_back({k});
    tube_bytes_ += pt.chunks.back().capacity() * sizeof(Key);
  } else {
    const size_t c = ChunkOf(pt, k);
    std::vector<Key>& chunk = pt.chunks[c];
    const size_t capacity = chunk.capacity();
    chunk.insert(std::upper_bound(chunk.begin(), chunk.end(), k), k);
    if (chunk.size() > kChunk) {  // split in two halves
      std::vector<Key> upper(chunk.begin() + static_cast<ptrdiff_t>(kChunk / 2), chunk.end());
      chunk.resize(kChunk / 2);
      chunk.shrink_to_fit();
      tube_bytes_ += (chunk.capacity() + upper.capacity() - capacity) * sizeof(Key);
      pt.chunks.insert(pt.chunks.begin() + static_cast<ptrdiff_t>(c) + 1, std::move(upper));
    } else {
      tube_bytes_ += (chunk.capacity() - capacity) * sizeof(Key);
    }
  }
  tube_bytes_ += (pt.chunks.capacity() - list_capacity) * sizeof(std::vector<Key>);
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
  std::vector<Key>& chunk = pt.chunks[c];
  auto at = std::lower_bound(chunk.begin(), chunk.end(), k);
  STALKD_CHECK(at != chunk.end() && *at == k);
  chunk.erase(at);
  const size_t capacity = chunk.capacity();
  if (chunk.empty()) {
    tube_bytes_ -= capacity * sizeof(Key);
    pt.chunks.erase(pt.chunks.begin() + static_cast<ptrdiff_t>(c));
  } else if (capacity > 64 && chunk.size() < capacity / 4) {
    chunk.shrink_to_fit();  // a drained chunk gives its room back
    tube_bytes_ -= (capacity - chunk.capacity()) * sizeof(Key);
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
  *out = it->second.chunks.front().front();
  return true;
}

bool ColdReadyIndex::TakeFirst(const engine::Tube* t, Entry* out) {
  Key k{};
  return First(t, &k) && Remove(k.id(), out);
}

size_t ColdReadyIndex::TubeBytes(const PerTube& pt) {
  size_t n = kTubeNode + pt.chunks.capacity() * sizeof(std::vector<Key>);
  for (const std::vector<Key>& c : pt.chunks) n += c.capacity() * sizeof(Key);
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
