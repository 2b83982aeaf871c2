#include "http/admin.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <map>

#include "base/build_info.h"
#include "base/check.h"
#include "base/constant_time.h"
#include "base/sha256.h"
#include "http/dashboard.h"
#include "http/json.h"
#include "http/names.h"
#include "http/response.h"
#include "http/tokens.h"
#include "http/url.h"

namespace stalkd::http {
namespace {

// The limit JSON of lmstfy's throttler: {"read": N, "write": N, "interval": N}.
void WriteLimit(const Limit& l, JsonWriter& w) {
  w.StartObject();
  w.Key("interval");
  w.Int(l.interval_s);
  w.Key("read");
  w.Int(l.read);
  w.Key("write");
  w.Int(l.write);
  w.EndObject();
}

// A JSON object whose read, write and interval, where present, are integers.
bool ParseLimit(std::string_view body, Limit* l) {
  rapidjson::Document doc;
  // Iterative: a recursive parse of a deeply nested body would overflow the stack.
  doc.Parse<rapidjson::kParseIterativeFlag>(body.data(), body.size());
  if (doc.HasParseError() || !doc.IsObject()) return false;
  auto field = [&](const char* name, int64_t* out) {
    // (HasMember, not FindMember: comparing RapidJSON 1.1's member iterators is ambiguous
    // in C++20.)
    if (!doc.HasMember(name)) return true;
    const rapidjson::Value& v = doc[name];
    if (!v.IsInt64()) return false;
    *out = v.GetInt64();
    return true;
  };
  return field("read", &l->read) && field("write", &l->write) && field("interval", &l->interval_s);
}

class AdminCall {
 public:
  AdminCall(Exchange& ex, TokenStore& tokens, AdminHost& host)
      : ex_(ex), tokens_(tokens), host_(host) {}
  Co<> Run();

 private:
  Response& resp() { return ex_.response; }
  void Fail(int status, std::string_view text) { Error(&resp(), status, text); }
  void Route(std::string_view name) { ex_.route = name; }
  void Tokens(const std::string& ns);
  void TokenDelete(const std::string& ns, const std::string& token);
  void TokenLimit(const std::string& ns, const std::string& token);
  Co<> Info();
  void Limits();
  void Status(int code, std::string_view status) {
    resp().status = code;
    JsonWriter w(&resp().body);
    w.StartObject();
    w.Key("status");
    w.String(status);
    w.EndObject();
  }
  // A `pool` query parameter other than empty or "default"; answered.
  bool BadPool() {
    std::optional<std::string_view> p = target_.Query("pool");
    if (!p || p->empty() || *p == "default") return false;
    Fail(400, kNoPool);
    return true;
  }
  static constexpr std::string_view kNoPool = "the pool was not exists";

