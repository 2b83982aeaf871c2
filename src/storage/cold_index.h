#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "base/id_map.h"

namespace stalkd::engine {
class Tube;
}

namespace stalkd::storage {

// The disk tier's index of the delayed jobs kept only in the binlog (docs/DISK-TIER.md):
// for each, its id, tube and times, and time buckets (about a second wide) of ids, so
// that the jobs falling due soon are found without looking at the others. Where a job's
// record is, the binlog knows (its per-job entry, which every live job has anyway).
//
// A removed id stays in its bucket until the bucket is next visited (then it is dropped),
// so a remove costs no search; the stale ids are bounded by a rebuild when they outnumber
// the live ones.
class ColdIndex {
 public:
  struct Entry {
    uint64_t id = 0;
    Nanos deadline = 0;  // when it becomes ready, on the engine's clock
    Nanos created = 0;
    const engine::Tube* tube = nullptr;
    bool operator==(const Entry&) const = default;
  };

  // id must be absent.
  void Add(const Entry& e);
  // Removes id if present, with its entry in *out (may be null).
  bool Remove(uint64_t id, Entry* out = nullptr);
  bool Contains(uint64_t id) const { return live_.Find(id) != nullptr; }
  // id's entry into *out, if present (the checkpoint, docs/DISK-TIER.md).
  bool Get(uint64_t id, Entry* out) const {
    const Meta* m = live_.Find(id);
    if (m) *out = Entry{id, m->deadline, m->created, m->tube};
    return m != nullptr;
  }

  size_t size() const { return live_.size(); }
  size_t Count(const engine::Tube* t) const;
  // A deadline no later than t's earliest (kForever if t has none here).
  Nanos Floor(const engine::Tube* t) const;
  // A time no later than the earliest deadline here (kForever if empty): the earliest
  // deadline itself once TakeDue has looked at its bucket, else that bucket's start.
  Nanos NextDeadline() const;

  // Removes up to max entries with deadlines before `until` and appends them to *out (in
  // no particular order). Returns whether some such entries are left.
  bool TakeDue(Nanos until, size_t max, std::vector<Entry>* out);
  // Removes t's n earliest entries by (deadline, id) and appends them to *out in that order.
  void TakeEarliest(const engine::Tube* t, size_t n, std::vector<Entry>* out);

  // Memory held, estimated from the containers' sizes (kept as they change: O(1)).
  size_t bytes() const;
  // The same, summed over every bucket: O(buckets), for tests of bytes().
  size_t BytesByWalk() const;

  static constexpr int kBucketShift = 30;  // 2^30 ns: buckets of about 1.07 s

 private:
  struct Meta {
    Nanos deadline;
    Nanos created;
    const engine::Tube* tube;
  };
  struct PerTube {
    size_t count = 0;
    Nanos floor = kForever;
  };
  static int64_t BucketOf(Nanos deadline) { return deadline >> kBucketShift; }
  // Whether `id`, found in bucket b, is the live entry it stands for.
  const Meta* LiveIn(uint64_t id, int64_t b) const;
  void Forget(uint64_t id, const Meta& m);
  void Rebuild();
  void SortBucket(int64_t b, std::vector<uint64_t>* ids);
  static constexpr int64_t kNoBucket = INT64_MIN;
  static constexpr size_t kBucketNode = 64;  // a map node, with its vector's header
  static size_t BucketBytes(const std::vector<uint64_t>& ids) {
    return ids.capacity() * sizeof(uint64_t) + kBucketNode;
  }

  IdMap<Meta> live_;
  std::map<int64_t, std::vector<uint64_t>> buckets_;
  std::unordered_map<const engine::Tube*, PerTube> tubes_;
  size_t slots_ = 0;         // ids in buckets, stale ones included
  size_t bucket_bytes_ = 0;  // BucketBytes of every bucket
  // The bucket TakeDue has sorted by deadline, and how far into it it has taken.
  int64_t sorted_bucket_ = kNoBucket;
  size_t sorted_pos_ = 0;
};

}  // namespace stalkd::storage
