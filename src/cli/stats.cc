// stats, stats-tube, stats-job, tubes, pause.
#include <algorithm>
#include <cstdio>

#include "cli/commands.h"
#include "cli/errors.h"
#include "cli/json.h"

namespace stalkd::cli {

namespace {

void PrintDict(const Dict& d) {
  for (const auto& [k, v] : d.items()) printf("%s: %s\n", k.c_str(), v.text.c_str());
}

// Several dicts: JSON lines, or blocks separated by blank lines.
void PrintDicts(Context& ctx, const std::vector<Dict>& dicts) {
  for (size_t i = 0; i < dicts.size(); i++) {
    if (ctx.json) {
      Json j;
      PrintLine(j.Object(dicts[i]));
    } else {
      if (i > 0) printf("\n");
      PrintDict(dicts[i]);
    }
  }
}

std::string Count(const Dict& d, const char* key) { return std::to_string(d.Number(key)); }

}  // namespace

int Stats(Context& ctx, const std::vector<std::string>& keys) {
  Dict all = ctx.client().Stats();
  if (keys.empty()) {
    PrintDicts(ctx, {all});
    return kExitOk;
  }
  Dict some;
  int rc = kExitOk;
  for (const std::string& k : keys) {
    bool found = false;
    for (const auto& [key, v] : all.items()) {
      if (key == k) {
        some.Add(key, v);
        found = true;
        break;
      }
    }
    if (!found) {
      fprintf(stderr, "stalk: stats has no key \"%s\"\n", k.c_str());
      rc = kExitNotFound;
    }
  }
  if (ctx.json) {
    Json j;
    PrintLine(j.Object(some));
  } else {
    for (const auto& item : some.items()) printf("%s\n", item.second.text.c_str());
  }
  return rc;
}

int StatsTube(Context& ctx, const std::vector<std::string>& tubes) {
  for (const std::string& t : tubes) CheckTubeName(t);
  std::vector<std::optional<Dict>> got = ctx.client().StatsTubes(tubes);
  std::vector<Dict> found;
  int rc = kExitOk;
  for (size_t i = 0; i < tubes.size(); i++) {
    if (got[i]) {
      found.push_back(std::move(*got[i]));
    } else {
      fprintf(stderr, "stalk: tube %s: not found\n", tubes[i].c_str());
      rc = kExitNotFound;
    }
  }
  PrintDicts(ctx, found);
  return rc;
}

int StatsJob(Context& ctx, const std::vector<uint64_t>& ids) {
  Client& c = ctx.client();
  for (uint64_t id : ids) c.conn().SendLine("stats-job " + std::to_string(id));
  std::vector<Dict> found;
  int rc = kExitOk;
  for (uint64_t id : ids) {
    Reply r = c.conn().Read();
    if (r.Is("OK")) {
      found.push_back(ParseDict(r.body));
    } else if (r.Is("NOT_FOUND")) {
      fprintf(stderr, "stalk: job %llu: not found\n", static_cast<unsigned long long>(id));
      rc = kExitNotFound;
    } else {
      Client::Unexpected("stats-job " + std::to_string(id), r);
    }
  }
  PrintDicts(ctx, found);
  return rc;
}

int Tubes(Context& ctx, bool names_only) {
  Client& c = ctx.client();
  std::vector<std::string> names = c.Tubes();
  std::sort(names.begin(), names.end());
  if (names_only) {
    if (ctx.json) {
      for (const std::string& n : names) {
        Json j;
        PrintLine(j.Begin().Key("name").Str(n).End());
      }
    } else {
      for (const std::string& n : names) printf("%s\n", n.c_str());
    }
    return kExitOk;
  }
  std::vector<std::optional<Dict>> stats = c.StatsTubes(names);
  if (ctx.json) {  // a stats-tube object per line
    for (const auto& d : stats) {
      if (!d) continue;
      Json j;
      PrintLine(j.Object(*d));
    }
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {{"TUBE", "READY", "URGENT", "RESERVED", "DELAYED",
                                                 "BURIED", "WAITING", "WATCHING", "USING", "TOTAL",
                                                 "PAUSED"}};
  for (size_t i = 0; i < names.size(); i++) {
    if (!stats[i]) continue;  // gone since list-tubes
    const Dict& d = *stats[i];
    rows.push_back({names[i], Count(d, "current-jobs-ready"), Count(d, "current-jobs-urgent"),
                    Count(d, "current-jobs-reserved"), Count(d, "current-jobs-delayed"),
                    Count(d, "current-jobs-buried"), Count(d, "current-waiting"),
                    Count(d, "current-watching"), Count(d, "current-using"), Count(d, "total-jobs"),
                    d.Number("pause") ? Count(d, "pause-time-left") + "s" : "-"});
  }
  PrintTable(rows);
  return kExitOk;
}

int Pause(Context& ctx, const std::string& tube, uint64_t seconds) {
  CheckTubeName(tube);
  Reply r = ctx.client().Expect("pause-tube " + tube + " " + std::to_string(seconds),
                                {"PAUSED", "NOT_FOUND"});
  if (r.Is("NOT_FOUND")) {
    fprintf(stderr, "stalk: tube %s: not found\n", tube.c_str());
    return kExitNotFound;
  }
  if (ctx.json) {
    Json j;
    PrintLine(j.Begin().Key("tube").Str(tube).Key("pause").Uint(seconds).End());
  } else if (seconds == 0) {
    printf("resumed %s\n", tube.c_str());
  } else {
    printf("paused %s for %llu s\n", tube.c_str(), static_cast<unsigned long long>(seconds));
  }
  return kExitOk;
}

}  // namespace stalkd::cli
