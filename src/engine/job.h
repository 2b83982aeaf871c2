#pragma once

#include <cstdint>
#include <new>
#include <string_view>

#include "base/check.h"
#include "base/clock.h"
#include "base/intrusive_list.h"

namespace stalkd::engine {

class Tube;
class Session;
struct Job;

enum class JobState : uint8_t { kNew, kReady, kDelayed, kReserved, kBuried };

// Seconds (from a protocol) to nanoseconds; u32 seconds always fit.
inline Nanos Seconds(uint32_t s) { return static_cast<Nanos>(s) * kSecond; }

const char* JobStateName(JobState s);

struct JobListTag;

// What stats-job counts for a job; kept by the engine, the binlog's records and restores.
struct JobCounts {
  uint32_t reserves = 0;
  uint32_t timeouts = 0;
  uint32_t releases = 0;
  uint32_t buries = 0;
  uint32_t kicks = 0;
  bool any() const { return (reserves | timeouts | releases | buries | kicks) != 0; }
};

// The part of a job that a job waiting in a ready queue, never reserved, does not need. It
// is allocated by the engine (Engine::ColdOf) the first time the job needs one of its
// fields: a put with a delay, the first reserve, a bury, a counter becoming nonzero, a
// restore that brings any of these back. It lives until the job is freed.
// Every delayed, reserved or buried job has one.
struct JobCold : ListNode<JobListTag> {
  Job* job;                     // the job this belongs to
  Session* reserver = nullptr;  // set only while kReserved
  // kDelayed: when it becomes ready; kReserved: TTR expiry; kBuried: its place in its tube's
  // bury order (Engine::BurySeq), not a time.
  Nanos deadline = 0;
  uint32_t delay_s = 0;
  JobCounts counts;

  explicit JobCold(Job* j) : job(j) {}
};

// Why a buried job was buried (shown by stats-job for jobs with a JobExtra).
enum class BuryReason : uint8_t { kNone = 0, kCommand = 1, kTimeout = 2, kRelease = 3 };
const char* BuryReasonName(BuryReason r);

// One attribute of a job (docs/EXTENSIONS.md): a short name and a short value.
struct JobAttribute {
  std::string_view name;
  std::string_view value;
};
inline constexpr size_t kMaxAttributes = 16;
inline constexpr size_t kMaxAttributeName = 64;
inline constexpr size_t kMaxAttributeValue = 255;
inline constexpr size_t kMaxJobKey = 200;

// The lifecycle extensions of a job (tries, TTL, unique key, attributes, a reservation's own
// TTR): a JobCold with more fields, allocated instead of a plain one only for a job that uses
// one of them, so a plain job pays nothing. The key and attributes follow it in the same
// allocation, as the "blob":
//   key[key_len], then per attribute: u8 name_len, u8 value_len, name, value
// (the binlog stores the blob as it is).
struct JobExtra : JobCold {
  Nanos expires_at = kForever;        // TTL deadline on the engine's clock; kForever: none
  uint32_t tries_left = 0;            // meaningful when `limited`
  uint32_t reserve_ttr_s = 0;         // the current reservation's TTR, when given at reserve
  uint32_t expiry_slot = UINT32_MAX;  // slot in the engine's expiry heap
  uint32_t blob_size = 0;
  uint16_t key_len = 0;
  uint8_t attr_count = 0;
  bool limited = false;         // tries_left counts down; unlimited otherwise
  bool expire_pending = false;  // the TTL passed while the job was reserved
  BuryReason bury_reason = BuryReason::kNone;

  explicit JobExtra(Job* j) : JobCold(j) {}

