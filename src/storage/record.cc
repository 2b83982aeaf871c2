#include "storage/record.h"

#include <algorithm>
#include <cstring>

#include "storage/crc32c.h"

namespace stalkd::storage {

namespace {

void Put8(std::string* o, uint8_t v) { o->push_back(static_cast<char>(v)); }
void PutLE(std::string* o, uint64_t v, int bytes) {
  char b[8];
  for (int i = 0; i < bytes; i++) b[i] = static_cast<char>(v >> (8 * i));
  o->append(b, static_cast<size_t>(bytes));
}
void Put16(std::string* o, uint16_t v) { PutLE(o, v, 2); }
void Put32(std::string* o, uint32_t v) { PutLE(o, v, 4); }
void Put64(std::string* o, uint64_t v) { PutLE(o, v, 8); }
uint64_t GetLE(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; i--) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}
uint32_t Get32(const char* p) { return static_cast<uint32_t>(GetLE(p, 4)); }

// Reads a payload's fields in order; reading past its end yields zeros and clears ok().
class Reader {
 public:
  Reader(const char* p, size_t n) : p_(p), left_(n) {}
  bool ok() const { return ok_; }
  size_t left() const { return left_; }
  uint8_t U8() { return static_cast<uint8_t>(Int(1)); }
  uint16_t U16() { return static_cast<uint16_t>(Int(2)); }
  uint32_t U32() { return static_cast<uint32_t>(Int(4)); }
  uint64_t U64() { return Int(8); }
  std::string_view Bytes(size_t n) {
    const char* q = Take(n);
    return q ? std::string_view(q, n) : std::string_view();
  }

