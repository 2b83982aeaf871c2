// lmstfy's routes that read and settle jobs: consume (one queue or several, one job or a
// batch, with a long poll), peek at a queue's head or a job, and ack (delete) a job; and
// how lmstfy's JSON shows a job.
#include <algorithm>

#include "http/api_call.h"
#include "http/json.h"
#include "http/names.h"

namespace stalkd::http::api {

using command::Outcome;
using command::Result;
using command::Session;

namespace {

// One job as lmstfy's consume and peek show it. Needs the job's stats; `body` must be
// copied before the StatsJob call invalidates it.
Co<bool> WriteJob(Session& s, std::string_view ns, std::string_view tube, uint64_t id,
                  std::string_view body, bool with_msg, JsonWriter& w) {
  std::string data;
  AppendBase64(body, &data);
  Result st = co_await Ask(s.StatsJob(id));
  if (st.outcome != Outcome::kJobStats) co_return false;
  const command::JobStats& js = *st.job_stats;
  std::string_view job_ns, queue;
  if (!SplitTube(js.tube, &job_ns, &queue) || job_ns != ns) co_return false;
  if (!tube.empty() && js.tube != tube) co_return false;
  const command::JobExtensionStats* x = js.extension;
  w.StartObject();
  w.Key("attributes");
  if (x && !x->attributes.empty()) {
    std::vector<command::Attribute> attrs(x->attributes.begin(), x->attributes.end());
    std::sort(
        attrs.begin(), attrs.end(),
        [](const command::Attribute& a, const command::Attribute& b) { return a.name < b.name; });
    w.StartObject();
    for (const command::Attribute& a : attrs) {
      w.Key(a.name);
      w.String(a.value);
    }
    w.EndObject();
  } else {
    w.Null();
  }
  w.Key("data");
  w.String(data);
  w.Key("elapsed_ms");
  w.Int(js.age_ms);
  w.Key("job_id");
  w.String(JobIdString(id));
  if (with_msg) {
    w.Key("msg");
    w.String("new job");
  }
  w.Key("namespace");
  w.String(ns);
  w.Key("queue");
  w.String(queue);
  w.Key("remain_tries");
  // A job with unlimited tries (put over the text protocol without tries) shows the most
  // lmstfy's uint16 tries can say.
  w.Uint(x && x->limited ? x->tries_left : 65535);
  w.Key("ttl");
  // lmstfy reports Redis's TTL of the job's key: the time left rounded to the nearest
  // second (so 0 for less than half a second, as for no TTL).
  w.Int(x && x->has_ttl ? (x->ttl_left_ms + 500) / 1000 : 0);
  w.EndObject();
  co_return true;
}

// Makes the session watch exactly `tubes` (a consume's queues).
Co<> WatchOnly(Session& s, const std::vector<std::string>& tubes) {
  for (const std::string& t : tubes) co_await Ask(s.Watch(t));
  Result r = co_await Ask(s.ListTubesWatched());
  if (r.outcome != Outcome::kTubeList) co_return;
  std::vector<std::string> drop;
  for (std::string_view t : *r.tubes) {
    if (std::find(tubes.begin(), tubes.end(), t) == tubes.end()) drop.emplace_back(t);
  }
  for (const std::string& t : drop) co_await Ask(s.Ignore(t));
}

// What the reserve gave: the jobs' ids and bodies, copied out of the result.
struct Reserved {
  std::vector<std::pair<uint64_t, std::string>> jobs;
  void Take(const Result& r) {
    jobs.clear();
    if (r.outcome != Outcome::kReservedMany) return;
    for (const command::JobView& j : *r.jobs) jobs.emplace_back(j.id, std::string(j.body));
  }
};

// The consume's answer from the jobs it reserved.
Co<> AnswerConsume(Session& s, std::string_view ns, const Reserved& got, bool batch,
                   Response* resp) {
  if (got.jobs.empty()) co_return Message(resp, 404, "no job available");
  resp->status = 200;
  resp->body.clear();
  JsonWriter w(&resp->body);
  if (batch) w.StartArray();
  size_t written = 0;
  for (const auto& [id, body] : got.jobs) {
    bool ok = co_await WriteJob(s, ns, "", id, body, true, w);
    if (ok) written++;
    if (!batch) break;
  }
  if (batch) w.EndArray();
  if (written == 0) Message(resp, 404, "no job available");
}

}  // namespace

Co<> Call::Consume() {
  uint64_t ttr, timeout, count;
  if (!Uint("ttr", kDefaultTtrS, 32, &ttr) || !Uint("timeout", 0, 32, &timeout)) co_return;
  std::optional<std::string_view> c = target_.Query("count");
  std::optional<uint64_t> n = c ? ParseUint(*c, 32) : std::optional<uint64_t>(1);
  if (!n || *n == 0 || *n > kMaxConsumeCount) co_return Fail(400, "invalid count");
  count = *n;
  bool freeze = false;
  if (std::optional<std::string_view> f = target_.Query("freeze_tries")) {
    std::optional<bool> b = ParseBool(*f);
    if (!b) co_return Fail(400, "invalid freeze_tries value");
    freeze = *b;
  }
  bool multi = tubes_.size() > 1;
  if (multi && timeout == 0) {
    co_return Fail(400, "timeout must be provided to consume multiple queues");
  }
  bool batch = count > 1;
  command::ReserveArgs args;
  args.count = static_cast<uint32_t>(count);
  args.ttr_s = static_cast<uint32_t>(ttr == 0 ? 1 : ttr);
  args.freeze_tries = freeze;
  args.detached = true;
  Reserved got;
  if (multi) {
    // The queues' order is their priority: each is tried alone before waiting on all.
    args.timeout = 0;
    args.count = static_cast<uint32_t>(count);
    for (const std::string& t : tubes_) {
      std::vector<std::string> one(1, t);
      co_await WatchOnly(s_, one);
      got.Take(co_await Ask(s_.ReserveExt(args), /*client_waits=*/true));
      if (!got.jobs.empty()) co_return co_await AnswerConsume(s_, ns_, got, batch, &resp());
    }
  }
  co_await WatchOnly(s_, tubes_);
  args.timeout = static_cast<Nanos>(timeout) * kSecond;
  // A long poll waits here, as a waiting reserve does, until a job comes, the timeout
  // passes or the client goes away (AbandonReserve: no job).
  got.Take(co_await Ask(s_.ReserveExt(args), /*client_waits=*/true));
  co_await AnswerConsume(s_, ns_, got, batch, &resp());
}

Co<> Call::DeleteInTube(uint64_t id) {
  Result st = co_await Ask(s_.StatsJob(id));
  if (st.outcome != Outcome::kJobStats || st.job_stats->tube != tube_) co_return;
  co_await Ask(s_.Delete(id));
}

Co<> Call::Delete() {
  std::optional<uint64_t> id = ParseJobId(target_.segments()[4]);
  if (!id) co_return Fail(400, "invalid job id");
  co_await DeleteInTube(*id);
  resp().status = 204;
}

Co<> Call::PeekJob() {
  std::optional<uint64_t> id = ParseJobId(target_.segments()[4]);
  if (!id) co_return Fail(400, "invalid job id");
  Result r = co_await Ask(s_.Peek(*id));
  if (r.outcome == Outcome::kFound) {
    std::string body(r.job.body);
    resp().status = 200;
    JsonWriter w(&resp().body);
    bool ok = co_await WriteJob(s_, ns_, tube_, *id, body, false, w);
    if (ok) co_return;
  }
  Fail(404, "job not found");
}

Co<> Call::PeekQueue() {
  co_await Ask(s_.Use(tube_));
  Result r = co_await Ask(s_.PeekReady());
  if (r.outcome == Outcome::kFound) {
    uint64_t id = r.job.id;
    std::string body(r.job.body);
    resp().status = 200;
    JsonWriter w(&resp().body);
    bool ok = co_await WriteJob(s_, ns_, tube_, id, body, false, w);
    if (ok) co_return;
  }
  Fail(404, "job not found");
}

}  // namespace stalkd::http::api
