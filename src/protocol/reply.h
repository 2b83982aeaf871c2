#pragma once

#include <span>
#include <string>
#include <string_view>

#include "command/values.h"

namespace stalkd::protocol {

// Appends the text protocol's reply for `r` to *out, byte for byte as beanstalkd 1.13
// answers. r.outcome must not be kPending. With `extended` (stats-ext, stats-tube-ext,
// stats-job-ext), a stats reply adds stalkd's own keys after beanstalkd's.
void AppendReply(const command::Result& r, std::string* out, bool extended = false);

// YAML bodies of stats, stats-tube, stats-job, list-tubes and list-tubes-watched: "---\n...\n"
// without the trailing CRLF, keys in beanstalkd 1.13's order and quoting: beanstalkd's keys
// only, and with `extended` stalkd's own after them (docs/EXTENSIONS.md).
std::string FormatStats(const command::ServerStats& s, bool extended = false);
std::string FormatTubeStats(const command::TubeStats& t, bool extended = false);
std::string FormatJobStats(const command::JobStats& j, bool extended = false);
std::string FormatTubeList(std::span<const std::string_view> tubes);
// list-jobs: the ids and where to continue (docs/EXTENSIONS.md).
std::string FormatJobList(std::span<const uint64_t> ids, uint64_t next);

}  // namespace stalkd::protocol
