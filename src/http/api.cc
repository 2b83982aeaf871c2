#include "http/api.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>

#include <algorithm>
#include <charconv>
#include <vector>

#include "http/json.h"
#include "http/names.h"
#include "http/response.h"
#include "http/url.h"

namespace stalkd::http {

using command::Outcome;
using command::Result;
using command::Session;

namespace {

// lmstfy's defaults (its server/handlers/setup.go) and limits (queue.go).
constexpr uint32_t kDefaultTtlS = 86400;
constexpr uint32_t kDefaultTtrS = 120;
constexpr uint32_t kDefaultTries = 1;
constexpr uint64_t kMaxConsumeCount = 100;
constexpr size_t kMaxBulkJobs = 64;
constexpr size_t kLmstfyMaxBody = 65535;  // "must be smaller than 64kB"
// Jobs a dead-letter delete or respawn handles per step.
constexpr uint32_t kSliceJobs = 1000;
// A job put over HTTP also has a beanstalkd TTR, for a text client that reserves it;
// lmstfy's consumers choose theirs at consume.
constexpr uint32_t kPutTtrS = kDefaultTtrS;

// Go's encoding/json writes a map's keys in sorted order, so lmstfy's gin.H replies have
// them sorted; ours are written in the same order.

std::string JobIdString(uint64_t id) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, id);
  return std::string(buf, r.ptr);
}

// 1 to 20 digits; id 0 is valid and names no job.
std::optional<uint64_t> ParseJobId(std::string_view s) {
  if (s.size() > 20) return std::nullopt;
  return ParseUint(s, 64);
}

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
  w.Int(x && x->has_ttl ? x->ttl_left_s : 0);
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

// The elements of a JSON array that RapidJSON has already found valid, as the text of
// each: the array is walked by depth, skipping strings, and each element trimmed.
std::vector<std::string_view> SplitJsonArray(std::string_view text) {
  std::vector<std::string_view> out;
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  size_t i = text.find('[');
  if (i == std::string_view::npos) return out;
  int depth = 0;
  size_t start = i + 1;
  auto add = [&](size_t end) {
    std::string_view e = text.substr(start, end - start);
    while (!e.empty() && blank(e.front())) e.remove_prefix(1);
    while (!e.empty() && blank(e.back())) e.remove_suffix(1);
    if (!e.empty()) out.push_back(e);
  };
  for (i = i + 1; i < text.size(); i++) {
    char c = text[i];
    if (c == '"') {
      for (i++; i < text.size() && text[i] != '"'; i++) {
        if (text[i] == '\\') i++;
      }
    } else if (c == '[' || c == '{') {
      depth++;
    } else if (c == ']' || c == '}') {
      if (depth == 0) {
        add(i);
        break;
      }
      depth--;
    } else if (c == ',' && depth == 0) {
      add(i);
      start = i + 1;
    }
  }
  return out;
}

enum class Throttle : uint8_t { kNone, kProduce, kConsume };

// One request on its way through lmstfy's middleware and handler.
class Call {
 public:
  Call(Exchange& ex, Access& access, const ApiOptions& options)
      : ex_(ex), s_(ex.session), access_(access), options_(options) {}

  Co<> Run();

 private:
  Response& resp() { return ex_.response; }
  void Fail(int status, std::string_view text) { Error(&resp(), status, text); }
  // The middleware: names, pool, token, rate limit. false: answered.
  bool Admit(bool multi, bool token, Throttle throttle);
  // A numeric query parameter as lmstfy parses it; false: answered 400 "invalid <name>".
  bool Uint(std::string_view name, uint64_t def, int bits, uint64_t* out);

  Co<> Publish(bool republish);
  Co<> PublishBulk();
  Co<> Consume();
  Co<> Delete();
  Co<> PeekQueue();
  Co<> PeekJob();
  Co<> Size(bool dead);
  Co<> DestroyQueue();
  Co<> PeekDeadLetter();
  Co<> RespawnDeadLetter();
  Co<> DeleteDeadLetter();

