#include "base/clock.h"

#include <time.h>

namespace stalkd {

Nanos SystemClock::Now() const {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<Nanos>(ts.tv_sec) * kSecond + ts.tv_nsec;
}

}  // namespace stalkd
