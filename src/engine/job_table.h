#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/job.h"

namespace stalkd::engine {

// Job id -> Job*. Ids are handed out in increasing order, so the table is a two-level
// array indexed by id: lookup, insert and erase are O(1), and growing it never rehashes or
// copies entries (only the small directory of pages grows). A page is freed once all of its
// ids are gone, so memory follows the live id range, not the total ever put.
class JobTable {
 public:
  JobTable() = default;
  JobTable(const JobTable&) = delete;
  JobTable& operator=(const JobTable&) = delete;

  Job* Find(uint64_t id) const {
    uint64_t p = id >> kPageBits;
    if (p >= pages_.size() || !pages_[p]) return nullptr;
    return pages_[p]->slots[id & kPageMask];
  }

  // id must not be present.
  void Insert(Job* j);
  // Removes id if present.
  void Erase(uint64_t id);

  size_t size() const { return size_; }
  // Bytes held by the table itself, for memory accounting.
  size_t bytes() const { return live_pages_ * sizeof(Page) + pages_.capacity() * sizeof(void*); }

 private:
  static constexpr int kPageBits = 10;
  static constexpr uint64_t kPageMask = (uint64_t{1} << kPageBits) - 1;
  struct Page {
    uint32_t live = 0;
    Job* slots[uint64_t{1} << kPageBits] = {};
  };
  std::vector<std::unique_ptr<Page>> pages_;
  size_t size_ = 0;
  size_t live_pages_ = 0;
};

}  // namespace stalkd::engine