  // Puts one job into tube_; false: answered with the failure.
  Co<bool> Put(std::string_view body, uint32_t pri, uint32_t delay_s, uint32_t ttl_s,
               uint32_t tries, std::span<const command::Attribute> attrs, uint64_t* id);
  // Deletes job `id` if it is in tube_.
  Co<> DeleteInTube(uint64_t id);

  Exchange& ex_;
  Session& s_;
  Access& access_;
  const ApiOptions& options_;
  Target target_;
  std::string ns_, queue_, tube_;
  std::vector<std::string> queues_, tubes_;  // a consume's
};

Co<> Call::Run() {
  Method m = ex_.request.method;
  if (!target_.Parse(ex_.request.target)) {
    ex_.route = "unknown";
    ex_.request.keep_alive = false;  // a transport error: the connection closes after it
    co_return Fail(400, "malformed request");
  }
  const std::vector<std::string>& seg = target_.segments();
  auto route = [&](std::string_view name) { ex_.route = name; };
  bool empty_segment =
      std::any_of(seg.begin(), seg.end(), [](const std::string& s) { return s.empty(); });
  if (seg.size() < 3 || seg[0] != "api" || empty_segment) {
    route("unknown");
    co_return Fail(404, "api not found");
  }
  ns_ = seg[1];
  queue_ = seg[2];
  if (seg.size() == 3) {
    if (m == Method::kPut) {
      route("publish");
      if (Admit(false, true, Throttle::kProduce)) co_await Publish(false);
      co_return;
    }
    if (m == Method::kGet) {
      route("consume");
      if (Admit(true, true, Throttle::kConsume)) co_await Consume();
      co_return;
    }
    if (m == Method::kDelete) {
      route("destroy_queue");
      if (Admit(false, true, Throttle::kNone)) co_await DestroyQueue();
      co_return;
    }
  } else if (seg.size() == 4) {
    const std::string& what = seg[3];
    if (what == "bulk" && m == Method::kPut) {
      route("publish_bulk");
      if (Admit(false, true, Throttle::kProduce)) co_await PublishBulk();
      co_return;
    }
    if (what == "peek" && m == Method::kGet) {
      route("peek_queue");
      if (Admit(false, true, Throttle::kNone)) co_await PeekQueue();
      co_return;
    }
    if (what == "size" && m == Method::kGet) {
      route("size");
      if (Admit(false, false, Throttle::kNone)) co_await Size(false);
      co_return;
    }
    if (what == "deadletter") {
      if (m == Method::kGet) {
        route("peek_deadletter");
        if (Admit(false, true, Throttle::kNone)) co_await PeekDeadLetter();
        co_return;
      }
      if (m == Method::kPut) {
        route("respawn_deadletter");
        if (Admit(false, true, Throttle::kNone)) co_await RespawnDeadLetter();
        co_return;
      }
      if (m == Method::kDelete) {
        route("delete_deadletter");
        if (Admit(false, true, Throttle::kNone)) co_await DeleteDeadLetter();
        co_return;
      }
    }
  } else if (seg.size() == 5) {
    if (seg[3] == "job") {
      if (m == Method::kPut) {
        route("republish");
        if (Admit(false, true, Throttle::kNone)) co_await Publish(true);
        co_return;
      }
      if (m == Method::kGet) {
        route("peek_job");
        if (Admit(false, true, Throttle::kNone)) co_await PeekJob();
        co_return;
      }
      if (m == Method::kDelete) {
        route("delete");
        if (Admit(false, true, Throttle::kNone)) co_await Delete();
        co_return;
      }
    }
    if (seg[3] == "deadletter" && seg[4] == "size" && m == Method::kGet) {
      route("deadletter_size");
      if (Admit(false, false, Throttle::kNone)) co_await Size(true);
      co_return;
    }
  }
  route("unknown");
  Fail(404, "api not found");
}

