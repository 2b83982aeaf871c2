#include <cstring>
#include <iterator>

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

namespace {

// Verbs as the protocol spells them, by Verb.
constexpr std::string_view kVerbNames[] = {
    "put",
    "peek",
    "peek-ready",
    "peek-delayed",
    "peek-buried",
    "reserve",
    "reserve-with-timeout",
    "delete",
    "release",
    "use",
    "watch",
    "ignore",
    "bury",
    "kick",
    "touch",
    "stats",
    "stats-job",
    "stats-tube",
    "list-tubes",
    "list-tube-used",
    "list-tubes-watched",
    "pause-tube",
    "reserve-job",
    "kick-job",
    "put-ext",
    "put-many",
    "reserve-ext",
    "delete-many",
    "purge",
    "list-jobs",
    "tube-tries",
    "quit",
    "unknown",
};
static_assert(std::size(kVerbNames) == command::kVerbCount);

}  // namespace

std::string_view VerbName(Verb v) { return kVerbNames[static_cast<size_t>(v)]; }

}  // namespace stalkd::command