  Exchange& ex_;
  TokenStore& tokens_;
  AdminHost& host_;
  Target target_;
};

// lmstfy's tokens may carry a pool prefix, "pool:token"; stalkd has the one pool "default".
bool StripPool(std::string_view raw, std::string_view* token) {
  size_t colon = raw.find(':');
  if (colon == std::string_view::npos) {
    *token = raw;
    return true;
  }
  *token = raw.substr(colon + 1);
  return raw.substr(0, colon) == "default";
}

Co<> AdminCall::Run() {
  Method m = ex_.request.method;
  if (!target_.Parse(ex_.request.target)) {
    // A transport error (docs/HTTP.md, section 2), as on the API listener.
    Route("unknown");
    ex_.request.keep_alive = false;
    co_return Fail(400, "malformed request");
  }
  bool probe = target_.segments().size() == 1 &&
               (target_.segments()[0] == "healthz" || target_.segments()[0] == "readyz");
  if (host_.recovering() && !probe) {
    Route("recovering");
    co_return Fail(503, "recovering");
  }
  const std::vector<std::string>& seg = target_.segments();
  bool get = m == Method::kGet || m == Method::kHead;
  if (seg.size() == 1 && get) {
    const std::string& s = seg[0];
    if (s == "healthz") {
      Route("healthz");
      co_return Status(200, "ok");
    }
    if (s == "readyz") {
      Route("readyz");
      if (host_.recovering()) co_return Status(503, "recovering");
      if (host_.ready()) co_return Status(200, "ready");
      co_return Status(503, host_.why_not_ready());
    }
    if (s == "limits") {
      Route("list_limits");
      co_return Limits();
    }
    if (s == "version") {
      Route("version");
      resp().status = 200;
      JsonWriter w(&resp().body);
      w.StartObject();
      w.Key("build_commit");
      w.String(BuildCommit());
      w.Key("build_date");
      w.String(BuildDate());
      w.Key("version");
      w.String(host_.version());
      w.EndObject();
      co_return;
    }
    if (s == "pools") {
      Route("pools");
      std::optional<std::string_view> kind = target_.Query("kind");
      if (kind && *kind != "redis" && *kind != "memory") co_return Fail(400, "invalid kind");
      resp().status = 200;
      resp().body = "[\"default\"]";
      co_return;
    }
    if (s == "info") {
      Route("info");
      co_return co_await Info();
    }
    if (s == "metrics") {
      Route("metrics");
      co_return co_await host_.ScrapeMetrics(ex_.session, &resp());
    }
  }
  if (seg.size() >= 2 && seg[0] == "token") {
    std::string ns = seg[1];
    if (seg.size() == 2) co_return Tokens(ns);
    if (seg.size() == 3 && m == Method::kDelete) co_return TokenDelete(ns, seg[2]);
    if (seg.size() == 4 && seg[3] == "limit") co_return TokenLimit(ns, seg[2]);
  }
  Route("unknown");
  Fail(404, "api not found");
}

void AdminCall::Tokens(const std::string& ns) {
  Method m = ex_.request.method;
  if (m == Method::kGet) {
    Route("list_tokens");
    if (BadPool()) return;
    resp().status = 200;
    JsonWriter w(&resp().body);
    w.StartObject();
    w.Key("tokens");
    w.StartObject();
    for (const TokenInfo& t : tokens_.List(ns)) {
      w.Key(t.id);
      w.String(t.description);
    }
    w.EndObject();
    w.EndObject();
    return;
  }
  if (m != Method::kPost) {
    Route("unknown");
    return Fail(404, "api not found");
  }
  Route("new_token");
  // Parameters come from a form body or the query, as Go's Request.Form (the body's
  // value wins).
  Target form;
  if (!form.Parse("/?" + ex_.request.body)) form.Parse("/");
  auto param = [&](std::string_view name) -> std::string_view {
    if (auto v = form.Query(name)) return *v;
    if (auto v = target_.Query(name)) return *v;
    return {};
  };
  std::string_view description = param("description");
  std::string_view chosen = param("token");
  std::string_view pool = param("pool");
  if (description.empty() || description.size() > 1024) {
    return Fail(400, "invalid description");
  }
  if (!chosen.empty()) {
    if (size_t colon = chosen.find(':'); colon != std::string_view::npos) {
      pool = chosen.substr(0, colon);
      chosen = chosen.substr(colon + 1);
    }
    if (chosen.size() < 20) return Fail(400, "the user token was too short");
    bool ok = chosen.size() <= 128 && std::all_of(chosen.begin(), chosen.end(), [](char c) {
                return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '-' || c == '_' || c == '.';
              });
    if (!ok) return Fail(400, "invalid user token");
  }
  if (ns.size() > kMaxNameLength) return Fail(400, "the namespace name was too long");
  std::string tube;
  if (const char* e = QueueTube(ns, "q", &tube)) {
    return Fail(400, std::string_view(e).ends_with("too long")
                         ? "the namespace name was too long"
                         : "namespace name contains forbidden characters");
  }
  if (!pool.empty() && pool != "default") return Fail(400, kNoPool);
  std::string token, error;
  // The token file keeps when a token was made in unix seconds (ex_.now is monotonic: since
  // boot, which a restart after a reboot would put before older tokens).
  int64_t now_s = static_cast<int64_t>(std::time(nullptr));
  TokenStore::Status st;
  if (chosen.empty()) {
    st = tokens_.Create(ns, description, now_s, &token, &error);
  } else {
    token = chosen;
    st = tokens_.CreateChosen(ns, description, now_s, chosen, &error);
  }
  if (st == TokenStore::Status::kExists) return Fail(400, "the token has already existed");
  if (st != TokenStore::Status::kOk) return Fail(500, "cannot save the token: " + error);
  // As lmstfy: a token made for a pool named in the request carries it as a prefix.
  if (pool == "default") token = "default:" + token;
  resp().status = 201;
  JsonWriter w(&resp().body);
  w.StartObject();
  w.Key("token");
  w.String(token);
  w.EndObject();
}

void AdminCall::TokenDelete(const std::string& ns, const std::string& raw) {
  Route("delete_token");
  std::string_view token;
  if (!StripPool(raw, &token) || BadPool()) return Fail(400, kNoPool);
  std::string error;
  TokenStore::Status st = tokens_.Delete(ns, token, &error);
  if (st == TokenStore::Status::kFailed) return Fail(500, "cannot save the tokens: " + error);
  // lmstfy's delete answers 204 whether or not the token existed.
  resp().status = 204;
}

void AdminCall::TokenLimit(const std::string& ns, const std::string& raw) {
  Method m = ex_.request.method;
  switch (m) {
    case Method::kGet:
      Route("get_limit");
      break;
    case Method::kDelete:
      Route("delete_limit");
      break;
    case Method::kPost:
      Route("add_limit");
      break;
    case Method::kPut:
      Route("set_limit");
      break;
    default:
      Route("unknown");
      return Fail(404, "api not found");
  }
  std::string_view token;
  if (!StripPool(raw, &token) || BadPool()) return Fail(400, kNoPool);
  std::string_view id = tokens_.Find(ns, token);
  if (id.empty()) return Fail(404, "token not found");
  if (m == Method::kGet) {
    const Limit* l = tokens_.throttler().Get(ns, id);
    if (!l) return Fail(404, "limit not found");
    resp().status = 200;
    JsonWriter w(&resp().body);
    WriteLimit(*l, w);
    return;
  }
  std::string error;
  if (m == Method::kDelete) {
    if (tokens_.RemoveLimit(ns, token, &error) == TokenStore::Status::kFailed) {
      return Fail(500, "cannot save the limits: " + error);
    }
    return Message(&resp(), 200, "success");
  }
  Limit l;
  if (!ParseLimit(ex_.request.body, &l) || l.read < 0 || l.write < 0) {
    return Fail(400, "invalid limit");
  }
  if (l.read == 0 && l.write == 0) {
    return Fail(400, "the read and write of limiter can't be 0 at the same time");
  }
  if (l.interval_s <= 0) return Fail(400, "interval should be > 0");
  if (m == Method::kPost && tokens_.throttler().Get(ns, id)) {
    return Fail(400, "the limit has already existed");
  }
  switch (tokens_.SetLimit(ns, token, l, &error)) {
    case TokenStore::Status::kOk:
      break;
    case TokenStore::Status::kNotFound:
      return Fail(404, "token not found");
    case TokenStore::Status::kInvalid:
    case TokenStore::Status::kExists:
      return Fail(400, "invalid limit");
    case TokenStore::Status::kFailed:
      return Fail(500, "cannot save the limits: " + error);
  }
  resp().status = m == Method::kPost ? 201 : 200;
  JsonWriter w(&resp().body);
  w.StartObject();
  w.Key("limiter");
  WriteLimit(l, w);
  w.EndObject();
}

Co<> AdminCall::Info() {
  // Every namespace with its queues: the tubes named "ns/queue".
  command::Result r = co_await Ask(ex_.session.ListTubes());
  std::map<std::string, std::vector<std::string>, std::less<>> info;
  if (r.outcome == command::Outcome::kTubeList) {
    for (std::string_view t : *r.tubes) {
      std::string_view ns, queue;
      if (SplitTube(t, &ns, &queue)) info[std::string(ns)].emplace_back(queue);
    }
  }
  resp().status = 200;
  JsonWriter w(&resp().body);
  w.StartObject();
  for (auto& [ns, queues] : info) {
    std::sort(queues.begin(), queues.end());
    w.Key(ns);
    w.StartArray();
    for (const std::string& q : queues) w.String(q);
    w.EndArray();
  }
  w.EndObject();
}

void AdminCall::Limits() {
  resp().status = 200;
  JsonWriter w(&resp().body);
  w.StartArray();
  for (const LimitInfo& l : tokens_.throttler().List()) {
    w.StartObject();
    w.Key("limiter");
    WriteLimit(l.limit, w);
    w.Key("namespace");
    w.String(l.ns);
    w.Key("token");
    w.String(l.token_id);
    w.EndObject();
  }
  w.EndArray();
}

Co<> HandleAdmin(Exchange& ex, TokenStore& tokens, AdminHost& host) {
  AdminCall call(ex, tokens, host);
  co_await call.Run();
}

}  // namespace

AdminService::AdminService(const Clock& clock, TokenStore& tokens, AdminHost& host)
    : clock_(clock), tokens_(tokens), host_(host) {}

bool AdminService::LoadAccounts(const std::string& path, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = "cannot read the accounts file " + path;
    return false;
  }
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    n++;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    if (line.find(':') == std::string::npos || line.front() == ':') {
      *error = path + ":" + std::to_string(n) + ": not user:password";
      return false;
    }
    accounts_.push_back(Digest(line));
  }
  if (accounts_.empty()) {
    *error = "the accounts file " + path + " names no account";
    return false;
  }
  return true;
}