bool Call::Admit(bool multi, bool token, Throttle throttle) {
  if (multi) {
    // ValidateMultiConsume: the names' characters; then each queue as a tube.
    for (size_t at = 0; at <= queue_.size();) {
      size_t comma = std::min(queue_.find(',', at), queue_.size());
      std::string q = queue_.substr(at, comma - at);
      at = comma + 1;
      if (q.empty()) continue;
      std::string tube;
      if (const char* e = QueueTube(ns_, q, &tube)) {
        Fail(400, e);
        return false;
      }
      if (std::find(tubes_.begin(), tubes_.end(), tube) != tubes_.end()) continue;
      queues_.push_back(std::move(q));
      tubes_.push_back(std::move(tube));
    }
    if (queues_.empty()) {
      std::string ignored;
      if (const char* e = QueueTube(ns_, "q", &ignored)) {
        Fail(400, e);
      } else {
        Fail(400, "invalid queue name(s)");
      }
      return false;
    }
    tube_ = tubes_[0];
  } else if (const char* e = QueueTube(ns_, queue_, &tube_)) {
    Fail(400, e);
    return false;
  }
  // SetupQueueEngine: a token may name a pool, "pool:token"; stalkd has one, "default".
  std::string_view raw = ex_.request.token;
  if (raw.empty()) {
    if (auto q = target_.Query("token")) raw = *q;
  }
  std::string_view tok = raw;
  if (size_t colon = raw.find(':'); colon != std::string_view::npos) {
    if (colon != 0 && raw.substr(0, colon) != "default") {
      Fail(404, "pool not found");
      return false;
    }
    tok = raw.substr(colon + 1);
  }
  if (!token) return true;
  if (tok.empty()) {
    Fail(401, "token not found");
    return false;
  }
  std::string id;
  if (!access_.Valid(ns_, tok, &id)) {
    Fail(401, "invalid token");
    return false;
  }
  if (throttle != Throttle::kNone) {
    bool produce = throttle == Throttle::kProduce;
    if (!access_.Allow(ns_, id, produce, ex_.now)) {
      resp().status = 429;
      JsonWriter w(&resp().body);
      w.StartObject();
      w.Key("msg");
      w.String("token(" + std::string(tok) + ") " + (produce ? "produce" : "consume") +
               " reach the limit rate, please retry later");
      w.EndObject();
      return false;
    }
    ex_.limited = produce ? Exchange::Limited::kProduce : Exchange::Limited::kConsume;
    ex_.limited_ns = ns_;
    ex_.limited_token = id;
  }
  return true;
}

bool Call::Uint(std::string_view name, uint64_t def, int bits, uint64_t* out) {
  std::optional<std::string_view> v = target_.Query(name);
  if (!v) {
    *out = def;
    return true;
  }
  std::optional<uint64_t> n = ParseUint(*v, bits);
  if (!n) {
    Fail(400, "invalid " + std::string(name));
    return false;
  }
  *out = *n;
  return true;
}

Co<bool> Call::Put(std::string_view body, uint32_t pri, uint32_t delay_s, uint32_t ttl_s,
                   uint32_t tries, std::span<const command::Attribute> attrs, uint64_t* id) {
  Result u = co_await Ask(s_.Use(tube_));
  if (u.outcome != Outcome::kUsing) {
    Fail(400, "invalid queue name");
    co_return false;
  }
  command::PutOptions opts;
  opts.tries = tries;
  opts.ttl_s = ttl_s;
  opts.attributes = attrs;
  command::PutArgs args;
  args.pri = pri;
  args.delay_s = delay_s;
  args.ttr_s = kPutTtrS;
  args.bytes = static_cast<uint32_t>(body.size());
  args.verb = command::Verb::kPut;
  args.options = &opts;
  command::PutSlot slot = s_.BeginPut(args);
  Outcome o = slot.refusal;
  if (slot.data) {
    std::copy(body.begin(), body.end(), slot.data);
    slot.data[body.size()] = '\r';
    slot.data[body.size() + 1] = '\n';
    Result r = co_await Ask(s_.CommitPut());
    if (r.outcome == Outcome::kInserted) {
      *id = r.number;
      co_return true;
    }
    o = r.outcome;
  }
  switch (o) {
    case Outcome::kJobTooBig:
      Fail(413, "body too large");
      break;
    case Outcome::kDraining:
      Fail(503, "server is draining");
      break;
    case Outcome::kOutOfMemory:
      Fail(503, "out of memory");
      break;
    default:
      Fail(500, "internal error");
  }
  co_return false;
}

