#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "http/dashboard_call.h"
#include "http/dashboard_put.h"
#include "http/put_job.h"

// The dashboard's actions, each a POST (or DELETE) of /dashboard/api/: on a tube kick,
// purge, pause, respawn dead letters and move jobs; on a job delete, kick and move. Long
// ones (respawn, a tube's move) work in bounded slices.
namespace stalkd::http::dash {

using command::Outcome;
using command::Result;
using command::StateFilter;

namespace {

constexpr uint32_t kRespawnSlice = 1000;     // dead letters respawned per step
constexpr uint32_t kMoveListSlice = 100;     // ids a move lists per step
constexpr size_t kMoveSliceBytes = 1 << 20;  // body bytes a move copies per step (at least 1 job)

// Respawns up to `count` dead letters, kRespawnSlice per step.
Co<> Respawn(Session& s, std::string tube, uint64_t count, uint32_t ttl_s, Response* resp) {
  uint64_t done = 0;
  for (uint64_t left = count;;) {
    auto n = static_cast<uint32_t>(std::min<uint64_t>(left, kRespawnSlice));
    Result r = co_await Ask(s.Respawn(tube, n, ttl_s));
    uint64_t got = r.outcome == Outcome::kKicked ? r.number : 0;
    done += got;
    left -= got;
    if (got != n || left == 0) break;
    co_await Slice();
  }
  Ok(resp);
  JsonWriter w(&resp->body);
  w.StartObject();
  w.Key("respawned");
  w.Uint(done);
  w.EndObject();
}

using MoveError = ActionError;

// Moves one job: puts a copy into `to` (same body, priority, TTR, remaining delay, tries
// left, remaining TTL, key and attributes) and deletes the original, in one step, so no
// other client acts in between. A reserved job cannot be moved (its worker holds it); a
// buried one arrives ready; a job with no tries left gets one. The session uses `to`
// afterwards (the caller uses "default" again).
Co<std::optional<MoveError>> MoveJob(Session& s, uint64_t id, std::string_view to, uint64_t* new_id,
                                     size_t* bytes) {
  Result st = co_await Ask(s.StatsJob(id));
  if (st.outcome != Outcome::kJobStats) co_return MoveError{404, "job not found"};
  const command::JobStats& js = *st.job_stats;
  if (js.state == "reserved") co_return MoveError{409, "a reserved job cannot be moved"};
  if (js.tube == to) co_return MoveError{400, "the job is in that tube already"};
  command::PutArgs args;
  args.pri = js.pri;
  args.ttr_s = js.ttr_s;
  args.delay_s =
      js.state == "delayed" ? static_cast<uint32_t>(std::max<int64_t>(js.time_left_s, 0)) : 0;
  command::PutOptions opts;
  std::string key;
  std::vector<std::pair<std::string, std::string>> attr_text;
  if (const command::JobExtensionStats* x = js.extension) {
    if (x->limited) opts.tries = std::max<uint32_t>(x->tries_left, 1);
    if (x->has_ttl) {
      opts.ttl_s = static_cast<uint32_t>(std::clamp<int64_t>(x->ttl_left_s, 1, UINT32_MAX));
    }
    key = x->key;
    for (const command::Attribute& a : x->attributes) attr_text.emplace_back(a.name, a.value);
  }
  std::vector<command::Attribute> attrs;
  for (const auto& [n, v] : attr_text) attrs.push_back({n, v});
  opts.key = key;
  opts.attributes = attrs;
  Result p = co_await Ask(s.Peek(id));
  if (p.outcome != Outcome::kFound) co_return MoveError{404, "job not found"};
  std::string body(p.job.body);
  Result use = co_await Ask(s.Use(to));
  if (use.outcome != Outcome::kUsing) co_return MoveError{400, "invalid tube name"};
  args.verb = command::Verb::kPut;
  args.options = &opts;
  PutDone put = co_await PutJob(s, args, body);
  if (put.outcome == Outcome::kInserted) {
    Result del = co_await Ask(s.Delete(id));
    if (del.outcome != Outcome::kDeleted) {
      co_await Ask(s.Delete(put.id));
      co_return MoveError{409, "the job changed; nothing was moved"};
    }
    *new_id = put.id;
    *bytes += body.size();
    co_return std::nullopt;
  }
  if (put.outcome == Outcome::kExists) {
    co_return MoveError{409, "the target tube has a job with the same key"};
  }
  co_return PutRefusal(put.outcome);
}

// Moves up to `count` of a tube's jobs in one state to another tube: lists them
// kMoveListSlice ids at a time and moves up to kMoveSliceBytes of bodies per step.
class MoveJobs {
 public:
  MoveJobs(Session& s, std::string tube, StateFilter state, std::string to, uint64_t count)
      : s_(s), tube_(std::move(tube)), state_(state), to_(std::move(to)), left_(count) {}

