#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/ui.h"

// The commands of `stalk`, one function each: main.cc declares their arguments (CLI11) into
// these structs and calls the chosen one. Each returns the exit code (errors.h) or throws
// Failure.
namespace stalkd::cli {

constexpr uint64_t kMaxU32 = 4294967295u;

// ---- jobs (jobs.cc)

struct PutOptions {
  std::string tube = "default";
  uint64_t pri = 1024, delay = 0, ttr = 60;
  std::string file;  // the body (or, with `lines`, the bodies) from this file; "-": stdin
  bool lines = false;
  std::vector<std::string> words;  // the body, from the command line
};
int Put(Context& ctx, const PutOptions& o);

struct ReserveOptions {
  std::vector<std::string> tubes;
  uint64_t timeout = 0;
  bool wait = false;
  uint64_t count = 1;
  bool del = false, bury = false;
  JobFormat format;
};
int Reserve(Context& ctx, const ReserveOptions& o);

struct PeekOptions {
  std::string what;  // a job id, or ready, delayed, buried
  std::string tube = "default";
  JobFormat format;
};
int Peek(Context& ctx, const PeekOptions& o);

int Delete(Context& ctx, const std::vector<uint64_t>& ids);

struct KickOptions {
  std::string tube = "default";
  uint64_t count = 1;
  bool all = false;
  std::vector<uint64_t> jobs;
};
int Kick(Context& ctx, const KickOptions& o);

struct BuryOptions {
  std::vector<uint64_t> ids;
  int64_t pri = -1;  // -1: each job's own priority
};
int Bury(Context& ctx, const BuryOptions& o);

// ---- stats (stats.cc)

int Stats(Context& ctx, const std::vector<std::string>& keys);
int StatsTube(Context& ctx, const std::vector<std::string>& tubes);
int StatsJob(Context& ctx, const std::vector<uint64_t>& ids);
int Tubes(Context& ctx, bool names_only);
int Pause(Context& ctx, const std::string& tube, uint64_t seconds);

// ---- purge (purge.cc)

int Purge(Context& ctx, const std::string& tube, const std::string& state);

// ---- tail (tail.cc)

struct TailOptions {
  std::string tube;
  double interval = 0.2;           // seconds between polls
  bool existing = false;           // show the jobs already there first
  uint64_t count = 0;              // stop after this many jobs (0: never)
  bool del = false, bury = false;  // take each job (reserve) and delete or bury it
  JobFormat format;
};
int Tail(Context& ctx, const TailOptions& o);

// ---- top (top.cc)

struct TopOptions {
  double interval = 1.0;
  std::string sort = "ready";
  uint64_t iterations = 0;  // 0: until q
  bool batch = false;       // plain snapshots instead of a screen
};
int Top(Context& ctx, const TopOptions& o);
// The sort keys of `top`, in the order its `s` key cycles through them.
const std::vector<std::string>& TopSortKeys();

// ---- dump and load (dump.cc)

struct DumpOptions {
  std::vector<std::string> tubes;  // none: every tube
  bool text = false;
  std::string output = "-";
  uint64_t max_id = 0;  // beanstalkd: the highest id to look at (0: find it out)
};
int Dump(Context& ctx, const DumpOptions& o);

struct LoadOptions {
  std::string input = "-";
};
int Load(Context& ctx, const LoadOptions& o);

}  // namespace stalkd::cli
