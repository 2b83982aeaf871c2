#pragma once

#include <cstdint>

namespace stalkd {

// All engine time is int64 nanoseconds on a monotonic clock. Protocol values are seconds and
// are converted at the protocol boundary.
using Nanos = int64_t;

inline constexpr Nanos kSecond = 1'000'000'000;
inline constexpr Nanos kForever = INT64_MAX;

// The engine's only source of time. `Now()` must never go backwards.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual Nanos Now() const = 0;
};

// CLOCK_MONOTONIC.
class SystemClock final : public Clock {
 public:
  Nanos Now() const override;
};

// A clock that moves only when told to; for deterministic tests.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(Nanos start = 1000 * kSecond) : now_(start) {}
  Nanos Now() const override { return now_; }
  void Advance(Nanos d) { now_ += d; }
  void Set(Nanos t) { now_ = t; }

 private:
  Nanos now_;
};

}  // namespace stalkd
