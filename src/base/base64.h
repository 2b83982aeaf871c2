#pragma once

// RFC 4648 base64 with padding, header-only: the server's HTTP API (lmstfy's `data`, basic
// auth, the dashboard) and stalk (job bodies in JSON) both use it, and stalk links no
// library of the server.

#include <cstdint>
#include <string>
#include <string_view>

namespace stalkd::base64 {

inline constexpr char kAlphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// The value of a base64 digit, or -1.
inline int Digit(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Appends the base64 of `data` to *out, padded with '='.
inline void Append(std::string_view data, std::string* out) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  size_t n = data.size();
  out->reserve(out->size() + 4 * ((n + 2) / 3));
  for (; n >= 3; n -= 3, p += 3) {
    const uint32_t v = uint32_t{p[0]} << 16 | uint32_t{p[1]} << 8 | p[2];
    const char quad[4] = {kAlphabet[v >> 18], kAlphabet[(v >> 12) & 63], kAlphabet[(v >> 6) & 63],
                          kAlphabet[v & 63]};
    out->append(quad, 4);
  }
  if (n == 0) return;
  const uint32_t v = uint32_t{p[0]} << 16 | (n == 2 ? uint32_t{p[1]} << 8 : 0);
  const char quad[4] = {kAlphabet[v >> 18], kAlphabet[(v >> 12) & 63],
                        n == 2 ? kAlphabet[(v >> 6) & 63] : '=', '='};
  out->append(quad, 4);
}

// Decodes padded base64 (4 digits per 3 bytes, '=' only in the last one or two places) into
// *out; false if `text` is not that.
inline bool DecodePadded(std::string_view text, std::string* out) {
  if (text.size() % 4 != 0) return false;
  size_t pad = 0;
  if (!text.empty() && text.back() == '=') pad = text[text.size() - 2] == '=' ? 2 : 1;
  out->clear();
  out->reserve(3 * (text.size() / 4));
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    uint32_t v = 0;
    for (size_t k = 0; k < 4; k++) {
      const int d = last && k >= 4 - pad ? 0 : Digit(text[i + k]);
      if (d < 0) return false;
      v = v << 6 | static_cast<uint32_t>(d);
    }
    const char bytes[3] = {static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                           static_cast<char>(v)};
    out->append(bytes, last ? 3 - pad : 3);
  }
  return true;
}

}  // namespace stalkd::base64
