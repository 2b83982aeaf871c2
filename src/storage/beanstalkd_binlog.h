#pragma once

// A reader for beanstalkd's binlog (format version 7, written by beanstalkd 1.10 to 1.13 on
// 64-bit little-endian machines), so stalkd can adopt the directory of a beanstalkd it
// replaces. See docs/BINLOG.md for the layout.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "storage/record.h"

namespace stalkd::storage {

inline constexpr int32_t kBeanstalkdVersion = 7;

struct BeanstalkdFile {
  std::string path;
  std::string_view data;  // the whole file
};

// A live job as the binlog leaves it; times are wall-clock nanoseconds, as beanstalkd
// stores them.
struct BeanstalkdJob {
  JobRecord rec;  // rec.tube and rec.body are unset; see tube and body
  std::string tube;
  std::string body;  // without the trailing CRLF
};

struct BeanstalkdReadResult {
  std::map<uint64_t, BeanstalkdJob> jobs;
  std::vector<std::string> notes;  // torn tails truncated, damage skipped
  size_t skipped = 0;              // damaged records skipped (with skip_damaged)
  uint64_t max_id = 0;
};

// Replays `files` (oldest first). Damage in the last file with nothing readable after it
// is a torn tail (noted, not an error). Other damage is an error (false, *error names the
// file and offset) unless skip_damaged, which skips the rest of that file.
bool ReadBeanstalkdBinlog(const std::vector<BeanstalkdFile>& files, bool skip_damaged,
                          BeanstalkdReadResult* out, std::string* error);

}  // namespace stalkd::storage
