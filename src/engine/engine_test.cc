#include "engine/engine.h"

#include <gtest/gtest.h>

namespace stalkd::engine {
namespace {

TEST(EngineSmoke, Builds) {
  FakeClock clock;
  Engine e(clock);
  e.CheckInvariants();
}

}  // namespace
}  // namespace stalkd::engine