  char* blob() { return reinterpret_cast<char*>(this + 1); }
  const char* blob() const { return reinterpret_cast<const char*>(this + 1); }
  std::string_view blob_view() const { return {blob(), blob_size}; }
  std::string_view key() const { return {blob(), key_len}; }
  bool has_ttl() const { return expires_at != kForever; }
  // Whether the job was put with options (tries, a TTL, a key, attributes), which it keeps
  // for life; false for a JobExtra the engine added only for a reservation's own TTR. Such
  // a job is a plain job to stats-job and to the binlog.
  bool has_options() const { return limited || has_ttl() || blob_size > 0; }
  // Calls fn(JobAttribute) for each attribute, in put order.
  template <typename Fn>
  void ForEachAttribute(Fn fn) const {
    const char* p = blob() + key_len;
    for (uint8_t i = 0; i < attr_count; i++) {
      auto n = static_cast<uint8_t>(p[0]);
      auto v = static_cast<uint8_t>(p[1]);
      fn(JobAttribute{{p + 2, n}, {p + 2 + n, v}});
      p += 2 + n + v;
    }
  }
  // The blob for a key and attributes (sizes within the limits above).
  static size_t BlobSize(std::string_view key, const JobAttribute* attrs, size_t n);
  static void WriteBlob(char* out, std::string_view key, const JobAttribute* attrs, size_t n);
};

// One job: metadata followed, in the same allocation, by the body and its trailing "\r\n"
// (the bytes are kept exactly as a RESERVED/FOUND reply sends them). The header holds only
// what a ready job uses; the rest is in the JobCold part, when the job has one.
//
// Where a job sits, by state:
//   kNew       built from a put line, body still arriving; in the job table (its id is taken)
//   kReady     tube->ready heap               (heap_slot)
//   kDelayed   tube->delayed heap             (heap_slot, deadline = when it becomes ready)
//   kReserved  reserver->reserved heap        (heap_slot, deadline = TTR expiry)
//   kBuried    tube->buried list              (the list node in cold; deadline = bury order)
// A job is in exactly one of these places, so one heap slot serves all heaps. The list node
// also serves twice: a reserved job is on its reserver's list in reservation order.
struct Job {
  uint64_t id = 0;
  Tube* tube = nullptr;
  JobCold* cold = nullptr;  // owned; see JobCold
  uint32_t pri = 0;
  uint32_t ttr_s = 0;
  uint32_t heap_slot = UINT32_MAX;
  uint32_t body_size = 0;  // without the trailing CRLF

  // The creation time keeps 16 ns of precision: the low 4 bits of its word hold the state
  // and whether the cold part is a JobExtra.
  Nanos created() const { return static_cast<Nanos>(created_state_ & ~kFlagMask); }
  void set_created(Nanos t) {
    created_state_ = (static_cast<uint64_t>(t) & ~kFlagMask) | (created_state_ & kFlagMask);
  }
  JobState state() const { return static_cast<JobState>(created_state_ & kStateMask); }
  void set_state(JobState s) {
    created_state_ = (created_state_ & ~kStateMask) | static_cast<uint64_t>(s);
  }

  // The cold fields; without a cold part they are all zero.
  Session* reserver() const { return cold ? cold->reserver : nullptr; }
  Nanos deadline() const {  // kDelayed and kReserved only (they always have a cold part)
    STALKD_DCHECK(cold != nullptr);
    return cold->deadline;
  }
  uint32_t delay_s() const { return cold ? cold->delay_s : 0; }
  JobCounts counts() const { return cold ? cold->counts : JobCounts{}; }
  uint32_t reserves() const { return counts().reserves; }
  uint32_t timeouts() const { return counts().timeouts; }
  uint32_t releases() const { return counts().releases; }
  uint32_t buries() const { return counts().buries; }
  uint32_t kicks() const { return counts().kicks; }
  // The lifecycle extensions, if the job uses any (docs/EXTENSIONS.md).
  bool has_extra() const { return (created_state_ & kExtraBit) != 0; }
  JobExtra* extra() { return has_extra() ? static_cast<JobExtra*>(cold) : nullptr; }
  const JobExtra* extra() const {
    return has_extra() ? static_cast<const JobExtra*>(cold) : nullptr;
  }

  // body_size bytes of body followed by "\r\n" (once received).
  char* data() { return reinterpret_cast<char*>(this + 1); }
  const char* data() const { return reinterpret_cast<const char*>(this + 1); }
  uint32_t data_size() const { return body_size + 2; }

