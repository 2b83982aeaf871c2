#include "http/throttle.h"

#include <gtest/gtest.h>

namespace stalkd::http {
namespace {

constexpr Nanos kStart = 1000 * kSecond;

TEST(ThrottlerTest, UnlimitedWithoutALimit) {
  Throttler t;
  for (int i = 0; i < 1000; i++) {
    EXPECT_TRUE(t.Allow("ns", "tok", Kind::kConsume, kStart));
    EXPECT_TRUE(t.Allow("ns", "tok", Kind::kProduce, kStart));
  }
  EXPECT_EQ(t.Get("ns", "tok"), nullptr);
  EXPECT_EQ(t.size(), 0u);
}

TEST(ThrottlerTest, ExactlyNPerIntervalThenRefused) {
  Throttler t;
  ASSERT_TRUE(t.Set("ns", "tok", Limit{3, 0, 10}));
  for (int i = 0; i < 3; i++) EXPECT_TRUE(t.Allow("ns", "tok", Kind::kConsume, kStart + i));
  EXPECT_FALSE(t.Allow("ns", "tok", Kind::kConsume, kStart + 5 * kSecond));
  EXPECT_FALSE(t.Allow("ns", "tok", Kind::kConsume, kStart + 10 * kSecond - 1));
  // Refusals do not count: the window still ends 10 s after its first request.
  EXPECT_TRUE(t.Allow("ns", "tok", Kind::kConsume, kStart + 10 * kSecond));
}

TEST(ThrottlerTest, WindowRollsOverFromTheFirstRequestAfterTheLastWindow) {
  Throttler t;
  ASSERT_TRUE(t.Set("ns", "tok", Limit{0, 2, 1}));
  EXPECT_TRUE(t.Allow("ns", "tok", Kind::kProduce, kStart));
  EXPECT_TRUE(t.Allow("ns", "tok", Kind::kProduce, kStart + kSecond / 2));
  EXPECT_FALSE(t.Allow("ns", "tok", Kind::kProduce, kStart + kSecond / 2));
  // A new window opens at 3.7 s, not at a multiple of the interval.
  Nanos later = kStart + 3 * kSecond + 700'000'000;
  EXPECT_TRUE(t.Allow("ns", "tok", Kind::kProduce, later));
  EXPECT_TRUE(t.Allow("ns", "tok", Kind::kProduce, later + kSecond - 1));
  EXPECT_FALSE(t.Allow("ns", "tok", Kind::kProduce, later + kSecond - 1));
  EXPECT_TRUE(t.Allow("ns", "tok", Kind::kProduce, later + kSecond));
}

TEST(ThrottlerTest, ReadAndWriteAreIndependent) {
  Throttler t;
  ASSERT_TRUE(t.Set("ns", "tok", Limit{1, 2, 60}));
  EXPECT_TRUE(t.Allow("ns", "tok", Kind::kConsume, kStart));
  EXPECT_FALSE(t.Allow("ns", "tok", Kind::kConsume, kStart));
  EXPECT_TRUE(t.Allow("ns", "tok", Kind::kProduce, kStart));
  EXPECT_TRUE(t.Allow("ns", "tok", Kind::kProduce, kStart));
  EXPECT_FALSE(t.Allow("ns", "tok", Kind::kProduce, kStart));
  EXPECT_FALSE(t.Allow("ns", "tok", Kind::kConsume, kStart));
}

TEST(ThrottlerTest, ZeroOrNegativeIsUnlimitedForThatKind) {
  Throttler t;
  ASSERT_TRUE(t.Set("ns", "tok", Limit{-1, 1, 60}));
  for (int i = 0; i < 100; i++) EXPECT_TRUE(t.Allow("ns", "tok", Kind::kConsume, kStart));
  EXPECT_TRUE(t.Allow("ns", "tok", Kind::kProduce, kStart));
  EXPECT_FALSE(t.Allow("ns", "tok", Kind::kProduce, kStart));
}

TEST(ThrottlerTest, LimitsArePerNamespaceAndToken) {
  Throttler t;
  ASSERT_TRUE(t.Set("ns", "a", Limit{1, 1, 60}));
  EXPECT_TRUE(t.Allow("ns", "a", Kind::kConsume, kStart));
  EXPECT_FALSE(t.Allow("ns", "a", Kind::kConsume, kStart));
  EXPECT_TRUE(t.Allow("ns", "b", Kind::kConsume, kStart));
  EXPECT_TRUE(t.Allow("other", "a", Kind::kConsume, kStart));
  EXPECT_TRUE(t.Allow("other", "a", Kind::kConsume, kStart));
}

TEST(ThrottlerTest, RefundGivesBackACountOfTheOpenWindowOnly) {
  Throttler t;
  ASSERT_TRUE(t.Set("ns", "tok", Limit{2, 0, 10}));
  EXPECT_TRUE(t.Allow("ns", "tok", Kind::kConsume, kStart));
  EXPECT_TRUE(t.Allow("ns", "tok", Kind::kConsume, kStart));
  t.Refund("ns", "tok", Kind::kConsume, kStart, kStart + kSecond);  // e.g. no job: a 404
  EXPECT_TRUE(t.Allow("ns", "tok", Kind::kConsume, kStart + kSecond));
  EXPECT_FALSE(t.Allow("ns", "tok", Kind::kConsume, kStart + kSecond));
  // After the window, a refund changes nothing.
  t.Refund("ns", "tok", Kind::kConsume, kStart + kSecond, kStart + 10 * kSecond);
  EXPECT_TRUE(t.Allow("ns", "tok", Kind::kConsume, kStart + 10 * kSecond));
  EXPECT_TRUE(t.Allow("ns", "tok", Kind::kConsume, kStart + 10 * kSecond));
  EXPECT_FALSE(t.Allow("ns", "tok", Kind::kConsume, kStart + 10 * kSecond));
  // Refunds without a limit or a window are harmless.
  t.Refund("ns", "none", Kind::kConsume, kStart, kStart);
  t.Refund("ns", "tok", Kind::kProduce, kStart, kStart);
}

// read=1 per second: five long polls started in five successive windows, each counted,
// end without a job 50 ms apart in a later window. lmstfy gives each back to the window
// open when it ends, so the consumes tried meanwhile would all succeed (6 within 0.5 s,
// counting the poll that opened a window); a refund belongs to its own window, over by
// then, so one consume per window.
TEST(ThrottlerTest, ARefundGoesToTheWindowItWasCountedIn) {
  Throttler t;
  ASSERT_TRUE(t.Set("ns", "tok", Limit{1, 0, 1}));
  constexpr Nanos kMs = kSecond / 1000;
  Nanos started[5];
  for (int i = 0; i < 5; i++) {
    started[i] = kStart + i * kSecond + 100 * kMs;
    ASSERT_TRUE(t.Allow("ns", "tok", Kind::kConsume, started[i])) << i;
  }
  // A consume opens the window of second 5; then the polls end, and a consume follows each.
  Nanos now = kStart + 5 * kSecond + 200 * kMs;
  int allowed = t.Allow("ns", "tok", Kind::kConsume, now) ? 1 : 0;
  for (int i = 0; i < 5; i++) {
    now += 50 * kMs;
    t.Refund("ns", "tok", Kind::kConsume, started[i], now);
    if (t.Allow("ns", "tok", Kind::kConsume, now)) allowed++;
  }
  EXPECT_EQ(allowed, 1);
  // A request refunded within the window it was counted in gives its place back.
  Nanos next = kStart + 7 * kSecond;
  EXPECT_TRUE(t.Allow("ns", "tok", Kind::kConsume, next));
  EXPECT_FALSE(t.Allow("ns", "tok", Kind::kConsume, next + 10 * kMs));
  t.Refund("ns", "tok", Kind::kConsume, next, next + 500 * kMs);
  EXPECT_TRUE(t.Allow("ns", "tok", Kind::kConsume, next + 600 * kMs));
}

TEST(ThrottlerTest, ARefundToZeroClosesTheWindow) {
  Throttler t;
  ASSERT_TRUE(t.Set("ns", "tok", Limit{1, 0, 10}));
  EXPECT_TRUE(t.Allow("ns", "tok", Kind::kConsume, kStart));
  t.Refund("ns", "tok", Kind::kConsume, kStart, kStart + 9 * kSecond);
  // As lmstfy's INCR back to 1, the next request opens a fresh window.
  EXPECT_TRUE(t.Allow("ns", "tok", Kind::kConsume, kStart + 9 * kSecond));
  EXPECT_FALSE(t.Allow("ns", "tok", Kind::kConsume, kStart + 18 * kSecond));
  EXPECT_TRUE(t.Allow("ns", "tok", Kind::kConsume, kStart + 19 * kSecond));
}

TEST(ThrottlerTest, ValidateFollowsLmstfy) {
  EXPECT_EQ(Throttler::Validate(Limit{1, 1, 1}), nullptr);
  EXPECT_EQ(Throttler::Validate(Limit{-1, 5, 1}), nullptr);
  EXPECT_STREQ(Throttler::Validate(Limit{1, 1, 0}), "interval should be > 0");
  EXPECT_NE(Throttler::Validate(Limit{1, 1, -3}), nullptr);
  EXPECT_STREQ(Throttler::Validate(Limit{0, 0, 10}),
               "the read and write of limiter can't be 0 at the same time");
  EXPECT_NE(Throttler::Validate(Limit{1, 1, INT64_MAX}), nullptr);
  Throttler t;
  EXPECT_FALSE(t.Set("ns", "tok", Limit{0, 0, 10}));
  EXPECT_EQ(t.size(), 0u);
}

TEST(ThrottlerTest, SetReplacesGetRemoveList) {
  Throttler t;
  ASSERT_TRUE(t.Set("b", "y", Limit{1, 2, 3}));
  ASSERT_TRUE(t.Set("a", "z", Limit{4, 5, 6}));
  ASSERT_TRUE(t.Set("b", "x", Limit{7, 8, 9}));
  ASSERT_TRUE(t.Set("b", "y", Limit{10, 11, 12}));
  EXPECT_EQ(t.size(), 3u);
  ASSERT_NE(t.Get("b", "y"), nullptr);
  EXPECT_EQ(t.Get("b", "y")->read, 10);
  EXPECT_EQ(t.Get("b", "y")->interval_s, 12);
  std::vector<LimitInfo> all = t.List();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].ns + "/" + all[0].token_id, "a/z");
  EXPECT_EQ(all[1].ns + "/" + all[1].token_id, "b/x");
  EXPECT_EQ(all[2].ns + "/" + all[2].token_id, "b/y");
  EXPECT_EQ(all[1].limit.write, 8);
  EXPECT_TRUE(t.Remove("a", "z"));
  EXPECT_FALSE(t.Remove("a", "z"));
  EXPECT_FALSE(t.Remove("b", "nope"));
  EXPECT_EQ(t.Get("a", "z"), nullptr);
  EXPECT_EQ(t.size(), 2u);
}

TEST(ThrottlerTest, ChangingALimitKeepsTheOpenWindow) {
  Throttler t;
  ASSERT_TRUE(t.Set("ns", "tok", Limit{2, 0, 10}));
  EXPECT_TRUE(t.Allow("ns", "tok", Kind::kConsume, kStart));
  EXPECT_TRUE(t.Allow("ns", "tok", Kind::kConsume, kStart));
  ASSERT_TRUE(t.Set("ns", "tok", Limit{3, 0, 10}));
  EXPECT_TRUE(t.Allow("ns", "tok", Kind::kConsume, kStart + kSecond));
  EXPECT_FALSE(t.Allow("ns", "tok", Kind::kConsume, kStart + kSecond));
  ASSERT_TRUE(t.Set("ns", "tok", Limit{3, 0, 2}));  // a shorter interval ends it sooner
  EXPECT_TRUE(t.Allow("ns", "tok", Kind::kConsume, kStart + 2 * kSecond));
}

}  // namespace
}  // namespace stalkd::http
