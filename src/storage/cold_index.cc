#include "storage/cold_index.h"

#include <algorithm>
#include <queue>
#include <utility>

#include "base/check.h"

namespace stalkd::storage {

namespace {

constexpr int kCodeBits = 48;  // of Meta::packed: the creation time's code; above: the tube
constexpr uint64_t kCodeMask = (uint64_t{1} << kCodeBits) - 1;
// The code's top bit says which of two forms it has; the 47 bits below it hold the age
// (deadline - created):
// - 0: in units of 16 ns, for a creation time that is a multiple of 16 ns (a Job keeps it
//   so: engine::Job::created, 4 flag bits below it): the age's low 4 bits are then the
//   deadline's, so it is exact; up to 2^51 ns (26 days). Jobs released with a delay.
// - 1: whole seconds (24 bits, 194 days) and nanoseconds below them (23 bits, 8.4 ms), for
//   any creation time: a put with a delay (created + delay + the µs between them).
constexpr uint64_t kFormBit = uint64_t{1} << (kCodeBits - 1);
constexpr int kGrainBits = 4;
constexpr uint64_t kGrainMask = (uint64_t{1} << kGrainBits) - 1;
constexpr uint64_t kMaxGrains = kFormBit;
constexpr int kSubBits = 23;  // of the second form: nanoseconds below the whole seconds
constexpr uint64_t kSubMask = (uint64_t{1} << kSubBits) - 1;
constexpr uint64_t kMaxSeconds = uint64_t{1} << (kCodeBits - 1 - kSubBits);

// The code of an age (deadline - created), or false if it fits neither form.
bool Encode(Nanos created, uint64_t age, uint64_t* code) {
  if ((static_cast<uint64_t>(created) & kGrainMask) == 0 && (age >> kGrainBits) < kMaxGrains) {
    *code = age >> kGrainBits;
    return true;
  }
  if (age / kSecond < kMaxSeconds && age % kSecond <= kSubMask) {
    *code = kFormBit | (age / kSecond) << kSubBits | age % kSecond;
    return true;
  }
  return false;
}

uint64_t AgeOf(Nanos deadline, uint64_t code) {
  if (code & kFormBit) {
    return ((code & ~kFormBit) >> kSubBits) * kSecond + (code & kSubMask);
  }
  return code << kGrainBits | (static_cast<uint64_t>(deadline) & kGrainMask);
}

// How far a lies after b (0 if it does not), without overflow.
uint64_t After(Nanos a, Nanos b) {
  return a > b ? static_cast<uint64_t>(a) - static_cast<uint64_t>(b) : 0;
}

uint64_t Width(int level) { return uint64_t{1} << ColdIndex::Shift(level); }

bool Earlier(const ColdIndex::Entry& a, const ColdIndex::Entry& b) {
  return a.deadline != b.deadline ? a.deadline < b.deadline : a.id < b.id;
}

}  // namespace

uint16_t ColdIndex::NumberOf(const Meta& m) { return static_cast<uint16_t>(m.packed >> kCodeBits); }

ColdIndex::Entry ColdIndex::Decode(uint64_t id, const Meta& m) const {
  const auto number = NumberOf(m);
  if (number == TubeNumbers::kNone) {
    const Wide& w = wide_.at(id);
    return Entry{id, m.deadline, w.created, w.tube};
  }
  const uint64_t age = AgeOf(m.deadline, m.packed & kCodeMask);
  const auto created = static_cast<Nanos>(static_cast<uint64_t>(m.deadline) - age);
  return Entry{id, m.deadline, created, numbers_.TubeOf(number)};
}

const engine::Tube* ColdIndex::TubeOf(uint64_t id, const Meta& m) const {
  const auto number = NumberOf(m);
  return number == TubeNumbers::kNone ? wide_.at(id).tube : numbers_.TubeOf(number);
}

void ColdIndex::Add(const Entry& e) {
  STALKD_CHECK(!Contains(e.id));
  auto [it, fresh] = tubes_.try_emplace(e.tube);
  PerTube& t = it->second;
  if (fresh) t.number = numbers_.Take(e.tube);
  t.count++;
  t.floor = std::min(t.floor, e.deadline);
  const uint64_t age = e.deadline >= e.created ? After(e.deadline, e.created) : UINT64_MAX;
  uint64_t packed = uint64_t{TubeNumbers::kNone} << kCodeBits;
  uint64_t code = 0;
  if (t.number != TubeNumbers::kNone && age != UINT64_MAX && Encode(e.created, age, &code)) {
    packed = uint64_t{t.number} << kCodeBits | code;
  } else {
    STALKD_CHECK(wide_.emplace(e.id, Wide{e.created, e.tube}).second);
  }
  live_.Emplace(e.id, Meta{e.deadline, packed});
  Place(e.id, e.deadline, NumberOf(Meta{e.deadline, packed}));
  slots_++;
}

// Into the bucket of the window that holds the deadline: the existing one (at most one that
// is not being split holds it), else a new one, as coarse as its distance from the horizon
// allows.
void ColdIndex::Place(uint64_t id, Nanos deadline, uint16_t number) {
  if (last_ && Start(deadline, last_level_) == last_start_) {
    Push(last_, id, number);
    return;
  }
  for (int level = kLevels - 1; level >= 0; level--) {
    const Nanos start = Start(deadline, level);
    Level& lv = levels_[level];
    auto it = lv.find(start);
    if (it == lv.end()) {
      if (level > 0 && After(start, horizon_) <= Width(level)) continue;  // too near: finer
      it = lv.emplace(start, Bucket{}).first;
      bucket_bytes_ += kBucketNode;
    } else if (it->second.splitting) {
      continue;
    }
    Push(&it->second, id, number);
    last_ = &it->second;
    last_level_ = level;
    last_start_ = start;
    return;
  }
}

namespace {

uint64_t KeyOf(uint16_t number, uint32_t hi) { return uint64_t{number} << 32 | hi; }

template <typename G>
bool Before(const G& x, const G& y) {
  return KeyOf(x.number, x.hi) < KeyOf(y.number, y.hi);
}

}  // namespace

void ColdIndex::Push(Bucket* b, uint64_t id, uint16_t number) {
  const auto hi = static_cast<uint32_t>(id >> 32);
  std::vector<Group>& groups = b->groups;
  Group* g = nullptr;
  if (!groups.empty() && groups.back().number == number && groups.back().hi == hi) {
    g = &groups.back();
  } else {
    const uint64_t key = KeyOf(number, hi);
    auto end = groups.begin() + b->ordered;
    auto at = std::lower_bound(groups.begin(), end, key, [](const Group& x, uint64_t k) {
      return KeyOf(x.number, x.hi) < k;
    });
    if (at == end || KeyOf(at->number, at->hi) != key) {
      at = std::find_if(end, groups.end(),
                        [&](const Group& x) { return x.number == number && x.hi == hi; });
    }
    if (at == groups.end()) {
      const size_t capacity = groups.capacity();
      groups.push_back(Group{hi, number, {}});
      bucket_bytes_ += (groups.capacity() - capacity) * sizeof(Group);
      at = groups.end() - 1;
    }
    g = &*at;
  }
  std::vector<uint32_t>& lo = g->lo;
  if (lo.size() == lo.capacity()) {  // grow by a quarter: less room left idle than doubling
    const size_t capacity = lo.capacity();
    lo.reserve(capacity + capacity / 4 + 4);
    bucket_bytes_ += (lo.capacity() - capacity) * sizeof(uint32_t);
  }
  lo.push_back(static_cast<uint32_t>(id));
  const size_t tail = groups.size() - b->ordered;
  if (tail > 8 && tail * tail > b->ordered) {
    auto mid = groups.begin() + b->ordered;
    std::sort(mid, groups.end(), Before<Group>);
    std::inplace_merge(groups.begin(), mid, groups.end(), Before<Group>);
    b->ordered = static_cast<uint32_t>(groups.size());
  }
}

template <typename F>
void ColdIndex::ForGroups(const Bucket& b, uint16_t number, F f) {
  const std::vector<Group>& groups = b.groups;
  auto end = groups.begin() + b.ordered;
  auto g = std::lower_bound(groups.begin(), end, KeyOf(number, 0),
                            [](const Group& x, uint64_t k) { return KeyOf(x.number, x.hi) < k; });
  for (; g != end && g->number == number; ++g) f(*g);
  for (g = end; g != groups.end(); ++g) {
    if (g->number == number) f(*g);
  }
}

size_t ColdIndex::BucketBytes(const Bucket& b) {
  size_t n = kBucketNode + b.groups.capacity() * sizeof(Group);
  for (const Group& g : b.groups) n += g.lo.capacity() * sizeof(uint32_t);
  return n;
}

void ColdIndex::EraseBucket(int level, Level::iterator it) {
  bucket_bytes_ -= BucketBytes(it->second);
  levels_[level].erase(it);
  last_ = nullptr;
}

bool ColdIndex::Remove(uint64_t id, Entry* out) {
  const Meta* m = live_.Find(id);
  if (!m) return false;
  const Meta copy = *m;
  if (out) *out = Decode(id, copy);
  Forget(id, copy);
  if (slots_ > 2 * live_.size() + 4096) Rebuild();
  return true;
}

void ColdIndex::Forget(uint64_t id, const Meta& m) {
  auto it = tubes_.find(TubeOf(id, m));
  STALKD_CHECK(it != tubes_.end());
  if (NumberOf(m) == TubeNumbers::kNone) {
    wide_.erase(id);
    if (wide_.bucket_count() > 1024 && wide_.size() < wide_.bucket_count() / 8) wide_.rehash(0);
  }
  live_.Erase(id);
  if (--it->second.count == 0) {  // its number goes back, its floor starts afresh
    numbers_.Give(it->second.number);
    tubes_.erase(it);
  }
}

const ColdIndex::Meta* ColdIndex::LiveIn(uint64_t id, int level, Nanos start) const {
  const Meta* m = live_.Find(id);
  return m && Start(m->deadline, level) == start ? m : nullptr;
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
  if (live_.size() == 0) return kForever;
  Nanos next = kForever;
  for (int level = 1; level < kLevels; level++) {  // when the first bucket is to be split
    if (levels_[level].empty()) continue;
    const Nanos start = levels_[level].begin()->first;
    const uint64_t lead = Width(level);
    next = std::min(next,
                    After(start, INT64_MIN) > lead ? start - static_cast<Nanos>(lead) : INT64_MIN);
  }
  if (!levels_[0].empty()) {
    auto it = levels_[0].begin();
    Nanos first = it->first;
    if (it->first == sorted_start_ && it->second.empty()) {  // exact: from where TakeDue stopped
      for (size_t i = sorted_pos_; i < sorted_.size(); i++) {
        if (const Meta* m = LiveIn(sorted_[i], 0, it->first)) {
          first = m->deadline;
          break;
        }
      }
    }
    next = std::min(next, first);
  }
  return next;
}

// Moves the ids of level's first bucket to finer ones (Place: the horizon is within its
// width, so none goes back to its level or above), up to *work of them; true once it is
// gone.
bool ColdIndex::SplitFirst(int level, size_t* work) {
  auto it = levels_[level].begin();
  const Nanos start = it->first;
  Bucket& b = it->second;
  if (!b.splitting) {
    b.splitting = true;
    last_ = nullptr;
  }
  while (!b.groups.empty()) {
    Group& g = b.groups.back();
    while (!g.lo.empty()) {
      if (*work == 0) return false;
      const uint64_t id = uint64_t{g.hi} << 32 | g.lo.back();
      g.lo.pop_back();
      (*work)--;
      slots_--;
      if (const Meta* m = LiveIn(id, level, start)) {
        Place(id, m->deadline, NumberOf(*m));
        slots_++;
      }
    }
    bucket_bytes_ -= g.lo.capacity() * sizeof(uint32_t);
    b.groups.pop_back();
    b.ordered = std::min(b.ordered, static_cast<uint32_t>(b.groups.size()));
  }
  EraseBucket(level, it);
  return true;
}

bool ColdIndex::TakeDue(Nanos until, size_t max, std::vector<Entry>* out) {
  horizon_ = std::max(horizon_, until);
  size_t work = split_work_;
  bool split_left = false;
  for (int level = kLevels - 1; level >= 1 && !split_left; level--) {
    Level& lv = levels_[level];
    while (!lv.empty() && After(lv.begin()->first, horizon_) <= Width(level)) {
      if (!SplitFirst(level, &work)) {
        split_left = true;
        break;
      }
    }
  }
  if (split_left) {  // nothing is taken while a bucket that may hold due ids is whole
    for (int level = 1; level < kLevels; level++) {
      if (!levels_[level].empty() && levels_[level].begin()->first < until) return true;
    }
  }
  size_t taken = 0;
  Level& l0 = levels_[0];
  while (!l0.empty()) {
    auto it = l0.begin();
    const Nanos start = it->first;
    if (start >= until) break;
    if (start != sorted_start_ || !it->second.empty()) SortFirst();
    for (; sorted_pos_ < sorted_.size(); sorted_pos_++) {
      const uint64_t id = sorted_[sorted_pos_];
      const Meta* m = LiveIn(id, 0, start);
      if (!m) continue;                             // stale: removed since the sort
      if (m->deadline >= until) return split_left;  // so is every later one
      if (taken == max) return true;
      const Meta copy = *m;
      out->push_back(Decode(id, copy));
      Forget(id, copy);
      taken++;
    }
    slots_ -= sorted_.size();
    std::vector<uint64_t>().swap(sorted_);
    sorted_start_ = kNoBucket;
    sorted_pos_ = 0;
    EraseBucket(0, it);
  }
  return split_left;
}

// Puts the ids TakeDue sorted but did not take back into their bucket.
void ColdIndex::Unsort() {
  if (sorted_start_ == kNoBucket) return;
  auto it = levels_[0].find(sorted_start_);
  STALKD_CHECK(it != levels_[0].end());
  slots_ -= sorted_.size();
  for (size_t i = sorted_pos_; i < sorted_.size(); i++) {
    if (const Meta* m = LiveIn(sorted_[i], 0, sorted_start_)) {  // else stale: dropped
      Push(&it->second, sorted_[i], NumberOf(*m));
      slots_++;
    }
  }
  std::vector<uint64_t>().swap(sorted_);
  sorted_start_ = kNoBucket;
  sorted_pos_ = 0;
}

// The first level-0 bucket, falling due, is sorted by (deadline, id) into sorted_ (its ids
// leave it), stale ids dropped, so that each TakeDue goes on from where the last stopped.
// Ids added to it since are sorted in with the rest.
void ColdIndex::SortFirst() {
  auto it = levels_[0].begin();
  const Nanos start = it->first;
  if (sorted_start_ != start) Unsort();
  std::vector<std::pair<Nanos, uint64_t>> keyed;
  size_t before = sorted_.size() - sorted_pos_;
  auto keep = [&](uint64_t id) {
    if (const Meta* m = LiveIn(id, 0, start)) keyed.emplace_back(m->deadline, id);
  };
  for (size_t i = sorted_pos_; i < sorted_.size(); i++) keep(sorted_[i]);
  Bucket& b = it->second;
  for (const Group& g : b.groups) {
    before += g.lo.size();
    for (uint32_t lo : g.lo) keep(uint64_t{g.hi} << 32 | lo);
  }
  bucket_bytes_ -= BucketBytes(b) - kBucketNode;
  std::vector<Group>().swap(b.groups);
  b.ordered = 0;
  std::sort(keyed.begin(), keyed.end());
  keyed.erase(std::unique(keyed.begin(), keyed.end()), keyed.end());
  slots_ -= sorted_pos_ + before - keyed.size();  // sorted_'s taken part, and the stale
  sorted_.assign(keyed.size(), 0);
  for (size_t i = 0; i < keyed.size(); i++) sorted_[i] = keyed[i].second;
  sorted_start_ = start;
  sorted_pos_ = 0;
}

void ColdIndex::TakeEarliest(const engine::Tube* t, size_t n, std::vector<Entry>* out) {
  size_t left = std::min(n, Count(t));
  if (left == 0) return;
  const uint16_t number = tubes_.at(t).number;
  auto later = [](const Entry& a, const Entry& b) { return Earlier(b, a); };
  std::priority_queue<Entry, std::vector<Entry>, decltype(later)> found(later);
  // Every entry due before a bucket's start is in a bucket visited before it.
  auto take_before = [&](Nanos bound, bool all) {
    while (left > 0 && !found.empty() && (all || found.top().deadline < bound)) {
      const Entry e = found.top();
      found.pop();
      const Meta* m = live_.Find(e.id);
      if (!m) continue;  // listed twice, taken already
      const Meta copy = *m;
      out->push_back(e);
      Forget(e.id, copy);
      left--;
    }
  };
  auto look = [&](uint64_t id, int level, Nanos start) {
    looked_++;
    const Meta* m = LiveIn(id, level, start);
    if (!m) return;
    const auto num = NumberOf(*m);
    // Kept wide (kNone): by its tube aside; else by number (t's is not kNone then).
    if (num == TubeNumbers::kNone ? wide_.at(id).tube != t : num != number) return;
    found.push(Decode(id, *m));
  };
  std::array<Level::iterator, kLevels> at;
  for (int level = 0; level < kLevels; level++) at[level] = levels_[level].begin();
  while (left > 0) {  // the buckets of every level by start, the coarser first
    int next = -1;
    for (int level = kLevels - 1; level >= 0; level--) {
      if (at[level] == levels_[level].end()) continue;
      if (next < 0 || at[level]->first < at[next]->first) next = level;
    }
    if (next < 0) break;
    const Nanos start = at[next]->first;
    take_before(start, false);
    if (left == 0) break;
    // t's groups only, and those of the entries kept wide (listed under kNone).
    auto look_all = [&](const Group& g) {
      for (uint32_t lo : g.lo) look(uint64_t{g.hi} << 32 | lo, next, start);
    };
    ForGroups(at[next]->second, number, look_all);
    if (number != TubeNumbers::kNone) ForGroups(at[next]->second, TubeNumbers::kNone, look_all);
    if (next == 0 && start == sorted_start_) {
      for (size_t i = sorted_pos_; i < sorted_.size(); i++) look(sorted_[i], 0, start);
    }
    ++at[next];
  }
  take_before(0, true);
  if (slots_ > 2 * live_.size() + 4096) Rebuild();
}

void ColdIndex::Rebuild() {
  Unsort();
  last_ = nullptr;
  slots_ = bucket_bytes_ = 0;
  for (int level = 0; level < kLevels; level++) {
    Level& lv = levels_[level];
    for (auto it = lv.begin(); it != lv.end();) {
      std::vector<Group>& groups = it->second.groups;
      for (Group& g : groups) {
        std::sort(g.lo.begin(), g.lo.end());
        g.lo.erase(std::unique(g.lo.begin(), g.lo.end()), g.lo.end());
        std::erase_if(g.lo, [&](uint32_t lo) {  // stale, or listed under another tube now
          const Meta* m = LiveIn(uint64_t{g.hi} << 32 | lo, level, it->first);
          return !m || NumberOf(*m) != g.number;
        });
        g.lo.shrink_to_fit();
        slots_ += g.lo.size();
      }
      std::erase_if(groups, [](const Group& g) { return g.lo.empty(); });
      groups.shrink_to_fit();
      std::sort(groups.begin(), groups.end(), Before<Group>);
      it->second.ordered = static_cast<uint32_t>(groups.size());
      if (groups.empty()) {
        it = lv.erase(it);
        continue;
      }
      bucket_bytes_ += BucketBytes(it->second);
      ++it;
    }
  }
}

size_t ColdIndex::bytes() const {
  // SparseIdMap: 16 bytes an id and its pages; a bucket: its ids' capacity, its
  // groups and a map node; sorted_; a tube: a hash node; an entry kept wide: a hash node.
  // Kept up to date as buckets change: a stats reply must not walk the buckets.
  return live_.bytes() + bucket_bytes_ + sorted_.capacity() * sizeof(uint64_t) +
         tubes_.size() * kHashNode + tubes_.bucket_count() * sizeof(void*) +
         wide_.size() * kHashNode + wide_.bucket_count() * sizeof(void*) + numbers_.bytes();
}

size_t ColdIndex::BytesByWalk() const {
  size_t buckets = 0;
  for (const Level& lv : levels_) {
    for (const auto& [start, b] : lv) buckets += BucketBytes(b);
  }
  return bytes() - bucket_bytes_ + buckets - live_.bytes() + live_.BytesByWalk();
}

}  // namespace stalkd::storage
