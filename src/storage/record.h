#pragma once

// stalkd's binlog format, version 1 (docs/BINLOG.md). Every integer is little-endian.
//
//   segment  = header record*  (then zeros: segments are preallocated)
//   header   = "STALKDWL" u32:version u32:crc32c(first 12 bytes)               16 bytes
//   record   = u32:crc32c(len..payload) u32:len u8:type payload[len]         9 + len bytes
//
// A record header of nine zero bytes marks the end of the data in a segment.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/job.h"

namespace stalkd::storage {

inline constexpr char kSegmentMagic[8] = {'S', 'T', 'A', 'L', 'K', 'D', 'W', 'L'};
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr size_t kSegmentHeaderSize = 16;
inline constexpr size_t kRecordHeaderSize = 9;
// Largest tube name (beanstalkd's limit is 200 bytes).
inline constexpr size_t kMaxTubeName = 255;

enum class RecordType : uint8_t {
  kFull = 1,       // a job with its tube and body (put, or a compaction move)
  kState = 2,      // a job's new state, priority, delay, deadline and counters
  kDelete = 3,     // the job is gone
  kAdoptDone = 4,  // every job of an adopted beanstalkd binlog has been written before this
};

// On-disk job states (independent of the engine's enum values).
enum class DiskState : uint8_t { kReady = 1, kDelayed = 2, kReserved = 3, kBuried = 4 };

// The body of a kFull or kState record. Times are wall-clock nanoseconds since the epoch
// (CLOCK_REALTIME), so they survive a reboot; deadline is meaningful for delayed jobs.
struct JobRecord {
  uint64_t id = 0;
  DiskState state = DiskState::kReady;
  uint32_t pri = 0;
  uint32_t delay_s = 0;
  uint32_t ttr_s = 0;
  int64_t created_wall = 0;
  int64_t deadline_wall = 0;
  engine::JobCounts counts;
  std::string_view tube;  // kFull only
  std::string_view body;  // kFull only; without the trailing CRLF
};

inline constexpr size_t kJobFixedSize = 8 + 1 + 4 + 4 + 4 + 8 + 8 + 5 * 4;  // 57
inline constexpr size_t kStateRecordSize = kRecordHeaderSize + kJobFixedSize;
inline constexpr size_t kDeleteRecordSize = kRecordHeaderSize + 8;
inline constexpr size_t kAdoptDoneRecordSize = kRecordHeaderSize;
// The largest record that is never a kFull record.
inline constexpr size_t kMaxSmallRecord = kStateRecordSize;

inline size_t FullRecordSize(size_t tube_len, size_t body_len) {
  return kRecordHeaderSize + kJobFixedSize + 1 + tube_len + 4 + body_len;
}

void AppendSegmentHeader(std::string* out);
// True if p[0..kSegmentHeaderSize) is a valid header of a supported version.
bool CheckSegmentHeader(const char* p, size_t n, std::string* why);

void AppendFull(std::string* out, const JobRecord& r);
void AppendState(std::string* out, const JobRecord& r);
void AppendDelete(std::string* out, uint64_t id);
void AppendAdoptDone(std::string* out);

struct Record {
  RecordType type = RecordType::kFull;
  JobRecord job;  // kFull, kState; for kDelete only job.id is set
};

enum class Parse {
  kOk,   // *out and *size are set
  kEnd,  // no record here: the data ends (zero header, or fewer than 9 bytes left, all zero)
  kBad,  // a damaged or cut record; *why says how
};

// Parses the record at p (avail bytes up to the segment's end). String views in *out point
// into p.
Parse ParseRecord(const char* p, size_t avail, Record* out, size_t* size, std::string* why);

// The offset of the first valid record in data[from, n), or n if there is none. Used to
// tell a torn tail (nothing valid after it) from damage in the middle of a segment.
size_t FindNextRecord(const char* data, size_t n, size_t from);

}  // namespace stalkd::storage
