#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli/yaml.h"

// A job as `stalk` shows, dumps and loads it: one JSON object per job (stalk(1), "JOB
// LINES").
namespace stalkd::cli {

struct JobRecord {
  uint64_t id = 0;  // the id it had where it was read; `load` cannot keep it
  std::string tube = "default";
  std::string state = "ready";  // ready, delayed, reserved or buried
  uint64_t pri = 1024;
  uint64_t ttr = 60;
  uint64_t delay = 0;  // a delayed job's remaining delay (stats-job's time-left); else 0
  std::string body;
  // stalkd's extensions (docs/EXTENSIONS.md), when the job has them.
  std::optional<uint64_t> tries;  // tries left
  std::optional<uint64_t> ttl;    // seconds of its time to live left
  std::optional<std::string> key;
  std::vector<std::pair<std::string, std::string>> attrs;

  bool HasExtensions() const { return tries || ttl || key || !attrs.empty(); }
};

// The job `stats-job` describes (its dict) with this body.
JobRecord JobFromStats(const Dict& stats, std::string body);

// The job as one line of JSON (without the newline). The body is `body64` (base64), or,
// with `text` and when it is valid UTF-8, `body` (a JSON string).
std::string JobToJson(const JobRecord& job, bool text);

// A line of JSON back into a job. Every field but the body has a default (tube "default",
// state ready, or delayed when there is no state and a delay, pri 1024, ttr 60, delay 0);
// unknown fields are ignored. Throws Failure(kExitInput) saying what is wrong.
JobRecord JobFromJson(std::string_view line);

}  // namespace stalkd::cli
