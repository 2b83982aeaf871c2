#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "command/store.h"
#include "http/co.h"
#include "http/dashboard.h"
#include "http/dashboard_browse.h"
#include "http/dashboard_json.h"
#include "http/exchange.h"
#include "http/url.h"

// One dashboard request as a coroutine: routed (dashboard_routes.cc) to a read
// (dashboard_reads.cc) or an action (dashboard_actions.cc), on the connection's session.
namespace stalkd::http::dash {

using command::Session;

// A request's route, its parameters' checks, and each read and action as a member (the
// members are defined in the three files named above).
class DashboardCall {
 public:
  DashboardCall(Exchange& ex, Dashboard& d) : ex_(ex), s_(ex.session), d_(d) {}
  Co<> Run();

 private:
  Response& resp() { return ex_.response; }
  void Route(std::string_view name) { ex_.route = name; }
  void Asset(std::string_view name);
  Co<> Api();
  Co<> Server();
  Co<> Tubes();
  Co<> Namespaces();                         // dashboard_lmstfy.cc
  Co<> DeleteDead(const std::string& tube);  // dashboard_lmstfy.cc
  Co<> Tube(const std::string& name);
  Co<> Jobs(const std::string& tube);
  Co<> TubeAction(const std::string& tube, std::string_view action);
  Co<> Job(uint64_t id);
  Co<> JobBody(uint64_t id);
  Co<> JobAction(uint64_t id, std::string_view action);
  // The tube list's parameters (q, prefix, sort if `by_count`, order, offset, limit, step)
  // into *q; false: answered (400).
  bool ListParams(ListQuery* q, bool by_count);
  // dashboard_put.cc, dashboard_search.cc
  Co<> Put(const std::string& tube);
  Co<> Search(const std::string& tube);
  // A uint32 query parameter: absent is `def`; invalid or out of [lo, hi] answers 400
  // "invalid <name>" and gives nullopt.
  std::optional<uint64_t> Number(std::string_view name, uint64_t def, uint64_t lo, uint64_t hi);
  // The tube of the path exists; false: answered (400 or 404).
  Co<bool> TubeExists(const std::string& name, TubeRow* row);
  // {"<key>": n} after a kick or purge, the session using "default" again.
  Co<> AnswerCount(std::string_view key, uint64_t n);

  Exchange& ex_;
  Session& s_;
  Dashboard& d_;
  Target target_;
};

// Answers one request of the dashboard's (the coroutine Dashboard::Handle serves).
Co<> HandleDashboard(Exchange& ex, Dashboard& d);

}  // namespace stalkd::http::dash
