#include "cli/codec.h"

#include <cstdint>

#include "base/base64.h"

namespace stalkd::cli {

namespace {

// The length of the valid UTF-8 sequence at the start of `s`, or 0 if there is none.
size_t Utf8Length(std::string_view s) {
  auto b = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  uint8_t c = b(0);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2, cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3, cp = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4, cp = c & 0x07;
  } else {
    return 0;
  }
  if (s.size() < n) return 0;
  for (size_t i = 1; i < n; i++) {
    if ((b(i) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(i) & 0x3f);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
      (cp >= 0xd800 && cp <= 0xdfff)) {
    return 0;
  }
  return n;
}

}  // namespace

std::string Base64Encode(std::string_view bytes) {
  std::string out;
  base64::Append(bytes, &out);
  return out;
}

std::optional<std::string> Base64Decode(std::string_view text) {
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(text.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    int v = base64::Digit(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

bool IsUtf8(std::string_view bytes) {
  while (!bytes.empty()) {
    size_t n = Utf8Length(bytes);
    if (n == 0) return false;
    bytes.remove_prefix(n);
  }
  return true;
}

std::string Printable(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size());
  while (!bytes.empty()) {
    size_t n = Utf8Length(bytes);
    auto c = static_cast<uint8_t>(bytes[0]);
    if (n == 1 && c == '\\') {
      out += "\\\\";
    } else if (n == 1 && ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)) {
      n = 0;
    } else if (n > 0) {
      out.append(bytes.substr(0, n));
    }
    if (n == 0) {  // a byte to escape
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
      n = 1;
    }
    bytes.remove_prefix(n);
  }
  return out;
}

}  // namespace stalkd::cli
