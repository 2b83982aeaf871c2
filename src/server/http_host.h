#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>

#include "base/clock.h"
#include "command/identity.h"
#include "http/admin.h"
#include "http/api.h"
#include "http/dashboard.h"
#include "http/metrics.h"
#include "http/tokens.h"
#include "server/options.h"

namespace stalkd::server {

class Server;
class Connection;

// The HTTP side of a server (docs/HTTP.md): the tokens and their limits, the lmstfy API and
// admin services its HTTP listeners serve, the dashboard, what those ask of the server, and
// the slow-client timeout of HTTP requests.
class HttpHost final : public http::Access,
                       public http::ApiObserver,
                       public http::AdminHost,
                       public http::DashboardHost,
                       public command::Observer,
                       public command::Authenticator {
 public:
  HttpHost(Server& server, const Options& options);
  ~HttpHost();
  // Opens the token file (beside the binlog with -b) and the admin accounts file.
  bool Open(std::string* error);

  http::ApiService& api() { return api_; }
  http::AdminService& admin() { return admin_; }
  http::Metrics& metrics() { return metrics_; }

  // Access.
  bool Valid(std::string_view ns, std::string_view token, std::string* id) const override;
  bool Allow(std::string_view ns, std::string_view id, bool produce, Nanos now) override;
  void Refund(std::string_view ns, std::string_view id, bool produce, Nanos counted_at,
              Nanos now) override;
  // Authenticator: the text protocol's `auth`, on the same tokens and limits.
  bool Authenticate(std::string_view ns, std::string_view credential,
                    command::Identity* who) const override;
  bool StillValid(const command::Identity& who) const override;
  bool AllowPut(const command::Identity& who) override;
  // ApiObserver.
  void OnRequest(std::string_view route, int status, Nanos latency) override;
  // command::Observer: the store's and the text protocol's measurements.
  Nanos Now() const override;
  void OnCommand(command::Verb v, Nanos latency) override { metrics_.ObserveCommand(v, latency); }
  void OnFirstReserve(std::string_view tube, Nanos waited) override {
    metrics_.ObserveQueueLatency(tube, waited);
    dashboard_.OnFirstReserve(tube);
  }
  void OnRunDone(std::string_view tube, Nanos ran) override { metrics_.ObserveRunTime(tube, ran); }
  // AdminHost.
  std::string_view version() const override;
  bool ready() const override;
  std::string why_not_ready() const override;
  bool recovering() const override;
  http::Co<> ScrapeMetrics(command::Session& s, http::Response* resp) override;
  // DashboardHost.
  http::BinlogMetrics BinlogNow() const override;
  const http::Histogram& BinlogSyncs() const override { return metrics_.binlog_sync(); }

  // HTTP connections, for the request timeout.
  void Opened(Connection* c) { connections_.insert(c); }
  void Closed(Connection* c) { connections_.erase(c); }
  // Answers 408 to requests that began arriving longer ago than --http-request-timeout,
  // and lets the dashboard sample; returns when it should next be called.
  Nanos CheckRequestTimeouts(Nanos now);
  // When CheckRequestTimeouts next has work (kForever: none).
  Nanos next_check() const {
    return std::min(connections_.empty() ? kForever : next_check_, dashboard_.next_tick());
  }

 private:
  Server& server_;
  const Options& options_;
  http::TokenStore tokens_;
  http::ApiService api_;
  http::AdminService admin_;
  http::Metrics metrics_;
  http::Dashboard dashboard_;
  // The room of the request bodies being received on both listeners: a quarter of
  // --max-memory, at least one bulk publish's body (docs/HTTP.md, "Request bodies").
  http::BodyBudget bodies_;
  std::unordered_set<Connection*> connections_;
  Nanos next_check_ = 0;
};

// Connections of the lmstfy API and the admin API.
Connection* MakeApiConnection(Server& server, int fd);
Connection* MakeAdminConnection(Server& server, int fd);

}  // namespace stalkd::server