 private:
  const char* Take(size_t n) {
    if (!ok_ || n > left_) {
      ok_ = false;
      return nullptr;
    }
    const char* q = p_;
    p_ += n;
    left_ -= n;
    return q;
  }
  uint64_t Int(int bytes) {
    const char* q = Take(static_cast<size_t>(bytes));
    return q ? GetLE(q, bytes) : 0;
  }
  const char* p_;
  size_t left_;
  bool ok_ = true;
};

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

// The extension fields' flags byte.
constexpr uint8_t kFlagLimited = 1;
constexpr uint8_t kFlagTtl = 2;
// A bury reason is stored as the engine's value; renumbering the enum breaks the build.
static_assert(static_cast<int>(engine::BuryReason::kNone) == 0 &&
              static_cast<int>(engine::BuryReason::kCommand) == 1 &&
              static_cast<int>(engine::BuryReason::kTimeout) == 2 &&
              static_cast<int>(engine::BuryReason::kRelease) == 3);
constexpr uint8_t kMaxBuryReason = 3;

void PutJobFixed(std::string* o, const JobRecord& r) {
  Put64(o, r.id);
  Put8(o, static_cast<uint8_t>(static_cast<uint8_t>(r.state) |
                               (r.extra.present ? kStateHasExtra : 0)));
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

void PutExtraFixed(std::string* o, const ExtraRecord& x) {
  Put8(o, static_cast<uint8_t>((x.limited ? kFlagLimited : 0) | (x.has_ttl ? kFlagTtl : 0)));
  Put32(o, x.tries_left);
  Put64(o, static_cast<uint64_t>(x.expires_wall));
  Put8(o, static_cast<uint8_t>(x.bury_reason));
}

void PutExtraBlob(std::string* o, const ExtraRecord& x) {
  Put16(o, x.key_len);
  Put8(o, x.attr_count);
  Put32(o, static_cast<uint32_t>(x.blob.size()));
  o->append(x.blob);
}

// The job fields; in a version 1 segment no job has extension fields.
bool GetJobFixed(Reader* in, JobRecord* r, uint32_t version) {
  r->id = in->U64();
  uint8_t s = in->U8();
  r->extra.present = (s & kStateHasExtra) != 0 && version >= 2;
  if (r->extra.present) s = static_cast<uint8_t>(s & ~kStateHasExtra);
  r->state = static_cast<DiskState>(s);
  r->pri = in->U32();
  r->delay_s = in->U32();
  r->ttr_s = in->U32();
  r->created_wall = static_cast<int64_t>(in->U64());
  r->deadline_wall = static_cast<int64_t>(in->U64());
  r->counts.reserves = in->U32();
  r->counts.timeouts = in->U32();
  r->counts.releases = in->U32();
  r->counts.buries = in->U32();
  r->counts.kicks = in->U32();
  return in->ok() && s >= 1 && s <= 4 && r->id != 0;
}

bool GetExtraFixed(Reader* in, ExtraRecord* x) {
  uint8_t flags = in->U8();
  x->limited = (flags & kFlagLimited) != 0;
  x->has_ttl = (flags & kFlagTtl) != 0;
  x->tries_left = in->U32();
  x->expires_wall = static_cast<int64_t>(in->U64());
  uint8_t reason = in->U8();
  x->bury_reason = static_cast<engine::BuryReason>(reason);
  return in->ok() && (flags & ~(kFlagLimited | kFlagTtl)) == 0 && reason <= kMaxBuryReason;
}

// Whether the blob is a key of key_len bytes followed by exactly attr_count attributes,
// all within the engine's limits (job.h).
bool ValidBlob(const ExtraRecord& x) {
  std::string_view b = x.blob;
  if (x.key_len > engine::kMaxJobKey || x.key_len > b.size() ||
      x.attr_count > engine::kMaxAttributes)
    return false;
  size_t at = x.key_len;
  for (uint8_t i = 0; i < x.attr_count; i++) {
    if (b.size() - at < 2) return false;
    size_t name = static_cast<unsigned char>(b[at]), value = static_cast<unsigned char>(b[at + 1]);
    if (name == 0 || name > engine::kMaxAttributeName || b.size() - at - 2 < name + value)
      return false;
    at += 2 + name + value;
  }
  return at == b.size();
}

bool GetExtraBlob(Reader* in, ExtraRecord* x) {
  x->key_len = in->U16();
  x->attr_count = in->U8();
  x->blob = in->Bytes(in->U32());
  return in->ok() && ValidBlob(*x);
}

bool GetFull(Reader* in, JobRecord* r, uint32_t version) {
  if (!GetJobFixed(in, r, version)) return false;
  if (r->extra.present && !(GetExtraFixed(in, &r->extra) && GetExtraBlob(in, &r->extra)))
    return false;
  size_t tube_len = in->U8();
  r->tube = in->Bytes(tube_len);
  r->body = in->Bytes(in->U32());
  return in->ok() && tube_len != 0 && in->left() == 0;
}

bool GetState(Reader* in, JobRecord* r, uint32_t version) {
  if (!GetJobFixed(in, r, version)) return false;
  if (r->extra.present && !GetExtraFixed(in, &r->extra)) return false;
  return in->left() == 0;
}

bool GetTubeTries(Reader* in, Record* out, uint32_t version) {
  size_t tube_len = in->U8();
  out->job.tube = in->Bytes(tube_len);
  out->tries = in->U32();
  return version >= 2 && in->ok() && tube_len != 0 && in->left() == 0;
}

// Parses the payload of a record of `type` into *out.
bool GetPayload(uint8_t type, Reader* in, Record* out, uint32_t version) {
  out->type = static_cast<RecordType>(type);
  switch (out->type) {
    case RecordType::kFull:
      return GetFull(in, &out->job, version);
    case RecordType::kState:
      return GetState(in, &out->job, version);
    case RecordType::kDelete:
      out->job.id = in->U64();
      return in->ok() && in->left() == 0 && out->job.id != 0;
    case RecordType::kAdoptDone:
      return in->left() == 0;
    case RecordType::kTubeTries:
      return GetTubeTries(in, out, version);
  }
  return false;
}

}  // namespace

void AppendSegmentHeader(std::string* out) {
  size_t at = out->size();
  out->append(kSegmentMagic, 8);
  Put32(out, kFormatVersion);
  Put32(out, Crc32c(out->data() + at, 12));
}

bool CheckSegmentHeader(const char* p, size_t n, std::string* why, uint32_t* version) {
  if (n < kSegmentHeaderSize || memcmp(p, kSegmentMagic, 8) != 0) {
    *why = "not a stalkd segment";
    return false;
  }
  if (Get32(p + 12) != Crc32c(p, 12)) {
    *why = "segment header checksum mismatch";
    return false;
  }
  uint32_t v = Get32(p + 8);
  if (v < kOldestFormatVersion || v > kFormatVersion) {
    *why = "unsupported format version " + std::to_string(v);
    return false;
  }
  if (version) *version = v;
  return true;
}

void AppendFull(std::string* out, const JobRecord& r) {
  size_t at = Begin(out, RecordType::kFull);
  PutJobFixed(out, r);
  if (r.extra.present) {
    PutExtraFixed(out, r.extra);
    PutExtraBlob(out, r.extra);
  }
  Put8(out, static_cast<uint8_t>(r.tube.size()));
  out->append(r.tube);
  Put32(out, static_cast<uint32_t>(r.body.size()));
  out->append(r.body);
  Finish(out, at);
}

void AppendState(std::string* out, const JobRecord& r) {
  size_t at = Begin(out, RecordType::kState);
  PutJobFixed(out, r);
  if (r.extra.present) PutExtraFixed(out, r.extra);
  Finish(out, at);
}

void AppendDelete(std::string* out, uint64_t id) {
  size_t at = Begin(out, RecordType::kDelete);
  Put64(out, id);
  Finish(out, at);
}

void AppendAdoptDone(std::string* out) { Finish(out, Begin(out, RecordType::kAdoptDone)); }

void AppendTubeTries(std::string* out, std::string_view tube, uint32_t tries) {
  size_t at = Begin(out, RecordType::kTubeTries);
  Put8(out, static_cast<uint8_t>(tube.size()));
  out->append(tube);
  Put32(out, tries);
  Finish(out, at);
}

Parse ParseRecord(const char* p, size_t avail, Record* out, size_t* size, std::string* why,
                  uint32_t version) {
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
  *size = kRecordHeaderSize + len;
  *out = Record{};
  Reader in(p + kRecordHeaderSize, len);
  if (GetPayload(type, &in, out, version)) return Parse::kOk;
  *why = "malformed record of type " + std::to_string(type);
  return Parse::kBad;
}

size_t FindNextRecord(const char* data, size_t n, size_t from, uint32_t version) {
  Record r;
  size_t size;
  std::string why;
  for (size_t o = from; o + kRecordHeaderSize <= n; o++) {
    uint8_t type = static_cast<uint8_t>(data[o + 8]);
    if (type < 1 || type > static_cast<uint8_t>(RecordType::kTubeTries)) continue;
    if (ParseRecord(data + o, n - o, &r, &size, &why, version) == Parse::kOk) return o;
  }
  return n;
}

}  // namespace stalkd::storage
