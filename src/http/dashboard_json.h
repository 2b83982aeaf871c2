#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "command/store.h"
#include "http/co.h"
#include "http/dashboard_history.h"
#include "http/json.h"
#include "http/response.h"

// The dashboard API's common pieces (docs/DASHBOARD.md): its response headers and errors,
// the names it gives stats' counts, a tube's row and a job's fields as JSON, and the store
// reads that fill a tube's row. Every route file of the dashboard uses them.
namespace stalkd::http::dash {

// Headers of every dashboard API response: nothing is cached by a proxy or sniffed.
inline constexpr std::string_view kApiHeaders =
    "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n";
inline constexpr size_t kRateWindow = 10;  // seconds the rates are averaged over
inline constexpr std::string_view kDefaultTube = "default";

// An error answer ({"error": text}) with the API's headers.
void Fail(Response* r, int status, std::string_view text);
// A 200 answer with the API's headers and an empty body (the caller writes it).
void Ok(Response* r);

// A job state's name (and "all" if `all`) as list-jobs' filter.
std::optional<command::StateFilter> ParseState(std::string_view s, bool all);
std::string_view StateName(command::StateFilter s);

// stats-tube's counts as the dashboard names them: its JSON keys, the sort keys of the
// tube list, and (ready, reserved, delayed, buried) the states of list-jobs.
template <class T>
struct Field {
  std::string_view name;
  T field;
};
using TubeCount = Field<uint64_t command::TubeStats::*>;
extern const TubeCount kTubeCounts[11];

using ServerField = Field<uint64_t command::ServerStats::*>;
extern const ServerField kConnectionCounts[5];
extern const ServerField kJobCounts[9];
extern const ServerField kMemory[2];

// The count named `name` (a key of kTubeCounts), or null.
const TubeCount* FindCount(std::string_view name);

// Keys and values of one JSON object, from a table of a struct's fields.
template <class T, class Fields>
void WriteFields(const T& x, const Fields& fields, JsonWriter& w) {
  for (const auto& f : fields) {
    w.Key(f.name);
    w.Uint(x.*f.field);
  }
}

// A rate rounded to hundredths, or null before there is one.
void Rate(JsonWriter& w, std::optional<double> r);

// A tube's stats, copied (the store's views last until its next call).
struct TubeRow {
  std::string name;
  command::TubeStats st;
  std::optional<uint64_t> next_id;  // the next ready job (peek-ready)
  int64_t next_age_s = 0;
};

// Reads a tube's stats into *row; false if there is no such tube.
Co<bool> ReadTube(command::Session& s, std::string_view name, TubeRow* row);
// The job a reserve would take next (peek-ready: best priority, then lowest id) and its age.
// The session uses the tube meanwhile, then "default" again, so the dashboard's connection
// keeps no tube alive.
Co<> ReadNextReady(command::Session& s, TubeRow* row);

// A tube's row of the tube list and tube page: its counts, next ready job, rates and
// (with step > 0) its history in points of `step` seconds.
void WriteTubeRow(const TubeRow& row, const DashboardHistory& h, size_t step, JsonWriter& w);

// A job's stats-job fields, with the extensions' (null where a plain job has none).
void WriteJobFields(const command::JobStats& js, JsonWriter& w);

}  // namespace stalkd::http::dash
