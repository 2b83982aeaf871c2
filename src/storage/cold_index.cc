#include "storage/cold_index.h"

#include <algorithm>

#include "base/check.h"

namespace stalkd::storage {

void ColdIndex::Add(const Entry& e) {
  auto [m, fresh] = live_.Emplace(e.id, Meta{e.deadline, e.created, e.tube});
  STALKD_CHECK(fresh);
  const int64_t b = BucketOf(e.deadline);
  auto [it, made] = buckets_.try_emplace(b);
  std::vector<uint64_t>& ids = it->second;
  const size_t capacity = ids.capacity();
  ids.push_back(e.id);
  bucket_bytes_ += (ids.capacity() - capacity) * sizeof(uint64_t) + (made ? kBucketNode : 0);
  if (b == sorted_bucket_) sorted_bucket_ = kNoBucket;  // sorted again when next due
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
  auto it = buckets_.begin();
  if (it->first == sorted_bucket_) {  // exact: the first live id from where TakeDue stopped
    for (size_t i = sorted_pos_; i < it->second.size(); i++) {
      if (const Meta* m = LiveIn(it->second[i], it->first)) return m->deadline;
    }
  }
  return it->first << kBucketShift;
}

bool ColdIndex::TakeDue(Nanos until, size_t max, std::vector<Entry>* out) {
  size_t taken = 0;
  while (!buckets_.empty()) {
    auto it = buckets_.begin();
    const int64_t b = it->first;
    if ((b << kBucketShift) >= until) return false;
    std::vector<uint64_t>& ids = it->second;
    if (b != sorted_bucket_) SortBucket(b, &ids);
    for (; sorted_pos_ < ids.size(); sorted_pos_++) {
      const Meta* m = LiveIn(ids[sorted_pos_], b);
      if (!m) continue;                        // stale: removed since the sort
      if (m->deadline >= until) return false;  // so is every later one
      if (taken == max) return true;
      Meta copy = *m;
      out->push_back(Entry{ids[sorted_pos_], copy.deadline, copy.created, copy.tube});
      Forget(ids[sorted_pos_], copy);
      taken++;
    }
    slots_ -= ids.size();
    bucket_bytes_ -= BucketBytes(ids);
    buckets_.erase(it);
    sorted_bucket_ = kNoBucket;
  }
  return false;
}

// The bucket falling due is sorted once by (deadline, id), its stale ids dropped, so that
// each TakeDue goes on from where the last one stopped instead of scanning it all again.
void ColdIndex::SortBucket(int64_t b, std::vector<uint64_t>* ids) {
  const size_t before = ids->size();
  std::erase_if(*ids, [&](uint64_t id) { return !LiveIn(id, b); });
  std::sort(ids->begin(), ids->end(), [&](uint64_t x, uint64_t y) {
    const Nanos dx = live_.Find(x)->deadline, dy = live_.Find(y)->deadline;
    return dx != dy ? dx < dy : x < y;
  });
  ids->erase(std::unique(ids->begin(), ids->end()), ids->end());
  slots_ -= before - ids->size();
  sorted_bucket_ = b;
  sorted_pos_ = 0;
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
  sorted_bucket_ = kNoBucket;
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    std::vector<uint64_t>& ids = it->second;
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    std::erase_if(ids, [&](uint64_t id) { return !LiveIn(id, it->first); });
    ids.shrink_to_fit();
    it = ids.empty() ? buckets_.erase(it) : std::next(it);
  }
  slots_ = bucket_bytes_ = 0;
  for (const auto& [b, ids] : buckets_) {
    slots_ += ids.size();
    bucket_bytes_ += BucketBytes(ids);
  }
}

size_t ColdIndex::bytes() const {
  // IdMap: a Meta and a presence bit per id (dense ids); a bucket: its vector's capacity
  // and a map node; a tube: a hash node.
  // Kept up to date as buckets change: a stats reply must not walk millions of buckets.
  return live_.size() * sizeof(Meta) + live_.size() / 8 + bucket_bytes_ + tubes_.size() * 48;
}

size_t ColdIndex::BytesByWalk() const {
  size_t buckets = 0;
  for (const auto& [b, ids] : buckets_) buckets += BucketBytes(ids);
  return bytes() - bucket_bytes_ + buckets;
}

}  // namespace stalkd::storage