bool AdminService::Authorized(const Request& r) const {
  if (accounts_.empty()) return true;
  std::string_view a = r.authorization;
  constexpr std::string_view kBasic = "Basic ";
  if (a.size() <= kBasic.size() || a.substr(0, kBasic.size()) != kBasic) return false;
  std::string decoded;
  if (!DecodeBase64(a.substr(kBasic.size()), &decoded)) return false;
  return IsAccount(decoded);
}

bool AdminService::IsAccount(std::string_view user_password) const {
  // In constant time: the digests (which hide the lengths) of every account are compared
  // whole, and all of them, whatever matched.
  Sha256 d = Digest(user_password);
  bool ok = false;
  for (const Sha256& acc : accounts_) {
    ok |= ConstantTimeEqual(acc.data(), d.data(), d.size());
  }
  return ok;
}

AdminService::Sha256 AdminService::Digest(std::string_view s) { return ::stalkd::Sha256(s); }

bool AdminService::IsDashboardPut(std::string_view path) {
  constexpr std::string_view kPrefix = "/dashboard/api/tubes/", kSuffix = "/put";
  if (!path.starts_with(kPrefix) || !path.ends_with(kSuffix)) return false;
  std::string_view tube = path.substr(kPrefix.size());
  if (tube.size() <= kSuffix.size()) return false;
  tube.remove_suffix(kSuffix.size());
  return tube.find('/') == std::string_view::npos;
}

