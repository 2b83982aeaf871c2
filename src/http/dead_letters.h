#pragma once

#include <cstdint>
#include <string_view>

#include "command/store.h"
#include "http/co.h"

// Deleting a tube's dead letters (its buried jobs) from the head, as lmstfy's
// DELETE /api/:ns/:q/deadletter does: shared by that route (api_queue.cc) and the
// dashboard's "Delete dead letters" (dashboard_namespaces.cc).
namespace stalkd::http {

// Deletes up to `limit` buried jobs of `tube`, the head first (the order they were buried
// in, as peek-buried, kick and respawn take them), `slice` per step of the event loop. The
// session uses `tube` afterwards. Resolves to how many were deleted.
Co<uint64_t> DeleteDeadLetters(command::Session& s, std::string_view tube, uint64_t limit,
                               uint64_t slice);

}  // namespace stalkd::http
