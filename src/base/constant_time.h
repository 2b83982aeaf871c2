#pragma once

#include <cstddef>

namespace stalkd {

// Whether a[0, n) and b[0, n) are equal, in a time that depends on n only: every byte is
// read whatever differs (the accumulator is volatile, so the loop cannot stop early). For
// secrets and their digests (tokens, basic-auth accounts), whose compare time must not tell
// an attacker how much of a guess was right.
inline bool ConstantTimeEqual(const unsigned char* a, const unsigned char* b, size_t n) {
  volatile unsigned char diff = 0;
  for (size_t i = 0; i < n; ++i) diff = diff | static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace stalkd
