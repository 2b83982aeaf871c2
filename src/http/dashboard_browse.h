#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "command/store.h"
#include "http/co.h"
#include "http/dashboard_json.h"
#include "http/response.h"

// Browsing without changing anything: the tube list searched, sorted and paged over
// 100,000 tubes, and a page of a tube's jobs in one state; both in bounded slices so that
// other clients are answered meanwhile.
namespace stalkd::http {
class Dashboard;
}

namespace stalkd::http::dash {

inline constexpr uint32_t kDefaultPage = 50;
inline constexpr uint32_t kMaxPage = 200;        // tubes or jobs in one page
inline constexpr uint64_t kMaxOffset = 1000000;  // how deep the tube list pages
inline constexpr size_t kScanSlice = 2500;       // tube names a search looks at per step
inline constexpr size_t kStatsSlice = 250;       // stats-tube calls of a search per step

// Whether `name` contains `lower` (lower case), in any case (tube names are ASCII).
bool Matches(std::string_view name, std::string_view lower);

struct ListQuery {
  std::string q;                    // lower case
  std::string prefix;               // the names start with it (as given)
  const TubeCount* sort = nullptr;  // null: by name
  bool desc = false;
  uint64_t offset = 0;
  uint32_t limit = kDefaultPage;
  size_t step = 5;  // history points of the rows
};

// A tube list's first keys: the tubes in all, those matching, and the page's offset and limit.
void WriteListHead(size_t total, uint64_t matched, const ListQuery& q, JsonWriter& w);

// A tube list's row: the tube's stats and next ready job, its history kept from `now` on
// (DashboardHistory::Track); false if there is no such tube (gone since it was listed).
Co<bool> ReadListRow(command::Session& s, Dashboard& d, std::string_view name, Nanos now,
                     TubeRow* row);

// GET /dashboard/api/tubes: the tubes whose name contains q.q, sorted, one page.
Co<> SearchTubes(command::Session& s, Dashboard& d, ListQuery q, Nanos now, Response* resp);

// GET /dashboard/api/tubes/:tube/jobs: up to `limit` of the tube's jobs in `state` from id
// `from` on.
Co<> ListJobsPage(command::Session& s, std::string tube, command::StateFilter state, uint64_t from,
                  uint32_t limit, Response* resp);

}  // namespace stalkd::http::dash
