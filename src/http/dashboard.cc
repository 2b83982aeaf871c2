#include "http/dashboard.h"

#include <algorithm>

#include "http/dashboard_call.h"
#include "http/dashboard_json.h"

// The Dashboard itself: which requests are its (handed to dashboard_routes.cc), and the
// sampler that keeps its history (DashboardHistory) while someone looks at it.
namespace stalkd::http {

using command::Outcome;
using command::Result;

Dashboard::Dashboard(const Clock& clock, command::Store& store, DashboardHost& host)
    : clock_(clock), store_(store), host_(host) {}

Dashboard::~Dashboard() = default;

bool Dashboard::Serves(std::string_view target) {
  std::string_view path = target.substr(0, target.find('?'));
  return path == "/" || path == "/dashboard" || path.starts_with("/dashboard/");
}

void Dashboard::Handle(Exchange& ex) {
  std::string_view path = ex.request.target;
  if (path.starts_with("/dashboard/api/")) Activate(ex.now);
  ex.error_headers = dash::kApiHeaders;
  Serve(ex, dash::HandleDashboard(ex, *this));
}

void Dashboard::Activate(Nanos now) {
  last_request_ = now;
  if (session_) return;
  session_ = store_.Open(*this);
  history_.Clear();
  next_round_ = now;
  reserves_total_ = 0;
}

void Dashboard::Stop() {
  session_.reset();
  history_.Clear();
}

void Dashboard::Tick(Nanos now) {
  if (!session_) return;
  if (round_) {
    if (flow_.waiting) return;
    return Ran(!flow_.failed && round_.Continue(flow_));
  }
  if (now - last_request_ >= kIdleStop) return Stop();
  if (now < next_round_) return;
  // A round a second; after the loop was held up, the next one a second from now.
  next_round_ = next_round_ + kSecond > now ? next_round_ + kSecond : now + kSecond;
  round_ = Round(now);
  Ran(round_.Start(flow_));
}

void Dashboard::Ran(bool done) {
  if (!done && !flow_.failed) return;  // a slice done, or waiting for the store
  round_ = Co<>();
  // The store could not answer (kInternalError): the round ends with what it has.
  if (flow_.failed && history_.in_round()) history_.EndRound();
  flow_.failed = false;
}

Co<> Dashboard::Round(Nanos now) {
  Result st = co_await Ask(session_->Stats());
  if (st.outcome != Outcome::kStats) co_return;
  bool few = st.stats->tubes <= DashboardHistory::kMaxTubes;
  history_.BeginRound(now, *st.stats, reserves_total_, host_.BinlogSyncs());
  // While every tube fits, every tube has a history.
  if (few) {
    Result l = co_await Ask(session_->ListTubes());
    if (l.outcome == Outcome::kTubeList) {
      for (std::string_view t : *l.tubes) history_.Discover(t);
    }
  }
  for (size_t cursor = 0;;) {
    size_t end = std::min(history_.tube_count(), cursor + kSampleSlice);
    for (; cursor < end; cursor++) {
      Result r = co_await Ask(session_->StatsTube(history_.tube_name(cursor)));
      history_.SampleTube(cursor, r.outcome == Outcome::kTubeStats ? r.tube_stats : nullptr);
    }
    if (cursor >= history_.tube_count()) break;
    co_await Slice();
  }
  history_.EndRound();
}

Nanos Dashboard::next_tick() const {
  if (!session_) return kForever;
  if (round_) return flow_.waiting ? kForever : 0;  // a result wakes the loop when it comes
  return std::min(next_round_, last_request_ + kIdleStop);
}

void Dashboard::OnFirstReserve(std::string_view tube) {
  if (!session_) return;
  reserves_total_++;
  history_.CountReserve(tube);
}

}  // namespace stalkd::http
