#pragma once

// stalkd's binlog format, version 2 (docs/BINLOG.md); version 1 segments are still read.
// Every integer is little-endian.
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
inline constexpr uint32_t kFormatVersion = 2;        // what new segments are written in
inline constexpr uint32_t kOldestFormatVersion = 1;  // the oldest still read
inline constexpr size_t kSegmentHeaderSize = 16;
inline constexpr size_t kRecordHeaderSize = 9;
// Largest tube name (beanstalkd's limit is 200 bytes).
inline constexpr size_t kMaxTubeName = 255;

enum class RecordType : uint8_t {
  kFull = 1,       // a job with its tube and body (put, or a compaction move)
  kState = 2,      // a job's new state, priority, delay, deadline and counters
  kDelete = 3,     // the job is gone
  kAdoptDone = 4,  // every job of an adopted beanstalkd binlog has been written before this
  kTubeTries = 5,  // version 2: a tube's default tries changed (0: cleared)
};

// On-disk job states (independent of the engine's enum values).
enum class DiskState : uint8_t { kReady = 1, kDelayed = 2, kReserved = 3, kBuried = 4 };
// Version 2: set in a job record's state byte when the extension fields follow the job fields.
inline constexpr uint8_t kStateHasExtra = 0x80;

// The lifecycle extensions of a job (engine::JobExtra), in the kFull and kState records of
// a job that has them (version 2). The key and attributes never change after the put, so
// only kFull records carry them; a kState record carries the fields that do change.
struct ExtraRecord {
  bool present = false;  // the job has a JobExtra; the rest is meaningful only then
  bool limited = false;  // tries_left counts down
  bool has_ttl = false;  // expires_wall is meaningful
  uint32_t tries_left = 0;
  int64_t expires_wall = 0;  // the TTL deadline, wall-clock nanoseconds
  engine::BuryReason bury_reason = engine::BuryReason::kNone;
  uint16_t key_len = 0;    // kFull only
  uint8_t attr_count = 0;  // kFull only
  std::string_view blob;   // kFull only: key and attributes, laid out as JobExtra's blob
  bool operator==(const ExtraRecord&) const = default;
};

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
  ExtraRecord extra;
};

inline constexpr size_t kJobFixedSize = 8 + 1 + 4 + 4 + 4 + 8 + 8 + 5 * 4;  // 57
// The extension fields of both records: u8 flags, u32 tries_left, i64 expires, u8 reason.
inline constexpr size_t kExtraFixedSize = 1 + 4 + 8 + 1;  // 14
// What a kFull record adds before the blob: u16 key_len, u8 attr_count, u32 blob_len.
inline constexpr size_t kExtraBlobHeaderSize = 2 + 1 + 4;  // 7
inline constexpr size_t kStateRecordSize = kRecordHeaderSize + kJobFixedSize;
inline constexpr size_t kExtraStateRecordSize = kStateRecordSize + kExtraFixedSize;
inline constexpr size_t kDeleteRecordSize = kRecordHeaderSize + 8;
inline constexpr size_t kAdoptDoneRecordSize = kRecordHeaderSize;
// The largest record written into room reserved for a job (a state or delete record).
inline constexpr size_t kMaxSmallRecord = kExtraStateRecordSize;

inline size_t StateRecordSize(bool extra) {
  return extra ? kExtraStateRecordSize : kStateRecordSize;
}
// A plain job's kFull record.
inline size_t FullRecordSize(size_t tube_len, size_t body_len) {
  return kRecordHeaderSize + kJobFixedSize + 1 + tube_len + 4 + body_len;
}
// The kFull record of a job with extensions whose blob has blob_len bytes.
inline size_t FullRecordSize(size_t tube_len, size_t body_len, size_t blob_len) {
  return FullRecordSize(tube_len, body_len) + kExtraFixedSize + kExtraBlobHeaderSize + blob_len;
}
inline size_t TubeTriesRecordSize(size_t tube_len) { return kRecordHeaderSize + 1 + tube_len + 4; }

void AppendSegmentHeader(std::string* out);
// True if p[0..kSegmentHeaderSize) is a valid header of a supported version, which goes
// to *version if given.
bool CheckSegmentHeader(const char* p, size_t n, std::string* why, uint32_t* version = nullptr);

void AppendFull(std::string* out, const JobRecord& r);
void AppendState(std::string* out, const JobRecord& r);
void AppendDelete(std::string* out, uint64_t id);
void AppendAdoptDone(std::string* out);
void AppendTubeTries(std::string* out, std::string_view tube, uint32_t tries);

struct Record {
  RecordType type = RecordType::kFull;
  JobRecord job;  // kFull, kState; for kDelete only job.id is set
  // kTubeTries: the tube (in job.tube) and its new default tries.
  uint32_t tries = 0;
};

enum class Parse {
  kOk,   // *out and *size are set
  kEnd,  // no record here: the data ends (zero header, or fewer than 9 bytes left, all zero)
  kBad,  // a damaged or cut record; *why says how
};

// Parses the record at p (avail bytes up to the segment's end) of a segment in format
// `version` (version 1 knows neither extension fields nor kTubeTries). String views in
// *out point into p.
Parse ParseRecord(const char* p, size_t avail, Record* out, size_t* size, std::string* why,
                  uint32_t version = kFormatVersion);

// The offset of the first valid record in data[from, n), or n if there is none. Used to
// tell a torn tail (nothing valid after it) from damage in the middle of a segment.
size_t FindNextRecord(const char* data, size_t n, size_t from, uint32_t version = kFormatVersion);

}  // namespace stalkd::storage
