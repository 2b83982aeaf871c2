#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "base/clock.h"
#include "command/store.h"
#include "http/dashboard_history.h"
#include "http/exchange.h"
#include "http/metrics.h"

// The web dashboard (docs/DASHBOARD.md) on the admin listener: `/` and the static files
// under /dashboard/ (embedded in the binary), and its JSON API under /dashboard/api/. Every
// request works through the connection's store session, as the other admin routes do; work
// that grows with the number of tubes or jobs is done in slices by a Task. AdminService
// hands it the requests for its paths once they passed the admin listener's basic auth.
//
// Its history (DashboardHistory) is sampled once a second through a session of its own,
// from the first dashboard request on, until no dashboard request has come for
// kIdleStop; the server calls Tick every loop iteration and wakes up for next_tick().
namespace stalkd::http {

// What the dashboard asks of the server it runs in.
class DashboardHost {
 public:
  virtual std::string_view version() const = 0;
  // The binlog's files and bytes now (zeros without -b).
  virtual BinlogMetrics BinlogNow() const = 0;
  // Every binlog sync's duration so far.
  virtual const Histogram& BinlogSyncs() const = 0;

 protected:
  ~DashboardHost() = default;
};

class Dashboard final : public command::Client {
 public:
  // Sampling stops, and its session and history go, after this long without a request.
  static constexpr Nanos kIdleStop = 10 * 60 * kSecond;
  // Tubes sampled per Tick while a round is in progress.
  static constexpr size_t kSampleSlice = 250;

  Dashboard(const Clock& clock, command::Store& store, DashboardHost& host);
  ~Dashboard();
  Dashboard(const Dashboard&) = delete;
  Dashboard& operator=(const Dashboard&) = delete;

  // Whether a request target is the dashboard's: "/", "/dashboard" or under "/dashboard/".
  static bool Serves(std::string_view target);
  // Answers a request for one of its paths into ex.response, or leaves ex.task.
  void Handle(Exchange& ex);

  // Samples when a round is due (a slice of it per call). Call every loop iteration.
  void Tick(Nanos now);
  // When Tick next has work: now while a round is in progress, kForever when not sampling.
  Nanos next_tick() const;
  // A job of `tube` was reserved for the first time (command::Observer).
  void OnFirstReserve(std::string_view tube);

  // command::Client: a sampler's call answered later (the next Tick carries on).
  void OnResult(const command::Result& r) override { Arrived(flow_, r); }

  bool sampling() const { return session_ != nullptr; }
  const DashboardHistory& history() const { return history_; }
  DashboardHistory& history() { return history_; }
  DashboardHost& host() { return host_; }
  const Clock& clock() const { return clock_; }

 private:
  // A dashboard request came at `now`: sample from now on.
  void Activate(Nanos now);
  void Stop();
  // One round of samples: the server's, then kSampleSlice tubes' per Tick.
  Co<> Round(Nanos now);
  // The round ran a slice (done: to its end).
  void Ran(bool done);

  const Clock& clock_;
  command::Store& store_;
  DashboardHost& host_;
  std::unique_ptr<command::Session> session_;  // the sampler's, while sampling
  DashboardHistory history_;
  Nanos last_request_ = 0;
  Nanos next_round_ = 0;
  Nanos next_discovery_ = 0;
  Flow flow_;                    // the round's coroutines (co.h)
  Co<> round_;                   // the round in progress, if any
  uint64_t reserves_total_ = 0;  // first reservations while sampling
};

}  // namespace stalkd::http
