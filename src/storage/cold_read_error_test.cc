// A job on disk whose record cannot be read back (damaged after it left memory): the disk
// tier counts and logs it, the job is lost to this run (it stays in the binlog), and the
// reference the job held on its tube goes, so a tube with nothing else in it is freed as
// it is when its last job is deleted (docs/DISK-TIER.md).
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "command/put_test_util.h"
#include "server/cold_store_test_util.h"
#include "storage/binlog_test_util.h"

namespace stalkd::storage {
namespace {

using command::Outcome;

struct Tier : testing_util::SessionTier<> {
  Tier(FakeClock& clock, const std::string& in)
      : SessionTier(clock, in, ColdStoreOptions{1, 2 * kSecond, 1000, 0}) {}
  // Puts `body` into `tube` (the session then uses "default" again), and ticks until the
  // tier has every job but the tube's first ready one on disk.
  uint64_t PutAway(const char* tube, uint32_t delay, const std::string& body) {
    EXPECT_EQ(s->Use(tube).outcome, Outcome::kUsing);
    command::Result r = command::testing_util::PutThrough(*s, 10, delay, body);
    EXPECT_EQ(r.outcome, Outcome::kInserted);
    EXPECT_EQ(s->Use("default").outcome, Outcome::kUsing);
    for (int i = 0; i < 10; i++) Tick();
    return r.number;
  }
};

// Flips a byte of `body` where it is in the segments of `dir` (one place), so that the
// record holding it no longer passes its CRC.
void Damage(const std::string& dir, const std::string& body) {
  int found = 0;
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr);
  while (dirent* e = readdir(d)) {
    if (std::string(e->d_name).rfind("binlog.", 0) != 0) continue;
    const std::string path = dir + "/" + e->d_name;
    const std::string bytes = testing_util::ReadFile(path);
    const size_t at = bytes.find(body);
    if (at == std::string::npos) continue;
    found++;
    int fd = open(path.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    const char flipped = static_cast<char>(bytes[at] ^ 0x20);
    ASSERT_EQ(pwrite(fd, &flipped, 1, static_cast<off_t>(at)), 1);
    close(fd);
  }
  closedir(d);
  ASSERT_EQ(found, 1);
}

TEST(ColdReadErrorTest, AJobNamedByACommandIsLostAndItsTubeFreed) {
  FakeClock clock;
  const std::string dir = testing_util::MakeTempDir();
  {
    Tier tier(clock, dir);
    const uint64_t kept = tier.PutAway("kept", 3600, "a job that stays readable");
    const uint64_t lost = tier.PutAway("lost", 3600, "a job whose record is damaged");
    ASSERT_EQ(tier.cold->stats().cold, 2u);
    Damage(dir, "a job whose record is damaged");

    EXPECT_EQ(tier.s->Peek(lost).outcome, Outcome::kNotFound);
    EXPECT_EQ(tier.cold->stats().read_errors, 1u);
    tier.Tick();
    // Nothing else held the tube: it is gone, as after a delete of its last job.
    EXPECT_EQ(tier.store->engine().FindTube("lost"), nullptr);
    EXPECT_EQ(tier.s->StatsTube("lost").outcome, Outcome::kNotFound);
    // The other job and its tube are untouched.
    EXPECT_EQ(tier.s->Peek(kept).outcome, Outcome::kFound);
    EXPECT_NE(tier.store->engine().FindTube("kept"), nullptr);
  }
  testing_util::RemoveDir(dir);
}

TEST(ColdReadErrorTest, AJobDueWhileOnDiskIsLostAndATubeStillWatchedStays) {
  FakeClock clock;
  const std::string dir = testing_util::MakeTempDir();
  {
    Tier tier(clock, dir);
    tier.PutAway("lost", 60, "the other tube's damaged job");
    tier.PutAway("watched", 60, "the watched tube's damaged job");
    ASSERT_EQ(tier.cold->stats().cold, 2u);
    Damage(dir, "the other tube's damaged job");
    Damage(dir, "the watched tube's damaged job");
    ASSERT_EQ(tier.s->Watch("watched").outcome, Outcome::kWatching);

    clock.Advance(60 * kSecond);  // the loop reads both back, ahead of their deadline
    tier.Tick();
    EXPECT_EQ(tier.cold->stats().read_errors, 2u);
    tier.Tick();
    EXPECT_EQ(tier.store->engine().FindTube("lost"), nullptr);
    // A session watches this one: it stays, with no job.
    ASSERT_NE(tier.store->engine().FindTube("watched"), nullptr);
    EXPECT_EQ(tier.s->Reserve(0).outcome, Outcome::kTimedOut);
  }
  testing_util::RemoveDir(dir);
}

}  // namespace
}  // namespace stalkd::storage
