// lmstfy's routes about a queue rather than one job: its size, its destruction (its ready
// jobs go), and its dead letters (buried jobs): their size and head, respawn and delete, in
// slices of kSliceJobs a step.
#include <algorithm>

#include "http/api_call.h"
#include "http/dead_letters.h"
#include "http/json.h"

namespace stalkd::http::api {

using command::Outcome;
using command::Result;

Co<> Call::Size(bool dead) {
  Result r = co_await Ask(s_.StatsTube(tube_));
  uint64_t size = 0;
  if (r.outcome == Outcome::kTubeStats) size = dead ? r.tube_stats->buried : r.tube_stats->ready;
  resp().status = 200;
  JsonWriter w(&resp().body);
  w.StartObject();
  w.Key("namespace");
  w.String(ns_);
  w.Key("queue");
  w.String(queue_);
  w.Key("size");
  w.Uint(size);
  w.EndObject();
}

Co<> Call::DestroyQueue() {
  co_await Ask(s_.Purge(tube_, command::StateFilter::kReady));
  resp().status = 204;
}

Co<> Call::PeekDeadLetter() {
  Result r = co_await Ask(s_.StatsTube(tube_));
  uint64_t size = r.outcome == Outcome::kTubeStats ? r.tube_stats->buried : 0;
  std::string head;
  if (size > 0) {
    co_await Ask(s_.Use(tube_));
    Result b = co_await Ask(s_.PeekBuried());
    if (b.outcome == Outcome::kFound) head = JobIdString(b.job.id);
  }
  resp().status = 200;
  JsonWriter w(&resp().body);
  w.StartObject();
  w.Key("deadletter_head");
  w.String(head);
  w.Key("deadletter_size");
  w.Uint(size);
  w.Key("namespace");
  w.String(ns_);
  w.Key("queue");
  w.String(queue_);
  w.EndObject();
}

Co<> Call::RespawnDeadLetter() {
  std::optional<std::string_view> l = target_.Query("limit");
  std::optional<int64_t> limit = l ? ParseInt64(*l) : std::optional<int64_t>(1);
  if (!limit || *limit <= 0) co_return Fail(400, "invalid limit");
  std::optional<std::string_view> t = target_.Query("ttl");
  std::optional<int64_t> ttl = t ? ParseInt64(*t) : std::optional<int64_t>(kDefaultTtlS);
  if (!ttl || *ttl < 0 || *ttl > UINT32_MAX) co_return Fail(400, "invalid ttl");
  uint32_t ttl_s = static_cast<uint32_t>(*ttl);
  // A slice of kSliceJobs per step.
  int64_t left = *limit;
  uint64_t count = 0;
  for (;;) {
    uint32_t n = static_cast<uint32_t>(std::min<int64_t>(left, kSliceJobs));
    Result r = co_await Ask(s_.Respawn(tube_, n, ttl_s));
    uint64_t done = r.outcome == Outcome::kKicked ? r.number : 0;
    count += done;
    left -= static_cast<int64_t>(done);
    if (done != n || left == 0) break;
    co_await Slice();
  }
  resp().status = 200;
  resp().body.clear();
  JsonWriter w(&resp().body);
  w.StartObject();
  w.Key("count");
  w.Uint(count);
  w.Key("msg");
  w.String("respawned");
  w.EndObject();
}

Co<> Call::DeleteDeadLetter() {
  std::optional<std::string_view> l = target_.Query("limit");
  std::optional<int64_t> limit = l ? ParseInt64(*l) : std::optional<int64_t>(1);
  if (!limit || *limit <= 0) co_return Fail(400, "invalid limit");
  // Up to `limit` dead letters from the head, kSliceJobs per step.
  co_await DeleteDeadLetters(s_, tube_, static_cast<uint64_t>(*limit), kSliceJobs);
  resp().status = 204;
}

}  // namespace stalkd::http::api
