#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/string_map.h"
#include "command/values.h"
#include "http/metrics.h"

// The dashboard's memory of the last minutes (docs/DASHBOARD.md, "History"): one sample a
// round (a round is begun once a second) of the server's totals and of at most kMaxTubes
// tubes, each in a fixed ring of kSeconds samples. Nothing here grows with time or with the
// number of tubes beyond kMaxTubes: at most about 3.8 MB in all (12 bytes a second a tube).
//
// A round: BeginRound (the server's sample, and the changes to the set of tubes), then
// SampleTube for tube(0) .. tube(tube_count() - 1) (the caller spreads these over loop
// iterations), then EndRound. Tubes are only added or removed in BeginRound, or added at the
// end of the list (Track with room), so a round's index i keeps naming the same tube.
namespace stalkd::http {

class DashboardHistory {
 public:
  static constexpr size_t kSeconds = 300;      // each ring: 5 minutes of 1-second samples
  static constexpr size_t kMaxTubes = 1000;    // tubes with a history
  static constexpr size_t kSyncWindow = 60;    // seconds of binlog syncs the panel sums
  static constexpr size_t kMaxPending = 1000;  // tubes shown but waiting for room
  // A ring holds one slot more than it shows: the round in progress writes there.
  static constexpr size_t kRing = kSeconds + 1;

  struct TubeSample {
    uint32_t ready = 0;
    uint32_t puts = 0;      // jobs put into the tube since the previous sample
    uint32_t reserves = 0;  // first reservations since the previous sample
  };
  struct ServerSample {
    Nanos at = 0;  // when the round began
    uint64_t ready = 0;
    uint64_t reserved = 0;
    uint64_t delayed = 0;
    uint64_t buried = 0;
    uint64_t connections = 0;
    uint64_t memory_used = 0;
    uint32_t puts = 0;
    uint32_t reserves = 0;
  };
  struct Tube {
    std::string name;
    uint64_t first_round = 0;  // its first sample's round
    Nanos last_shown = 0;      // when the dashboard last showed it (0: found by Discover)
    uint64_t missing = 0;      // rounds in a row the tube did not exist
    uint64_t last_total = 0;   // total-jobs at the previous sample
    bool have_total = false;
    uint64_t reserves = 0;       // first reservations counted since tracked
    uint64_t last_reserves = 0;  // at the previous sample
    std::unique_ptr<TubeSample[]> ring;
  };
  // Rates over a window: events per second; nullopt without two samples to compare.
  struct Rates {
    std::optional<double> puts, reserves;
  };

  DashboardHistory();

  // Forgets everything (the dashboard stopped sampling).
  void Clear();

  // The dashboard showed `name` at `now`: it keeps (or gets) a history, from the next
  // sample on. When kMaxTubes tubes have one, it takes the place of the tube shown least
  // recently at the next BeginRound.
  void Track(std::string_view name, Nanos now);
  // Found by listing every tube: gets a history only while there is room.
  void Discover(std::string_view name);
  // A job of `tube` was reserved for the first time.
  void CountReserve(std::string_view tube);

  void BeginRound(Nanos now, const command::ServerStats& s, uint64_t reserves_total,
                  const Histogram& syncs);
  size_t tube_count() const { return tubes_.size(); }
  const std::string& tube_name(size_t i) const { return tubes_[i]->name; }
  // The sample of tube(i) this round; null: the tube does not exist now.
  void SampleTube(size_t i, const command::TubeStats* st);
  void EndRound();
  bool in_round() const { return in_round_; }

  // Rounds completed; the valid samples are those of rounds [oldest_round(), rounds()).
  uint64_t rounds() const { return round_; }
  uint64_t oldest_round() const { return round_ > kSeconds ? round_ - kSeconds : 0; }
  const ServerSample& server(uint64_t round) const { return server_[round % kRing]; }
  const Tube* Find(std::string_view name) const;
  // A valid sample of t, or null (before it was tracked, or older than the ring).
  const TubeSample* Sample(const Tube& t, uint64_t round) const;

  // Puts and first reservations per second over the last `seconds` seconds (or less, as
  // far as there are samples): of the server, or of one tube.
  Rates ServerRates(size_t seconds) const;
  Rates TubeRates(const Tube& t, size_t seconds) const;
  // Binlog syncs over the last kSyncWindow seconds: how many, their mean, and the upper
  // bound of the histogram bucket holding their 99th percentile (nullopt: none).
  struct Syncs {
    uint64_t count = 0;
    std::optional<Nanos> mean, p99;
  };
  Syncs SyncsNow(const Histogram& now) const;

 private:
  struct SyncSnapshot {
    std::array<uint64_t, Histogram::kBuckets + 1> buckets{};
    uint64_t count = 0;
    uint64_t sum_s = 0;
    uint32_t sum_ns = 0;
    bool valid = false;
  };
  void Add(std::string_view name, Nanos shown);
  void Remove(size_t i);
  // The window of `seconds` ending at the newest sample: [from, round_) and the time it
  // spans; false if shorter than two samples.
  bool Window(size_t seconds, uint64_t* from, Nanos* span) const;

  std::vector<std::unique_ptr<Tube>> tubes_;
  StringMap<size_t> index_;   // name -> position in tubes_
  StringMap<Nanos> pending_;  // shown while full: name -> when
  std::unique_ptr<ServerSample[]> server_;
  std::array<SyncSnapshot, kSyncWindow + 1> syncs_{};  // by round % (kSyncWindow + 1)
  uint64_t round_ = 0;
  bool in_round_ = false;
  uint64_t last_total_jobs_ = 0;
  uint64_t last_reserves_ = 0;
  bool have_last_ = false;
};

}  // namespace stalkd::http
