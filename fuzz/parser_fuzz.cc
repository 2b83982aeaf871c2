// Fuzzes ParseCommand and IsValidTubeName with arbitrary lines: no crash, no read outside
// the line, and the results agree with the documented rules. pause-tube's tube is any run
// of name characters: whether it is a valid name is the store's to say (after it counts
// the command, as beanstalkd does).
#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "base/check.h"
#include "command/values.h"
#include "protocol/command.h"

using stalkd::command::IsTubeNameChar;
using stalkd::protocol::Command;
using stalkd::protocol::IsValidTubeName;
using stalkd::protocol::ParseCommand;
using stalkd::protocol::ParseStatus;
using stalkd::protocol::Verb;

namespace {

bool Inside(std::string_view part, std::string_view whole) {
  return part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size();
}

// Re-parses a canonical spelling of cmd and checks it yields the same fields.
void CheckRoundTrip(const Command& cmd) {
  char buf[2048];  // a pause-tube's tube may be as long as the line
  int n = -1;
  switch (cmd.verb) {
    case Verb::kPut:
      if (cmd.trailing_garbage) return;
      n = snprintf(buf, sizeof buf, "put %u %u %u %u", cmd.pri, cmd.delay, cmd.ttr, cmd.bytes);
      break;
    case Verb::kRelease:
      n = snprintf(buf, sizeof buf, "release %" PRIu64 " %u %u", cmd.id, cmd.pri, cmd.delay);
      break;
    case Verb::kBury:
      n = snprintf(buf, sizeof buf, "bury %" PRIu64 " %u", cmd.id, cmd.pri);
      break;
    case Verb::kDelete:
      n = snprintf(buf, sizeof buf, "delete %" PRIu64, cmd.id);
      break;
    case Verb::kPeek:
      n = snprintf(buf, sizeof buf, "peek %" PRIu64, cmd.id);
      break;
    case Verb::kKick:
      n = snprintf(buf, sizeof buf, "kick %u", cmd.count);
      break;
    case Verb::kReserveWithTimeout:
      n = snprintf(buf, sizeof buf, "reserve-with-timeout %u", cmd.timeout);
      break;
    case Verb::kPauseTube:
      n = snprintf(buf, sizeof buf, "pause-tube %.*s %u", static_cast<int>(cmd.tube.size()),
                   cmd.tube.data(), cmd.delay);
      break;
    case Verb::kWatch:
      n = snprintf(buf, sizeof buf, "watch %.*s", static_cast<int>(cmd.tube.size()),
                   cmd.tube.data());
      break;
    default:
      return;
  }
  STALKD_CHECK(n > 0 && static_cast<size_t>(n) < sizeof buf);
  Command again;
  STALKD_CHECK(ParseCommand(std::string_view(buf, static_cast<size_t>(n)), &again) ==
               ParseStatus::kOk);
  STALKD_CHECK(again.verb == cmd.verb);
  STALKD_CHECK(again.id == cmd.id && again.pri == cmd.pri && again.delay == cmd.delay);
  STALKD_CHECK(again.ttr == cmd.ttr && again.bytes == cmd.bytes && again.count == cmd.count);
  STALKD_CHECK(again.timeout == cmd.timeout && again.tube == cmd.tube);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1024) return -1;  // lines are at most 222 bytes on the wire
  // A private copy, so any read past the end is caught by ASan.
  std::string copy(reinterpret_cast<const char*>(data), size);
  std::string_view line(copy);

  bool valid_name = IsValidTubeName(line);
  if (valid_name) {
    STALKD_CHECK(!line.empty() && line.size() <= 200 && line[0] != '-');
    for (char c : line) STALKD_CHECK(IsTubeNameChar(c));
  }

  Command cmd;
  ParseStatus st = ParseCommand(line, &cmd);
  bool has_nul = line.find('\0') != std::string_view::npos;
  if (has_nul) STALKD_CHECK(st == ParseStatus::kBadFormat);
  if (st == ParseStatus::kUnknownCommand) STALKD_CHECK(cmd.verb == Verb::kUnknown);
  if (st != ParseStatus::kOk) return 0;

  STALKD_CHECK(cmd.verb != Verb::kUnknown);
  switch (cmd.verb) {
    case Verb::kUse:
    case Verb::kWatch:
    case Verb::kIgnore:
    case Verb::kStatsTube:
      STALKD_CHECK(IsValidTubeName(cmd.tube));
      STALKD_CHECK(Inside(cmd.tube, line));
      break;
    case Verb::kPauseTube: {
      // As beanstalkd's read_tube_name: after the verb, spaces, then the longest run of name
      // characters; the delay follows after a space.
      STALKD_CHECK(!cmd.tube.empty() && Inside(cmd.tube, line));
      for (char c : cmd.tube) STALKD_CHECK(IsTubeNameChar(c));
      constexpr std::string_view kVerb = "pause-tube";
      size_t start = static_cast<size_t>(cmd.tube.data() - line.data());
      size_t end = start + cmd.tube.size();
      STALKD_CHECK(line.substr(0, kVerb.size()) == kVerb && start >= kVerb.size());
      for (size_t i = kVerb.size(); i < start; i++) STALKD_CHECK(line[i] == ' ');
      STALKD_CHECK(end < line.size() && line[end] == ' ');
      break;
    }
    default:
      STALKD_CHECK(cmd.tube.empty());
      break;
  }
  CheckRoundTrip(cmd);
  return 0;
}
