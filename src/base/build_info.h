#pragma once

// Where this binary was built from, as lmstfy's GET /version reports it: the git commit
// (abbreviated, as `git rev-parse --short=12`) and the date of the source (ISO 8601, UTC).
// src/base/build_info.cmake writes them at each build, reproducibly: the date is
// SOURCE_DATE_EPOCH when it is set (Debian's builds set it), else the commit's date, else
// the date of the newest entry of packaging/debian/changelog; the commit is "" outside a git
// checkout.
namespace stalkd {

const char* BuildCommit();
const char* BuildDate();

}  // namespace stalkd
