#include "engine/job_table.h"

#include "base/check.h"

namespace stalkd::engine {

void JobTable::Insert(Job* j) {
  uint64_t p = j->id >> kPageBits;
  STALKD_CHECK(p < (uint64_t{1} << 40));  // ids beyond this would need a sparse directory
  if (p >= pages_.size()) pages_.resize(p + 1);
  if (!pages_[p]) {
    pages_[p] = std::make_unique<Page>();
    live_pages_++;
  }
  Job*& slot = pages_[p]->slots[j->id & kPageMask];
  STALKD_CHECK(slot == nullptr);
  slot = j;
  pages_[p]->live++;
  size_++;
}

void JobTable::Erase(uint64_t id) {
  uint64_t p = id >> kPageBits;
  if (p >= pages_.size() || !pages_[p]) return;
  Job*& slot = pages_[p]->slots[id & kPageMask];
  if (!slot) return;
  slot = nullptr;
  size_--;
  if (--pages_[p]->live == 0) {
    pages_[p].reset();
    live_pages_--;
  }
}

}  // namespace stalkd::engine
