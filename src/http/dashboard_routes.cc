#include <string_view>
#include <vector>

#include "http/dashboard_assets.h"
#include "http/dashboard_call.h"

// The dashboard's routes: its page and static files, and which read or action of
// DashboardCall each /dashboard/api/ path and method goes to, with the checks every route
// shares (a number parameter, a tube that exists, the header that stops cross-site posts).
namespace stalkd::http::dash {

namespace {

// Headers of the page and its files: nothing is sniffed; the page runs only the binary's
// own scripts and styles and cannot be framed.
constexpr std::string_view kAssetHeaders =
    "Cache-Control: no-cache\r\nX-Content-Type-Options: nosniff\r\n";
constexpr std::string_view kPageHeaders =
    "Cache-Control: no-cache\r\nX-Content-Type-Options: nosniff\r\n"
    "Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'\r\n"
    "X-Frame-Options: DENY\r\nReferrer-Policy: no-referrer\r\n";

}  // namespace

Co<> DashboardCall::Run() {
  if (!target_.Parse(ex_.request.target)) {
    Route("dashboard");
    co_return Fail(&resp(), 400, "invalid request target");
  }
  const std::vector<std::string>& seg = target_.segments();
  Method m = ex_.request.method;
  bool get = m == Method::kGet || m == Method::kHead;
  if (seg.size() >= 3 && seg[0] == "dashboard" && seg[1] == "api") co_return co_await Api();
  if (get) {
    if ((seg.size() == 1 && (seg[0].empty() || seg[0] == "dashboard")) ||
        (seg.size() == 2 && seg[0] == "dashboard" && seg[1].empty())) {
      co_return Asset("index.html");
    }
    if (seg.size() == 2 && seg[0] == "dashboard") co_return Asset(seg[1]);
  }
  Route("unknown");
  Fail(&resp(), 404, "api not found");
}

void DashboardCall::Asset(std::string_view name) {
  const DashboardAsset* a = FindDashboardAsset(name);
  if (!a) {
    Route("unknown");
    return Fail(&resp(), 404, "api not found");
  }
  Route("dashboard_asset");
  resp().status = 200;
  resp().body.assign(a->data);
  resp().content_type = a->content_type;
  resp().extra_headers = name == "index.html" ? kPageHeaders : kAssetHeaders;
}

std::optional<uint64_t> DashboardCall::Number(std::string_view name, uint64_t def, uint64_t lo,
                                              uint64_t hi) {
  std::optional<std::string_view> v = target_.Query(name);
  if (!v) return def;
  std::optional<uint64_t> n = ParseUint(*v, 64);
  if (!n || *n < lo || *n > hi) {
    Fail(&resp(), 400, "invalid " + std::string(name));
    return std::nullopt;
  }
  return n;
}

Co<bool> DashboardCall::TubeExists(const std::string& name, TubeRow* row) {
  if (!command::IsValidTubeName(name)) {
    Fail(&resp(), 400, "invalid tube name");
    co_return false;
  }
  bool found = co_await ReadTube(s_, name, row);
  if (!found) {
    Fail(&resp(), 404, "tube not found");
    co_return false;
  }
  co_return true;
}

Co<> DashboardCall::Api() {
  const std::vector<std::string>& seg = target_.segments();
  Method m = ex_.request.method;
  bool get = m == Method::kGet || m == Method::kHead;
  bool post = m == Method::kPost;
  bool del = m == Method::kDelete;
  // A browser sends a custom header only from a script of the same origin (a cross-site
  // form or image cannot), so a changing request without one is refused: basic auth
  // alone would not stop another site's page from posting here.
  if ((post || del) && ex_.request.requested_with.empty()) {
    Route("dashboard_forbidden");
    co_return Fail(&resp(), 403, "missing X-Requested-With header");
  }
  const std::string& what = seg[2];
  if (what == "server" && seg.size() == 3 && get) {
    Route("dashboard_server");
    co_return co_await Server();
  }
  if (what == "tubes" && seg.size() == 3 && get) {
    Route("dashboard_tubes");
    co_return co_await Tubes();
  }
  if (what == "namespaces" && seg.size() == 3 && get) {
    Route("dashboard_namespaces");
    co_return co_await Namespaces();
  }
  if (what == "tubes" && seg.size() >= 4) {
    const std::string& tube = seg[3];
    if (seg.size() == 4 && get) {
      Route("dashboard_tube");
      co_return co_await Tube(tube);
    }
    if (seg.size() == 5 && seg[4] == "jobs" && get) {
      Route("dashboard_jobs");
      co_return co_await Jobs(tube);
    }
    if (seg.size() == 5 && post && seg[4] == "delete-dead") co_return co_await DeleteDead(tube);
    if (seg.size() == 5 && seg[4] == "search" && get) {
      Route("dashboard_search");
      co_return co_await Search(tube);
    }
    if (seg.size() == 5 && seg[4] == "put" && post) {
      Route("dashboard_put");
      co_return co_await Put(tube);
    }
    if (seg.size() == 5 && post) co_return co_await TubeAction(tube, seg[4]);
  }
  if (what == "jobs" && (seg.size() == 4 || seg.size() == 5)) {
    std::optional<uint64_t> id = seg[3].size() <= 20 ? ParseUint(seg[3], 64) : std::nullopt;
    if (!id) {
      Route("dashboard_job");
      co_return Fail(&resp(), 400, "invalid job id");
    }
    if (seg.size() == 4 && get) {
      Route("dashboard_job");
      co_return co_await Job(*id);
    }
    if (seg.size() == 4 && del) {
      Route("dashboard_job_delete");
      co_return co_await JobAction(*id, "delete");
    }
    if (seg.size() == 5 && seg[4] == "body" && get) {
      Route("dashboard_job_body");
      co_return co_await JobBody(*id);
    }
    if (seg.size() == 5 && post) co_return co_await JobAction(*id, seg[4]);
  }
  Route("unknown");
  Fail(&resp(), 404, "api not found");
}

Co<> HandleDashboard(Exchange& ex, Dashboard& d) {
  DashboardCall call(ex, d);
  co_await call.Run();
}

}  // namespace stalkd::http::dash
