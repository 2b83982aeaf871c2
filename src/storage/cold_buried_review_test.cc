// A review of buried jobs on disk (docs/DISK-TIER.md): the costs the design promises (a slot
// goes into the buried index in O(1) when demotion takes a tube's newest first, above older
// ones already on disk; DemoteBuried walks at most 65,536 list entries a Tick), and commands
// across the memory/disk boundary with jobs that cannot go (a key, a TTL) and dead letters
// (tries used up) answering as the all-in-memory store.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "server/cold_store_test_util.h"
#include "storage/binlog_test_util.h"
#include "storage/cold_buried_index.h"
#include "storage/cold_tier_test_util.h"

namespace stalkd::storage {
namespace {

using command::Outcome;
using command::Result;
using command::StateFilter;
using testing_util::ExpectSame;

const engine::Tube* FakeTube() { return reinterpret_cast<const engine::Tube*>(0x1000); }

// 1000 buried jobs on disk, then 20,000 buried after them that go newest first (a pile
// buried while memory was under the budget, leaving once it is over): each slot goes in
// below the ones just added, above every older one. Linear, not quadratic, in slots moved.
TEST(ColdBuriedReviewTest, NewerBuriesGoingNewestFirstAboveOlderOnesCostLinear) {
  ColdBuriedIndex index;
  const uint64_t old = 1000, newer = 20000;
  for (uint64_t i = 1; i <= old; i++) index.Add({i, i, 0, FakeTube()});
  for (uint64_t i = old + newer; i > old; i--) index.Add({i, i, 0, FakeTube()});
  EXPECT_LE(index.moved(), 2 * (old + newer));
  // Then again above those (a second pile), and one at a time (a bury a Tick).
  for (uint64_t i = old + 2 * newer; i > old + newer; i--) index.Add({i, i, 0, FakeTube()});
  for (uint64_t i = old + 2 * newer + 1; i <= old + 2 * newer + 100; i++) {
    index.Add({i, i, 0, FakeTube()});
  }
  EXPECT_LE(index.moved(), 2 * (old + 2 * newer + 100));
  EXPECT_EQ(index.BytesByWalk(), index.bytes());
  // Every one comes out in bury order, some removed by id on the way.
  ASSERT_TRUE(index.Remove(old + 5));
  ASSERT_TRUE(index.Remove(old + newer + 7));
  uint64_t want = 1;
  ColdBuriedIndex::Entry e;
  while (index.TakeFirst(FakeTube(), &e)) {
    if (want == old + 5 || want == old + newer + 7) want++;
    ASSERT_EQ(e.seq, want);
    want++;
  }
  EXPECT_EQ(want, old + 2 * newer + 101);
  EXPECT_EQ(index.size(), 0u);
}

Result PutWith(command::Session& s, const command::PutOptions& o, const std::string& body) {
  command::PutArgs a;
  a.ttr_s = 30;
  a.bytes = static_cast<uint32_t>(body.size());
  a.options = &o;
  command::PutSlot slot = s.BeginPut(a);
  if (!slot.data) return Result::Of(slot.refusal);
  std::memcpy(slot.data, body.data(), body.size());
  std::memcpy(slot.data + body.size(), "\r\n", 2);
  return s.CommitPut();
}

struct Tier : testing_util::SessionTier<> {
  explicit Tier(FakeClock& clock, size_t budget, uint32_t buried_hot = 64)
      : SessionTier(clock, testing_util::MakeTempDir(),
                    ColdStoreOptions{budget, 2 * kSecond, 1000, 4, buried_hot}) {}
  ~Tier() {
    const std::string d = dir;
    s.reset();
    store->engine().CheckInvariants();
    Close();
    testing_util::RemoveDir(d);
  }
};

// Puts `first` jobs, then `then` more, those with a TTL (they stay in memory) the first ones if
// ttl_first, else the others; reserves and buries them all in that order. Returns their ids
// in bury order.
std::vector<uint64_t> BuryInOrder(command::Session& s, int first, int then, bool ttl_first) {
  command::PutOptions ttl;
  ttl.ttl_s = 1000000;
  std::vector<uint64_t> order;
  for (int i = 0; i < first + then; i++) {
    const bool with_ttl = (i < first) == ttl_first;
    EXPECT_EQ(PutWith(s, with_ttl ? ttl : command::PutOptions{}, "x").outcome, Outcome::kInserted);
  }
  for (int i = 0; i < first + then; i++) {
    const Result r = s.Reserve(0);
    EXPECT_EQ(r.outcome, Outcome::kReserved);
    if (r.outcome != Outcome::kReserved) break;
    EXPECT_EQ(s.Bury(r.job.id, 0).outcome, Outcome::kBuried);
    order.push_back(r.job.id);
  }
  return order;
}

// A tube whose 70,000 newest buried jobs have a TTL (they stay) and whose older ones may go:
// no Tick walks more than DemoteBuried's 65,536 list entries (and a visit's few), and the
// walk still reaches the older ones.
TEST(ColdBuriedReviewTest, DemotionWalkStaysBoundedBehindJobsThatMustStay) {
  FakeClock clock;
  Tier t(clock, 1);
  command::Session& s = *t.s;
  const int may_go = 200, must_stay = 70000;
  BuryInOrder(s, may_go, must_stay, false);
  if (HasFatalFailure()) return;
  uint64_t most = 0;
  for (int i = 0; i < 9500; i++) {
    const uint64_t before = t.cold->buried_steps();
    t.Tick();
    most = std::max(most, t.cold->buried_steps() - before);
  }
  printf("most list steps in a Tick: %llu\n", static_cast<unsigned long long>(most));
  EXPECT_LE(most, 65536u + 1024u);
  EXPECT_EQ(t.cold->BuriedOnDisk(nullptr), static_cast<size_t>(may_go - 64));
  EXPECT_EQ(s.Stats().stats->buried, static_cast<size_t>(may_go + must_stay));
}

// A tube's oldest buried jobs must stay (a TTL) and its 200 newest went to disk: stats-job,
// peek and delete of one of those on disk find its place in the list from the end it is
// near, not by a walk past every job that stays.
TEST(ColdBuriedReviewTest, AJobNamedByIdFindsItsPlaceFromTheNearEnd) {
  FakeClock clock;
  Tier t(clock, 1);
  command::Session& s = *t.s;
  const int must_stay = 20000, may_go = 200;
  const std::vector<uint64_t> order = BuryInOrder(s, must_stay, may_go, true);
  if (HasFatalFailure()) return;
  for (int i = 0; i < 10; i++) t.Tick();
  ASSERT_EQ(t.cold->BuriedOnDisk(nullptr), static_cast<size_t>(may_go));
  const uint64_t before = t.cold->buried_steps();
  for (int i = must_stay; i < must_stay + may_go; i += 2) {
    const uint64_t id = order[static_cast<size_t>(i)];
    ASSERT_EQ(s.StatsJob(id).outcome, Outcome::kJobStats);
    ASSERT_EQ(s.Peek(order[static_cast<size_t>(i + 1)]).outcome, Outcome::kFound);
  }
  EXPECT_LE(t.cold->buried_steps() - before, static_cast<uint64_t>(may_go * may_go));
  // Still in bury order; the ones read back still buried, in their places.
  EXPECT_EQ(s.PeekBuried().job.id, order[0]);
  EXPECT_EQ(s.Kick(10).number, 10u);
  EXPECT_EQ(s.PeekBuried().job.id, order[10]);
  EXPECT_EQ(s.Stats().stats->buried, static_cast<uint64_t>(must_stay + may_go - 10));
  t.store->engine().CheckInvariants();
}

// Dead letters (tries used up, with attributes), jobs with a key or a TTL interleaved with
// jobs that may go, buried out of id order: every command answers as all in memory, the bury
// reason and attributes of a job read back included.
TEST(ColdBuriedReviewTest, MixedDeadLettersAcrossTheBoundaryAnswerAsAllInMemory) {
  FakeClock clock;
  Tier hot(clock, 0), cold(clock, 1, 2);
  const std::vector<command::Attribute> attrs = {{"from", "review"}};
  auto both = [&](auto fn, const std::string& what) {
    Result a = fn(*hot.s);
    Result b = fn(*cold.s);
    ExpectSame(a, b, what, false);
    return a;
  };
  const int n = 60;
  for (int i = 0; i < n; i++) {
    command::PutOptions o;
    const std::string key = "k" + std::to_string(i);
    if (i % 5 == 1) o.key = key;
    if (i % 7 == 2) o.ttl_s = 100000;
    o.tries = 1;
    if (i % 3 == 0) o.attributes = attrs;
    both([&](command::Session& s) { return PutWith(s, o, "job " + std::to_string(i)); }, "put");
  }
  // Reserved in id order; released (tries used up: buried, "release") or buried, from the
  // last reserved back: bury order is the reverse of id order.
  std::vector<uint64_t> ids;
  for (int i = 0; i < n; i++) {
    Result r = both([](command::Session& s) { return s.Reserve(0); }, "reserve");
    ASSERT_EQ(r.outcome, Outcome::kReserved);
    ids.push_back(r.job.id);
  }
  for (int i = n - 1; i >= 0; i--) {
    const uint64_t id = ids[static_cast<size_t>(i)];
    if (i % 2 == 0) {
      both([&](command::Session& s) { return s.Release(id, 3, 0); }, "release");
    } else {
      both([&](command::Session& s) { return s.Bury(id, 4); }, "bury");
    }
  }
  for (int i = 0; i < 5; i++) {
    hot.Tick();
    cold.Tick();
  }
  ASSERT_GT(cold.cold->BuriedOnDisk(nullptr), 20u);
  auto compare_all = [&](const std::string& what) {
    both([](command::Session& s) { return s.Stats(); }, what + " stats");
    both([](command::Session& s) { return s.StatsTube("default"); }, what + " stats-tube");
    both([](command::Session& s) { return s.PeekBuried(); }, what + " peek-buried");
    both([](command::Session& s) { return s.ListJobs("default", StateFilter::kBuried, 0, 1000); },
         what + " list-jobs");
    for (uint64_t id : ids) {
      Result a = hot.s->StatsJob(id);
      Result b = cold.s->StatsJob(id);
      ExpectSame(a, b, what + " stats-job " + std::to_string(id), false);
      if (a.outcome == Outcome::kJobStats && a.job_stats->extension) {
        const auto& x = *a.job_stats->extension;
        const auto& y = *b.job_stats->extension;
        EXPECT_EQ(x.bury_reason, y.bury_reason) << what << " " << id;
        EXPECT_EQ(x.limited, y.limited) << what << " " << id;
        ASSERT_EQ(x.attributes.size(), y.attributes.size()) << what << " " << id;
        for (size_t k = 0; k < x.attributes.size(); k++) {
          EXPECT_EQ(x.attributes[k].name, y.attributes[k].name) << what;
          EXPECT_EQ(x.attributes[k].value, y.attributes[k].value) << what;
        }
      }
      hot.Tick();
      cold.Tick();
    }
  };
  compare_all("settled");
  // A job on disk deleted, one kicked by id, one re-buried after a reserve-job.
  both([&](command::Session& s) { return s.Delete(ids[40]); }, "delete");
  both([&](command::Session& s) { return s.KickJob(ids[30]); }, "kick-job");
  both([&](command::Session& s) { return s.ReserveJob(ids[20]); }, "reserve-job");
  both([&](command::Session& s) { return s.Bury(ids[20], 9); }, "bury again");
  for (int i = 0; i < 5; i++) {
    hot.Tick();
    cold.Tick();
  }
  compare_all("changed");
  for (uint32_t k : {1u, 3u, 7u, 1000u}) {
    both([&](command::Session& s) { return s.Kick(k); }, "kick " + std::to_string(k));
    both([](command::Session& s) { return s.PeekBuried(); }, "peek-buried after kick");
    both([](command::Session& s) { return s.PeekReady(); }, "peek-ready after kick");
    hot.Tick();
    cold.Tick();
  }
  compare_all("kicked");
  EXPECT_EQ(cold.cold->stats().read_errors, 0u);
}

}  // namespace
}  // namespace stalkd::storage
