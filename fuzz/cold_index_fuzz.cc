// Fuzzes the disk tier's two indexes (storage/cold_index.h, storage/cold_ready_index.h)
// against plain models: the input is a program of operations (adds, removes, takes of due
// or earliest entries, queries), each answer compared with the model's. The decoder keeps
// to the APIs' preconditions (an added id is absent; TakeDue's `until` never goes back
// before a horizon given) and to the documented order: TakeDue hands out the first due
// entries in (deadline, id) order, all of them unless a split is left half done (a small
// split_work); TakeEarliest a tube's first by (deadline, id); the ready index a tube's
// first by (priority, id). Floor and NextDeadline only promise a bound.
//
// Input: byte 0 chooses split_work (default, or 1..64), byte 1 where ids start; then
// operations, one byte each and their arguments.
#define FUZZ_NAME "cold_index_fuzz"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "fuzz_support.h"
#include "storage/cold_index.h"
#include "storage/cold_ready_index.h"

namespace {

using stalkd::Nanos;
using stalkd::fuzz::Input;
using stalkd::storage::ColdIndex;
using stalkd::storage::ColdReadyIndex;
using Entry = ColdIndex::Entry;
using ReadyEntry = ColdReadyIndex::Entry;
using ReadyKey = ColdReadyIndex::Key;
using Tube = stalkd::engine::Tube;

constexpr Nanos kSecond = stalkd::kSecond;
constexpr Nanos kForever = stalkd::kForever;
constexpr int kTubes = 5;
constexpr size_t kMaxOps = 3000;
// Adds to the delayed index at most: with the default split_work (16,384) each TakeDue then
// finishes every split it starts (an id moves through at most 5 levels), so it takes
// exactly what is due.
constexpr size_t kMaxColdAdds = 3000;
constexpr size_t kMaxReadyAdds = 6000;
constexpr size_t kDefaultSplitWork = 16384;

// Fake tube pointers, never dereferenced (as the unit tests do).
const Tube* TubeNo(int i) { return reinterpret_cast<const Tube*>(0x1000 + 16 * i); }

uint64_t U64(Input& in, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) v |= uint64_t{in.Byte()} << (8 * i);
  return v;
}

bool Earlier(const Entry& a, const Entry& b) {
  return a.deadline != b.deadline ? a.deadline < b.deadline : a.id < b.id;
}

// The ready index's model: entries by id, and every (tube, priority, id) in one ordered set
// (a tube's first is the first of its range).
struct ReadyModel {
  using Key = std::tuple<const Tube*, uint32_t, uint64_t>;
  std::map<uint64_t, ReadyEntry> by_id;
  std::set<Key> keys;

  void Add(const ReadyEntry& e) {
    by_id[e.id] = e;
    keys.emplace(e.tube, e.pri, e.id);
  }
  void Remove(uint64_t id) {
    auto it = by_id.find(id);
    keys.erase(Key{it->second.tube, it->second.pri, id});
    by_id.erase(it);
  }
  // t's first (priority, id); false if it has none.
  bool First(const Tube* t, uint32_t* pri, uint64_t* id) const {
    auto it = keys.lower_bound(Key{t, 0, 0});
    if (it == keys.end() || std::get<0>(*it) != t) return false;
    *pri = std::get<1>(*it);
    *id = std::get<2>(*it);
    return true;
  }
  // Jobs of t (all with t == nullptr), and of those the urgent ones (priority below 1024).
  std::pair<size_t, size_t> Counts(const Tube* t) const {
    size_t n = 0, urgent = 0;
    for (const Key& k : keys) {
      if (t != nullptr && std::get<0>(k) != t) continue;
      n++;
      urgent += std::get<1>(k) < 1024;
    }
    return {n, urgent};
  }
  std::set<const Tube*> Tubes() const {
    std::set<const Tube*> out;
    for (const Key& k : keys) out.insert(std::get<0>(k));
    return out;
  }
};

class Program {
 public:
  Program(const uint8_t* data, size_t size) : in_(data, size) {
    const uint8_t w = in_.Byte();
    split_work_ = w < 128 ? kDefaultSplitWork : 1 + (w & 63);
    const uint64_t bases[] = {1, (uint64_t{1} << 32) - 600, (uint64_t{1} << 40) + 12345,
                              uint64_t{1} << 63};
    base_ = bases[in_.Byte() & 3];
  }

