#pragma once

// Helpers for the unit tests that run the same commands on two stores (one with the disk
// tier, one all in memory; a restart and a replay of a copy) and expect the same answers:
// stats, stats-tube and stats-job compared field by field.

#include <string>
#include <type_traits>

#include <gtest/gtest.h>

#include "command/values.h"

namespace stalkd::command::testing_util {

// The job counts of `stats` (S = ServerStats, with the tubes and waiting sessions) or of
// `stats-tube` (S = TubeStats).
template <typename S>
inline void ExpectSameCounts(const S& a, const S& b, const std::string& what) {
  EXPECT_EQ(a.ready, b.ready) << what;
  EXPECT_EQ(a.urgent, b.urgent) << what;
  EXPECT_EQ(a.delayed, b.delayed) << what;
  EXPECT_EQ(a.buried, b.buried) << what;
  EXPECT_EQ(a.reserved, b.reserved) << what;
  EXPECT_EQ(a.total_jobs, b.total_jobs) << what;
  if constexpr (std::is_same_v<S, ServerStats>) {
    EXPECT_EQ(a.tubes, b.tubes) << what;
    EXPECT_EQ(a.waiting, b.waiting) << what;
  }
}

// What two stats-job answers may differ in.
struct JobStatsSlack {
  bool file = false;   // `file` (a store that writes records the other does not)
  double drift_s = 0;  // time-left, and age in ms up to 1000 times it (times restored from
                       // the wall clock a moment apart); 0: exact
};

// Every field of `stats-job` but what `slack` allows.
inline void ExpectSameJob(const JobStats& a, const JobStats& b, const std::string& what,
                          JobStatsSlack slack = {}) {
  EXPECT_EQ(a.id, b.id) << what;
  EXPECT_EQ(a.tube, b.tube) << what;
  EXPECT_EQ(a.state, b.state) << what;
  EXPECT_EQ(a.pri, b.pri) << what;
  EXPECT_EQ(a.delay_s, b.delay_s) << what;
  EXPECT_EQ(a.ttr_s, b.ttr_s) << what;
  if (!slack.file) {
    EXPECT_EQ(a.file, b.file) << what;
  }
  EXPECT_EQ(a.reserves, b.reserves) << what;
  EXPECT_EQ(a.timeouts, b.timeouts) << what;
  EXPECT_EQ(a.releases, b.releases) << what;
  EXPECT_EQ(a.buries, b.buries) << what;
  EXPECT_EQ(a.kicks, b.kicks) << what;
  EXPECT_EQ(a.detached, b.detached) << what;
  EXPECT_NEAR(static_cast<double>(a.age_s), static_cast<double>(b.age_s), slack.drift_s + 1)
      << what;  // whole seconds of age_ms: a second more where age_ms is near one
  EXPECT_NEAR(static_cast<double>(a.time_left_s), static_cast<double>(b.time_left_s), slack.drift_s)
      << what;
  EXPECT_NEAR(static_cast<double>(a.age_ms), static_cast<double>(b.age_ms), 1000 * slack.drift_s)
      << what;
  ASSERT_EQ(a.extension != nullptr, b.extension != nullptr) << what;
  if (a.extension) {
    EXPECT_EQ(a.extension->tries_left, b.extension->tries_left) << what;
    EXPECT_EQ(a.extension->has_ttl, b.extension->has_ttl) << what;
    EXPECT_EQ(a.extension->key, b.extension->key) << what;
  }
}

}  // namespace stalkd::command::testing_util
