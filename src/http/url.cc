#include "http/url.h"

#include <limits>

namespace stalkd::http {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decodes s into *out; `plus_space` for query parts (form encoding).
bool Decode(std::string_view s, bool plus_space, std::string* out) {
  out->clear();
  for (size_t i = 0; i < s.size(); i++) {
    char c = s[i];
    if (c == '%') {
      if (i + 2 >= s.size()) return false;
      int hi = HexValue(s[i + 1]), lo = HexValue(s[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out->push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_space) {
      out->push_back(' ');
    } else {
      out->push_back(c);
    }
  }
  return true;
}

}  // namespace

bool Target::Parse(std::string_view target) {
  segments_.clear();
  query_.clear();
  if (target.empty() || target[0] != '/') return false;
  size_t q = target.find('?');
  std::string_view path = target.substr(0, q);
  std::string_view query = q == std::string_view::npos ? "" : target.substr(q + 1);
  size_t at = 1;
  while (at <= path.size()) {
    size_t slash = path.find('/', at);
    if (slash == std::string_view::npos) slash = path.size();
    std::string seg;
    if (!Decode(path.substr(at, slash - at), false, &seg)) return false;
    segments_.push_back(std::move(seg));
    at = slash + 1;
  }
  // "/api/ns/q/" has an empty last segment: as Gin without trailing-slash redirects, it
  // matches no route.
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view part = query.substr(0, amp);
    query = amp == std::string_view::npos ? "" : query.substr(amp + 1);
    if (part.empty()) continue;
    size_t eq = part.find('=');
    std::string k, v;
    // As Go's url.ParseQuery: a pair with a malformed escape is dropped.
    if (!Decode(part.substr(0, eq), true, &k)) continue;
    if (eq != std::string_view::npos && !Decode(part.substr(eq + 1), true, &v)) continue;
    query_.emplace_back(std::move(k), std::move(v));
  }
  return true;
}

std::optional<std::string_view> Target::Query(std::string_view key) const {
  for (const auto& [k, v] : query_) {
    if (k == key) return std::string_view(v);
  }
  return std::nullopt;
}

std::optional<uint64_t> ParseUint(std::string_view s, int bits) {
  if (s.empty()) return std::nullopt;
  uint64_t max = bits >= 64 ? std::numeric_limits<uint64_t>::max() : (uint64_t{1} << bits) - 1;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (max - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

std::optional<int64_t> ParseInt64(std::string_view s) {
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  std::optional<uint64_t> v = ParseUint(s, 64);
  if (!v) return std::nullopt;
  uint64_t limit = uint64_t{std::numeric_limits<int64_t>::max()} + (negative ? 1 : 0);
  if (*v > limit) return std::nullopt;
  return negative ? static_cast<int64_t>(0 - *v) : static_cast<int64_t>(*v);
}

std::optional<bool> ParseBool(std::string_view s) {
  if (s == "1" || s == "t" || s == "T" || s == "TRUE" || s == "true" || s == "True") return true;
  if (s == "0" || s == "f" || s == "F" || s == "FALSE" || s == "false" || s == "False") {
    return false;
  }
  return std::nullopt;
}

}  // namespace stalkd::http
