#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "http/exchange.h"

// lmstfy's public API (docs/HTTP.md) on the command interface: each route is a handler
// that checks its parameters as lmstfy's Go handlers do, makes store calls on the
// connection's session, and answers lmstfy's JSON.
namespace stalkd::http {

// Who may do what: tokens and their rate limits (the admin side keeps them).
class Access {
 public:
  // Whether `token` (without its pool prefix) belongs to namespace `ns`; then *id names it.
  virtual bool Valid(std::string_view ns, std::string_view token, std::string* id) const = 0;
  // Counts one produce (or consume) request of token `id` against its rate limit; false if
  // over it.
  virtual bool Allow(std::string_view ns, std::string_view id, bool produce, Nanos now) = 0;
  // Gives back what Allow counted at `counted_at` for a request that did not succeed
  // (lmstfy's RemedyLimiter), to the window it was counted in if that is still open.
  virtual void Refund(std::string_view ns, std::string_view id, bool produce, Nanos counted_at,
                      Nanos now) = 0;

 protected:
  ~Access() = default;
};

// Observes what the API does, for /metrics.
class ApiObserver {
 public:
  virtual void OnRequest(std::string_view route, int status, Nanos latency) = 0;

 protected:
  ~ApiObserver() = default;
};

struct ApiOptions {
  size_t max_job_size = 65535;  // the smaller of lmstfy's 64 KiB rule and -z
};

class ApiService final : public Service {
 public:
  ApiService(const Clock& clock, Access& access, ApiObserver* observer, ApiOptions options);

  void Handle(Exchange& ex) override;
  bool Screen(Exchange& ex) override;
  void Answered(const Exchange& ex, Nanos done) override;
  const Clock& clock() const override { return clock_; }
  uint64_t body_limit() const override;
  uint64_t bulk_body_limit() const override;

 private:
  const Clock& clock_;
  Access& access_;
  ApiObserver* observer_;
  ApiOptions options_;
};

}  // namespace stalkd::http
