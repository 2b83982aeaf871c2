#include "cli/client.h"

#include <unistd.h>

#include <algorithm>

#include "cli/errors.h"

namespace stalkd::cli {

namespace {

// Commands pipelined at a time: enough to hide the round trips, small enough to keep the
// replies in memory.
constexpr size_t kBatch = 256;
// stats-job by id, pipelined at a time: most answers are a short NOT_FOUND.
constexpr uint64_t kScanBatch = 4096;

}  // namespace

void CheckTubeName(std::string_view name) {
  bool ok = !name.empty() && name.size() <= 200 && name[0] != '-';
  for (char c : name) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                std::string_view("-+/;.$_()").find(c) != std::string_view::npos);
  }
  if (!ok) {
    throw Failure(kExitUsage, "bad tube name \"" + std::string(name) +
                                  "\": 1 to 200 of A-Z a-z 0-9 - + / ; . $ _ ( ), "
                                  "not beginning with -");
  }
}

namespace {

// What a beanstalkd error reply means, in words ("" for a reply that is not one of them).
std::string_view ErrorMeaning(std::string_view word) {
  if (word == "OUT_OF_MEMORY") return "the server is out of memory, or at stalkd's --max-memory";
  if (word == "JOB_TOO_BIG") return "the body is larger than the server's max-job-size, its -z";
  if (word == "DRAINING") return "the server is draining (SIGUSR1) and takes no new jobs";
  if (word == "INTERNAL_ERROR") return "the server failed (its log may say why)";
  if (word == "BAD_FORMAT") return "the server did not understand the command's arguments";
  if (word == "UNKNOWN_COMMAND") return "the server does not have this command";
  if (word == "NOT_IGNORED") return "a connection must watch at least one tube";
  return "";
}

}  // namespace

Client::Client(const std::string& address, const TlsOptions& tls, const Credentials& auth)
    : conn_(address, tls) {
  if (!auth.token.empty()) Authenticate(auth);
}

void Client::Authenticate(const Credentials& auth) {
  if (auth.token.find_first_of(" \r\n") != std::string::npos ||
      auth.ns.find_first_of(" \r\n") != std::string::npos) {
    throw Failure(kExitUsage, "--token and --ns are single words");
  }
  // The token is never part of a message: the reply alone says what went wrong.
  Reply r = conn_.Call("auth " + (auth.ns.empty() ? "" : auth.ns + " ") + auth.token);
  if (r.Is("UNAUTHORIZED")) {
    throw Failure(kExitServer, "auth: the server answered UNAUTHORIZED (the token is not one of " +
                                   std::string(auth.ns.empty() ? "its" : "this namespace's") +
                                   " tokens)");
  }
  if (!r.Is("AUTHENTICATED")) Unexpected("auth", r);
  // A namespace's token moves the connection to "<ns>/default".
  Reply used = Expect("list-tube-used", {"USING"});
  used_ = used.line.substr(std::min(used.line.size(), size_t{6}));
}

std::string Client::Answered(std::string_view command, const Reply& r) {
  std::string what = std::string(command) + ": the server answered " +
                     (r.line.empty() ? std::string("nothing") : r.line);
  if (std::string_view meaning = ErrorMeaning(r.Word()); !meaning.empty()) {
    what += " (" + std::string(meaning) + ")";
  }
  return what;
}

void Client::Unexpected(std::string_view command, const Reply& r) {
  throw Failure(kExitServer, Answered(command, r));
}

Reply Client::Expect(std::string_view line, std::initializer_list<std::string_view> words) {
  Reply r = conn_.Call(line);
  if (std::find(words.begin(), words.end(), r.Word()) == words.end()) Unexpected(line, r);
  return r;
}

std::string Client::StatsVerb(std::string_view verb) {
  return std::string(verb) + (Extensions() ? "-ext" : "");
}

Dict Client::Stats() { return ParseDict(Expect(StatsVerb("stats"), {"OK"}).body); }

std::optional<Dict> Client::StatsTube(std::string_view tube) {
  Reply r = Expect(StatsVerb("stats-tube") + " " + std::string(tube), {"OK", "NOT_FOUND"});
  if (!r.Is("OK")) return std::nullopt;
  return ParseDict(r.body);
}

JobRecord Client::Describe(const Reply& r) {
  uint64_t id = r.Number(1);
  std::optional<Dict> stats = StatsJob(id);
  if (!stats) {
    JobRecord j;
    j.id = id;
    j.body = r.body;
    return j;
  }
  return JobFromStats(*stats, r.body);
}

std::optional<Dict> Client::StatsJob(uint64_t id) {
  Reply r = Expect(StatsVerb("stats-job") + " " + std::to_string(id), {"OK", "NOT_FOUND"});
  if (!r.Is("OK")) return std::nullopt;
  return ParseDict(r.body);
}

