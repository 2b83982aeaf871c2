#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "base/sparse_id_map.h"
#include "storage/cold_tubes.h"

namespace stalkd::engine {
class Tube;
}

namespace stalkd::storage {

// The disk tier's index of the buried jobs kept only in the binlog (docs/DISK-TIER.md): per
// tube, their (bury number, id) slots in bury order (Engine::BurySeq) in a deque, so that the
// tube's first buried job on disk is at its front; and per job its tube (a two-byte number,
// cold_tubes.h) and creation time (16 bytes in a SparseIdMap), so that a job named by id is
// found. A job removed by id leaves its slot behind (skipped when reached; the deque is
// compacted once such slots outnumber the live ones). A slot is added at its place by its
// bury number: at either end in O(1) (demotion takes a tube's newest first, and a newer
// bury comes after every job on disk), elsewhere by a move within the deque. The slots above
// every older one on disk go into a second deque (`newer`), so that a pile buried after
// them and demoted newest first goes in at its front, in O(1) too, not each just below the
// last (quadratic).
class ColdBuriedIndex {
 public:
  struct Entry {
    uint64_t id = 0;
    uint64_t seq = 0;  // its place in its tube's bury order
    Nanos created = 0;
    const engine::Tube* tube = nullptr;
    bool operator==(const Entry&) const = default;
  };

  // id must be absent.
  void Add(const Entry& e);
  // Removes id if present, with its entry in *out (may be null).
  bool Remove(uint64_t id, Entry* out = nullptr);
  bool Contains(uint64_t id) const { return live_.Find(id) != nullptr; }
  bool Get(uint64_t id, Entry* out) const;

  size_t size() const { return live_.size(); }
  size_t Count(const engine::Tube* t) const;
  // t's first entry in bury order; false if t has none here. Drops the slots left behind
  // in front of it (hence not const).
  bool First(const engine::Tube* t, Entry* out);
  // Removes t's first entry into *out; false if t has none here.
  bool TakeFirst(const engine::Tube* t, Entry* out);
  // Bounds of the ids here (SparseIdMap::lo and hi: exact unless an end's page emptied).
  uint64_t lo() const { return live_.lo(); }
  uint64_t hi() const { return live_.hi(); }
  // Appends the ids of t's entries with from <= id < below to *out (AppendIdsOfTube).
  void ListIds(const engine::Tube* t, uint64_t from, uint64_t below,
               std::vector<uint64_t>* out) const {
    AppendIdsOfTube(
        live_, [this](uint64_t id, const Meta& m) { return TubeOf(id, m); }, t, from, below, out);
  }

  // Memory held, estimated from the containers' sizes (kept as they change: O(1)).
  size_t bytes() const;
  // The same, summed over every tube: O(tubes), for tests of bytes().
  size_t BytesByWalk() const;
  // Slots moved within or between the deques so far (inserts between others, compactions),
  // for tests of Add's cost.
  uint64_t moved() const { return moved_; }

 private:
  // A job's creation time, and its bury number (the low 48 bits) with its tube's number
  // (the high 16; TubeNumbers::kNone: in wide_tubes_).
  struct Meta {
    Nanos created;
    uint64_t seq_tube;
    uint64_t seq() const { return seq_tube & kSeqMask; }
    uint16_t tube() const { return static_cast<uint16_t>(seq_tube >> 48); }
  };
  static_assert(sizeof(Meta) == 16);
  static constexpr uint64_t kSeqMask = (uint64_t{1} << 48) - 1;
  struct Slot {
    uint64_t seq;
    uint64_t id;
  };
  struct PerTube {
    std::deque<Slot> slots;  // by seq; includes slots left behind by removals
    std::deque<Slot> newer;  // the same, every one above every one of slots
    size_t count = 0;        // live slots (of both)
    uint16_t number = TubeNumbers::kNone;
  };
  const engine::Tube* TubeOf(uint64_t id, const Meta& m) const;
  // Whether s is the slot of a job here (not one left behind by a removal).
  bool Live(const Slot& s) const {
    const Meta* m = live_.Find(s.id);
    return m && m->seq() == s.seq;
  }
  static size_t TubeBytes(const PerTube& pt);
  // Puts s into q at its place by seq (after slots of the same seq).
  void Insert(std::deque<Slot>* q, const Slot& s);
  // Moves newer's slots to the end of slots.
  void Merge(PerTube* pt);
  void Compact(PerTube* pt);
  // After a removal from pt (of tube t): compacts it, or forgets it once it holds none.
  void Removed(PerTube* pt, const engine::Tube* t);
  static constexpr size_t kHashNode = 48;                    // an unordered_map node (small value)
  static constexpr size_t kTubeNode = sizeof(PerTube) + 32;  // a tubes_ node and its header

  SparseIdMap<Meta> live_;
  std::unordered_map<const engine::Tube*, PerTube> tubes_;
  std::unordered_map<uint64_t, const engine::Tube*> wide_tubes_;  // jobs of tubes with no number
  TubeNumbers numbers_;
  size_t tube_bytes_ = 0;  // TubeBytes of every tube
  uint64_t moved_ = 0;
};

}  // namespace stalkd::storage
