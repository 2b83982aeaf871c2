#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "base/sparse_id_map.h"
#include "storage/cold_tubes.h"

namespace stalkd::engine {
class Tube;
}

namespace stalkd::storage {

// The disk tier's index of the ready jobs kept only in the binlog (docs/DISK-TIER.md): per
// tube, their (priority, id) keys in order, in sorted chunks of at most kChunk keys (8 bytes
// a key: a chunk's keys share the high half of their ids), so that the tube's first job on
// disk is found at once and a job is added or removed with one binary search and a move
// within one chunk; and per job its tube (a two-byte number, cold_tubes.h), priority and
// creation time (16 bytes in a SparseIdMap), so that a job named by id is found.
class ColdReadyIndex {
 public:
  struct Entry {
    uint64_t id = 0;
    uint32_t pri = 0;
    Nanos created = 0;
    const engine::Tube* tube = nullptr;
    bool operator==(const Entry&) const = default;
  };
  // A job's place in its tube's ready order: priority, then id (beanstalkd's order).
  struct Key {
    uint32_t pri;
    uint32_t id_hi;
    uint32_t id_lo;
    static Key Of(uint32_t pri, uint64_t id) {
      return {pri, static_cast<uint32_t>(id >> 32), static_cast<uint32_t>(id)};
    }
    uint64_t id() const { return uint64_t{id_hi} << 32 | id_lo; }
    bool operator<(const Key& o) const {
      if (pri != o.pri) return pri < o.pri;
      return id_hi != o.id_hi ? id_hi < o.id_hi : id_lo < o.id_lo;
    }
    bool operator==(const Key&) const = default;
  };

  // id must be absent.
  void Add(const Entry& e);
  // Removes id if present, with its entry in *out (may be null).
  bool Remove(uint64_t id, Entry* out = nullptr);
  bool Contains(uint64_t id) const { return live_.Find(id) != nullptr; }
  // id's entry into *out, if present (the checkpoint, docs/DISK-TIER.md).
  bool Get(uint64_t id, Entry* out) const {
    const Meta* m = live_.Find(id);
    if (m) *out = Entry{id, m->pri, m->created, TubeOf(id, *m)};
    return m != nullptr;
  }

  size_t size() const { return live_.size(); }
  size_t urgent() const { return urgent_; }  // jobs with pri < 1024 (current-jobs-urgent)
  // Bounds of the ids here (SparseIdMap::lo and hi: exact unless an end's page emptied).
  uint64_t lo() const { return live_.lo(); }
  uint64_t hi() const { return live_.hi(); }
  // Appends the ids of t's entries with from <= id < below to *out (AppendIdsOfTube).
  void ListIds(const engine::Tube* t, uint64_t from, uint64_t below,
               std::vector<uint64_t>* out) const {
    AppendIdsOfTube(
        live_, [this](uint64_t id, const Meta& m) { return TubeOf(id, m); }, t, from, below, out);
  }
  size_t Count(const engine::Tube* t) const;
  size_t Urgent(const engine::Tube* t) const;
  // t's first key here (priority, then id); false if t has none here.
  bool First(const engine::Tube* t, Key* out) const;
  // Removes t's first entry into *out; false if t has none here.
  bool TakeFirst(const engine::Tube* t, Entry* out);
  // Calls fn(tube) for every tube with jobs here; fn must not change the index.
  template <typename Fn>
  void ForEachTube(Fn fn) const {
    for (const auto& [t, pt] : tubes_) fn(t);
  }

  // Memory held, estimated from the containers' sizes (kept as they change: O(1)).
  size_t bytes() const;
  // The same, summed over every chunk: O(chunks), for tests of bytes().
  size_t BytesByWalk() const;

  static constexpr size_t kChunk = 512;  // keys per chunk at most (split in two beyond)

 private:
  struct Meta {
    Nanos created;
    uint32_t pri;
    uint16_t tube;  // its number; TubeNumbers::kNone: in wide_tubes_
  };
  static_assert(sizeof(Meta) == 16);
  // A key in a chunk: its priority and the low half of its id.
  struct Slot {
    uint32_t pri;
    uint32_t lo;
  };
  // Consecutive keys of a tube whose ids have the same high half (a tube's keys are cut into
  // more chunks only where that changes, once in 2^32 ids).
  struct Chunk {
    uint32_t hi;
    std::vector<Slot> keys;  // sorted, never empty
    Key At(size_t i) const { return Key{keys[i].pri, hi, keys[i].lo}; }
    Key Last() const { return At(keys.size() - 1); }
    size_t UpperBound(const Key& k) const;
    size_t LowerBound(const Key& k) const;
  };
  struct PerTube {
    std::vector<Chunk> chunks;  // sorted
    size_t count = 0;
    size_t urgent = 0;
    uint16_t number = TubeNumbers::kNone;
  };
  const engine::Tube* TubeOf(uint64_t id, const Meta& m) const {
    return m.tube == TubeNumbers::kNone ? wide_tubes_.at(id) : numbers_.TubeOf(m.tube);
  }
  static size_t TubeBytes(const PerTube& pt);
  static constexpr size_t kHashNode = 48;                    // an unordered_map node (small value)
  static constexpr size_t kTubeNode = sizeof(PerTube) + 32;  // a tubes_ node and its header
  // The chunk that holds (or would hold) k: the first whose last key is not below k, else
  // the last one.
  static size_t ChunkOf(const PerTube& pt, const Key& k);
  void Dropped(PerTube* pt, const engine::Tube* t, uint32_t pri);
  void Insert(PerTube* pt, size_t c, size_t at, Slot s);
  Chunk Cut(Chunk* ch, size_t at);
  void InsertChunk(PerTube* pt, size_t c, Chunk ch);

  SparseIdMap<Meta> live_;
  std::unordered_map<const engine::Tube*, PerTube> tubes_;
  std::unordered_map<uint64_t, const engine::Tube*> wide_tubes_;  // jobs of tubes with no number
  TubeNumbers numbers_;
  size_t urgent_ = 0;
  size_t tube_bytes_ = 0;  // TubeBytes of every tube
};

}  // namespace stalkd::storage
