#include <cstring>

#include "command/values.h"

namespace stalkd::command {

bool IsTubeNameChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         (c != '\0' && std::strchr("-+/;.$_()", c) != nullptr);
}

bool IsValidTubeName(std::string_view name) {
  if (name.empty() || name.size() > kMaxTubeNameLength || name[0] == '-') return false;
  for (char c : name) {
    if (!IsTubeNameChar(c)) return false;
  }
  return true;
}

}  // namespace stalkd::command
