#pragma once

#include <cstdint>
#include <string_view>

#include "command/store.h"
#include "http/co.h"

// One job put through a connection's store session, as a text client's put goes: the
// sequence every HTTP route that puts a job shares (an lmstfy publish, the dashboard's put
// and move).
namespace stalkd::http {

struct PutDone {
  // kInserted, or why not: kJobTooBig, kDraining, kOutOfMemory, kExists (a key taken), ...
  command::Outcome outcome = command::Outcome::kOutOfMemory;
  uint64_t id = 0;  // the new job's, when inserted
};

// Puts `body` as a job with `args` (their `bytes` are set here) into the tube the session
// uses.
Co<PutDone> PutJob(command::Session& s, command::PutArgs args, std::string_view body);

}  // namespace stalkd::http
