#pragma once

// The disk tier's checkpoint (docs/DISK-TIER.md, docs/BINLOG.md): DIR/checkpoint, written at
// a clean shutdown, lists every live job of the binlog with where its kFull record is, and
// for the jobs kept on disk only (cold: delayed or ready) their index entry, with the binlog
// position it covers (every segment's sequence number, size, end of records and a CRC of its
// last bytes). A start whose segments continue those it covers (MatchPrefix) restores the
// cold jobs from it without reading their records, reads only the records of the others,
// and replays the records written after its position on top.
//
// Format (version 2), integers little-endian:
//
//   file    = "STALKDCP" u32:version  u64:max_id
//             u32:n  segment{n}       segment = u32:seq i64:size i64:end u32:tail_crc
//             u32:n  tube{n}          tube    = u8:len name[len]
//             u32:n  tries{n}         tries   = u8:len name[len] u32:tries u32:seq u32:size
//             u64:n  job{n}           (ids strictly increasing)
//             u32:crc32c(everything before)
//   job     = u64:id u32:seq u32:off u32:size u8:flags
//             flags: 0 (in memory), 1 (delayed, on disk) or 2 (ready, on disk); no other value
//             [flags 1: u32:resv u32:tube i64:deadline_wall i64:created_wall]   (45 bytes a job)
//             [flags 2: u32:resv u32:tube u32:pri i64:created_wall]             (41 bytes a job)
//
// Version 1 is version 2 without flags 2 (its ready jobs on disk were listed as in memory):
// it is still read.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace stalkd::storage {

inline constexpr char kCheckpointMagic[8] = {'S', 'T', 'A', 'L', 'K', 'D', 'C', 'P'};
inline constexpr uint32_t kCheckpointVersion = 2;
inline constexpr uint32_t kCheckpointOldestVersion = 1;  // still read
inline constexpr const char* kCheckpointName = "checkpoint";
inline constexpr const char* kCheckpointTmpName = "checkpoint.tmp";
// How many bytes before a segment's end of records the tail CRC covers (fewer in a
// segment with less after its header).
inline constexpr int64_t kCheckpointTailBytes = 256;

struct CheckpointSegment {
  uint32_t seq = 0;
  int64_t size = 0;  // of the file
  int64_t end = 0;   // where its records end (the header's size if it has none)
  uint32_t tail_crc = 0;
  bool operator==(const CheckpointSegment&) const = default;
};

struct CheckpointTubeTries {
  std::string tube;
  uint32_t tries = 0;
  uint32_t seq = 0;   // segment of its latest kTubeTries record
  uint32_t size = 0;  // of that record
  bool operator==(const CheckpointTubeTries&) const = default;
};

struct CheckpointJob {
  uint64_t id = 0;
  uint32_t seq = 0;           // segment of its kFull record, its latest record
  uint32_t off = 0;           // where that record starts
  uint32_t size = 0;          // of that record
  bool cold = false;          // kept on disk only: the fields below are meaningful
  uint32_t resv = 0;          // bytes reserved for its future records
  uint32_t tube = 0;          // index into CheckpointMeta::tubes
  int64_t deadline_wall = 0;  // delayed (not ready)
  int64_t created_wall = 0;
  bool ready = false;  // with cold: in the ready index, not the delayed one
  uint32_t pri = 0;    // ready
  bool operator==(const CheckpointJob&) const = default;
};

struct CheckpointMeta {
  // As read; what the writer writes (an older one refuses the ready jobs on disk).
  uint32_t version = kCheckpointVersion;
  uint64_t max_id = 0;  // ids above it were never handed out
  std::vector<CheckpointSegment> segments;
  std::vector<std::string> tubes;  // of the cold jobs
  std::vector<CheckpointTubeTries> tube_tries;
  uint64_t jobs = 0;
  bool operator==(const CheckpointMeta&) const = default;
};

