// Fuzzes the disk tier's index of buried jobs (storage/cold_buried_index.h) against a plain
// model: per tube, its entries in bury order. The input is a program of operations (adds at
// any place of a tube's order, removes by id, looks and takes of a tube's first, queries,
// list-jobs ranges), each answer compared with the model's. The decoder keeps to the API's
// preconditions and to what the engine does: an added id is absent; a job never changes
// tube; a bury number belongs to one job for good (the engine hands out a new one a bury; a
// job that comes back from disk keeps its own and may go out again with it, leaving a slot
// behind that the index must skip or keep as one).
//
// Input: operations, one byte each and their arguments.
#define FUZZ_NAME "cold_buried_fuzz"

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "fuzz_support.h"
#include "storage/cold_buried_index.h"

namespace {

using stalkd::fuzz::Input;
using stalkd::storage::ColdBuriedIndex;
using Entry = ColdBuriedIndex::Entry;
using Tube = stalkd::engine::Tube;

constexpr int kTubes = 4;
// Fake tube addresses: the index only compares and hashes them.
const Tube* TubeNo(int i) { return reinterpret_cast<const Tube*>(0x1000 + 16 * i); }

class Program {
 public:
  Program(const uint8_t* d, size_t n) : in_(d, n) {}

  void Run() {
    while (!in_.empty()) Step();
    FUZZ_CHECK(index_.size() == by_id_.size(), "size %zu, model %zu", index_.size(), by_id_.size());
    FUZZ_CHECK(index_.bytes() == index_.BytesByWalk(), "bytes %zu, by walk %zu", index_.bytes(),
               index_.BytesByWalk());
    for (int i = 0; i < kTubes; i++) {  // every tube taken empty, in order
      const Tube* t = TubeNo(i);
      Entry got;
      for (auto it = order_[t].begin(); it != order_[t].end(); ++it) {
        FUZZ_CHECK(index_.TakeFirst(t, &got) && got == by_id_.at(it->second), "drain of tube %d",
                   i);
      }
      FUZZ_CHECK(!index_.TakeFirst(t, &got) && index_.Count(t) == 0, "tube %d left", i);
    }
    FUZZ_CHECK(index_.size() == 0, "left %zu", index_.size());
  }

 private:
  uint64_t Id() { return 1 + (uint64_t{in_.Byte()} << 8 | in_.Byte()) % 2048; }
  const Tube* AnyTube() { return TubeNo(in_.Byte() % kTubes); }

  void ExpectFirst(const Tube* t, bool take) {
    Entry got;
    const bool found = take ? index_.TakeFirst(t, &got) : index_.First(t, &got);
    auto& order = order_[t];
    FUZZ_CHECK(found == !order.empty(), "First/TakeFirst found %d, model %zu", found, order.size());
    if (!found) return;
    const Entry want = by_id_.at(order.begin()->second);
    FUZZ_CHECK(got == want, "first of a tube: id %llu seq %llu, model id %llu seq %llu",
               static_cast<unsigned long long>(got.id), static_cast<unsigned long long>(got.seq),
               static_cast<unsigned long long>(want.id), static_cast<unsigned long long>(want.seq));
    if (take) Forget(want);
  }

  void Forget(const Entry& e) {
    order_[e.tube].erase({e.seq, e.id});
    by_id_.erase(e.id);
  }

  void Step() {
    switch (in_.Byte() % 8) {
      case 0:
      case 1: {  // Add, at a place of the tube's order chosen by its bury number
        Entry e;
        e.id = Id();
        e.tube = AnyTube();
        e.seq = uint64_t{in_.Byte()} << 8 | in_.Byte();
        e.created = static_cast<stalkd::Nanos>(in_.Byte()) * 1000;
        if (by_id_.count(e.id)) return;
        if (auto t = tube_of_.find(e.id); t != tube_of_.end()) e.tube = t->second;
        if (auto o = owner_.find(e.seq); o != owner_.end() && o->second != e.id) return;
        tube_of_[e.id] = e.tube;
        owner_[e.seq] = e.id;
        index_.Add(e);
        by_id_[e.id] = e;
        order_[e.tube].insert({e.seq, e.id});
        return;
      }
      case 2: {  // Remove by id
        const uint64_t id = Id();
        Entry got;
        const bool removed = index_.Remove(id, &got);
        auto it = by_id_.find(id);
        FUZZ_CHECK(removed == (it != by_id_.end()), "Remove %llu: %d",
                   static_cast<unsigned long long>(id), removed);
        if (!removed) return;
        FUZZ_CHECK(got == it->second, "Remove %llu: entry differs",
                   static_cast<unsigned long long>(id));
        Forget(it->second);
        return;
      }
      case 3:
        ExpectFirst(AnyTube(), false);
        return;
      case 4:
        ExpectFirst(AnyTube(), true);
        return;
      case 5: {  // Get, Contains
        const uint64_t id = Id();
        Entry got;
        auto it = by_id_.find(id);
        const bool found = index_.Get(id, &got);
        FUZZ_CHECK(found == (it != by_id_.end()) && index_.Contains(id) == found, "Get %llu",
                   static_cast<unsigned long long>(id));
        FUZZ_CHECK(!found || got == it->second, "Get %llu: entry differs",
                   static_cast<unsigned long long>(id));
        return;
      }
      case 6: {  // Count, size
        const Tube* t = AnyTube();
        FUZZ_CHECK(index_.Count(t) == order_[t].size(), "Count %zu, model %zu", index_.Count(t),
                   order_[t].size());
        FUZZ_CHECK(index_.size() == by_id_.size(), "size");
        return;
      }
      default: {  // ListIds: the tube's ids in [from, below), in id order
        const Tube* t = AnyTube();
        const uint64_t from = Id();
        const uint64_t below = from + in_.Byte() * 8;
        std::vector<uint64_t> got;
        index_.ListIds(t, from, below, &got);
        std::vector<uint64_t> want;
        for (auto it = by_id_.lower_bound(from); it != by_id_.end() && it->first < below; ++it) {
          if (it->second.tube == t) want.push_back(it->first);
        }
        FUZZ_CHECK(got == want, "ListIds: %zu ids, model %zu", got.size(), want.size());
        return;
      }
    }
  }

  Input in_;
  ColdBuriedIndex index_;
  std::map<uint64_t, Entry> by_id_;
  std::map<uint64_t, const Tube*> tube_of_;  // every id added so far: its tube
  std::map<uint64_t, uint64_t> owner_;       // every bury number given so far: its id
  std::map<const Tube*, std::set<std::pair<uint64_t, uint64_t>>> order_;  // (seq, id)
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 15) return 0;
  Program(data, size).Run();
  return 0;
}
