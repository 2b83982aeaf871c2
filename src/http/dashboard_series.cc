#include "http/dashboard_series.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>

// The dashboard's history as JSON series: see dashboard_series.h.
namespace stalkd::http::dash {

void WriteTubeHistory(const DashboardHistory& h, const DashboardHistory::Tube& t, size_t step,
                      JsonWriter& w) {
  size_t points = DashboardHistory::kSeconds / step;
  uint64_t end = h.rounds();  // rounds before it are complete
  w.StartObject();
  w.Key("step_s");
  w.Uint(step);
  auto series = [&](std::string_view key, int which) {
    w.Key(key);
    w.StartArray();
    for (size_t p = points; p-- > 0;) {
      uint64_t hi = end > p * step ? end - p * step : 0;  // the point's rounds: [hi - step, hi)
      uint64_t lo = hi > step ? hi - step : 0;
      bool any = false;
      uint64_t v = 0;
      for (uint64_t k = lo; k < hi; k++) {
        const DashboardHistory::TubeSample* x = h.Sample(t, k);
        if (!x) continue;
        any = true;
        if (which == 0) v = std::max<uint64_t>(v, x->ready);
        if (which == 1) v += x->puts;
        if (which == 2) v += x->reserves;
      }
      if (!any) {
        w.Null();
      } else if (which == 0) {
        w.Uint(v);
      } else {
        w.Double(std::round(static_cast<double>(v) / static_cast<double>(step) * 100) / 100);
      }
    }
    w.EndArray();
  };
  series("ready", 0);
  series("puts", 1);
  series("reserves", 2);
  w.EndObject();
}

void WriteServerHistory(const DashboardHistory& h, size_t step, JsonWriter& w) {
  w.StartObject();
  w.Key("step_s");
  w.Uint(step);
  size_t points = DashboardHistory::kSeconds / step;
  uint64_t end = h.rounds();
  auto series = [&](std::string_view key, auto value, bool rate) {
    w.Key(key);
    w.StartArray();
    for (size_t p = points; p-- > 0;) {
      uint64_t hi = end > p * step ? end - p * step : 0;
      uint64_t lo = std::max(hi > step ? hi - step : 0, h.oldest_round());
      if (lo >= hi) {
        w.Null();
        continue;
      }
      if (!rate) {
        w.Uint(value(h.server(hi - 1)));
        continue;
      }
      uint64_t sum = 0;
      for (uint64_t k = lo; k < hi; k++) sum += value(h.server(k));
      w.Double(std::round(static_cast<double>(sum) / static_cast<double>(hi - lo) * 100) / 100);
    }
    w.EndArray();
  };
  using S = DashboardHistory::ServerSample;
  series(
      "ready", [](const S& x) { return x.ready; }, false);
  series(
      "reserved", [](const S& x) { return x.reserved; }, false);
  series(
      "delayed", [](const S& x) { return x.delayed; }, false);
  series(
      "buried", [](const S& x) { return x.buried; }, false);
  series(
      "connections", [](const S& x) { return x.connections; }, false);
  series(
      "memory_used", [](const S& x) { return x.memory_used; }, false);
  series(
      "puts", [](const S& x) { return uint64_t{x.puts}; }, true);
  series(
      "reserves", [](const S& x) { return uint64_t{x.reserves}; }, true);
  w.EndObject();
}

}  // namespace stalkd::http::dash
