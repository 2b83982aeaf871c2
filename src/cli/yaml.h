#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// The flat YAML of beanstalkd's OK replies: `stats*` dicts and `list-tubes` lists.
namespace stalkd::cli {

// A YAML scalar as the server wrote it: `text` without quotes and escapes, `quoted` when
// it was a double-quoted string (beanstalkd 1.13 quotes strings; 1.12 does not).
struct Scalar {
  std::string text;
  bool quoted = false;
};

// A `stats`, `stats-tube` or `stats-job` reply, keys in the server's order.
class Dict {
 public:
  void Add(std::string key, Scalar value) { items_.emplace_back(std::move(key), std::move(value)); }
  const std::vector<std::pair<std::string, Scalar>>& items() const { return items_; }
  // The value of `key`, or nullopt.
  std::optional<std::string> Get(std::string_view key) const;
  // The value of `key` as a number; `otherwise` when it is missing or not a number.
  uint64_t Number(std::string_view key, uint64_t otherwise = 0) const;

 private:
  std::vector<std::pair<std::string, Scalar>> items_;
};

// Parse the body of an OK reply ("---\nkey: value\n..."). Lines that are not `key: value`
// are skipped.
Dict ParseDict(std::string_view yaml);
// Parse a YAML list ("---\n- a\n- b\n").
std::vector<std::string> ParseList(std::string_view yaml);
// A scalar: a double-quoted string loses its quotes and escapes (\" \\ \xNN \n \t ...).
Scalar ParseScalar(std::string_view text);

}  // namespace stalkd::cli
