// purge: stalkd's `purge` when the server has it; on beanstalkd, the jobs deleted one by one.
#include <algorithm>
#include <cstdio>

#include "cli/commands.h"
#include "cli/errors.h"
#include "cli/json.h"

namespace stalkd::cli {

namespace {

constexpr size_t kBatch = 100;

// peek-<state> and delete until the tube has no job in that state or `budget` is spent.
// delete takes a ready, delayed or buried job by its id, so nothing is reserved.
uint64_t PeekAndDelete(Client& c, const std::string& state, uint64_t budget, Progress* bar) {
  uint64_t n = 0;
  while (n < budget) {
    Reply r = c.Expect("peek-" + state, {"FOUND", "NOT_FOUND"});
    if (r.Is("NOT_FOUND")) break;
    if (c.Expect("delete " + std::to_string(r.Number(1)), {"DELETED", "NOT_FOUND"}).Is("DELETED")) {
      n++;
      bar->Add();
    }
  }
  return n;
}

// Ready jobs, a batch at a time: reserve-with-timeout 0 pipelined, then their deletes.
uint64_t ReserveAndDelete(Client& c, const std::string& tube, uint64_t budget, Progress* bar) {
  c.WatchOnly({tube});
  uint64_t n = 0;
  bool more = true;
  while (more && n < budget) {
    size_t ask = static_cast<size_t>(std::min<uint64_t>(kBatch, budget - n));
    for (size_t i = 0; i < ask; i++) c.conn().SendLine("reserve-with-timeout 0");
    std::vector<uint64_t> ids;
    for (size_t i = 0; i < ask; i++) {
      Reply r = c.conn().Read();
      if (r.Is("RESERVED")) {
        ids.push_back(r.Number(1));
      } else if (r.Is("TIMED_OUT")) {
        more = false;
      } else if (!r.Is("DEADLINE_SOON")) {  // a held job with a 1 s TTR: delete, go on
        Client::Unexpected("reserve-with-timeout 0", r);
      }
    }
    for (uint64_t id : ids) c.conn().SendLine("delete " + std::to_string(id));
    for (size_t i = 0; i < ids.size(); i++) {
      if (c.conn().Read().Is("DELETED")) {
        n++;
        bar->Add();
      }
    }
  }
  return n;
}

// beanstalkd: buried and delayed jobs by peek + delete, ready ones by reserve + delete
// (then peek + delete for what a paused tube does not hand out). Deletes at most as many
// jobs as the tube held in those states when it began, so a busy producer cannot keep it
// going. Returns nullopt if there is no such tube.
std::optional<uint64_t> PurgeByHand(Context& ctx, Client& c, const std::string& tube,
                                    const std::string& state) {
  std::optional<Dict> st = c.StatsTube(tube);
  if (!st) return std::nullopt;
  auto want = [&](const char* s) { return state == "all" || state == s; };
  uint64_t total = 0;
  for (const char* s : {"ready", "delayed", "buried"}) {
    if (want(s)) total += st->Number(std::string("current-jobs-") + s);
  }
  Progress bar(ctx.ProgressWanted(), "purge " + tube, total);
  c.Use(tube);
  uint64_t n = 0;
  for (const char* s : {"buried", "delayed"}) {
    if (want(s)) n += PeekAndDelete(c, s, total - n, &bar);
  }
  if (want("ready")) {
    n += ReserveAndDelete(c, tube, total - n, &bar);
    n += PeekAndDelete(c, "ready", total - n, &bar);
  }
  return n;
}

}  // namespace

int Purge(Context& ctx, const std::string& tube, const std::string& state) {
  CheckTubeName(tube);
  Client& c = ctx.client();
  Reply r = c.Expect("purge " + tube + " " + state, {"PURGED", "NOT_FOUND", "UNKNOWN_COMMAND"});
  std::optional<uint64_t> purged;
  if (r.Is("PURGED")) {
    purged = r.Number(1);
  } else if (r.Is("UNKNOWN_COMMAND")) {
    purged = PurgeByHand(ctx, c, tube, state);
  }
  if (!purged) {
    fprintf(stderr, "stalk: tube %s: not found\n", tube.c_str());
    return kExitNotFound;
  }
  std::optional<Dict> st = c.StatsTube(tube);
  uint64_t reserved = st ? st->Number("current-jobs-reserved") : 0;
  if (ctx.json) {
    Json j;
    PrintLine(j.Begin()
                  .Key("tube")
                  .Str(tube)
                  .Key("purged")
                  .Uint(*purged)
                  .Key("reserved")
                  .Uint(reserved)
                  .End());
  } else {
    printf("purged %s from %s\n", Plural(*purged, "job").c_str(), tube.c_str());
  }
  if (reserved > 0 && (state == "all" || state == "ready")) {
    ctx.Note("stalk: " + Plural(reserved, "reserved job") + " left in " + tube +
             ": a job reserved by a client is never purged");
  }
  return kExitOk;
}

}  // namespace stalkd::cli
