#pragma once

#include <cstdint>
#include <new>

#include "base/clock.h"
#include "base/intrusive_list.h"

namespace stalkd::engine {

class Tube;
class Session;

enum class JobState : uint8_t { kNew, kReady, kDelayed, kReserved, kBuried };

const char* JobStateName(JobState s);

struct BuriedTag;

// One job: metadata followed, in the same allocation, by the body and its trailing "\r\n"
// (the bytes are kept exactly as a RESERVED/FOUND reply sends them).
//
// Where a job sits, by state:
//   kNew       built from a put line, body still arriving; in the job table (its id is taken)
//   kReady     tube->ready heap               (heap_slot)
//   kDelayed   tube->delayed heap             (heap_slot, deadline = when it becomes ready)
//   kReserved  reserver->reserved heap        (heap_slot, deadline = TTR expiry)
//   kBuried    tube->buried list              (ListNode<BuriedTag>)
// A job is in exactly one of these places, so one heap slot serves all heaps. The list node
// also serves twice: a reserved job is on its reserver's list in reservation order.
struct Job : ListNode<BuriedTag> {
  uint64_t id;
  Tube* tube;
  Session* reserver;  // set only while kReserved
  Nanos created;
  Nanos deadline;
  uint32_t pri;
  uint32_t delay_s;
  uint32_t ttr_s;
  uint32_t heap_slot = UINT32_MAX;
  uint32_t body_size;  // without the trailing CRLF
  uint32_t reserves = 0;
  uint32_t timeouts = 0;
  uint32_t releases = 0;
  uint32_t buries = 0;
  uint32_t kicks = 0;
  JobState state = JobState::kNew;

  // body_size bytes of body followed by "\r\n" (once received).
  char* data() { return reinterpret_cast<char*>(this + 1); }
  const char* data() const { return reinterpret_cast<const char*>(this + 1); }
  uint32_t data_size() const { return body_size + 2; }

  // Bytes this job costs, as accounted against the memory cap.
  size_t footprint() const { return sizeof(Job) + data_size(); }

  static Job* Allocate(uint32_t body_size) {
    void* mem = ::operator new(sizeof(Job) + body_size + 2, std::nothrow);
    if (!mem) return nullptr;
    Job* j = new (mem) Job();
    j->body_size = body_size;
    return j;
  }
  static void Free(Job* j) {
    j->~Job();
    ::operator delete(j);
  }
};

}  // namespace stalkd::engine
