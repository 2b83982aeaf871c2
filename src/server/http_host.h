#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>

#include "base/clock.h"
#include "http/admin.h"
#include "http/api.h"
#include "http/metrics.h"
#include "http/tokens.h"
#include "server/options.h"

namespace stalkd::server {

class Server;
class Connection;

// The HTTP side of a server (docs/HTTP.md): the tokens and their limits, the lmstfy API and
// admin services its HTTP listeners serve, what those services ask of the server, and the
// slow-client timeout of HTTP requests.
class HttpHost final : public http::Access,
                       public http::ApiObserver,
                       public http::AdminHost,
                       public command::Observer {
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
  void Refund(std::string_view ns, std::string_view id, bool produce, Nanos now) override;
  // ApiObserver.
  void OnRequest(std::string_view route, int status, Nanos latency) override;
  // command::Observer: the store's and the text protocol's measurements.
  Nanos Now() const override;
  void OnCommand(command::Verb v, Nanos latency) override { metrics_.ObserveCommand(v, latency); }
  void OnFirstReserve(std::string_view tube, Nanos waited) override {
    metrics_.ObserveQueueLatency(tube, waited);
  }
  void OnRunDone(std::string_view tube, Nanos ran) override { metrics_.ObserveRunTime(tube, ran); }
  // AdminHost.
  std::string_view version() const override;
  bool ready() const override;
  bool recovering() const override;
  std::unique_ptr<http::Task> ScrapeMetrics(command::Session& s, http::Response* resp) override;

  // HTTP connections, for the request timeout.
  void Opened(Connection* c) { connections_.insert(c); }
  void Closed(Connection* c) { connections_.erase(c); }
  // Answers 408 to requests that began arriving longer ago than --http-request-timeout;
  // returns when it should next be called.
  Nanos CheckRequestTimeouts(Nanos now);
  bool has_connections() const { return !connections_.empty(); }
  Nanos next_check() const { return next_check_; }

 private:
  Server& server_;
  const Options& options_;
  http::TokenStore tokens_;
  http::ApiService api_;
  http::AdminService admin_;
  http::Metrics metrics_;
  std::unordered_set<Connection*> connections_;
  Nanos next_check_ = 0;
};

// Connections of the lmstfy API and the admin API.
Connection* MakeApiConnection(Server& server, int fd);
Connection* MakeAdminConnection(Server& server, int fd);

}  // namespace stalkd::server
