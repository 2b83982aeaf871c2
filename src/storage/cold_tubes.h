#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stalkd::engine {
class Tube;
}

namespace stalkd::storage {

// Two-byte numbers for the tubes that have jobs in a disk-tier index (docs/DISK-TIER.md), so
// that an index entry keeps a number instead of an 8-byte pointer. A tube takes a number when
// its first job comes in and gives it back when its last goes (the index counts them); a
// given-back number is reused. Both ways are O(1). Past 65,535 tubes at once there is no
// number (kNone): the index keeps such a job's tube aside, in full.
class TubeNumbers {
 public:
  static constexpr uint16_t kNone = 0xFFFF;

  uint16_t Take(const engine::Tube* t) {
    if (!free_.empty()) {
      const uint16_t n = free_.back();
      free_.pop_back();
      tubes_[n] = t;
      return n;
    }
    if (tubes_.size() >= kNone) return kNone;
    tubes_.push_back(t);
    return static_cast<uint16_t>(tubes_.size() - 1);
  }
  void Give(uint16_t n) {
    if (n == kNone) return;
    tubes_[n] = nullptr;
    free_.push_back(n);
  }
  const engine::Tube* TubeOf(uint16_t n) const { return tubes_[n]; }
  size_t bytes() const {
    return tubes_.capacity() * sizeof(const engine::Tube*) + free_.capacity() * sizeof(uint16_t);
  }

 private:
  std::vector<const engine::Tube*> tubes_;  // by number; null: free
  std::vector<uint16_t> free_;
};

// Appends to *out, in id order, the ids in [from, below) of an index's map of entries (a
// SparseIdMap) whose tube, as tube_of(id, entry) tells, is t (list-jobs): looks at each id
// of the range, not at t's other entries.
template <typename Map, typename TubeOf>
void AppendIdsOfTube(const Map& live, TubeOf tube_of, const engine::Tube* t, uint64_t from,
                     uint64_t below, std::vector<uint64_t>* out) {
  live.ForRange(from, below, [&](uint64_t id, const auto& entry) {
    if (tube_of(id, entry) == t) out->push_back(id);
  });
}

}  // namespace stalkd::storage