namespace {

// Whether an Origin ("scheme://host[:port]") names the host:port of a Host header, the
// port the scheme's default where one of them leaves it out.
bool SameHost(std::string_view origin, std::string_view host) {
  size_t sep = origin.find("://");
  if (sep == std::string_view::npos || host.empty()) return false;
  std::string_view scheme = origin.substr(0, sep), authority = origin.substr(sep + 3);
  if (EqualsNoCase(authority, host)) return true;
  std::string_view port = EqualsNoCase(scheme, "https") ? ":443" : ":80";
  auto strip = [&](std::string_view a) {
    return a.ends_with(port) ? a.substr(0, a.size() - port.size()) : a;
  };
  return EqualsNoCase(strip(authority), strip(host));
}

}  // namespace

bool AdminService::CrossSite(Exchange& ex) {
  const Request& r = ex.request;
  if (r.method != Method::kPost && r.method != Method::kPut && r.method != Method::kDelete) {
    return false;
  }
  // What a browser says of a request's origin, which a page cannot forge; a client that
  // is not a browser (lmstfy's admin tools, curl) sends neither header and is not refused.
  bool foreign = (!r.origin.empty() && !SameHost(r.origin, r.host)) ||
                 EqualsNoCase(r.sec_fetch_site, "cross-site") ||
                 EqualsNoCase(r.sec_fetch_site, "same-site");
  if (!foreign) return false;
  ex.route = "forbidden";
  Error(&ex.response, 403, "cross-site request refused");
  return true;
}

bool AdminService::Screen(Exchange& ex) {
  bool dashboard;
  return Guard(ex, &dashboard);
}

void AdminService::Handle(Exchange& ex) {
  bool dashboard;
  if (!Guard(ex, &dashboard)) return;
  if (dashboard) return dashboard_->Handle(ex);
  Serve(ex, HandleAdmin(ex, tokens_, host_));
}

bool AdminService::Guard(Exchange& ex, bool* dashboard_route) {
  // As lmstfy: the token and limit routes need an account; probes and scrapes do not; the
  // dashboard does (it can act on jobs). Which route it is follows from the decoded path,
  // as routing does ("/%74oken/ns" is a token route too).
  std::string_view path = ex.request.target;
  Target target;
  bool parsed = target.Parse(path);
  const std::vector<std::string>& seg = target.segments();
  bool dashboard =
      dashboard_ && (Dashboard::Serves(path) || (parsed && !seg.empty() && seg[0] == "dashboard"));
  bool guarded = dashboard || (parsed && ((seg.size() >= 2 && seg[0] == "token") ||
                                          (seg.size() == 1 && seg[0] == "limits")));
  *dashboard_route = dashboard;
  if (guarded && !Authorized(ex.request)) {
    ex.route = "unauthorized";
    Error(&ex.response, 401, "unauthorized");
    ex.response.extra_headers = "WWW-Authenticate: Basic realm=\"Authorization Required\"\r\n";
    return false;
  }
  // Basic auth alone does not stop another site's page from sending a browser's cached
  // credentials along (a form posting a token of its choosing, say).
  if (guarded && CrossSite(ex)) return false;
  if (dashboard && host_.recovering()) {  // the jobs are not all back yet
    ex.route = "recovering";
    Error(&ex.response, 503, "recovering");
    return false;
  }
  return true;
}

void AdminService::Answered(const Exchange& ex, Nanos done) {
  if (observer_) observer_->OnRequest(ex.route, ex.response.status, done - ex.now);
}

}  // namespace stalkd::http