// A segment as found at start-up, mapped.
struct SegmentView {
  uint32_t seq = 0;
  const char* data = nullptr;
  size_t size = 0;
};

// CRC-32C of the kCheckpointTailBytes before `end` (not before the segment's header).
uint32_t SegmentTailCrc(const char* data, int64_t end);

// How the segments found continue those a checkpoint covers: its segments are a prefix of
// the binlog, and the records after its position (the *tail*) are replayed on top of it.
struct PrefixMatch {
  // Per segment found, where its records after the checkpoint start: its end of records
  // for a segment it lists, the header's end for one made since.
  std::vector<int64_t> from;
  // Segments it lists that held records and are gone (compaction removed them since): every
  // job and tube default it lists in one of them must have a record in the tail.
  std::vector<uint32_t> removed;
};

// Whether the segments found (in sequence order) continue those the checkpoint covers:
// every one found up to its newest is one it lists; each one found that it lists has at
// least its bytes up to its end of records, the same last ones (tail CRC); those it lists
// that are gone held no records, or are older than every one found that it lists (only
// compaction removes segments with records, oldest first); and the segment its position is
// in (its newest with records) is there. Records after a listed segment's end are the
// tail's, as are those of a segment made since. false: *why says what differs.
bool MatchPrefix(const CheckpointMeta& meta, const std::vector<SegmentView>& found,
                 PrefixMatch* out, std::string* why);

// Writes DIR/checkpoint.tmp, then (Finish) fsyncs it, renames it to DIR/checkpoint and
// fsyncs the directory: a crash leaves the old state or the whole new file, never part.
class CheckpointWriter {
 public:
  CheckpointWriter() = default;
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // meta.jobs jobs must follow, by Add, in increasing id order.
  bool Begin(const std::string& dir, int dir_fd, const CheckpointMeta& meta, std::string* error);
  bool Add(const CheckpointJob& j, std::string* error);
  bool Finish(std::string* error);
  int64_t bytes() const { return bytes_; }

 private:
  bool Write(std::string* error);  // writes and empties buf_

  std::string dir_;
  int dir_fd_ = -1;
  int fd_ = -1;
  std::string buf_;
  uint32_t crc_ = 0;
  int64_t bytes_ = 0;
  uint64_t left_ = 0;
  uint64_t last_id_ = 0;
  uint32_t version_ = kCheckpointVersion;
};

// Reads a checkpoint: Open checks the whole file's CRC and reads its meta; Next then gives
// the jobs one by one, checked for bounds and order; Rewind starts them again.
class CheckpointReader {
 public:
  CheckpointReader() = default;
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  // false: *why says what is wrong (a missing file: ENOENT in *err_no).
  bool Open(const std::string& path, std::string* why, int* err_no = nullptr);
  const CheckpointMeta& meta() const { return meta_; }
  // The next job (false at the end or on damage: *why is then set).
  bool Next(CheckpointJob* j, std::string* why);
  // As Next, but only a job whose id is below `below`: a later one is held for the next call
  // (false with *why empty), so the jobs can be merged in id order with others.
  bool NextBelow(uint64_t below, CheckpointJob* j, std::string* why);
  bool Rewind(std::string* why);

 private:
  bool Fill(size_t n, std::string* why);  // at least n bytes in buf_ from pos_
  bool Take(void* out, size_t n, std::string* why);
  bool ReadMeta(std::string* why);

  int fd_ = -1;
  int64_t file_size_ = 0;
  int64_t file_pos_ = 0;  // of the byte after buf_
  std::string buf_;
  size_t pos_ = 0;          // into buf_
  int64_t jobs_at_ = 0;     // file offset of the first job
  uint64_t jobs_left_ = 0;  // jobs not yet given by Next
  uint64_t last_id_ = 0;
  CheckpointJob held_;  // read by NextBelow, not yet given
  bool holding_ = false;
  CheckpointMeta meta_;
};

}  // namespace stalkd::storage
