#pragma once

#include <cstddef>

#include "http/dashboard_history.h"
#include "http/json.h"

// The dashboard's history (DashboardHistory) written as the JSON series its charts draw:
// a tube's and the server's, in points of `step` seconds, oldest first.
namespace stalkd::http::dash {

// The history of one tube (or of the server) as points of `step` seconds each, oldest
// first, ending with the newest sample: `ready` the most in the step, `puts` and
// `reserves` per second; null where there is no sample.
void WriteTubeHistory(const DashboardHistory& h, const DashboardHistory::Tube& t, size_t step,
                      JsonWriter& w);

// The server's history as an object: gauges as the last sample of each point, puts and
// reserves per second; null before the first sample.
void WriteServerHistory(const DashboardHistory& h, size_t step, JsonWriter& w);

}  // namespace stalkd::http::dash
