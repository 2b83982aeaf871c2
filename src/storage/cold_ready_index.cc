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
  auto [m, fresh] = live_.Emplace(e.id, Meta{e.created, e.tube, e.pri});
  STALKD_CHECK(fresh);
  PerTube& pt = tubes_[e.tube];
  const Key k = Key::Of(e.pri, e.id);
  if (pt.chunks.empty()) {
    pt.chunks.push_back({k});
  } else {
    const size_t c = ChunkOf(pt, k);
    std::vector<Key>& chunk = pt.chunks[c];
    chunk.insert(std::upper_bound(chunk.begin(), chunk.end(), k), k);
    if (chunk.size() > kChunk) {  // split in two halves
      std::vector<Key> upper(chunk.begin() + static_cast<ptrdiff_t>(kChunk / 2), chunk.end());
      chunk.resize(kChunk / 2);
      chunk.shrink_to_fit();
      pt.chunks.insert(pt.chunks.begin() + static_cast<ptrdiff_t>(c) + 1, std::move(upper));
    }
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
  if (--pt->count == 0) tubes_.erase(t);
}

bool ColdReadyIndex::Remove(uint64_t id, Entry* out) {
  const Meta* m = live_.Find(id);
  if (!m) return false;
  const Meta copy = *m;
  if (out) *out = Entry{id, copy.pri, copy.created, copy.tube};
  live_.Erase(id);
  auto it = tubes_.find(copy.tube);
  STALKD_CHECK(it != tubes_.end());
  PerTube& pt = it->second;
  const Key k = Key::Of(copy.pri, id);
  const size_t c = ChunkOf(pt, k);
  std::vector<Key>& chunk = pt.chunks[c];
  auto at = std::lower_bound(chunk.begin(), chunk.end(), k);
  STALKD_CHECK(at != chunk.end() && *at == k);
  chunk.erase(at);
  if (chunk.empty()) {
    pt.chunks.erase(pt.chunks.begin() + static_cast<ptrdiff_t>(c));
  } else if (chunk.capacity() > 64 && chunk.size() < chunk.capacity() / 4) {
    chunk.shrink_to_fit();  // a drained chunk gives its room back
  }
  Dropped(&pt, copy.tube, copy.pri);
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

size_t ColdReadyIndex::bytes() const {
  // IdMap: a Meta and a presence bit per id (dense ids); chunks: their capacity and vector
  // header; a tube: a hash node and its chunk list.
  size_t n = live_.size() * sizeof(Meta) + live_.size() / 8;
  for (const auto& [t, pt] : tubes_) {
    n += 64 + pt.chunks.capacity() * sizeof(std::vector<Key>);
    for (const std::vector<Key>& c : pt.chunks) n += c.capacity() * sizeof(Key);
  }
  return n;
}

}  // namespace stalkd::storage
