#pragma once

#include <cstdint>
#include <string_view>

namespace stalkd::protocol {

enum class Verb : uint8_t {
  kUnknown,
  kPut,
  kPeek,
  kPeekReady,
  kPeekDelayed,
  kPeekBuried,
  kReserve,
  kReserveWithTimeout,
  kReserveJob,
  kDelete,
  kRelease,
  kBury,
  kKick,
  kKickJob,
  kTouch,
  kStats,
  kStatsJob,
  kStatsTube,
  kUse,
  kWatch,
  kIgnore,
  kListTubes,
  kListTubeUsed,
  kListTubesWatched,
  kQuit,
  kPauseTube,
};

// One parsed command line. Only the fields of its verb are set.
struct Command {
  Verb verb = Verb::kUnknown;
  uint64_t id = 0;        // peek, reserve-job, delete, release, bury, touch, kick-job, stats-job
  uint32_t pri = 0;       // put, release, bury
  uint32_t delay = 0;     // put, release, pause-tube (seconds)
  uint32_t ttr = 0;       // put (seconds)
  uint32_t bytes = 0;     // put
  uint32_t count = 0;     // kick
  uint32_t timeout = 0;   // reserve-with-timeout (seconds)
  std::string_view tube;  // use, watch, ignore, stats-tube, pause-tube; points into the line
  // put only: the line had something after <bytes>. beanstalkd checks the size limit first
  // (JOB_TOO_BIG, body skipped) and only then rejects the garbage (BAD_FORMAT).
  bool trailing_garbage = false;
};

enum class ParseStatus : uint8_t { kOk, kBadFormat, kUnknownCommand };

// Parses one command line, without its CRLF, exactly as beanstalkd does: verbs are matched
// by prefix in beanstalkd's order, numbers may be preceded by spaces, u32/u64 overflow and
// stray characters are BAD_FORMAT, a NUL byte anywhere is BAD_FORMAT.
ParseStatus ParseCommand(std::string_view line, Command* cmd);

// True if name is a valid tube name: 1..200 bytes of [A-Za-z0-9-+/;.$_()], not starting
// with '-'.
bool IsValidTubeName(std::string_view name);

inline constexpr size_t kMaxLineLength = 224;  // including CRLF
inline constexpr size_t kMaxTubeNameLength = 200;

}  // namespace stalkd::protocol
