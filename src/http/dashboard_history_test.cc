#include "http/dashboard_history.h"

#include <string>

#include <gtest/gtest.h>

namespace stalkd::http {
namespace {

using H = DashboardHistory;

// Drives rounds one second apart, every tracked tube sampled from `stats` (absent: the
// tube does not exist).
class DashboardHistoryTest : public ::testing::Test {
 protected:
  void Round(const StringMap<command::TubeStats>& stats = {}) {
    h_.BeginRound(now_, server_, reserves_, syncs_);
    for (size_t i = 0; i < h_.tube_count(); i++) {
      auto it = stats.find(h_.tube_name(i));
      h_.SampleTube(i, it == stats.end() ? nullptr : &it->second);
    }
    h_.EndRound();
    now_ += kSecond;
  }
  static command::TubeStats Tube(uint64_t ready, uint64_t total) {
    command::TubeStats t;
    t.ready = ready;
    t.total_jobs = total;
    return t;
  }

  H h_;
  Nanos now_ = 1000 * kSecond;
  command::ServerStats server_;
  uint64_t reserves_ = 0;
  Histogram syncs_;
};

TEST_F(DashboardHistoryTest, ServerPutsAndReservesPerRound) {
  EXPECT_FALSE(h_.ServerRates(10).puts);
  Round();  // the baseline
  server_.total_jobs = 30;
  reserves_ = 10;
  server_.ready = 20;
  Round();
  server_.total_jobs = 40;
  Round();
  ASSERT_EQ(h_.rounds(), 3u);
  EXPECT_EQ(h_.server(0).puts, 0u);
  EXPECT_EQ(h_.server(1).puts, 30u);
  EXPECT_EQ(h_.server(1).reserves, 10u);
  EXPECT_EQ(h_.server(1).ready, 20u);
  EXPECT_EQ(h_.server(2).puts, 10u);
  EXPECT_EQ(h_.server(2).reserves, 0u);
  H::Rates r = h_.ServerRates(10);  // 40 puts and 10 reserves over the 2 s since round 0
  ASSERT_TRUE(r.puts && r.reserves);
  EXPECT_DOUBLE_EQ(*r.puts, 20.0);
  EXPECT_DOUBLE_EQ(*r.reserves, 5.0);
  r = h_.ServerRates(1);  // the last second only
  EXPECT_DOUBLE_EQ(*r.puts, 10.0);
}

TEST_F(DashboardHistoryTest, ATubesFirstSampleIsItsBaseline) {
  h_.Track("a", now_);
  Round({{"a", Tube(5, 100)}});
  const H::Tube* a = h_.Find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(h_.Sample(*a, 0), nullptr);  // 100 jobs put before it was watched: unknown when
  EXPECT_FALSE(h_.TubeRates(*a, 10).puts);
  h_.CountReserve("a");
  h_.CountReserve("a");
  h_.CountReserve("not tracked");
  Round({{"a", Tube(7, 103)}});
  const H::TubeSample* x = h_.Sample(*a, 1);
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->ready, 7u);
  EXPECT_EQ(x->puts, 3u);
  EXPECT_EQ(x->reserves, 2u);
  H::Rates r = h_.TubeRates(*a, 10);
  ASSERT_TRUE(r.puts);
  EXPECT_DOUBLE_EQ(*r.puts, 3.0);
  EXPECT_DOUBLE_EQ(*r.reserves, 2.0);
  EXPECT_EQ(h_.Find("not tracked"), nullptr);
}

TEST_F(DashboardHistoryTest, AVanishedTubeCountsFromZeroAgainAndIsDroppedAfterTheRing) {
  h_.Track("a", now_);
  Round({{"a", Tube(1, 50)}});
  Round({{"a", Tube(1, 52)}});
  Round();  // gone: its counters go with it
  const H::Tube* a = h_.Find("a");
  EXPECT_EQ(h_.Sample(*a, 2)->ready, 0u);
  EXPECT_EQ(h_.Sample(*a, 2)->puts, 0u);
  Round({{"a", Tube(3, 3)}});  // made again, with 3 jobs since
  EXPECT_EQ(h_.Sample(*a, 3)->puts, 3u);
  for (size_t i = 0; i < H::kSeconds; i++) Round();
  EXPECT_NE(h_.Find("a"), nullptr);
  Round();  // missing for the whole ring: nothing left to show
  EXPECT_EQ(h_.Find("a"), nullptr);
}

TEST_F(DashboardHistoryTest, TheRingsHoldTheLastKSecondsRounds) {
  h_.Track("a", now_);
  for (uint64_t i = 0; i < H::kSeconds + 20; i++) {
    server_.total_jobs = i;
    Round({{"a", Tube(i, i * 2)}});
  }
  EXPECT_EQ(h_.oldest_round(), 20u);
  const H::Tube* a = h_.Find("a");
  EXPECT_EQ(h_.Sample(*a, 19), nullptr);
  ASSERT_NE(h_.Sample(*a, 20), nullptr);
  EXPECT_EQ(h_.Sample(*a, 20)->ready, 20u);
  EXPECT_EQ(h_.Sample(*a, 20)->puts, 2u);
  EXPECT_EQ(h_.Sample(*a, H::kSeconds + 19)->ready, H::kSeconds + 19);
  EXPECT_EQ(h_.server(20).puts, 1u);
  EXPECT_DOUBLE_EQ(*h_.TubeRates(*a, H::kSeconds * 2).puts, 2.0);
}

TEST_F(DashboardHistoryTest, AtMostKMaxTubesTheMostRecentlyShownWin) {
  for (size_t i = 0; i < H::kMaxTubes + 5; i++) h_.Discover("d" + std::to_string(i));
  EXPECT_EQ(h_.tube_count(), H::kMaxTubes);
  EXPECT_EQ(h_.Find("d1000"), nullptr);
  Round();
  // Shown tubes take the places of tubes nobody looked at, from the next round on.
  h_.Track("shown", now_);
  h_.Track("d7", now_);
  EXPECT_EQ(h_.Find("shown"), nullptr);
  Round();
  EXPECT_EQ(h_.tube_count(), H::kMaxTubes);
  ASSERT_NE(h_.Find("shown"), nullptr);
  EXPECT_NE(h_.Find("d7"), nullptr);
  // Once every tube was shown, a tube shown earlier gives way to one shown later.
  for (size_t i = 0; i < H::kMaxTubes * 2; i++) h_.Track("s" + std::to_string(i), now_ + 1);
  Round();
  EXPECT_EQ(h_.tube_count(), H::kMaxTubes);
  EXPECT_EQ(h_.Find("shown"), nullptr);
  size_t kept = 0;
  for (size_t i = 0; i < H::kMaxTubes * 2; i++) kept += h_.Find("s" + std::to_string(i)) != nullptr;
  EXPECT_EQ(kept, H::kMaxTubes);  // of the 2000 shown, the 1000 that fit (pending is bounded)
}

TEST_F(DashboardHistoryTest, ATubeAddedDuringARoundIsSampledInIt) {
  h_.Track("a", now_);
  h_.BeginRound(now_, server_, 0, syncs_);
  command::TubeStats a = Tube(1, 1);
  h_.SampleTube(0, &a);
  h_.Track("b", now_);  // room: appended, so the round's indexes hold
  ASSERT_EQ(h_.tube_count(), 2u);
  EXPECT_EQ(h_.tube_name(1), "b");
  command::TubeStats b = Tube(2, 9);
  h_.SampleTube(1, &b);
  h_.EndRound();
  EXPECT_EQ(h_.Find("b")->last_total, 9u);
}

TEST_F(DashboardHistoryTest, SyncsOverTheLastMinute) {
  EXPECT_EQ(h_.SyncsNow(syncs_).count, 0u);
  EXPECT_FALSE(h_.SyncsNow(syncs_).mean);
  syncs_.Observe(10 * 1000000);
  Round();  // round 0's snapshot holds that one
  for (int i = 0; i < 99; i++) syncs_.Observe(1 * 1000000);
  syncs_.Observe(40 * 1000000);
  Round();
  H::Syncs s = h_.SyncsNow(syncs_);
  EXPECT_EQ(s.count, 100u);  // since round 0
  ASSERT_TRUE(s.mean && s.p99);
  EXPECT_EQ(*s.mean, (99 * 1000000 + 40 * 1000000) / 100);
  EXPECT_EQ(*s.p99, 1000000);  // 99 of 100 within the 1 ms bucket
  for (size_t i = 2; i <= H::kSyncWindow; i++) Round();
  EXPECT_EQ(h_.SyncsNow(syncs_).count, 100u);  // round 0 is still a minute back
  Round();
  EXPECT_EQ(h_.SyncsNow(syncs_).count, 0u);
  EXPECT_FALSE(h_.SyncsNow(syncs_).p99);
}

TEST_F(DashboardHistoryTest, ClearForgetsEverything) {
  h_.Track("a", now_);
  Round({{"a", Tube(1, 1)}});
  h_.Clear();
  EXPECT_EQ(h_.rounds(), 0u);
  EXPECT_EQ(h_.tube_count(), 0u);
  EXPECT_EQ(h_.Find("a"), nullptr);
}

}  // namespace
}  // namespace stalkd::http
