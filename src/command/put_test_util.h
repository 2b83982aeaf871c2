#pragma once

// Helpers for the unit tests of stores (command::Session users).

#include <cstdint>
#include <cstring>
#include <string>

#include "command/store.h"

namespace stalkd::command::testing_util {

// A put through a store's session, as a client's `put pri delay 30 len` with this body.
inline Result PutThrough(Session& s, uint32_t pri, uint32_t delay, const std::string& body) {
  PutSlot slot = s.BeginPut({pri, delay, 30, static_cast<uint32_t>(body.size())});
  if (!slot.data) return Result::Of(slot.refusal);
  std::memcpy(slot.data, body.data(), body.size());
  std::memcpy(slot.data + body.size(), "\r\n", 2);
  return s.CommitPut();
}

}  // namespace stalkd::command::testing_util
