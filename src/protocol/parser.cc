#include <cstring>

#include "protocol/command.h"

namespace stalkd::protocol {

namespace {

// beanstalkd's read_u32/read_u64: skip spaces, require a digit, parse digits, reject
// overflow. With `last`, nothing may follow the number; otherwise `rest` is left just after
// it.
bool ReadNumber(std::string_view* rest, uint64_t max, bool last, uint64_t* out) {
  std::string_view s = *rest;
  size_t i = 0;
  while (i < s.size() && s[i] == ' ') i++;
  if (i == s.size() || s[i] < '0' || s[i] > '9') return false;
  uint64_t v = 0;
  bool overflow = false;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; i++) {
    uint64_t d = static_cast<uint64_t>(s[i] - '0');
    if (v > (UINT64_MAX - d) / 10) overflow = true;
    v = v * 10 + d;
  }
  if (overflow || v > max) return false;
  if (last && i != s.size()) return false;
  *rest = s.substr(i);
  *out = v;
  return true;
}

// beanstalkd 1.12 reads kick's count with strtoul() and keeps the low 32 bits: leading
// white space and a sign are accepted, anything after the digits is ignored, and only a
// missing number or a 64-bit overflow is an error.
bool ReadKickCount(std::string_view s, uint32_t* out) {
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r'))) i++;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  if (i == s.size() || s[i] < '0' || s[i] > '9') return false;
  uint64_t v = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; i++) {
    uint64_t d = static_cast<uint64_t>(s[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  if (negative) v = ~v + 1;
  *out = static_cast<uint32_t>(v);
  return true;
}

// reserve-with-timeout's largest timeout: beanstalkd 1.13 keeps it in an int.
constexpr uint32_t kMaxReserveTimeout = INT32_MAX;

struct VerbPrefix {
  std::string_view prefix;
  Verb verb;
};

// stalkd's extension verbs: matched as whole words (the verb, then a space or the end of the
// line) before beanstalkd's prefixes, so that anything else still gets beanstalkd's answer.
constexpr VerbPrefix kExtensionVerbs[] = {
    {"put-ext", Verb::kPutExt},
    {"put-many", Verb::kPutMany},
    {"reserve-ext", Verb::kReserveExt},
    {"delete-many", Verb::kDeleteMany},
    {"purge", Verb::kPurge},
    {"list-jobs", Verb::kListJobs},
    {"tube-tries", Verb::kTubeTries},
};

// The extended stats verbs (docs/EXTENSIONS.md): beanstalkd's "stats" prefix matches them,
// with something after it (BAD_FORMAT in beanstalkd), so only such lines look them up. Each
// is parsed as its beanstalkd verb, with Command::extended.
constexpr VerbPrefix kExtendedStats[] = {
    {"stats-ext", Verb::kStats},
    {"stats-tube-ext ", Verb::kStatsTube},
    {"stats-job-ext ", Verb::kStatsJob},
};

bool MatchesExtension(std::string_view line, const VerbPrefix& v, bool need_space) {
  if (line.substr(0, v.prefix.size()) != v.prefix) return false;
  if (line.size() == v.prefix.size()) return !need_space;
  return line[v.prefix.size()] == ' ';
}

// beanstalkd's which_cmd(): first matching prefix wins, so the order matters.
constexpr VerbPrefix kVerbs[] = {
    {"put ", Verb::kPut},
    {"peek ", Verb::kPeek},
    {"peek-ready", Verb::kPeekReady},
    {"peek-delayed", Verb::kPeekDelayed},
    {"peek-buried", Verb::kPeekBuried},
    {"reserve-with-timeout ", Verb::kReserveWithTimeout},
    {"reserve-job ", Verb::kReserveJob},
    {"reserve", Verb::kReserve},
    {"delete ", Verb::kDelete},
    {"release ", Verb::kRelease},
    {"bury ", Verb::kBury},
    {"kick ", Verb::kKick},
    {"kick-job ", Verb::kKickJob},
    {"touch ", Verb::kTouch},
    {"stats-job ", Verb::kStatsJob},
    {"stats-tube ", Verb::kStatsTube},
    {"stats", Verb::kStats},
    {"use ", Verb::kUse},
    {"watch ", Verb::kWatch},
    {"ignore ", Verb::kIgnore},
    {"list-tubes-watched", Verb::kListTubesWatched},
    {"list-tube-used", Verb::kListTubeUsed},
    {"list-tubes", Verb::kListTubes},
    {"quit", Verb::kQuit},
    {"pause-tube", Verb::kPauseTube},
};

}  // namespace

bool ReadU32(std::string_view* rest, bool last, uint32_t* out) {
  uint64_t v;
  if (!ReadNumber(rest, UINT32_MAX, last, &v)) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

bool ReadU64(std::string_view* rest, bool last, uint64_t* out) {
  return ReadNumber(rest, UINT64_MAX, last, out);
}

bool StartsExtensionLine(std::string_view buffered) {
  for (const VerbPrefix& v : kExtensionVerbs) {
    if (MatchesExtension(buffered, v, true)) return true;
  }
  return false;
}

ParseStatus ParseCommand(std::string_view line, Command* cmd) {
  *cmd = Command{};
  if (line.find('\0') != std::string_view::npos) return ParseStatus::kBadFormat;
  std::string_view args;
  for (const VerbPrefix& v : kVerbs) {
    if (line.substr(0, v.prefix.size()) == v.prefix) {
      cmd->verb = v.verb;
      args = line.substr(v.prefix.size());
      break;
    }
  }
  // An extension's verb matches none of beanstalkd's prefixes but "reserve" (reserve-ext),
  // so beanstalkd's commands never pay for looking them up.
  if (cmd->verb == Verb::kUnknown || (cmd->verb == Verb::kReserve && !args.empty())) {
    for (const VerbPrefix& v : kExtensionVerbs) {
      if (MatchesExtension(line, v, false)) {
        cmd->verb = v.verb;
        cmd->args = line.substr(v.prefix.size());
        return ParseStatus::kOk;
      }
    }
  }
  if (cmd->verb == Verb::kStats && !args.empty()) {
    for (const VerbPrefix& v : kExtendedStats) {
      if (line.substr(0, v.prefix.size()) == v.prefix) {
        cmd->verb = v.verb;
        cmd->extended = true;
        args = line.substr(v.prefix.size());
        break;
      }
    }
  }
  constexpr ParseStatus kBad = ParseStatus::kBadFormat;
  switch (cmd->verb) {
    case Verb::kUnknown:
    case Verb::kCount:
      return ParseStatus::kUnknownCommand;
    case Verb::kPutExt:
    case Verb::kPutMany:
    case Verb::kReserveExt:
    case Verb::kDeleteMany:
    case Verb::kPurge:
    case Verb::kListJobs:
    case Verb::kTubeTries:
      break;  // matched above
    case Verb::kPut: {
      if (!ReadU32(&args, false, &cmd->pri) || !ReadU32(&args, false, &cmd->delay) ||
          !ReadU32(&args, false, &cmd->ttr) || !ReadU32(&args, false, &cmd->bytes)) {
        return kBad;
      }
      cmd->trailing_garbage = !args.empty();
      return ParseStatus::kOk;
    }
    case Verb::kPeekReady:
    case Verb::kPeekDelayed:
    case Verb::kPeekBuried:
    case Verb::kReserve:
    case Verb::kStats:
    case Verb::kListTubes:
    case Verb::kListTubeUsed:
    case Verb::kListTubesWatched:
      return args.empty() ? ParseStatus::kOk : kBad;
    case Verb::kQuit:
      return ParseStatus::kOk;  // beanstalkd ignores whatever follows "quit"
    case Verb::kPeek:
    case Verb::kReserveJob:
    case Verb::kDelete:
    case Verb::kTouch:
    case Verb::kKickJob:
    case Verb::kStatsJob:
      return ReadU64(&args, true, &cmd->id) ? ParseStatus::kOk : kBad;
    case Verb::kReserveWithTimeout:
      // beanstalkd 1.13: read_u32 with an end pointer (what follows the number is ignored),
      // then the timeout must fit its int.
      return ReadU32(&args, false, &cmd->timeout) && cmd->timeout <= kMaxReserveTimeout
                 ? ParseStatus::kOk
                 : kBad;
    case Verb::kRelease:
      return ReadU64(&args, false, &cmd->id) && ReadU32(&args, false, &cmd->pri) &&
                     ReadU32(&args, true, &cmd->delay)
                 ? ParseStatus::kOk
                 : kBad;
    case Verb::kBury:
      return ReadU64(&args, false, &cmd->id) && ReadU32(&args, true, &cmd->pri) ? ParseStatus::kOk
                                                                                : kBad;
    case Verb::kKick:
      return ReadKickCount(args, &cmd->count) ? ParseStatus::kOk : kBad;
    case Verb::kStatsTube:
    case Verb::kUse:
    case Verb::kWatch:
    case Verb::kIgnore:
      if (!IsValidTubeName(args)) return kBad;
      cmd->tube = args;
      return ParseStatus::kOk;
    case Verb::kPauseTube: {
      // beanstalkd's read_tube_name: spaces, then the longest run of name characters.
      size_t i = 0;
      while (i < args.size() && args[i] == ' ') i++;
      size_t start = i;
      while (i < args.size() && command::IsTubeNameChar(args[i])) i++;
      if (i == start) return kBad;
      std::string_view name = args.substr(start, i - start);
      args = args.substr(i);
      if (!ReadU32(&args, true, &cmd->delay)) return kBad;
      // Whether the name is valid is the store's to say: beanstalkd has counted the command
      // by then.
      cmd->tube = name;
      return ParseStatus::kOk;
    }
  }
  return ParseStatus::kUnknownCommand;
}

}  // namespace stalkd::protocol
