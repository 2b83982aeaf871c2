#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "http/api.h"
#include "http/exchange.h"

// The admin listener (docs/HTTP.md, "Admin API"): lmstfy's token and limit administration,
// /info, /version, /pools and /metrics, plus /healthz and /readyz; optionally behind HTTP
// basic auth.
namespace stalkd::http {

class TokenStore;
class Dashboard;

// What the admin API asks of the server it runs in.
class AdminHost {
 public:
  virtual std::string_view version() const = 0;
  // Ready to serve: recovery is done (the listeners accept only after it) and the server
  // is not draining.
  virtual bool ready() const = 0;
  // Why not, for /readyz's 503 ("draining", or the store's reason).
  virtual std::string why_not_ready() const { return "draining"; }
  // The binlog is being replayed: only /healthz and /readyz are answered.
  virtual bool recovering() const = 0;
  // A /metrics scrape answered into *resp (in slices, or waiting for the store).
  virtual Co<> ScrapeMetrics(command::Session& s, Response* resp) = 0;

 protected:
  ~AdminHost() = default;
};

class AdminService final : public Service {
 public:
  AdminService(const Clock& clock, TokenStore& tokens, AdminHost& host);
  // Loads `path`'s "user:password" lines; from then on every request needs one of them as
  // HTTP basic auth. false: *error says why.
  bool LoadAccounts(const std::string& path, std::string* error);

  void Handle(Exchange& ex) override;
  bool Screen(Exchange& ex) override;
  void Answered(const Exchange& ex, Nanos done) override;
  const Clock& clock() const override { return clock_; }
  // 64 KiB for every route but the dashboard's put (IsDashboardPut), which takes up to the
  // largest job (-z) if larger: a route that needs no login admits no more than 64 KiB.
  uint64_t body_limit() const override { return kBodyLimit; }
  uint64_t bulk_body_limit() const override {
    return dashboard_ ? std::max<uint64_t>(kBodyLimit, max_job_size_) : kBodyLimit;
  }
  BigBodyRoute big_body_route() const override { return &IsDashboardPut; }
  // "/dashboard/api/tubes/<tube>/put", as received.
  static bool IsDashboardPut(std::string_view path);
  void set_max_job_size(uint64_t n) { max_job_size_ = n; }

  // Observes answered requests (for /metrics).
  void set_observer(ApiObserver* o) { observer_ = o; }
  // Serves the web dashboard's paths (docs/DASHBOARD.md), behind the same basic auth as
  // the token routes.
  void set_dashboard(Dashboard* d) { dashboard_ = d; }
  // Whether "user:password" is one of --admin-accounts' lines (in constant time); false
  // when there are none. The text protocol's `auth` takes these as admin credentials.
  bool IsAccount(std::string_view user_password) const;

 private:
  bool Authorized(const Request& r) const;
  // What every request passes first: an account for the guarded routes, and the dashboard
  // only once recovered. false: ex.response holds the refusal. *dashboard_route: the
  // request is the dashboard's.
  bool Guard(Exchange& ex, bool* dashboard_route);

  static constexpr uint64_t kBodyLimit = 64 * 1024;
  // A changing request to a guarded route that a browser sent from another site's page:
  // true, and ex.response holds the 403.
  static bool CrossSite(Exchange& ex);

  const Clock& clock_;
  TokenStore& tokens_;
  AdminHost& host_;
  ApiObserver* observer_ = nullptr;
  Dashboard* dashboard_ = nullptr;
  uint64_t max_job_size_ = 0;
  using Sha256 = std::array<unsigned char, 32>;
  static Sha256 Digest(std::string_view s);
  std::vector<Sha256> accounts_;  // of "user:password"; empty: no auth
};

}  // namespace stalkd::http
