#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/conn.h"
#include "cli/job.h"
#include "cli/yaml.h"

// The beanstalkd protocol, command by command, over one connection.
namespace stalkd::cli {

// Throws Failure(kExitUsage) unless `name` is a tube name beanstalkd accepts: 1 to 200 bytes
// of A-Z a-z 0-9 - + / ; . $ _ ( ), not beginning with a hyphen.
void CheckTubeName(std::string_view name);

// stalk --token (STALK_TOKEN), --ns (STALK_NS): what `auth` sends right after connecting, to
// a server whose listener asks for it (docs/SECURITY.md, "Tokens on the beanstalkd port").
struct Credentials {
  std::string token;  // empty: no `auth`
  std::string ns;     // the token's namespace, for a token an admin chose (any form)
};

class Client {
 public:
  // Connects, then with credentials sends `auth` (throws Failure(kExitServer) if refused).
  explicit Client(const std::string& address, const TlsOptions& tls = {},
                  const Credentials& auth = {});
  Conn& conn() { return conn_; }

  // "COMMAND: the server answered REPLY", and what REPLY means when it is an error.
  static std::string Answered(std::string_view command, const Reply& r);
  // Throws Failure(kExitServer) with Answered(command, r).
  [[noreturn]] static void Unexpected(std::string_view command, const Reply& r);
  // Calls `line` and returns the reply if its first word is one of `words`; else Unexpected.
  Reply Expect(std::string_view line, std::initializer_list<std::string_view> words);

  Dict Stats();
  std::optional<Dict> StatsTube(std::string_view tube);
  std::optional<Dict> StatsJob(uint64_t id);
  // stats-tube of each tube, pipelined; nullopt for a tube that is gone.
  std::vector<std::optional<Dict>> StatsTubes(const std::vector<std::string>& tubes);
  std::vector<std::string> Tubes();
  // The job a RESERVED or FOUND reply carries, with the rest of it from stats-job (a job
  // deleted in between keeps what the reply says).
  JobRecord Describe(const Reply& r);

  // `use`, sent only when the tube changes.
  void Use(std::string_view tube);
  // Queues a `use` if the tube changes (pipelining); true if it did, and then the caller
  // reads its USING reply.
  bool QueueUse(std::string_view tube);
  // Watches exactly these tubes.
  void WatchOnly(const std::vector<std::string>& tubes);

  // True when the server has stalkd's extensions (docs/EXTENSIONS.md); asked once, with a
  // list-jobs that beanstalkd answers UNKNOWN_COMMAND.
  bool Extensions();
  // "stats", "stats-tube" or "stats-job" as stalk asks it: on stalkd its -ext form, whose
  // reply adds stalkd's own keys and job fields after beanstalkd's (docs/EXTENSIONS.md).
  std::string StatsVerb(std::string_view verb);

  // For each id, in order: stats-job and peek, pipelined in batches; fn gets each job that
  // exists (a job gone between the two is skipped). Changes nothing on the server.
  void FetchJobs(const std::vector<uint64_t>& ids, const std::function<void(JobRecord&&)>& fn);

  // For every id from `first` to `last`: stats-job (pipelined); the jobs that exist and
  // whose stats `want` accepts are fetched and given to fn. `scanned(n)` is told of every
  // n ids looked at. Changes nothing on the server.
  void ScanJobs(uint64_t first, uint64_t last, const std::function<bool(const Dict&)>& want,
                const std::function<void(JobRecord&&)>& fn,
                const std::function<void(uint64_t)>& scanned = nullptr);

  // The highest id a job has now, for a server without list-jobs: a job with an empty body
  // is put into a tube of our own ("stalk.probe.<pid>") and deleted at once; every job
  // that exists has a lower id. Throws Failure(kExitServer) if the put is refused.
  uint64_t TopId();

 private:
  // `auth`, then the tube the server has the connection use (a namespace's "<ns>/default").
  void Authenticate(const Credentials& auth);

  Conn conn_;
  std::string used_ = "default";
  std::optional<bool> extensions_;
};

}  // namespace stalkd::cli