std::vector<std::optional<Dict>> Client::StatsTubes(const std::vector<std::string>& tubes) {
  std::vector<std::optional<Dict>> out;
  out.reserve(tubes.size());
  std::string verb = StatsVerb("stats-tube") + " ";
  for (size_t i = 0; i < tubes.size(); i += kBatch) {
    size_t end = std::min(tubes.size(), i + kBatch);
    for (size_t k = i; k < end; k++) conn_.SendLine(verb + tubes[k]);
    for (size_t k = i; k < end; k++) {
      Reply r = conn_.Read();
      if (r.Is("OK")) {
        out.push_back(ParseDict(r.body));
      } else if (r.Is("NOT_FOUND")) {
        out.emplace_back();
      } else {
        Unexpected(verb + tubes[k], r);
      }
    }
  }
  return out;
}

std::vector<std::string> Client::Tubes() { return ParseList(Expect("list-tubes", {"OK"}).body); }

void Client::Use(std::string_view tube) {
  if (tube == used_) return;
  Expect("use " + std::string(tube), {"USING"});
  used_ = std::string(tube);
}

bool Client::QueueUse(std::string_view tube) {
  if (tube == used_) return false;
  conn_.SendLine("use " + std::string(tube));
  used_ = std::string(tube);
  return true;
}

void Client::WatchOnly(const std::vector<std::string>& tubes) {
  for (const std::string& t : tubes) Expect("watch " + t, {"WATCHING"});
  for (const std::string& t : ParseList(Expect("list-tubes-watched", {"OK"}).body)) {
    if (std::find(tubes.begin(), tubes.end(), t) == tubes.end()) {
      Expect("ignore " + t, {"WATCHING"});
    }
  }
}

bool Client::Extensions() {
  if (!extensions_) {
    Reply r = conn_.Call("list-jobs default ready 1 1");
    // FORBIDDEN: a namespace's connection (stalkd's `auth`), not allowed "default".
    extensions_ = r.Is("OK") || r.Is("NOT_FOUND") || r.Is("FORBIDDEN");
  }
  return *extensions_;
}

void Client::FetchJobs(const std::vector<uint64_t>& ids,
                       const std::function<void(JobRecord&&)>& fn) {
  std::string verb = StatsVerb("stats-job") + " ";
  for (size_t i = 0; i < ids.size(); i += kBatch) {
    size_t end = std::min(ids.size(), i + kBatch);
    for (size_t k = i; k < end; k++) {
      std::string id = std::to_string(ids[k]);
      conn_.SendLine(verb + id);
      conn_.SendLine("peek " + id);
    }
    for (size_t k = i; k < end; k++) {
      Reply stats = conn_.Read();
      Reply peek = conn_.Read();
      std::string id = std::to_string(ids[k]);
      if (!stats.Is("OK") && !stats.Is("NOT_FOUND")) Unexpected(verb + id, stats);
      if (!peek.Is("FOUND") && !peek.Is("NOT_FOUND")) Unexpected("peek " + id, peek);
      if (stats.Is("OK") && peek.Is("FOUND")) fn(JobFromStats(ParseDict(stats.body), peek.body));
    }
  }
}

void Client::ScanJobs(uint64_t first, uint64_t last, const std::function<bool(const Dict&)>& want,
                      const std::function<void(JobRecord&&)>& fn,
                      const std::function<void(uint64_t)>& scanned) {
  std::string verb = StatsVerb("stats-job") + " ";
  for (uint64_t lo = first; lo <= last && lo != 0; lo += kScanBatch) {
    uint64_t hi = std::min<uint64_t>(last, lo + kScanBatch - 1);
    for (uint64_t id = lo; id <= hi; id++) conn_.SendLine(verb + std::to_string(id));
    std::vector<uint64_t> found;
    for (uint64_t id = lo; id <= hi; id++) {
      Reply r = conn_.Read();
      if (r.Is("OK")) {
        if (want(ParseDict(r.body))) found.push_back(id);
      } else if (!r.Is("NOT_FOUND")) {
        Unexpected(verb + std::to_string(id), r);
      }
    }
    FetchJobs(found, fn);
    if (scanned) scanned(hi - lo + 1);
  }
}

uint64_t Client::TopId() {
  std::string before = used_;
  Use("stalk.probe." + std::to_string(getpid()));
  Reply r = conn_.Call("put 0 0 1 0\r\n");
  Use(before);
  if (!r.Is("INSERTED")) {
    throw Failure(kExitServer,
                  "the server answered " + r.line + " to the put that finds the highest job id");
  }
  Expect("delete " + std::to_string(r.Number(1)), {"DELETED"});
  return r.Number(1) - 1;
}

}  // namespace stalkd::cli