  void Run() {
    ColdIndex index(split_work_);
    index_ = &index;
    for (size_t op = 0; op < kMaxOps && !in_.empty(); op++) {
      Step();
      FUZZ_CHECK(index.size() == model_.size(), "size %zu, model %zu", index.size(), model_.size());
      FUZZ_CHECK(ready_.size() == ready_model_.by_id.size(), "ready size %zu, model %zu",
                 ready_.size(), ready_model_.by_id.size());
    }
    // Everything left comes out in order.
    CheckTakeDue(kForever, 1 + in_.Byte(), true);
    // Only deadlines of kForever itself are never due.
    for (const auto& [id, e] : model_) {
      FUZZ_CHECK(e.deadline == kForever && index.Remove(id), "left after TakeDue(kForever)");
    }
    model_.clear();
    FUZZ_CHECK(model_.empty() && index.size() == 0 && index.wide() == 0, "left %zu", index.size());
    FUZZ_CHECK(index.NextDeadline() == kForever, "NextDeadline of an empty index");
    FUZZ_CHECK(index.bytes() == index.BytesByWalk(), "bytes");
    index_ = nullptr;
  }

 private:
  // An id near base_: low bits from the input, now and then across 2^32.
  uint64_t Id() {
    const uint64_t x = U64(in_, 2);
    return base_ + (x & 0x3ff) + (((x >> 10) & 3) << 32);
  }
  const Tube* AnyTube() { return TubeNo(in_.Byte() % kTubes); }
  // Deadlines near `now`, sometimes in the past, far ahead, or anywhere.
  Nanos Deadline() {
    switch (in_.Byte() & 7) {
      case 0:
        return now_ - static_cast<Nanos>(U64(in_, 4) % kSecond);
      case 1:
        return now_ + static_cast<Nanos>(in_.Byte() % 3) * kSecond;
      case 2:  // up to 136 years ahead (beanstalkd's delay is 32 bits of seconds)
        return now_ + static_cast<Nanos>(U64(in_, 4)) * kSecond + static_cast<Nanos>(in_.Byte());
      case 3:
        return static_cast<Nanos>(U64(in_, 8));
      default:
        return now_ + static_cast<Nanos>(U64(in_, 5));  // up to 18 minutes ahead
    }
  }
  Nanos Created(Nanos d) {
    switch (in_.Byte() & 3) {
      case 0:
        return static_cast<Nanos>(U64(in_, 8));
      case 1:
        return d - static_cast<Nanos>(U64(in_, 4) % kSecond);
      default: {  // as a put with a delay: seconds, plus a few µs
        const uint64_t s = U64(in_, 3);
        const Nanos back = static_cast<Nanos>(s) * kSecond + in_.Byte() * 20;
        return d >= INT64_MIN + back ? d - back : d;
      }
    }
  }

  void AddCold(uint64_t id) {
    if (cold_adds_ >= kMaxColdAdds || model_.count(id)) return;
    cold_adds_++;
    const Nanos d = Deadline();
    const Entry e{id, d, Created(d), AnyTube()};
    index_->Add(e);
    model_[id] = e;
  }

  void AddReady(uint64_t id, uint32_t pri, const Tube* t) {
    if (ready_adds_ >= kMaxReadyAdds || ready_model_.by_id.count(id)) return;
    ready_adds_++;
    const ReadyEntry e{id, pri, static_cast<Nanos>(id * 7), t};
    ready_.Add(e);
    ready_model_.Add(e);
  }

  uint32_t Pri() {
    const uint32_t pris[] = {0, 1, 1023, 1024, 5000, 0xFFFFFFFFu};
    const uint8_t b = in_.Byte();
    return b < 192 ? pris[b % 6] : static_cast<uint32_t>(U64(in_, 4));
  }

  // TakeDue(until, max): the first due in order; all of them (up to max) unless splits are
  // left (a small split_work), and then it says to call again.
  void CheckTakeDue(Nanos until, size_t max, bool drain) {
    horizon_ = std::max(horizon_, until);
    std::vector<Entry> due;
    for (const auto& [id, e] : model_) {
      if (e.deadline < until) due.push_back(e);
    }
    std::sort(due.begin(), due.end(), Earlier);
    std::vector<Entry> out;
    size_t calls = 0;
    bool more;
    do {
      FUZZ_CHECK(++calls < 100000, "TakeDue makes no progress");
      const size_t before = out.size();
      more = index_->TakeDue(until, max, &out);
      const size_t got = out.size() - before;
      FUZZ_CHECK(got <= max, "TakeDue gave %zu, max %zu", got, max);
      FUZZ_CHECK(out.size() <= due.size() && std::equal(out.begin(), out.end(), due.begin()),
                 "TakeDue(%lld, %zu): not the first due in (deadline, id) order",
                 static_cast<long long>(until), max);
      const size_t left = due.size() - before;
      if (got < std::min(left, max) || left > max) {
        FUZZ_CHECK(more, "TakeDue stopped short without saying so");
      }
      if (split_work_ >= kDefaultSplitWork) {
        FUZZ_CHECK(got == std::min(left, max), "TakeDue gave %zu of %zu due (max %zu)", got, left,
                   max);
        FUZZ_CHECK(more == (left > max), "TakeDue says more=%d with %zu due, max %zu", more, left,
                   max);
      }
    } while (drain && more);
    for (const Entry& e : out) model_.erase(e.id);
    if (drain) FUZZ_CHECK(out.size() == due.size(), "drained %zu of %zu", out.size(), due.size());
  }