// The attributes of Job-Attr-* headers, checked against the engine's limits
// (docs/EXTENSIONS.md).
const char* CheckAttributes(const Request& req, std::vector<command::Attribute>* out) {
  if (req.attributes.size() > command::kMaxAttributes) {
    return "too many attributes, cannot exceed 16";
  }
  for (const auto& [name, value] : req.attributes) {
    if (name.empty()) return "invalid attribute name";
    if (name.size() > command::kMaxAttributeName) {
      return "attribute name too long, cannot exceed 64";
    }
    for (char c : name) {
      bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '-' || c == '_';
      if (!ok) return "invalid attribute name";
    }
    if (value.size() > command::kMaxAttributeValue) {
      return "attribute value too long, cannot exceed 255";
    }
    for (char c : value) {
      if (c < 0x20 || c > 0x7e) return "invalid attribute value";
    }
    out->push_back({name, value});
  }
  return nullptr;
}

Co<> Call::Publish(bool republish) {
  std::optional<uint64_t> old_id;
  if (republish) {
    old_id = ParseJobId(target_.segments()[4]);
    if (!old_id) co_return Fail(400, "invalid job id");
  }
  uint64_t delay, ttl, tries, priority;
  if (!Uint("delay", 0, 32, &delay) || !Uint("ttl", kDefaultTtlS, 32, &ttl)) co_return;
  if (ttl > 0 && ttl < delay) co_return Fail(400, "ttl is shorter than delay");
  if (!Uint("tries", kDefaultTries, 16, &tries)) co_return;
  if (tries == 0) co_return Fail(400, "tries shouldn't be zero");
  if (!Uint("priority", 0, 8, &priority)) co_return;
  const std::string& body = ex_.request.body;
  if (body.size() > options_.max_job_size) co_return Fail(413, "body too large");
  std::vector<command::Attribute> attrs;
  if (const char* e = CheckAttributes(ex_.request, &attrs)) co_return Fail(400, e);
  if (old_id) co_await DeleteInTube(*old_id);
  uint64_t id;
  // lmstfy's priority: higher is consumed first; beanstalkd's: lower is.
  uint32_t pri = static_cast<uint32_t>(255 - priority);
  bool put = co_await Put(body, pri, static_cast<uint32_t>(delay), static_cast<uint32_t>(ttl),
                          static_cast<uint32_t>(tries), attrs, &id);
  if (!put) co_return;
  resp().status = 201;
  JsonWriter w(&resp().body);
  w.StartObject();
  w.Key("job_id");
  w.String(JobIdString(id));
  w.Key("msg");
  w.String("published");
  w.EndObject();
}

