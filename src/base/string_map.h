#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace stalkd {

// Hashes std::string and std::string_view alike, so a map keyed by std::string can be
// looked up with a string_view without making a string.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};

// A hash map from strings, looked up by string_view.
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

}  // namespace stalkd
