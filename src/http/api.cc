// lmstfy's API as a service: the route table (which handler a method and path reach),
// the middleware every route passes (names, pool, token, rate limit), and the service's
// limits and bookkeeping (refunds, metrics). The handlers are in api_publish.cc,
// api_consume.cc and api_queue.cc.
#include "http/api.h"

#include <algorithm>
#include <charconv>

#include "http/api_call.h"
#include "http/json.h"
#include "http/names.h"

namespace stalkd::http {
namespace api {

std::string JobIdString(uint64_t id) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, id);
  return std::string(buf, r.ptr);
}

std::optional<uint64_t> ParseJobId(std::string_view s) {
  if (s.size() > 20) return std::nullopt;
  return ParseUint(s, 64);
}

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

}  // namespace api

namespace {

Co<> Handle(Exchange& ex, Access& access, const ApiOptions& options) {
  api::Call call(ex, access, options);
  co_await call.Run();
}

}  // namespace

ApiService::ApiService(const Clock& clock, Access& access, ApiObserver* observer,
                       ApiOptions options)
    : clock_(clock), access_(access), observer_(observer), options_(options) {}

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
  return std::max<uint64_t>(options_.max_job_size, api::kLmstfyMaxBody);
}

uint64_t ApiService::bulk_body_limit() const {
  // Up to 64 jobs in one JSON array, but no more than 16 MiB unless one job may be larger.
  uint64_t l = body_limit();
  return std::min<uint64_t>(l * api::kMaxBulkJobs, std::max<uint64_t>(l, uint64_t{16} << 20));
}

}  // namespace stalkd::http
