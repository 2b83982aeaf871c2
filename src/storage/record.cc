#include "storage/record.h"

#include <algorithm>
#include <cstring>

#include "storage/crc32c.h"

namespace stalkd::storage {

namespace {

void Put8(std::string* o, uint8_t v) { o->push_back(static_cast<char>(v)); }
void Put32(std::string* o, uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; i++) b[i] = static_cast<char>(v >> (8 * i));
  o->append(b, 4);
}
void Put64(std::string* o, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; i++) b[i] = static_cast<char>(v >> (8 * i));
  o->append(b, 8);
}
uint32_t Get32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}
uint64_t Get64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// Reserves the 9-byte header; Finish fills in crc and length once the payload is appended.
size_t Begin(std::string* o, RecordType t) {
  size_t at = o->size();
  o->append(8, '\0');
  Put8(o, static_cast<uint8_t>(t));
  return at;
}
void Finish(std::string* o, size_t at) {
  uint32_t len = static_cast<uint32_t>(o->size() - at - kRecordHeaderSize);
  char* p = o->data() + at;
  for (int i = 0; i < 4; i++) p[4 + i] = static_cast<char>(len >> (8 * i));
  uint32_t crc = Crc32c(p + 4, o->size() - at - 4);
  for (int i = 0; i < 4; i++) p[i] = static_cast<char>(crc >> (8 * i));
}

void PutJobFixed(std::string* o, const JobRecord& r) {
  Put64(o, r.id);
  Put8(o, static_cast<uint8_t>(r.state));
  Put32(o, r.pri);
  Put32(o, r.delay_s);
  Put32(o, r.ttr_s);
  Put64(o, static_cast<uint64_t>(r.created_wall));
  Put64(o, static_cast<uint64_t>(r.deadline_wall));
  Put32(o, r.counts.reserves);
  Put32(o, r.counts.timeouts);
  Put32(o, r.counts.releases);
  Put32(o, r.counts.buries);
  Put32(o, r.counts.kicks);
}

bool GetJobFixed(const char* p, JobRecord* r) {
  r->id = Get64(p);
  uint8_t s = static_cast<uint8_t>(p[8]);
  if (s < 1 || s > 4) return false;
  r->state = static_cast<DiskState>(s);
  r->pri = Get32(p + 9);
  r->delay_s = Get32(p + 13);
  r->ttr_s = Get32(p + 17);
  r->created_wall = static_cast<int64_t>(Get64(p + 21));
  r->deadline_wall = static_cast<int64_t>(Get64(p + 29));
  r->counts.reserves = Get32(p + 37);
  r->counts.timeouts = Get32(p + 41);
  r->counts.releases = Get32(p + 45);
  r->counts.buries = Get32(p + 49);
  r->counts.kicks = Get32(p + 53);
  return r->id != 0;
}

}  // namespace

void AppendSegmentHeader(std::string* out) {
  size_t at = out->size();
  out->append(kSegmentMagic, 8);
  Put32(out, kFormatVersion);
  Put32(out, Crc32c(out->data() + at, 12));
}

bool CheckSegmentHeader(const char* p, size_t n, std::string* why) {
  if (n < kSegmentHeaderSize || memcmp(p, kSegmentMagic, 8) != 0) {
    *why = "not a stalkd segment";
    return false;
  }
  if (Get32(p + 12) != Crc32c(p, 12)) {
    *why = "segment header checksum mismatch";
    return false;
  }
  if (Get32(p + 8) != kFormatVersion) {
    *why = "unsupported format version " + std::to_string(Get32(p + 8));
    return false;
  }
  return true;
}

void AppendFull(std::string* out, const JobRecord& r) {
  size_t at = Begin(out, RecordType::kFull);
  PutJobFixed(out, r);
  Put8(out, static_cast<uint8_t>(r.tube.size()));
  out->append(r.tube);
  Put32(out, static_cast<uint32_t>(r.body.size()));
  out->append(r.body);
  Finish(out, at);
}

void AppendState(std::string* out, const JobRecord& r) {
  size_t at = Begin(out, RecordType::kState);
  PutJobFixed(out, r);
  Finish(out, at);
}

void AppendDelete(std::string* out, uint64_t id) {
  size_t at = Begin(out, RecordType::kDelete);
  Put64(out, id);
  Finish(out, at);
}

void AppendAdoptDone(std::string* out) { Finish(out, Begin(out, RecordType::kAdoptDone)); }

Parse ParseRecord(const char* p, size_t avail, Record* out, size_t* size, std::string* why) {
  if (avail < kRecordHeaderSize) {
    if (std::all_of(p, p + avail, [](char c) { return c == 0; })) return Parse::kEnd;
    *why = "record header cut short";
    return Parse::kBad;
  }
  uint32_t crc = Get32(p);
  uint32_t len = Get32(p + 4);
  uint8_t type = static_cast<uint8_t>(p[8]);
  if (crc == 0 && len == 0 && type == 0) return Parse::kEnd;
  if (len > avail - kRecordHeaderSize) {
    *why = "record length " + std::to_string(len) + " runs past the end of the segment";
    return Parse::kBad;
  }
  if (Crc32c(p + 4, 5 + size_t{len}) != crc) {
    *why = "record checksum mismatch";
    return Parse::kBad;
  }
  const char* q = p + kRecordHeaderSize;
  *size = kRecordHeaderSize + len;
  *out = Record{};
  switch (static_cast<RecordType>(type)) {
    case RecordType::kFull: {
      out->type = RecordType::kFull;
      if (len < kJobFixedSize + 5 || !GetJobFixed(q, &out->job)) break;
      size_t tl = static_cast<unsigned char>(q[kJobFixedSize]);
      if (len < kJobFixedSize + 5 + tl) break;
      out->job.tube = std::string_view(q + kJobFixedSize + 1, tl);
      uint32_t bl = Get32(q + kJobFixedSize + 1 + tl);
      if (len != kJobFixedSize + 5 + tl + bl || tl == 0) break;
      out->job.body = std::string_view(q + kJobFixedSize + 5 + tl, bl);
      return Parse::kOk;
    }
    case RecordType::kState:
      out->type = RecordType::kState;
      if (len != kJobFixedSize || !GetJobFixed(q, &out->job)) break;
      return Parse::kOk;
    case RecordType::kDelete:
      out->type = RecordType::kDelete;
      if (len != 8) break;
      out->job.id = Get64(q);
      if (out->job.id == 0) break;
      return Parse::kOk;
    case RecordType::kAdoptDone:
      out->type = RecordType::kAdoptDone;
      if (len != 0) break;
      return Parse::kOk;
  }
  *why = "malformed record of type " + std::to_string(type);
  return Parse::kBad;
}

size_t FindNextRecord(const char* data, size_t n, size_t from) {
  Record r;
  size_t size;
  std::string why;
  for (size_t o = from; o + kRecordHeaderSize <= n; o++) {
    uint8_t type = static_cast<uint8_t>(data[o + 8]);
    if (type < 1 || type > 4) continue;
    if (ParseRecord(data + o, n - o, &r, &size, &why) == Parse::kOk) return o;
  }
  return n;
}

}  // namespace stalkd::storage
