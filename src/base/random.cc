#include "base/random.h"

#include <errno.h>
#include <sys/random.h>
#include <sys/types.h>

namespace stalkd {

bool RandomBytes(void* p, size_t n) {
  auto* out = static_cast<unsigned char*>(p);
  while (n > 0) {
    ssize_t got = getrandom(out, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    out += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

}  // namespace stalkd
