#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"

// The values that cross the command interface: what a front end asks (verbs and their
// arguments) and what a store answers (outcomes, job views, stats). No store's internals
// (jobs, tubes, sessions) appear here; everything is copied or viewed.
namespace stalkd::command {

// Every verb, in the order `stats` lists its cmd-* counter. The verbs after kPauseTube are
// counted but not shown, as in beanstalkd.
enum class Verb : uint8_t {
  kPut,
  kPeek,
  kPeekReady,
  kPeekDelayed,
  kPeekBuried,
  kReserve,
  kReserveWithTimeout,
  kDelete,
  kRelease,
  kUse,
  kWatch,
  kIgnore,
  kBury,
  kKick,
  kTouch,
  kStats,
  kStatsJob,
  kStatsTube,
  kListTubes,
  kListTubeUsed,
  kListTubesWatched,
  kPauseTube,
  kReserveJob,
  kKickJob,
  // stalkd's extensions (docs/EXTENSIONS.md), shown after beanstalkd's keys.
  kPutExt,
  kPutMany,
  kReserveExt,
  kDeleteMany,
  kPurge,
  kListJobs,
  kTubeTries,
  kQuit,
  kUnknown,  // not a verb: a request that names none
  kCount,
};
inline constexpr size_t kVerbCount = static_cast<size_t>(Verb::kCount);
// Verbs whose cmd-* counter `stats` shows among beanstalkd's: kPut .. kPauseTube; the
// extensions' (kPutExt .. kTubeTries) come after all of beanstalkd's keys.
inline constexpr size_t kShownVerbCount = static_cast<size_t>(Verb::kPauseTube) + 1;
inline constexpr size_t kFirstExtensionVerb = static_cast<size_t>(Verb::kPutExt);
inline constexpr size_t kEndExtensionVerb = static_cast<size_t>(Verb::kTubeTries) + 1;

// Every answer a command can have. A front end encodes each in its own protocol.
enum class Outcome : uint8_t {
  kPending,  // not known yet: it arrives later through Client::OnResult
  // Successes.
  kInserted,   // number: the new job's id
  kReserved,   // job
  kFound,      // job
  kDeleted,    //
  kReleased,   //
  kBuried,     //
  kTouched,    //
  kKicked,     // number: how many jobs (kick)
  kKickedJob,  // the one job of kick-job
  kUsing,      // name: the tube used
  kWatching,   // number: how many tubes are watched
  kPaused,     //
  kStats,      // stats
  kTubeStats,  // tube_stats
  kJobStats,   // job_stats
  kTubeList,   // tubes
  // Successes of the extensions (docs/EXTENSIONS.md).
  kExists,        // number: the id of the living job with the put's key
  kReservedMany,  // jobs
  kDeletedMany,   // number: how many were deleted
  kPurged,        // number: how many were purged
  kJobList,       // ids, number: the id to continue from (0: no more)
  kTubeTries,     // number: the tube's default tries
  // Refusals.
  kNotFound,
  kNotIgnored,    // the tube is the only one watched
  kTimedOut,      // a reserve's timeout passed (or its client went away)
  kDeadlineSoon,  // a reserved job's TTR ends within a second
  kDraining,      // the server takes no new jobs
  kOutOfMemory,   // the memory cap, or the job could not be made durable
  kJobTooBig,     // the body is over the job size limit
  kBadFormat,     // the request is malformed (e.g. an invalid tube name)
  // The store cannot tell what happened (a store across a network: its connection was lost
  // during the command, or a replica did not confirm it in time); the command may or may
  // not have taken effect.
  kInternalError,
  // Decided by a front end itself, never by a store.
  kExpectedCrlf,
  kUnknownCommand,
  // The text protocol's `auth` (docs/SECURITY.md): accepted; the command needs an
  // identity (none yet, or its token was deleted); the tube is outside the identity's
  // namespace; the token's rate limit refused the put.
  kAuthenticated,
  kUnauthorized,
  kForbidden,
  kRateLimited,
};

// A job as a reply shows it. `body` excludes the protocol's CRLF; it stays valid until the
// caller next calls into the store.
struct JobView {
  uint64_t id = 0;
  std::string_view body;
};

// What `stats` reports about the process rather than the jobs; a store gets it from its
// Host.
struct HostStats {
  long pid = 0;
  std::string version;
  int64_t utime_us = 0;
  int64_t stime_us = 0;
  uint64_t uptime_s = 0;
  int binlog_oldest_index = 0;
  int binlog_current_index = 0;
  int64_t binlog_records_migrated = 0;
  int64_t binlog_records_written = 0;
  int64_t binlog_max_size = 0;
  std::string id;
  std::string hostname;
  std::string os;
  std::string platform;
};

struct ServerStats {
  uint64_t urgent = 0;
  uint64_t ready = 0;
  uint64_t reserved = 0;
  uint64_t delayed = 0;
  uint64_t buried = 0;
  uint64_t cmds[kVerbCount] = {};  // by Verb
  uint64_t timeouts = 0;
  uint64_t total_jobs = 0;
  size_t max_job_size = 0;
  size_t tubes = 0;
  uint64_t connections = 0;
  uint64_t producers = 0;
  uint64_t workers = 0;
  uint64_t waiting = 0;
  uint64_t total_connections = 0;
  bool draining = false;
  size_t memory_used = 0;
  size_t memory_limit = 0;
  uint64_t expired = 0;
  uint64_t tries_exhausted = 0;
  // The disk tier (docs/DISK-TIER.md), shown only when it is on (--hot-memory).
  struct DiskTier {
    bool on = false;
    uint64_t hot_jobs = 0;     // jobs in memory
    uint64_t cold_jobs = 0;    // jobs kept in the binlog only
    uint64_t index_bytes = 0;  // memory of the indexes of those
    uint64_t budget = 0;       // --hot-memory
    uint64_t promotions = 0;
    uint64_t demotions = 0;
    uint64_t waited_reads = 0;  // promotions a command waited for
    uint64_t read_errors = 0;
    uint64_t rewrites = 0;  // kFull records written again so that changed jobs could go
  } disk;
  HostStats host;
};

// A job's attribute (docs/EXTENSIONS.md): a short name and value.
struct Attribute {
  std::string_view name;
  std::string_view value;
};
inline constexpr size_t kMaxAttributes = 16;
inline constexpr size_t kMaxAttributeName = 64;
inline constexpr size_t kMaxAttributeValue = 255;
inline constexpr size_t kMaxJobKey = 200;

// The lifecycle extensions' part of JobStats, for a job that uses any.
struct JobExtensionStats {
  bool limited = false;
  uint32_t tries_left = 0;
  std::string_view bury_reason;  // empty unless buried: "bury", "timeout", "release"
  bool has_ttl = false;
  int64_t ttl_left_s = 0;   // whole seconds left, rounded down (as stats-job's times)
  int64_t ttl_left_ms = 0;  // the same in milliseconds, for a front end that rounds otherwise
  std::string_view key;     // empty: none
  std::span<const Attribute> attributes;
};

struct TubeStats {
  std::string_view name;
  uint64_t urgent = 0;
  uint64_t ready = 0;
  uint64_t reserved = 0;
  uint64_t delayed = 0;
  uint64_t buried = 0;
  uint64_t total_jobs = 0;
  uint32_t using_ct = 0;
  uint32_t watching_ct = 0;
  uint64_t waiting = 0;
  uint64_t deletes = 0;
  uint64_t pauses = 0;
  int64_t pause_s = 0;
  int64_t pause_left_s = 0;
  uint64_t expired = 0;
  uint64_t tries_exhausted = 0;
  uint32_t default_tries = 0;
};

struct JobStats {
  uint64_t id = 0;
  std::string_view tube;
  std::string_view state;  // "ready", "delayed", "reserved", "buried"
  uint32_t pri = 0;
  int64_t age_s = 0;
  int64_t age_ms = 0;  // the same, in milliseconds (lmstfy's elapsed_ms)
  uint32_t delay_s = 0;
  uint32_t ttr_s = 0;
  int64_t time_left_s = 0;
  uint32_t file = 0;
  uint32_t reserves = 0;
  uint32_t timeouts = 0;
  uint32_t releases = 0;
  uint32_t buries = 0;
  uint32_t kicks = 0;
  // Reserved by no connection (reserve-ext detached, an HTTP consume): anyone may delete,
  // release, bury or touch it by id.
  bool detached = false;
  const JobExtensionStats* extension = nullptr;  // null: a plain job
};

// The answer to one command. Only the fields its outcome names are set; views and
// pointers stay valid until the caller next calls into the store (for a late result: until
// OnResult returns).
// Every command returns one, so it is kept to 64 bytes: the pointers share one word.
struct Result {
  Outcome outcome = Outcome::kNotFound;
  uint64_t number = 0;    // kInserted: id; kKicked: jobs kicked; kWatching: tubes watched
  JobView job;            // kReserved, kFound
  std::string_view name;  // kUsing
  union {
    const ServerStats* stats = nullptr;          // kStats
    const TubeStats* tube_stats;                 // kTubeStats
    const JobStats* job_stats;                   // kJobStats
    const std::vector<std::string_view>* tubes;  // kTubeList
    const std::vector<JobView>* jobs;            // kReservedMany
    const std::vector<uint64_t>* ids;            // kJobList
  };

