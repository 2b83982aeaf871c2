#pragma once

#include <cstdint>

namespace stalkd::engine {

inline constexpr uint32_t kUrgentPriority = 1024;

struct GlobalCounters {
  uint64_t ready = 0;
  uint64_t urgent = 0;
  uint64_t reserved = 0;
  uint64_t delayed = 0;
  uint64_t buried = 0;
  uint64_t total_jobs = 0;
  uint64_t timeouts = 0;
  uint64_t sessions = 0;
  uint64_t producers = 0;
  uint64_t workers = 0;
  uint64_t waiting = 0;
  uint64_t total_sessions = 0;
  uint64_t expired = 0;          // jobs deleted by their TTL
  uint64_t tries_exhausted = 0;  // jobs buried for having no tries left
};

}  // namespace stalkd::engine
