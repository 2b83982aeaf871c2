#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

// A request target taken apart: path segments and query parameters, percent-decoded; and
// numbers parsed as lmstfy's Go handlers parse them (strconv.ParseUint/ParseInt, base 10).
namespace stalkd::http {

class Target {
 public:
  // false if the target is not an absolute path or has a bad percent escape.
  bool Parse(std::string_view target);

  const std::vector<std::string>& segments() const { return segments_; }
  // The first value of query parameter `key`, or nullopt if it is absent (Go's c.Query and
  // c.DefaultQuery tell an absent key from an empty one the same way).
  std::optional<std::string_view> Query(std::string_view key) const;

 private:
  std::vector<std::string> segments_;
  std::vector<std::pair<std::string, std::string>> query_;
};

// strconv.ParseUint(s, 10, bits): decimal digits only, no sign, at most 2^bits - 1.
std::optional<uint64_t> ParseUint(std::string_view s, int bits);
// strconv.ParseInt(s, 10, 64): an optional sign, then decimal digits.
std::optional<int64_t> ParseInt64(std::string_view s);
// strconv.ParseBool: 1 t T TRUE true True 0 f F FALSE false False.
std::optional<bool> ParseBool(std::string_view s);

}  // namespace stalkd::http
