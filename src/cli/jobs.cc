// put, reserve, peek, delete, kick, bury.
#include <algorithm>
#include <cstdio>

#include "cli/commands.h"
#include "cli/errors.h"
#include "cli/json.h"

namespace stalkd::cli {

namespace {

// The bodies `put` sends: the words joined by spaces, a file, stdin, or their lines.
std::vector<std::string> PutBodies(const PutOptions& o) {
  std::string all;
  if (!o.words.empty() && o.lines) {
    return o.words;  // --lines with words: one job per word
  }
  if (!o.words.empty()) {
    for (const std::string& w : o.words) all += (all.empty() ? "" : " ") + w;
    return {all};
  }
  if (o.file.empty() && IsTerminal(0)) {
    fprintf(stderr, "stalk: reading the job's body from the terminal; end it with Ctrl-D\n");
  }
  all = ReadAll(o.file.empty() ? "-" : o.file);
  if (!o.lines) return {all};
  std::vector<std::string> bodies;
  size_t start = 0;
  while (start < all.size()) {
    size_t nl = all.find('\n', start);
    if (nl == std::string::npos) nl = all.size();
    if (nl > start) bodies.push_back(all.substr(start, nl - start));
    start = nl + 1;
  }
  return bodies;
}

std::string PutLine(uint64_t pri, uint64_t delay, uint64_t ttr, size_t bytes) {
  return "put " + std::to_string(pri) + " " + std::to_string(delay) + " " + std::to_string(ttr) +
         " " + std::to_string(bytes);
}

// Prints the ids done, and on stderr each missing one with why it may be.
void PrintIds(Context& ctx, const char* verb, const std::vector<uint64_t>& done,
              const std::vector<uint64_t>& missing, const char* why) {
  if (ctx.json) {
    Json j;
    j.Begin().Key(verb).BeginArray();
    for (uint64_t id : done) j.Uint(id);
    j.EndArray().Key("not_found").BeginArray();
    for (uint64_t id : missing) j.Uint(id);
    j.EndArray().End();
    PrintLine(j);
  } else {
    for (uint64_t id : done) printf("%s %llu\n", verb, static_cast<unsigned long long>(id));
  }
  for (uint64_t id : missing) {
    fprintf(stderr, "stalk: job %llu: %s\n", static_cast<unsigned long long>(id), why);
  }
}

// `command <id>` for each id, pipelined; prints the ids answered `ok` and the ones NOT_FOUND.
int EachId(Context& ctx, const std::string& command, std::string_view ok, const char* shown,
           const char* why, const std::vector<uint64_t>& ids) {
  Client& c = ctx.client();
  for (uint64_t id : ids) c.conn().SendLine(command + " " + std::to_string(id));
  std::vector<uint64_t> done, missing;
  for (uint64_t id : ids) {
    Reply r = c.conn().Read();
    if (r.Is(ok)) {
      done.push_back(id);
    } else if (r.Is("NOT_FOUND")) {
      missing.push_back(id);
    } else {
      Client::Unexpected(command + " " + std::to_string(id), r);
    }
  }
  PrintIds(ctx, shown, done, missing, why);
  return missing.empty() ? kExitOk : kExitNotFound;
}

}  // namespace

int Put(Context& ctx, const PutOptions& o) {
  CheckTubeName(o.tube);
  std::vector<std::string> bodies = PutBodies(o);
  Client& c = ctx.client();
  c.Use(o.tube);
  Progress bar(ctx.ProgressWanted() && bodies.size() > 1000, "put", bodies.size());
  int rc = kExitOk;
  constexpr size_t kBatch = 256;
  for (size_t i = 0; i < bodies.size(); i += kBatch) {
    size_t end = std::min(bodies.size(), i + kBatch);
    for (size_t k = i; k < end; k++) {
      c.conn().SendLine(PutLine(o.pri, o.delay, o.ttr, bodies[k].size()));
      c.conn().Send(bodies[k]);
      c.conn().Send("\r\n");
    }
    for (size_t k = i; k < end; k++) {
      Reply r = c.conn().Read();
      if (r.Is("INSERTED") || r.Is("BURIED")) {
        if (ctx.json) {
          Json j;
          j.Begin().Key("id").Uint(r.Number(1));
          if (r.Is("BURIED")) j.Key("state").Str("buried");
          PrintLine(j.End());
        } else {
          printf("inserted %llu\n", static_cast<unsigned long long>(r.Number(1)));
        }
        if (r.Is("BURIED")) {  // beanstalkd could not grow its ready queue
          fprintf(stderr, "stalk: job %llu was buried: the server is out of memory\n",
                  static_cast<unsigned long long>(r.Number(1)));
          rc = kExitServer;
        }
      } else {
        bar.Finish();
        fflush(stdout);
        Client::Unexpected("put", r);
      }
      bar.Add();
    }
  }
  return rc;
}

int Reserve(Context& ctx, const ReserveOptions& o) {
  std::vector<std::string> tubes = o.tubes.empty() ? std::vector<std::string>{"default"} : o.tubes;
  for (const std::string& t : tubes) CheckTubeName(t);
  Client& c = ctx.client();
  c.WatchOnly(tubes);
  std::string cmd = o.wait ? "reserve" : "reserve-with-timeout " + std::to_string(o.timeout);
  // Without --delete or --bury each job is held until the last one is reserved, then all are
  // released (with their own priorities): a job released at once would be the next one
  // reserved, and -n 3 would show one job three times.
  std::vector<std::pair<uint64_t, uint64_t>> held;  // id, pri
  uint64_t got = 0;
  for (; got < o.count; got++) {
    Reply r = c.Expect(cmd, {"RESERVED", "TIMED_OUT", "DEADLINE_SOON"});
    if (r.Is("TIMED_OUT")) break;
    if (r.Is("DEADLINE_SOON")) {  // a held job's TTR is running out: stop waiting
      fprintf(stderr, "stalk: stopped after %s: the TTR of one held is running out\n",
              Plural(got, "job").c_str());
      break;
    }
    JobRecord job = c.Describe(r);
    job.state = "reserved";
    o.format.Print(job, ctx.json);
    std::string id = std::to_string(job.id);
    if (o.del) {
      c.Expect("delete " + id, {"DELETED"});
    } else if (o.bury) {
      c.Expect("bury " + id + " " + std::to_string(job.pri), {"BURIED"});
    } else {
      held.emplace_back(job.id, job.pri);
    }
  }
  for (const auto& [id, pri] : held) {
    c.conn().SendLine("release " + std::to_string(id) + " " + std::to_string(pri) + " 0");
  }
  for (const auto& [id, pri] : held) {
    Reply r = c.conn().Read();
    // NOT_FOUND: its TTR ran out, and the server gave it back already
    if (!r.Is("RELEASED") && !r.Is("NOT_FOUND")) {
      Client::Unexpected("release " + std::to_string(id), r);
    }
  }
  if (got == 0) {
    fprintf(stderr, "stalk: no job ready in %s\n",
            tubes.size() == 1 ? tubes[0].c_str() : "the tubes watched");
    return kExitNotFound;
  }
  return kExitOk;
}

int Peek(Context& ctx, const PeekOptions& o) {
  Client& c = ctx.client();
  std::string cmd;
  if (o.what == "ready" || o.what == "delayed" || o.what == "buried") {
    CheckTubeName(o.tube);
    c.Use(o.tube);
    cmd = "peek-" + o.what;
  } else if (!o.what.empty() && o.what.find_first_not_of("0123456789") == std::string::npos) {
    cmd = "peek " + o.what;
  } else {
    throw Failure(kExitUsage, "peek: a job id, ready, delayed or buried, not \"" + o.what + "\"");
  }
  Reply r = c.Expect(cmd, {"FOUND", "NOT_FOUND"});
  if (r.Is("NOT_FOUND")) {
    fprintf(stderr, "stalk: %s\n",
            cmd.rfind("peek ", 0) == 0 ? ("job " + o.what + ": not found").c_str()
                                       : ("no " + o.what + " job in " + o.tube).c_str());
    return kExitNotFound;
  }
  o.format.Print(c.Describe(r), ctx.json);
  return kExitOk;
}

int Delete(Context& ctx, const std::vector<uint64_t>& ids) {
  return EachId(ctx, "delete", "DELETED", "deleted", "not found, or reserved by another client",
                ids);
}

int Kick(Context& ctx, const KickOptions& o) {
  Client& c = ctx.client();
  if (!o.jobs.empty())
    return EachId(ctx, "kick-job", "KICKED", "kicked", "not found, or neither buried nor delayed",
                  o.jobs);
  CheckTubeName(o.tube);
  c.Use(o.tube);
  Reply r = c.Expect("kick " + std::to_string(o.all ? kMaxU32 : o.count), {"KICKED"});
  if (ctx.json) {
    Json j;
    PrintLine(j.Begin().Key("kicked").Uint(r.Number(1)).End());
  } else {
    printf("kicked %llu\n", static_cast<unsigned long long>(r.Number(1)));
  }
  return kExitOk;
}

int Bury(Context& ctx, const BuryOptions& o) {
  Client& c = ctx.client();
  std::vector<uint64_t> done, missing;
  for (uint64_t id : o.ids) {
    std::string sid = std::to_string(id);
    std::optional<Dict> stats = c.StatsJob(id);
    Reply r = c.Expect("reserve-job " + sid, {"RESERVED", "NOT_FOUND", "UNKNOWN_COMMAND"});
    if (r.Is("UNKNOWN_COMMAND")) {
      throw Failure(kExitServer,
                    "bury: the server has no reserve-job (beanstalkd 1.12 and "
                    "later have it), so a job cannot be buried by its id");
    }
    if (!stats || r.Is("NOT_FOUND")) {  // gone, or reserved by another client
      missing.push_back(id);
      continue;
    }
    uint64_t pri = o.pri >= 0 ? static_cast<uint64_t>(o.pri) : stats->Number("pri");
    c.Expect("bury " + sid + " " + std::to_string(pri), {"BURIED"});
    done.push_back(id);
  }
  PrintIds(ctx, "buried", done, missing, "not found, or reserved by another client");
  return missing.empty() ? kExitOk : kExitNotFound;
}

}  // namespace stalkd::cli
