// Fuzzes the binlog record reader with arbitrary segment contents: parsing never reads out
// of bounds, a record that parses re-encodes to exactly the bytes it was read from (every
// shape: plain and extended jobs' kFull and kState records, kDelete, kAdoptDone,
// kTubeTries), a record that a version 1 segment accepts reads the same in version 2, and
// resynchronisation after a damaged record always moves forward.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "storage/record.h"

using stalkd::storage::FindNextRecord;
using stalkd::storage::kFormatVersion;
using stalkd::storage::Parse;
using stalkd::storage::ParseRecord;
using stalkd::storage::Record;
using stalkd::storage::RecordType;

#define FUZZ_CHECK(cond)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      abort();                                                                 \
    }                                                                          \
  } while (0)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 16) return 0;
  // An exact-size copy, so ASan sees any read past the end.
  char* buf = static_cast<char*>(malloc(size ? size : 1));
  memcpy(buf, data, size);
  size_t off = 0;
  int steps = 0;
  while (off < size && steps++ < 10000) {
    Record r;
    size_t rec_size = 0;
    std::string why;
    Parse p = ParseRecord(buf + off, size - off, &r, &rec_size, &why, kFormatVersion);
    if (p == Parse::kEnd) break;
    if (p == Parse::kBad) {
      FUZZ_CHECK(!why.empty());
      Record old;
      size_t old_size = 0;
      FUZZ_CHECK(ParseRecord(buf + off, size - off, &old, &old_size, &why, 1) == Parse::kBad);
      size_t next = FindNextRecord(buf, size, off + 1);
      FUZZ_CHECK(next > off && next <= size);
      off = next;
      continue;
    }
    FUZZ_CHECK(rec_size > 0 && rec_size <= size - off);
    // Version 2 reads version 1 segments as they were: v1 is a subset.
    Record old;
    size_t old_size = 0;
    if (ParseRecord(buf + off, size - off, &old, &old_size, &why, 1) == Parse::kOk) {
      FUZZ_CHECK(old_size == rec_size && old.type == r.type && !old.job.extra.present);
    }
    std::string again;
    switch (r.type) {
      case RecordType::kFull:
        stalkd::storage::AppendFull(&again, r.job);
        break;
      case RecordType::kState:
        stalkd::storage::AppendState(&again, r.job);
        break;
      case RecordType::kDelete:
        stalkd::storage::AppendDelete(&again, r.job.id);
        break;
      case RecordType::kAdoptDone:
        stalkd::storage::AppendAdoptDone(&again);
        break;
      case RecordType::kTubeTries:
        stalkd::storage::AppendTubeTries(&again, r.job.tube, r.tries);
        break;
    }
    FUZZ_CHECK(again.size() == rec_size);
    FUZZ_CHECK(memcmp(again.data(), buf + off, rec_size) == 0);
    off += rec_size;
  }
  free(buf);
  return 0;
}
