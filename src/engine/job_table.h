#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>

#include "engine/job.h"

namespace stalkd::engine {

// Job id -> Job*. Ids are handed out in increasing order, so the table is a window of pages
// indexed by id: lookup, insert and erase are O(1), and growing it never rehashes or copies
// entries. The window spans the live ids only: a page is freed once all of its ids are
// gone, and empty pages at either end of the window are dropped, so memory follows the range
// of live ids, not the largest id ever seen (a restored job with a huge id costs one page).
class JobTable {
 public:
  JobTable() = default;
  JobTable(const JobTable&) = delete;
  JobTable& operator=(const JobTable&) = delete;

  Job* Find(uint64_t id) const {
    uint64_t p = id >> kPageBits;
    if (p < base_ || p - base_ >= pages_.size()) return nullptr;
    const Page* page = pages_[p - base_].get();
    return page ? page->slots[id & kPageMask] : nullptr;
  }

  // id must not be present.
  void Insert(Job* j);
  // Removes id if present.
  void Erase(uint64_t id);

  size_t size() const { return size_; }
  // The ids Scan spans: from the first id of the page of the lowest live id to the end of the
  // page of the highest (begin == end if none), in pages of page_ids() ids.
  uint64_t span_begin() const { return pages_.empty() ? 0 : base_ << kPageBits; }
  uint64_t span_end() const { return pages_.empty() ? 0 : (base_ + pages_.size()) << kPageBits; }
  static uint64_t page_ids() { return uint64_t{1} << kPageBits; }

  // Calls fn(job) for the live jobs with ids from `from` up, in id order, looking at no more
  // than `max_ids` ids (an absent page counts as its ids, at the cost of one), until fn
  // returns false. Returns the id after the last one looked at, or 0 if no ids remain.
  template <typename Fn>
  uint64_t Scan(uint64_t from, uint64_t max_ids, Fn fn) const {
    uint64_t id = std::max(from, base_ << kPageBits);
    const uint64_t end = (base_ + pages_.size()) << kPageBits;
    uint64_t looked = 0;
    while (id < end && looked < max_ids) {
      const Page* page = pages_[(id >> kPageBits) - base_].get();
      if (!page) {
        uint64_t next = ((id >> kPageBits) + 1) << kPageBits;
        looked += next - id;
        id = next;
        continue;
      }
      Job* j = page->slots[id & kPageMask];
      id++;
      looked++;
      if (j && !fn(j)) break;
    }
    return id < end ? id : 0;
  }
  // Bytes held by the table itself, for memory accounting.
  size_t bytes() const {
    return (live_pages_ + (spare_ ? 1 : 0)) * sizeof(Page) + pages_.size() * sizeof(void*);
  }

  // The widest window of pages the table accepts (ids further apart than this many pages
  // cannot be live at the same time): 2^30 pages, an 8 GiB directory, is never reached by
  // ids handed out in order; it bounds what a corrupt restored id can cost.
  static constexpr uint64_t kMaxWindowPages = uint64_t{1} << 30;
  // True if id could be inserted now without exceeding the window.
  bool Fits(uint64_t id) const;
  // How much bytes() grows by if id (absent) is inserted now: a page unless its page exists
  // or the spare can serve, and the directory slots that bring the page into the window.
  size_t insert_growth(uint64_t id) const;

 private:
  uint64_t SpanWith(uint64_t page) const;

  static constexpr int kPageBits = 10;
  static constexpr uint64_t kPageMask = (uint64_t{1} << kPageBits) - 1;
  struct Page {
    uint32_t live = 0;
    Job* slots[uint64_t{1} << kPageBits] = {};
  };
  std::deque<std::unique_ptr<Page>> pages_;  // pages_[i] holds ids of page base_ + i
  // One emptied page kept for the next new one: a put/delete cycle crossing a page boundary
  // would otherwise allocate and zero 8 KiB each time.
  std::unique_ptr<Page> spare_;
  uint64_t base_ = 0;
  size_t size_ = 0;
  size_t live_pages_ = 0;
};

}  // namespace stalkd::engine