  void CheckQueries() {
    // Per tube (by its number), the model's count and earliest deadline, in one pass.
    std::array<size_t, kTubes> count{};
    std::array<Nanos, kTubes> min;
    min.fill(kForever);
    Nanos all_min = kForever;
    for (const auto& [id, e] : model_) {
      const auto i = static_cast<size_t>((reinterpret_cast<uintptr_t>(e.tube) - 0x1000) / 16);
      count[i]++;
      min[i] = std::min(min[i], e.deadline);
      all_min = std::min(all_min, e.deadline);
    }
    for (int i = 0; i < kTubes; i++) {
      const Tube* t = TubeNo(i);
      FUZZ_CHECK(index_->Count(t) == count[i], "Count %zu, model %zu", index_->Count(t), count[i]);
      FUZZ_CHECK(index_->Floor(t) <= min[i], "Floor above the earliest deadline");
      if (count[i] == 0) FUZZ_CHECK(index_->Floor(t) == kForever, "Floor of a tube with none");
    }
    FUZZ_CHECK(index_->NextDeadline() <= all_min, "NextDeadline after the earliest deadline");
    if (model_.empty()) FUZZ_CHECK(index_->NextDeadline() == kForever, "NextDeadline when empty");
  }

  void CheckReady() {
    for (int i = 0; i < kTubes; i++) {
      const Tube* t = TubeNo(i);
      uint32_t pri = 0;
      uint64_t id = 0;
      ReadyKey first{};
      const bool has = ready_model_.First(t, &pri, &id);
      FUZZ_CHECK(ready_.First(t, &first) == has, "ready First");
      if (has) {
        FUZZ_CHECK(first.pri == pri && first.id() == id,
                   "ready First: (%u, %llu), model (%u, %llu)", first.pri,
                   static_cast<unsigned long long>(first.id()), pri,
                   static_cast<unsigned long long>(id));
      }
      const auto [count, urgent] = ready_model_.Counts(t);
      FUZZ_CHECK(ready_.Count(t) == count, "ready Count %zu, model %zu", ready_.Count(t), count);
      FUZZ_CHECK(ready_.Urgent(t) == urgent, "ready Urgent %zu, model %zu", ready_.Urgent(t),
                 urgent);
    }
    FUZZ_CHECK(ready_.urgent() == ready_model_.Counts(nullptr).second, "ready urgent");
    std::set<const Tube*> tubes;
    ready_.ForEachTube([&](const Tube* t) { tubes.insert(t); });
    FUZZ_CHECK(tubes == ready_model_.Tubes(), "ForEachTube: %zu tubes, model %zu", tubes.size(),
               ready_model_.Tubes().size());
  }