Co<> Call::PublishBulk() {
  uint64_t delay, ttl, tries, priority;
  if (!Uint("delay", 0, 32, &delay) || !Uint("ttl", kDefaultTtlS, 32, &ttl)) co_return;
  if (ttl > 0 && ttl < delay) co_return Fail(400, "ttl is shorter than delay");
  if (!Uint("tries", kDefaultTries, 16, &tries)) co_return;
  if (tries == 0) co_return Fail(400, "tries shouldn't be zero");
  if (!Uint("priority", 0, 8, &priority)) co_return;
  const std::string& text = ex_.request.body;
  rapidjson::Document doc;
  // Iterative: a recursive parse of a deeply nested body would overflow the stack.
  doc.Parse<rapidjson::kParseIterativeFlag>(text.data(), text.size());
  if (doc.HasParseError() || (!doc.IsArray() && !doc.IsNull())) {
    co_return Fail(400, "request body should be an array of objects");
  }
  size_t count = doc.IsArray() ? doc.Size() : 0;  // Go reads null as an empty array
  if (count == 0) co_return Fail(400, "no jobs");
  if (count > kMaxBulkJobs) co_return Fail(400, "too many jobs");
  // Each job is an element's JSON text as sent, as lmstfy stores json.RawMessage.
  std::vector<std::string_view> bodies = SplitJsonArray(text);
  if (bodies.size() != count) co_return Fail(400, "request body should be an array of objects");
  for (std::string_view b : bodies) {
    if (b.size() > options_.max_job_size) co_return Fail(413, "job too large");
  }
  std::vector<command::Attribute> attrs;
  if (const char* e = CheckAttributes(ex_.request, &attrs)) co_return Fail(400, e);
  std::vector<uint64_t> ids;
  uint32_t pri = static_cast<uint32_t>(255 - priority);
  for (std::string_view b : bodies) {
    uint64_t id;
    bool put = co_await Put(b, pri, static_cast<uint32_t>(delay), static_cast<uint32_t>(ttl),
                            static_cast<uint32_t>(tries), attrs, &id);
    if (!put) co_return;
    ids.push_back(id);
  }
  resp().status = 201;
  JsonWriter w(&resp().body);
  w.StartObject();
  w.Key("job_ids");
  w.StartArray();
  for (uint64_t id : ids) w.String(JobIdString(id));
  w.EndArray();
  w.Key("msg");
  w.String("published");
  w.EndObject();
}

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
  // Deletes up to `limit` dead letters from the head (the order they were buried in, as
  // peek and respawn take them), kSliceJobs per step.
  int64_t left = *limit;
  for (bool more = true; more;) {
    int64_t n = std::min<int64_t>(left, kSliceJobs);
    Result use = co_await Ask(s_.Use(tube_));
    more = use.outcome == Outcome::kUsing;
    for (int64_t i = 0; i < n && more; i++) {
      Result head = co_await Ask(s_.PeekBuried());
      more = head.outcome == Outcome::kFound;
      if (!more) break;
      Result del = co_await Ask(s_.Delete(head.job.id));
      more = del.outcome == Outcome::kDeleted;
      if (more) left--;
    }
    if (!more || left == 0) break;
    co_await Slice();
  }
  resp().status = 204;
}

}  // namespace

ApiService::ApiService(const Clock& clock, Access& access, ApiObserver* observer,
                       ApiOptions options)
    : clock_(clock), access_(access), observer_(observer), options_(options) {}

namespace {

Co<> Handle(Exchange& ex, Access& access, const ApiOptions& options) {
  Call call(ex, access, options);
  co_await call.Run();
}

}  // namespace

void ApiService::Handle(Exchange& ex) { Serve(ex, http::Handle(ex, access_, options_)); }

void ApiService::Answered(const Exchange& ex, Nanos done) {
  // lmstfy's RemedyLimiter: a counted request that did not succeed is given back.
  bool produce = ex.limited == Exchange::Limited::kProduce;
  if (ex.limited != Exchange::Limited::kNo && ex.response.status != (produce ? 201 : 200)) {
    access_.Refund(ex.limited_ns, ex.limited_token, produce, done);
  }
  if (observer_) observer_->OnRequest(ex.route, ex.response.status, done - ex.now);
}

uint64_t ApiService::body_limit() const {
  return std::max<uint64_t>(options_.max_job_size, kLmstfyMaxBody);
}

uint64_t ApiService::bulk_body_limit() const {
  // Up to 64 jobs in one JSON array, but no more than 16 MiB unless one job may be larger.
  uint64_t l = body_limit();
  return std::min<uint64_t>(l * kMaxBulkJobs, std::max<uint64_t>(l, uint64_t{16} << 20));
}

}  // namespace stalkd::http