  // Bytes this job costs, as accounted against the memory cap.
  static size_t Footprint(uint32_t body_size, bool with_cold) {
    return sizeof(Job) + size_t{body_size} + 2 + (with_cold ? sizeof(JobCold) : 0);
  }
  static size_t ExtraFootprint(uint32_t body_size, uint32_t blob_size) {
    return sizeof(Job) + size_t{body_size} + 2 + sizeof(JobExtra) + blob_size;
  }
  size_t footprint() const {
    const JobExtra* x = extra();
    return x ? ExtraFootprint(body_size, x->blob_size) : Footprint(body_size, cold != nullptr);
  }

  static Job* Allocate(uint32_t body_size) {
    void* mem = ::operator new(sizeof(Job) + body_size + 2, std::nothrow);
    if (!mem) return nullptr;
    Job* j = new (mem) Job();
    j->body_size = body_size;
    return j;
  }
  // Gives j its cold part; j must not have one.
  static JobCold* AddCold(Job* j) {
    STALKD_DCHECK(j->cold == nullptr);
    j->cold = new JobCold(j);
    return j->cold;
  }
  // Gives j a JobExtra with room for blob_size bytes, taking over the fields of its plain
  // cold part if it has one. j must be in no list (state kNew) and have no extra yet.
  static JobExtra* AddExtra(Job* j, uint32_t blob_size) {
    STALKD_DCHECK(!j->has_extra());
    void* mem = ::operator new(sizeof(JobExtra) + blob_size);
    auto* x = new (mem) JobExtra(j);
    x->blob_size = blob_size;
    if (JobCold* old = j->cold) {
      x->reserver = old->reserver;
      x->deadline = old->deadline;
      x->delay_s = old->delay_s;
      x->counts = old->counts;
      delete old;
    }
    j->cold = x;
    j->created_state_ |= kExtraBit;
    return x;
  }
  static void Free(Job* j) {
    if (JobExtra* x = j->extra()) {
      x->~JobExtra();
      ::operator delete(x);
    } else {
      delete j->cold;
    }
    j->~Job();
    ::operator delete(j);
  }

 private:
  static constexpr uint64_t kStateMask = 7;
  static constexpr uint64_t kExtraBit = 8;
  static constexpr uint64_t kFlagMask = kStateMask | kExtraBit;
  uint64_t created_state_ = 0;  // created time | has-extra bit | state
};

// The header of a 100-byte job plus its body and CRLF fit a 160-byte malloc chunk.
static_assert(sizeof(Job) == 48);
static_assert(static_cast<int>(JobState::kBuried) <= 7);

// A list of jobs through their cold parts (a tube's buried jobs, a session's reserved jobs
// in reservation order). Only jobs with a cold part can join.
class JobList {
  using List = IntrusiveList<JobCold, JobListTag>;

 public:
  bool empty() const { return list_.empty(); }
  size_t size() const { return list_.size(); }
  Job* front() const {
    JobCold* c = list_.front();
    return c ? c->job : nullptr;
  }
  Job* back() const {
    JobCold* c = list_.back();
    return c ? c->job : nullptr;
  }
  // j's neighbours (nullptr at the ends); j must be in this list.
  Job* Next(const Job* j) const {
    JobCold* c = list_.Next(j->cold);
    return c ? c->job : nullptr;
  }
  Job* Prev(const Job* j) const {
    JobCold* c = list_.Prev(j->cold);
    return c ? c->job : nullptr;
  }
  void PushBack(Job* j) { list_.PushBack(j->cold); }
  // Links j before `before` (in this list), or at the end if before is null.
  void InsertBefore(Job* j, const Job* before) {
    list_.InsertBefore(j->cold, before ? before->cold : nullptr);
  }
  void Remove(Job* j) { list_.Remove(j->cold); }

  class Iterator {
   public:
    explicit Iterator(List::Iterator it) : it_(it) {}
    Job* operator*() const { return (*it_)->job; }
    Iterator& operator++() {
      ++it_;
      return *this;
    }
    bool operator!=(const Iterator& o) const { return it_ != o.it_; }

   private:
    List::Iterator it_;
  };
  Iterator begin() const { return Iterator(list_.begin()); }
  Iterator end() const { return Iterator(list_.end()); }

 private:
  List list_;
};

}  // namespace stalkd::engine
