#include "http/dead_letters.h"

#include <algorithm>

namespace stalkd::http {

using command::Outcome;
using command::Result;

Co<uint64_t> DeleteDeadLetters(command::Session& s, std::string_view tube, uint64_t limit,
                               uint64_t slice) {
  uint64_t deleted = 0;
  for (bool more = true; more && deleted < limit;) {
    uint64_t n = std::min(limit - deleted, slice);
    Result use = co_await Ask(s.Use(tube));
    more = use.outcome == Outcome::kUsing;
    for (uint64_t i = 0; i < n && more; i++) {
      Result head = co_await Ask(s.PeekBuried());
      more = head.outcome == Outcome::kFound;
      if (!more) break;
      Result del = co_await Ask(s.Delete(head.job.id));
      more = del.outcome == Outcome::kDeleted;
      if (more) deleted++;
    }
    if (more && deleted < limit) co_await Slice();
  }
  co_return deleted;
}

}  // namespace stalkd::http