  void Step() {
    const uint8_t op = in_.Byte();
    switch (op % 16) {
      case 0:
      case 1:
        AddCold(Id());
        break;
      case 2: {  // a run of adds (a demotion round), into one tube's neighbourhood
        const uint64_t first = Id();
        const size_t n = 1 + in_.Byte() % 64;
        for (size_t i = 0; i < n; i++) AddCold(first + i);
        break;
      }
      case 3: {  // remove, there or not
        const uint64_t id = Id();
        Entry got;
        auto it = model_.find(id);
        const bool had = it != model_.end();
        FUZZ_CHECK(index_->Remove(id, in_.Byte() & 1 ? &got : nullptr) == had, "Remove");
        if (had) {
          Entry probe;
          FUZZ_CHECK(!index_->Get(id, &probe), "Get after Remove");
          model_.erase(it);
        }
        break;
      }
      case 4: {  // Get and Contains
        const uint64_t id = Id();
        Entry got;
        auto it = model_.find(id);
        FUZZ_CHECK(index_->Get(id, &got) == (it != model_.end()), "Get");
        FUZZ_CHECK(index_->Contains(id) == (it != model_.end()), "Contains");
        if (it != model_.end()) {
          FUZZ_CHECK(got == it->second, "Get(%llu): deadline %lld created %lld, model %lld %lld",
                     static_cast<unsigned long long>(id), static_cast<long long>(got.deadline),
                     static_cast<long long>(got.created),
                     static_cast<long long>(it->second.deadline),
                     static_cast<long long>(it->second.created));
        }
        break;
      }
      case 5: {  // time passes; take what falls due within the lead
        const uint8_t b = in_.Byte();
        Nanos step = static_cast<Nanos>(b & 0x7f) * (kSecond / 16);
        if (b & 0x80) step = static_cast<Nanos>(U64(in_, 6)) * 16;  // a long sleep
        if (now_ < INT64_MAX / 2) now_ += step;
        const size_t max = 1 + in_.Byte() % 64;
        CheckTakeDue(std::max(horizon_, now_ + 2 * kSecond), max, false);
        break;
      }
      case 6: {  // a tube's earliest n, in order
        const Tube* t = AnyTube();
        const size_t n = in_.Byte() % 8;
        std::set<std::pair<Nanos, uint64_t>> order;  // t's entries by (deadline, id)
        for (const auto& [id, e] : model_) {
          if (e.tube == t) order.emplace(e.deadline, id);
        }
        std::vector<Entry> want;
        for (auto it = order.begin(); it != order.end() && want.size() < n; ++it) {
          want.push_back(model_.at(it->second));
        }
        std::vector<Entry> out;
        index_->TakeEarliest(t, n, &out);
        FUZZ_CHECK(out == want, "TakeEarliest gave %zu, model %zu (or in another order)",
                   out.size(), want.size());
        for (const Entry& e : out) model_.erase(e.id);
        break;
      }
      case 7:
        CheckQueries();
        break;
      case 8: {  // the loop announces a horizon (as a start from the checkpoint does)
        const Nanos h = now_ + static_cast<Nanos>(in_.Byte()) * kSecond;
        horizon_ = std::max(horizon_, h);
        index_->SetHorizon(h);
        break;
      }
      case 9:
        FUZZ_CHECK(index_->bytes() == index_->BytesByWalk(), "bytes %zu, by walk %zu",
                   index_->bytes(), index_->BytesByWalk());
        FUZZ_CHECK(ready_.bytes() == ready_.BytesByWalk(), "ready bytes %zu, by walk %zu",
                   ready_.bytes(), ready_.BytesByWalk());
        break;
      case 10:
      case 11: {  // ready: add one, or a run
        const size_t n = op % 16 == 11 ? 1 + U64(in_, 2) % 1200 : 1;
        const uint64_t first = Id();
        const uint32_t pri = Pri();
        const Tube* t = AnyTube();
        const bool same_pri = in_.Byte() & 1;
        for (size_t i = 0; i < n; i++) AddReady(first + i, same_pri ? pri : Pri(), t);
        break;
      }
      case 12: {  // ready: remove, there or not
        const uint64_t id = Id();
        ReadyEntry got;
        auto it = ready_model_.by_id.find(id);
        const bool had = it != ready_model_.by_id.end();
        FUZZ_CHECK(ready_.Remove(id, &got) == had, "ready Remove");
        if (had) {
          FUZZ_CHECK(got == it->second, "ready Remove: entry differs");
          ready_model_.Remove(id);
        }
        FUZZ_CHECK(!ready_.Contains(id), "ready Contains after Remove");
        break;
      }
      case 13: {  // ready: take a tube's first ones
        const Tube* t = AnyTube();
        const size_t n = 1 + U64(in_, 2) % 700;
        for (size_t i = 0; i < n; i++) {
          ReadyEntry got;
          uint32_t pri = 0;
          uint64_t want = 0;
          if (!ready_model_.First(t, &pri, &want)) {
            FUZZ_CHECK(!ready_.TakeFirst(t, &got), "ready TakeFirst of a tube with none");
            break;
          }
          FUZZ_CHECK(ready_.TakeFirst(t, &got), "ready TakeFirst");
          FUZZ_CHECK(got == ready_model_.by_id.at(want), "ready TakeFirst: %llu, model %llu",
                     static_cast<unsigned long long>(got.id),
                     static_cast<unsigned long long>(want));
          ready_model_.Remove(want);
        }
        break;
      }
      case 14:
        CheckReady();
        break;
      default: {  // ready: Contains
        const uint64_t id = Id();
        FUZZ_CHECK(ready_.Contains(id) == (ready_model_.by_id.count(id) != 0), "ready Contains");
        break;
      }
    }
  }

  Input in_;
  size_t split_work_ = kDefaultSplitWork;
  uint64_t base_ = 1;
  Nanos now_ = 0;
  Nanos horizon_ = INT64_MIN;  // the latest `until` asked or announced
  size_t cold_adds_ = 0;
  size_t ready_adds_ = 0;
  ColdIndex* index_ = nullptr;
  std::map<uint64_t, Entry> model_;
  ColdReadyIndex ready_;
  ReadyModel ready_model_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 15) return 0;
  Program(data, size).Run();
  return 0;
}
