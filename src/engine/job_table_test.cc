#include "engine/job_table.h"

#include <map>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace stalkd::engine {
namespace {

// Jobs owned by the test; the table only holds pointers.
class JobTableTest : public ::testing::Test {
 protected:
  ~JobTableTest() override {
    for (Job* j : owned_) Job::Free(j);
  }
  Job* Make(uint64_t id) {
    Job* j = Job::Allocate(0);
    j->id = id;
    owned_.push_back(j);
    return j;
  }
  std::vector<Job*> owned_;
  JobTable table_;
};

TEST_F(JobTableTest, InsertFindErase) {
  EXPECT_EQ(table_.size(), 0u);
  EXPECT_EQ(table_.Find(1), nullptr);
  EXPECT_EQ(table_.Find(0), nullptr);
  EXPECT_EQ(table_.Find(UINT64_MAX), nullptr);
  Job* a = Make(1);
  Job* b = Make(2);
  Job* c = Make(1023);
  Job* d = Make(1024);  // first id of the second page
  for (Job* j : {a, b, c, d}) table_.Insert(j);
  EXPECT_EQ(table_.size(), 4u);
  EXPECT_EQ(table_.Find(1), a);
  EXPECT_EQ(table_.Find(2), b);
  EXPECT_EQ(table_.Find(1023), c);
  EXPECT_EQ(table_.Find(1024), d);
  EXPECT_EQ(table_.Find(3), nullptr);
  EXPECT_EQ(table_.Find(1025), nullptr);
  EXPECT_EQ(table_.Find(5000), nullptr);
  table_.Erase(2);
  EXPECT_EQ(table_.Find(2), nullptr);
  EXPECT_EQ(table_.size(), 3u);
  table_.Erase(2);  // absent: no-op
  table_.Erase(3);
  table_.Erase(999999);
  EXPECT_EQ(table_.size(), 3u);
  EXPECT_EQ(table_.Find(1), a);
}

TEST_F(JobTableTest, PagesAreFreedWhenEmpty) {
  size_t empty_bytes = table_.bytes();
  table_.Insert(Make(5));
  size_t one_page = table_.bytes();
  EXPECT_GT(one_page, empty_bytes);
  table_.Insert(Make(6));
  EXPECT_EQ(table_.bytes(), one_page);  // same page
  table_.Insert(Make(2048 + 7));        // third page, second one never made
  size_t two_pages = table_.bytes();
  EXPECT_GT(two_pages, one_page);
  table_.Erase(5);
  EXPECT_EQ(table_.bytes(), two_pages);  // page 0 still holds id 6
  table_.Erase(6);
  EXPECT_LT(table_.bytes(), two_pages);
  EXPECT_EQ(table_.Find(6), nullptr);
  EXPECT_NE(table_.Find(2048 + 7), nullptr);
  table_.Erase(2048 + 7);
  EXPECT_EQ(table_.size(), 0u);
  // Only the directory remains.
  EXPECT_LT(table_.bytes(), one_page);
  // A freed page can be made again.
  Job* j = Make(6);
  table_.Insert(j);
  EXPECT_EQ(table_.Find(6), j);
}

TEST_F(JobTableTest, SparseIds) {
  std::vector<uint64_t> ids = {1, 1000, 1 << 20, (1 << 20) + 1, 5'000'000, 123'456'789};
  for (uint64_t id : ids) table_.Insert(Make(id));
  EXPECT_EQ(table_.size(), ids.size());
  for (uint64_t id : ids) {
    ASSERT_NE(table_.Find(id), nullptr);
    EXPECT_EQ(table_.Find(id)->id, id);
    EXPECT_EQ(table_.Find(id + 2), nullptr);
  }
  size_t full = table_.bytes();
  for (uint64_t id : ids) table_.Erase(id);
  EXPECT_EQ(table_.size(), 0u);
  EXPECT_LT(table_.bytes(), full);
}

TEST_F(JobTableTest, MemoryFollowsTheLiveIdRangeNotTheLargestId) {
  // A single huge id (as a restored binlog might carry) costs one page, not a directory
  // sized by the id.
  const uint64_t huge = uint64_t{1} << 50;
  table_.Insert(Make(huge));
  EXPECT_LT(table_.bytes(), 16u * 1024);
  EXPECT_EQ(table_.Find(huge)->id, huge);
  // Ids further from it than the window allows are refused by Fits.
  EXPECT_FALSE(table_.Fits(1));
  EXPECT_TRUE(table_.Fits(huge + 5000));
  table_.Erase(huge);
  EXPECT_TRUE(table_.Fits(1));
  // The window slides: after the old ids are gone, only the new range is held.
  for (uint64_t id = 1; id <= 10000; id++) table_.Insert(Make(id));
  size_t wide = table_.bytes();
  for (uint64_t id = 1; id <= 9000; id++) table_.Erase(id);
  EXPECT_LT(table_.bytes(), wide / 2);  // two live pages and one spare are left of ten
  for (uint64_t id = 9001; id <= 10000; id++) EXPECT_EQ(table_.Find(id)->id, id);
  EXPECT_EQ(table_.Find(8999), nullptr);
}

// insert_growth foresees what Insert adds to bytes(): a page (none when the spare serves or
// the page exists) and the directory slots that reach it, below the window or above it.
TEST_F(JobTableTest, InsertGrowthIsExact) {
  auto insert = [this](uint64_t id) {
    size_t growth = table_.insert_growth(id);
    size_t before = table_.bytes();
    table_.Insert(Make(id));
    EXPECT_EQ(table_.bytes(), before + growth) << id;
    return growth;
  };
  const size_t page = insert(5000);  // page 4: a new page and one slot
  EXPECT_GT(page, 1024 * sizeof(Job*));
  EXPECT_EQ(insert(5001), 0u);
  EXPECT_EQ(insert(10), page + 3 * sizeof(void*));        // page 0: slots 0 to 3 added
  EXPECT_EQ(insert(7 * 1024), page + 2 * sizeof(void*));  // page 7: slots 5 to 7
  EXPECT_EQ(insert(3 * 1024), page - sizeof(void*));      // page 3: its slot exists
  table_.Erase(3 * 1024);                                 // page 3 becomes the spare
  EXPECT_EQ(insert(2 * 1024), 0u);                        // the spare serves page 2
  EXPECT_EQ(insert(8 * 1024), page);                      // page 8: a new page again, and one slot
}

TEST_F(JobTableTest, RandomAgainstMap) {
  std::mt19937_64 rng(7);
  std::map<uint64_t, Job*> ref;
  uint64_t next = 1;
  for (int step = 0; step < 50000; step++) {
    if (rng() % 3 != 0) {
      next += 1 + rng() % 4;
      Job* j = Make(next);
      size_t growth = table_.insert_growth(next);
      size_t before = table_.bytes();
      table_.Insert(j);
      ASSERT_EQ(table_.bytes(), before + growth);
      ref[next] = j;
    } else if (!ref.empty()) {
      auto it = ref.lower_bound(rng() % (next + 1));
      if (it == ref.end()) it = ref.begin();
      table_.Erase(it->first);
      ref.erase(it);
    }
    uint64_t probe = rng() % (next + 10);
    auto it = ref.find(probe);
    ASSERT_EQ(table_.Find(probe), it == ref.end() ? nullptr : it->second);
    ASSERT_EQ(table_.size(), ref.size());
  }
  for (auto& [id, j] : ref) ASSERT_EQ(table_.Find(id), j);
}

}  // namespace
}  // namespace stalkd::engine
