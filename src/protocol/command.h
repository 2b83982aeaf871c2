#pragma once

#include <cstdint>
#include <string_view>

#include "command/values.h"

namespace stalkd::protocol {

// The verbs are the command interface's; quit is answered by the front end alone.
using command::Verb;

// One parsed command line. Only the fields of its verb are set.
struct Command {
  Verb verb = Verb::kUnknown;
  uint64_t id = 0;       // peek, reserve-job, delete, release, bury, touch, kick-job, stats-job
  uint32_t pri = 0;      // put, release, bury
  uint32_t delay = 0;    // put, release, pause-tube (seconds)
  uint32_t ttr = 0;      // put (seconds)
  uint32_t bytes = 0;    // put
  uint32_t count = 0;    // kick
  uint32_t timeout = 0;  // reserve-with-timeout (seconds)
  // use, watch, ignore, stats-tube: a valid name; pause-tube: any run of name characters
  // (the store checks it, after counting the command as beanstalkd does). Points into the
  // line.
  std::string_view tube;
  // put only: the line had something after <bytes>. beanstalkd checks the size limit first
  // (JOB_TOO_BIG, body skipped) and only then rejects the garbage (BAD_FORMAT).
  bool trailing_garbage = false;
  // stats-ext, stats-tube-ext, stats-job-ext (docs/EXTENSIONS.md): kStats, kStatsTube or
  // kStatsJob whose reply adds stalkd's own keys after beanstalkd's.
  bool extended = false;
  // An extension verb (docs/EXTENSIONS.md): everything after the verb, parsed by
  // extensions.cc.
  std::string_view args;
};

// Whether v is one of stalkd's extension verbs (kPutExt .. kTubeTries).
inline bool IsExtension(Verb v) {
  auto i = static_cast<size_t>(v);
  return i >= command::kFirstExtensionVerb && i < command::kEndExtensionVerb;
}

// `auth` (auth.cc; docs/SECURITY.md): the line's verb is "auth". Not a Verb: a listener
// without tokens answers it UNKNOWN_COMMAND, as beanstalkd does.
bool IsAuthLine(std::string_view line);
// Whether a command of a namespace's connection names job ids that must be checked first.
bool NeedsIdCheck(Verb v);

enum class ParseStatus : uint8_t { kOk, kBadFormat, kUnknownCommand };

// Parses one command line, without its CRLF, exactly as beanstalkd 1.13 does: verbs are
// matched by prefix in beanstalkd's order; a number is optional spaces then decimal digits
// (no sign), and u32/u64 overflow is BAD_FORMAT; a NUL byte anywhere is BAD_FORMAT. What may
// follow the last number is beanstalkd's: nothing for peek, reserve-job, delete, release,
// bury, touch, kick-job, stats-job and pause-tube; anything for reserve-with-timeout (whose
// timeout is at most 2147483647) and for kick (read as strtoul() reads it); for put, the
// conversation refuses it after the size check (trailing_garbage).
ParseStatus ParseCommand(std::string_view line, Command* cmd);

using command::IsValidTubeName;
using command::kMaxTubeNameLength;

inline constexpr size_t kMaxLineLength = 224;  // including CRLF
// The line of an extension command may be longer (its options, delete-many's ids).
inline constexpr size_t kMaxExtensionLineLength = 8192;
// True if the buffered bytes begin an extension command's line (its verb and a space).
bool StartsExtensionLine(std::string_view buffered);

// beanstalkd's number reading: spaces, then digits; u32/u64 overflow is an error. With
// `last`, nothing may follow; otherwise *rest is left just after the number.
bool ReadU32(std::string_view* rest, bool last, uint32_t* out);
bool ReadU64(std::string_view* rest, bool last, uint64_t* out);

}  // namespace stalkd::protocol
