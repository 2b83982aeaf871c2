#pragma once

#include <cstddef>

namespace stalkd {

// Fills p[0, n) with random bytes from the kernel (getrandom(2): its CSPRNG, blocking only
// until it is seeded at boot). false if that failed.
bool RandomBytes(void* p, size_t n);

}  // namespace stalkd
