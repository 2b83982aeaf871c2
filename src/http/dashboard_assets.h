#pragma once

#include <string_view>

// The dashboard's static files (web/dashboard/), embedded in the binary at build time:
// web/embed_assets.cmake writes them into a generated source file as byte arrays, so the
// server needs no files at run time and the page loads nothing from elsewhere.
namespace stalkd::http {

struct DashboardAsset {
  std::string_view name;  // the file's name, e.g. "app.js" (served as /dashboard/app.js)
  std::string_view content_type;
  std::string_view data;
};

// The embedded file named `name`, or null.
const DashboardAsset* FindDashboardAsset(std::string_view name);

}  // namespace stalkd::http