  static Result Of(Outcome o, uint64_t n = 0) {
    Result r;
    r.outcome = o;
    r.number = n;
    return r;
  }
};

static_assert(sizeof(Result) == 64);

// What a put may carry beyond beanstalkd's arguments (put-ext), within the limits above.
struct PutOptions {
  uint32_t tries = 0;  // 0: the tube's default, or unlimited
  uint32_t ttl_s = 0;  // 0: none
  std::string_view key;
  std::span<const Attribute> attributes;
};

struct PutArgs {
  uint32_t pri = 0;
  uint32_t delay_s = 0;
  uint32_t ttr_s = 0;  // 0 is taken as 1, as in beanstalkd
  uint32_t bytes = 0;  // body size
  // The request had something malformed after its size: beanstalkd counts the put and
  // checks the size limit first (kJobTooBig), and only then refuses it (kBadFormat).
  bool malformed = false;
  // The cmd-* counter the put counts in (kPut, kPutExt); kCount: none (the puts of a batch,
  // counted once by Session::CountBatch).
  Verb verb = Verb::kPut;
  const PutOptions* options = nullptr;  // views valid during BeginPut only
};

// reserve-ext: how many jobs, for how long, and how they are reserved.
struct ReserveArgs {
  Nanos timeout = kForever;
  uint32_t count = 1;  // up to this many: the first that comes, then those ready at once
  uint32_t ttr_s = 0;  // 0: each job's own
  bool freeze_tries = false;
  bool detached = false;
};

// Which of a tube's jobs purge and list-jobs mean.
enum class StateFilter : uint8_t { kReady, kDelayed, kReserved, kBuried, kAll };

// Where a put's body goes: `bytes` of body, then 2 more bytes a front end may use for its
// framing (the text protocol reads the CRLF that ends the body into them).
struct PutSlot {
  char* data = nullptr;  // null: the put is refused with `refusal`
  size_t size = 0;       // bytes + 2
  Outcome refusal = Outcome::kOutOfMemory;
};

// A verb as the text protocol spells it ("put", "reserve-with-timeout", ...); "unknown" for
// kUnknown. stats' cmd-* keys and /metrics' verb labels are made from it.
std::string_view VerbName(Verb v);

// Tube names: 1..200 bytes of [A-Za-z0-9-+/;.$_()], not starting with '-'.
inline constexpr size_t kMaxTubeNameLength = 200;
bool IsTubeNameChar(char c);
bool IsValidTubeName(std::string_view name);

}  // namespace stalkd::command
