#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "engine/engine.h"

namespace stalkd::protocol {

// What `stats` reports about the process rather than the queue. Filled by the server.
struct HostStats {
  long pid = 0;
  std::string version;
  int64_t utime_us = 0;
  int64_t stime_us = 0;
  uint64_t uptime_s = 0;
  int binlog_oldest_index = 0;
  int binlog_current_index = 0;
  int64_t binlog_records_migrated = 0;
  int64_t binlog_records_written = 0;
  int64_t binlog_max_size = 0;
  std::string id;
  std::string hostname;
  std::string os;
  std::string platform;
};

class Host {
 public:
  virtual ~Host() = default;
  virtual HostStats CurrentStats() const = 0;
};

// YAML bodies of stats, stats-tube, stats-job, list-tubes and list-tubes-watched: "---\n...\n"
// without the trailing CRLF, keys in beanstalkd 1.13's order and quoting.
std::string FormatStats(const engine::Engine& e, const HostStats& host);
std::string FormatTubeStats(const engine::Engine& e, const engine::Tube& t);
std::string FormatJobStats(const engine::Engine& e, const engine::Job& j);
std::string FormatTubeList(std::span<engine::Tube* const> tubes);

}  // namespace stalkd::protocol
