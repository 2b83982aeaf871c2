#include "storage/cold_index.h"

#include <algorithm>

#include "base/check.h"

namespace stalkd::storage {

void ColdIndex::Add(const Entry& e) {
  auto [m, fresh] = live_.Emplace(e.id, Meta{e.deadline, e.created, e.tube});
  STALKD_CHECK(fresh);
  buckets_[BucketOf(e.deadline)].push_back(e.id);
  slots_++;
  PerTube& t = tubes_[e.tube];
  t.count++;
  t.floor = std::min(t.floor, e.deadline);
}

bool ColdIndex::Remove(uint64_t id, Entry* out) {
  const Meta* m = live_.Find(id);
  if (!m) return false;
  Meta copy = *m;
  if (out) *out = Entry{id, copy.deadline, copy.created, copy.tube};
  Forget(id, copy);
  if (slots_ > 2 * live_.size() + 4096) Rebuild();
  return true;
}

void ColdIndex::Forget(uint64_t id, const Meta& m) {
  live_.Erase(id);
  auto it = tubes_.find(m.tube);
  STALKD_CHECK(it != tubes_.end());
  if (--it->second.count == 0) tubes_.erase(it);  // its floor starts afresh
}

const ColdIndex::Meta* ColdIndex::LiveIn(uint64_t id, int64_t b) const {
  const Meta* m = live_.Find(id);
  return m && BucketOf(m->deadline) == b ? m : nullptr;
}

size_t ColdIndex::Count(const engine::Tube* t) const {
  auto it = tubes_.find(t);
  return it == tubes_.end() ? 0 : it->second.count;
}

Nanos ColdIndex::Floor(const engine::Tube* t) const {
  auto it = tubes_.find(t);
  return it == tubes_.end() ? kForever : it->second.floor;
}

Nanos ColdIndex::NextDeadline() const {
  if (live_.size() == 0 || buckets_.empty()) return kForever;
  return buckets_.begin()->first << kBucketShift;
}

bool ColdIndex::TakeDue(Nanos until, size_t max, std::vector<Entry>* out) {
  size_t taken = 0;
  bool more = false;
  while (!buckets_.empty()) {
    auto it = buckets_.begin();
    const int64_t b = it->first;
    if ((b << kBucketShift) >= until) return more;
    std::vector<uint64_t>& ids = it->second;
    size_t keep = 0;
    for (uint64_t id : ids) {
      const Meta* m = LiveIn(id, b);
      if (!m) continue;  // stale: removed, or moved to another bucket
      if (m->deadline < until) {
        if (taken < max) {
          Meta copy = *m;
          out->push_back(Entry{id, copy.deadline, copy.created, copy.tube});
          Forget(id, copy);
          taken++;
          continue;
        }
        more = true;
      }
      ids[keep++] = id;
    }
    slots_ -= ids.size() - keep;
    ids.resize(keep);
    // What is left here is due later (so is every later bucket), or over the max.
    if (keep > 0) return more;
    buckets_.erase(it);
  }
  return more;
}

void ColdIndex::TakeEarliest(const engine::Tube* t, size_t n, std::vector<Entry>* out) {
  size_t left = std::min(n, Count(t));
  std::vector<Entry> found;
  for (auto it = buckets_.begin(); left > 0 && it != buckets_.end(); ++it) {
    found.clear();
    for (uint64_t id : it->second) {
      const Meta* m = LiveIn(id, it->first);
      if (m && m->tube == t) found.push_back(Entry{id, m->deadline, m->created, m->tube});
    }
    std::sort(found.begin(), found.end(), [](const Entry& a, const Entry& b) {
      return a.deadline != b.deadline ? a.deadline < b.deadline : a.id < b.id;
    });
    for (const Entry& e : found) {
      if (left == 0) break;
      if (!live_.Find(e.id)) continue;  // listed twice in this bucket, taken already
      out->push_back(e);
      Forget(e.id, Meta{e.deadline, e.created, e.tube});
      left--;
    }
  }
  if (slots_ > 2 * live_.size() + 4096) Rebuild();
}

void ColdIndex::Rebuild() {
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    std::vector<uint64_t>& ids = it->second;
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    std::erase_if(ids, [&](uint64_t id) { return !LiveIn(id, it->first); });
    ids.shrink_to_fit();
    it = ids.empty() ? buckets_.erase(it) : std::next(it);
  }
  slots_ = 0;
  for (const auto& [b, ids] : buckets_) slots_ += ids.size();
}

size_t ColdIndex::bytes() const {
  // IdMap: a Meta and a presence bit per id (dense ids); a bucket: its vector's capacity
  // and a map node; a tube: a hash node.
  size_t n = live_.size() * sizeof(Meta) + live_.size() / 8;
  for (const auto& [b, ids] : buckets_) n += ids.capacity() * sizeof(uint64_t) + 64;
  return n + tubes_.size() * 48;
}

}  // namespace stalkd::storage
