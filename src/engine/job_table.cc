#include "engine/job_table.h"

#include "base/check.h"

namespace stalkd::engine {

// Pages from the lowest to the highest of page p and the window (which must not be empty).
uint64_t JobTable::SpanWith(uint64_t p) const {
  return std::max(p, base_ + pages_.size() - 1) - std::min(p, base_) + 1;
}

bool JobTable::Fits(uint64_t id) const {
  return pages_.empty() || SpanWith(id >> kPageBits) <= kMaxWindowPages;
}

size_t JobTable::insert_growth(uint64_t id) const {
  uint64_t p = id >> kPageBits;
  uint64_t window = 1;  // the directory's length after the insert
  if (!pages_.empty()) {
    if (p >= base_ && p - base_ < pages_.size() && pages_[p - base_]) return 0;
    window = SpanWith(p);
  }
  return (spare_ ? 0 : sizeof(Page)) + (window - pages_.size()) * sizeof(void*);
}

void JobTable::Insert(Job* j) {
  STALKD_CHECK(Fits(j->id));
  uint64_t p = j->id >> kPageBits;
  if (pages_.empty()) base_ = p;
  while (p < base_) {
    pages_.emplace_front();
    base_--;
  }
  if (p - base_ >= pages_.size()) pages_.resize(p - base_ + 1);
  std::unique_ptr<Page>& page = pages_[p - base_];
  if (!page) {
    page = spare_ ? std::move(spare_) : std::make_unique<Page>();
    live_pages_++;
  }
  Job*& slot = page->slots[j->id & kPageMask];
  STALKD_CHECK(slot == nullptr);
  slot = j;
  page->live++;
  size_++;
}

void JobTable::Erase(uint64_t id) {
  uint64_t p = id >> kPageBits;
  if (p < base_ || p - base_ >= pages_.size()) return;
  std::unique_ptr<Page>& page = pages_[p - base_];
  if (!page || !page->slots[id & kPageMask]) return;
  page->slots[id & kPageMask] = nullptr;
  size_--;
  if (--page->live > 0) return;
  if (spare_) {
    page.reset();
  } else {
    spare_ = std::move(page);  // every slot is null again: reusable as it is
  }
  live_pages_--;
  while (!pages_.empty() && !pages_.front()) {
    pages_.pop_front();
    base_++;
  }
  while (!pages_.empty() && !pages_.back()) pages_.pop_back();
}

}  // namespace stalkd::engine
