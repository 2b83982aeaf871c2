#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "base/sparse_id_map.h"
#include "storage/cold_tubes.h"

namespace stalkd::engine {
class Tube;
}

namespace stalkd::storage {

// The disk tier's index of the delayed jobs kept only in the binlog (docs/DISK-TIER.md):
// for each, its id, tube and times (16 bytes in a SparseIdMap), and time buckets of ids (4
// bytes an id), so that the jobs falling due soon are found without looking at the others. Where
// a job's record is, the binlog knows (its per-job entry, which every live job has anyway).
//
// Buckets come in levels: a level-L bucket holds the deadlines of a window of 2^(30+6L) ns
// (level 0: about 1.07 s; 1: 69 s; 2: 73 min; 3: 3.3 days; 4: 208 days; 5: 36 years). A job
// goes into the coarsest window that starts more than its own width after the horizon (the
// latest `until` of TakeDue), so that far deadlines share a few large buckets; a bucket is
// split into finer ones once the horizon comes within its width (a bounded number of ids per
// TakeDue), and level-0 buckets are sorted by deadline when they fall due. So there are a
// few hundred buckets, not one a second of deadlines.
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

  // split_work: ids moved to finer buckets per TakeDue at most (tests make it small).
  explicit ColdIndex(size_t split_work = 16384) : split_work_(split_work) {}

  // id must be absent.
  void Add(const Entry& e);
  // Removes id if present, with its entry in *out (may be null).
  bool Remove(uint64_t id, Entry* out = nullptr);
  bool Contains(uint64_t id) const { return live_.Find(id) != nullptr; }
  // id's entry into *out, if present (the checkpoint, docs/DISK-TIER.md).
  bool Get(uint64_t id, Entry* out) const {
    const Meta* m = live_.Find(id);
    if (m) *out = Decode(id, *m);
    return m != nullptr;
  }

  size_t size() const { return live_.size(); }
  size_t Count(const engine::Tube* t) const;
  // Bounds of the ids here (SparseIdMap::lo and hi: exact unless an end's page emptied).
  uint64_t lo() const { return live_.lo(); }
  uint64_t hi() const { return live_.hi(); }
  // Appends the ids of t's entries with from <= id < below to *out (AppendIdsOfTube).
  void ListIds(const engine::Tube* t, uint64_t from, uint64_t below,
               std::vector<uint64_t>* out) const {
    AppendIdsOfTube(
        live_, [this](uint64_t id, const Meta& m) { return TubeOf(id, m); }, t, from, below, out);
  }
  // A deadline no later than t's earliest (kForever if t has none here).
  Nanos Floor(const engine::Tube* t) const;
  // When TakeDue next has work (kForever if empty): no later than the earliest deadline here
  // (exact once TakeDue has sorted its bucket), and no later than when a bucket is to be
  // split.
  Nanos NextDeadline() const;

  // Removes up to max entries with deadlines before `until`, in (deadline, id) order, and
  // appends them to *out; splits the buckets the horizon has come near. Returns whether it
  // stopped with work left (entries due before `until`, or ids to move): call it again.
  bool TakeDue(Nanos until, size_t max, std::vector<Entry>* out);
  // Tells the index that TakeDue will be asked for jobs due before `until` from now on, so
  // that jobs added next go straight into buckets of their width (a start from a
  // checkpoint adds them all before the first TakeDue).
  void SetHorizon(Nanos until) { horizon_ = std::max(horizon_, until); }
  // Removes t's n earliest entries by (deadline, id) and appends them to *out in that order.
  // Looks at t's ids in the buckets it goes through (and at those kept wide, and at the ids
  // of the level-0 bucket TakeDue is taking from), not at other tubes'.
  void TakeEarliest(const engine::Tube* t, size_t n, std::vector<Entry>* out);

  // Memory held, estimated from the containers' sizes (kept as they change: O(1)).
  size_t bytes() const;
  // The same, summed over every bucket: O(buckets), for tests of bytes().
  size_t BytesByWalk() const;
  // Ids TakeEarliest has looked at, in all (for tests of its bound).
  uint64_t looked() const { return looked_; }
  // Entries whose creation time or tube did not fit in their 16 bytes (kept aside, in full).
  size_t wide() const { return wide_.size(); }