  Co<> Run(Response* resp) {
    for (;;) {
      bool done = co_await Step(resp);
      if (done) break;
      co_await Slice();
    }
  }

 private:
  // One step; true once *resp holds the answer.
  Co<bool> Step(Response* resp) {
    if (ids_.empty() && from_ != 0 && left_ > 0) {
      auto n = static_cast<uint32_t>(std::min<uint64_t>(left_, kMoveListSlice));
      Result r = co_await Ask(s_.ListJobs(tube_, state_, from_, n));
      if (r.outcome == Outcome::kJobList) {
        ids_.assign(r.ids->begin(), r.ids->end());
        from_ = r.number;
      } else {
        from_ = 0;
      }
      next_ = 0;
    }
    size_t bytes = 0;
    while (next_ < ids_.size() && left_ > 0 && bytes < kMoveSliceBytes) {
      uint64_t new_id = 0;
      std::optional<MoveError> e = co_await MoveJob(s_, ids_[next_++], to_, &new_id, &bytes);
      if (e) {
        failed_++;
        if (error_.empty()) error_ = e->text;
        if (e->status == 503 || e->status == 400) left_ = 0;  // the others would fail too
      } else {
        moved_++;
        left_--;
      }
    }
    if (next_ == ids_.size()) ids_.clear();
    if (left_ > 0 && (!ids_.empty() || from_ != 0)) co_return false;
    co_await Ask(s_.Use(kDefaultTube));
    Ok(resp);
    JsonWriter w(&resp->body);
    w.StartObject();
    w.Key("moved");
    w.Uint(moved_);
    w.Key("failed");
    w.Uint(failed_);
    w.Key("error");
    if (error_.empty()) {
      w.Null();
    } else {
      w.String(error_);
    }
    w.EndObject();
    co_return true;
  }
  Session& s_;
  std::string tube_;
  StateFilter state_;
  std::string to_;
  uint64_t left_;
  uint64_t from_ = 1;
  std::vector<uint64_t> ids_;
  size_t next_ = 0;
  uint64_t moved_ = 0, failed_ = 0;
  std::string error_;
};

}  // namespace

Co<> DashboardCall::AnswerCount(std::string_view key, uint64_t n) {
  co_await Ask(s_.Use(kDefaultTube));
  Ok(&resp());
  JsonWriter w(&resp().body);
  w.StartObject();
  w.Key(key);
  w.Uint(n);
  w.EndObject();
}

Co<> DashboardCall::TubeAction(const std::string& tube, std::string_view action) {
  TubeRow row;
  if (action == "kick") {
    Route("dashboard_kick");
    std::optional<uint64_t> count = Number("count", 1, 1, UINT32_MAX);
    if (!count) co_return;
    bool exists = co_await TubeExists(tube, &row);
    if (!exists) co_return;
    co_await Ask(s_.Use(tube));
    Result r = co_await Ask(s_.Kick(static_cast<uint32_t>(*count)));
    co_return co_await AnswerCount("kicked", r.number);
  }
  if (action == "purge") {
    Route("dashboard_purge");
    std::optional<StateFilter> state = ParseState(target_.Query("state").value_or(""), true);
    if (!state || *state == StateFilter::kReserved) co_return Fail(&resp(), 400, "invalid state");
    bool exists = co_await TubeExists(tube, &row);
    if (!exists) co_return;
    Result r = co_await Ask(s_.Purge(tube, *state));
    if (r.outcome == Outcome::kNotFound) co_return Fail(&resp(), 404, "tube not found");
    co_return co_await AnswerCount("purged", r.number);
  }
  if (action == "pause") {
    Route("dashboard_pause");
    std::optional<uint64_t> seconds = Number("seconds", 0, 0, UINT32_MAX);
    if (!seconds) co_return;
    bool exists = co_await TubeExists(tube, &row);
    if (!exists) co_return;
    Result r = co_await Ask(s_.PauseTube(tube, static_cast<uint32_t>(*seconds)));
    if (r.outcome != Outcome::kPaused) co_return Fail(&resp(), 404, "tube not found");
    Ok(&resp());
    JsonWriter w(&resp().body);
    w.StartObject();
    w.Key("paused");
    w.Bool(*seconds > 0);
    w.Key("seconds");
    w.Uint(*seconds);
    w.EndObject();
    co_return;
  }
  if (action == "respawn") {
    Route("dashboard_respawn");
    std::optional<uint64_t> count = Number("count", 1, 1, UINT64_MAX);
    if (!count) co_return;
    std::optional<uint64_t> ttl = Number("ttl", 0, 0, UINT32_MAX);
    if (!ttl) co_return;
    bool exists = co_await TubeExists(tube, &row);
    if (!exists) co_return;
    co_return co_await Respawn(s_, tube, *count, static_cast<uint32_t>(*ttl), &resp());
  }
  if (action == "move") {
    Route("dashboard_move");
    std::optional<StateFilter> state = ParseState(target_.Query("state").value_or(""), false);
    if (!state || *state == StateFilter::kReserved) co_return Fail(&resp(), 400, "invalid state");
    std::string to(target_.Query("to").value_or(""));
    if (!command::IsValidTubeName(to)) co_return Fail(&resp(), 400, "invalid target tube");
    if (to == tube) co_return Fail(&resp(), 400, "the jobs are in that tube already");
    std::optional<uint64_t> count = Number("count", UINT64_MAX, 1, UINT64_MAX);
    if (!count) co_return;
    bool exists = co_await TubeExists(tube, &row);
    if (!exists) co_return;
    MoveJobs move(s_, tube, *state, std::move(to), *count);
    co_return co_await move.Run(&resp());
  }
  Route("unknown");
  Fail(&resp(), 404, "api not found");
}

Co<> DashboardCall::JobAction(uint64_t id, std::string_view action) {
  if (action == "delete") {
    Result st = co_await Ask(s_.StatsJob(id));
    if (st.outcome != Outcome::kJobStats) co_return Fail(&resp(), 404, "job not found");
    bool reserved = st.job_stats->state == "reserved";
    Result del = co_await Ask(s_.Delete(id));
    if (del.outcome != Outcome::kDeleted) {
      if (reserved)
        co_return Fail(&resp(), 409, "the job is reserved: only its worker can delete it");
      co_return Fail(&resp(), 404, "job not found");
    }
    Ok(&resp());
    resp().body = "{\"deleted\":true}";
    co_return;
  }
  if (action == "kick") {
    Route("dashboard_job_kick");
    Result kicked = co_await Ask(s_.KickJob(id));
    if (kicked.outcome != Outcome::kKickedJob) {
      co_return Fail(&resp(), 404, "job not found, or not buried or delayed");
    }
    Ok(&resp());
    resp().body = "{\"kicked\":true}";
    co_return;
  }
  if (action == "move") {
    Route("dashboard_job_move");
    std::string to(target_.Query("to").value_or(""));
    if (!command::IsValidTubeName(to)) co_return Fail(&resp(), 400, "invalid target tube");
    uint64_t new_id = 0;
    size_t bytes = 0;
    std::optional<MoveError> e = co_await MoveJob(s_, id, to, &new_id, &bytes);
    co_await Ask(s_.Use(kDefaultTube));
    if (e) co_return Fail(&resp(), e->status, e->text);
    Ok(&resp());
    JsonWriter w(&resp().body);
    w.StartObject();
    w.Key("id");
    w.Uint(id);
    w.Key("new_id");
    w.Uint(new_id);
    w.Key("tube");
    w.String(to);
    w.EndObject();
    co_return;
  }
  Route("unknown");
  Fail(&resp(), 404, "api not found");
}

}  // namespace stalkd::http::dash
