#pragma once

// What the fuzz targets share: a check that fails loudly, reading the fuzzer input, printf
// into a std::string, and a store Host. A target defines FUZZ_NAME (its name, for the
// messages) before it includes this.

#include <algorithm>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "command/store.h"
#include "command/values.h"

#ifndef FUZZ_NAME
#error "define FUZZ_NAME before including fuzz_support.h"
#endif

// Unless cond holds, prints the printf-style message and aborts (which libFuzzer reports as
// a crash, with the input that caused it).
#define FUZZ_CHECK(cond, ...)                                        \
  do {                                                               \
    if (!(cond)) {                                                   \
      std::fprintf(stderr, FUZZ_NAME ": check failed: %s: ", #cond); \
      std::fprintf(stderr, __VA_ARGS__);                             \
      std::fprintf(stderr, "\n");                                    \
      std::abort();                                                  \
    }                                                                \
  } while (0)

namespace stalkd::fuzz {

// Reads the fuzzer input; past its end, every byte is 0.
class Input {
 public:
  Input(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  bool empty() const { return i_ >= n_; }
  uint8_t Byte() { return i_ < n_ ? d_[i_++] : 0; }
  std::string_view Bytes(size_t n) {
    n = std::min(n, n_ - i_);
    std::string_view s(reinterpret_cast<const char*>(d_ + i_), n);
    i_ += n;
    return s;
  }
  // A length: one byte below 128, or two bytes ((first - 128) * 256 + second), up to 32767.
  size_t Length() {
    size_t n = Byte();
    if (n >= 128) n = (n - 128) * 256 + Byte();
    return n;
  }

 private:
  const uint8_t* d_;
  size_t n_;
  size_t i_ = 0;
};

inline std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline std::string Format(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  FUZZ_CHECK(n >= 0 && static_cast<size_t>(n) < sizeof buf, "Format");
  return std::string(buf, static_cast<size_t>(n));
}

// The process a store runs in, as far as `stats` asks.
class StubHost final : public command::Host {
 public:
  command::HostStats CurrentStats() const override {
    command::HostStats h;
    h.pid = 1;
    h.version = "fuzz";
    return h;
  }
};

}  // namespace stalkd::fuzz
