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

// lmstfy's routes (its server/route.go): what a method and path reach, and the middleware
// they pass.
struct Route {
  std::string_view name;  // for metrics
  Handler handler;
  bool multi;  // a consume: queue names separated by commas
  bool token;  // the token is checked (not for the public size routes)
  Throttle throttle;
};

namespace {

std::optional<Route> FindRoute(Method m, const std::vector<std::string>& seg) {
  using H = Handler;
  using T = Throttle;
  if (seg.size() == 3) {
    if (m == Method::kPut) return Route{"publish", H::kPublish, false, true, T::kProduce};
    if (m == Method::kGet) return Route{"consume", H::kConsume, true, true, T::kConsume};
    if (m == Method::kDelete)
      return Route{"destroy_queue", H::kDestroyQueue, false, true, T::kNone};
  } else if (seg.size() == 4) {
    const std::string& what = seg[3];
    if (what == "bulk" && m == Method::kPut) {
      return Route{"publish_bulk", H::kPublishBulk, false, true, T::kProduce};
    }
    if (what == "peek" && m == Method::kGet) {
      return Route{"peek_queue", H::kPeekQueue, false, true, T::kNone};
    }
    if (what == "size" && m == Method::kGet) return Route{"size", H::kSize, false, false, T::kNone};
    if (what == "deadletter" && m == Method::kGet) {
      return Route{"peek_deadletter", H::kPeekDeadLetter, false, true, T::kNone};
    }
    if (what == "deadletter" && m == Method::kPut) {
      return Route{"respawn_deadletter", H::kRespawnDeadLetter, false, true, T::kNone};
    }
    if (what == "deadletter" && m == Method::kDelete) {
      return Route{"delete_deadletter", H::kDeleteDeadLetter, false, true, T::kNone};
    }
  } else if (seg.size() == 5) {
    if (seg[3] == "job" && m == Method::kPut) {
      return Route{"republish", H::kRepublish, false, true, T::kNone};
    }
    if (seg[3] == "job" && m == Method::kGet) {
      return Route{"peek_job", H::kPeekJob, false, true, T::kNone};
    }
    if (seg[3] == "job" && m == Method::kDelete) {
      return Route{"delete", H::kDelete, false, true, T::kNone};
    }
    if (seg[3] == "deadletter" && seg[4] == "size" && m == Method::kGet) {
      return Route{"deadletter_size", H::kDeadLetterSize, false, false, T::kNone};
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<Route> Call::Routed() {
  if (!target_.Parse(ex_.request.target)) {
    ex_.route = "unknown";
    ex_.request.keep_alive = false;  // a transport error: the connection closes after it
    Fail(400, "malformed request");
    return std::nullopt;
  }
  const std::vector<std::string>& seg = target_.segments();
  bool empty_segment =
      std::any_of(seg.begin(), seg.end(), [](const std::string& s) { return s.empty(); });
  std::optional<Route> r;
  if (seg.size() >= 3 && seg[0] == "api" && !empty_segment) {
    ns_ = seg[1];
    queue_ = seg[2];
    r = FindRoute(ex_.request.method, seg);
  }
  if (!r) {
    ex_.route = "unknown";
    Fail(404, "api not found");
    return std::nullopt;
  }
  ex_.route = r->name;
  return r;
}

bool Call::Screen() {
  std::optional<Route> r = Routed();
  return r && Admit(r->multi, r->token, Throttle::kNone);
}

Co<> Call::Run() {
  std::optional<Route> r = Routed();
  if (!r || !Admit(r->multi, r->token, r->throttle)) co_return;
  switch (r->handler) {
    case Handler::kPublish:
      co_return co_await Publish(false);
    case Handler::kRepublish:
      co_return co_await Publish(true);
    case Handler::kPublishBulk:
      co_return co_await PublishBulk();
    case Handler::kConsume:
      co_return co_await Consume();
    case Handler::kDelete:
      co_return co_await Delete();
    case Handler::kPeekQueue:
      co_return co_await PeekQueue();
    case Handler::kPeekJob:
      co_return co_await PeekJob();
    case Handler::kSize:
      co_return co_await Size(false);
    case Handler::kDeadLetterSize:
      co_return co_await Size(true);
    case Handler::kDestroyQueue:
      co_return co_await DestroyQueue();
    case Handler::kPeekDeadLetter:
      co_return co_await PeekDeadLetter();
    case Handler::kRespawnDeadLetter:
      co_return co_await RespawnDeadLetter();
    case Handler::kDeleteDeadLetter:
      co_return co_await DeleteDeadLetter();
  }
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
      // lmstfy's text, but with the token's id where lmstfy puts the token itself: an
      // answer never repeats a secret (a proxy's log, a shared screen).
      w.String("token(" + id + ") " + (produce ? "produce" : "consume") +
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

bool ApiService::Screen(Exchange& ex) {
  api::Call call(ex, access_, options_);
  return call.Screen();
}

void ApiService::Answered(const Exchange& ex, Nanos done) {
  // lmstfy's RemedyLimiter: a counted request that did not succeed is given back.
  bool produce = ex.limited == Exchange::Limited::kProduce;
  if (ex.limited != Exchange::Limited::kNo && ex.response.status != (produce ? 201 : 200)) {
    access_.Refund(ex.limited_ns, ex.limited_token, produce, ex.now, done);
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