  static constexpr int kLevels = 6;
  static constexpr int Shift(int level) { return 30 + 6 * level; }

 private:
  // 16 bytes: the deadline, and in `packed` the tube's number (high 16 bits) and the
  // creation time as its age (deadline - created) in 48 bits, in one of two forms (exact
  // both; cold_index.cc): in units of 16 ns up to 26 days, for a creation time that is a
  // multiple of 16 ns as a Job's is (a job released with a delay: its deadline is at any
  // nanosecond), or whole seconds up to 194 days with nanoseconds below them up to 8.4 ms (a
  // job put with a delay: created + delay + the few µs between them). Anything else (kNone
  // as the number) is kept in wide_.
  struct Meta {
    Nanos deadline;
    uint64_t packed;
  };
  static_assert(sizeof(Meta) == 16);
  struct Wide {
    Nanos created;
    const engine::Tube* tube;
  };
  struct PerTube {
    size_t count = 0;
    Nanos floor = kForever;
    uint16_t number = TubeNumbers::kNone;
  };
  // A bucket's ids, grouped by their tube's number and their high 32 bits (nearly always
  // one group a tube), so that a tube's earliest are found among its own ids.
  struct Group {
    uint32_t hi;
    uint16_t number;  // in the padding: a Group is 32 bytes either way
    std::vector<uint32_t> lo;
  };
  static_assert(sizeof(Group) == 32);
  // Its groups: the first `ordered` by (number, hi), the rest (fewer than about the square
  // root of those) as they came, merged in past that, so that adding a group costs
  // O(sqrt(groups)) however many tubes share the bucket.
  struct Bucket {
    std::vector<Group> groups;
    uint32_t ordered = 0;
    bool splitting = false;  // its ids are being moved to finer buckets
    bool empty() const { return groups.empty(); }
  };
  using Level = std::map<Nanos, Bucket>;  // by window start

  Entry Decode(uint64_t id, const Meta& m) const;
  const engine::Tube* TubeOf(uint64_t id, const Meta& m) const;
  static Nanos Start(Nanos deadline, int level) {
    return (deadline >> Shift(level)) << Shift(level);
  }
  // Whether id's live entry has its deadline in the window (level, start).
  const Meta* LiveIn(uint64_t id, int level, Nanos start) const;
  static uint16_t NumberOf(const Meta& m);  // its tube's number (kNone: kept wide)
  void Place(uint64_t id, Nanos deadline, uint16_t number);
  void Push(Bucket* b, uint64_t id, uint16_t number);
  // Calls f(group) for each of b's groups of tube number `number`.
  template <typename F>
  static void ForGroups(const Bucket& b, uint16_t number, F f);
  void EraseBucket(int level, Level::iterator it);
  bool SplitFirst(int level, size_t* work);
  void SortFirst();
  void Unsort();
  void Forget(uint64_t id, const Meta& m);
  void Rebuild();
  static size_t BucketBytes(const Bucket& b);
  static constexpr Nanos kNoBucket = INT64_MIN;
  static constexpr size_t kBucketNode = 80;  // a map node with its Bucket, and its header
  static constexpr size_t kHashNode = 48;    // an unordered_map node (small value)

  SparseIdMap<Meta> live_;
  std::unordered_map<uint64_t, Wide> wide_;
  std::array<Level, kLevels> levels_;
  std::unordered_map<const engine::Tube*, PerTube> tubes_;
  TubeNumbers numbers_;
  const size_t split_work_;
  Nanos horizon_ = INT64_MIN;  // the latest `until` of TakeDue
  size_t slots_ = 0;           // ids in buckets and sorted_, stale ones included
  size_t bucket_bytes_ = 0;    // BucketBytes of every bucket
  // The level-0 bucket TakeDue has sorted by deadline (its ids moved here), and how far
  // into it it has taken.
  Nanos sorted_start_ = kNoBucket;
  std::vector<uint64_t> sorted_;
  size_t sorted_pos_ = 0;
  uint64_t looked_ = 0;
  // The bucket Place last pushed to (cleared when a bucket goes or starts splitting).
  Bucket* last_ = nullptr;
  int last_level_ = 0;
  Nanos last_start_ = 0;
};

}  // namespace stalkd::storage
