#include "http/put_job.h"

#include <algorithm>
#include <cstdint>

namespace stalkd::http {

Co<PutDone> PutJob(command::Session& s, command::PutArgs args, std::string_view body) {
  if (body.size() > UINT32_MAX) co_return PutDone{command::Outcome::kJobTooBig, 0};
  args.bytes = static_cast<uint32_t>(body.size());
  command::PutSlot slot = s.BeginPut(args);
  if (!slot.data) co_return PutDone{slot.refusal, 0};
  std::copy(body.begin(), body.end(), slot.data);
  slot.data[body.size()] = '\r';
  slot.data[body.size() + 1] = '\n';
  command::Result r = co_await Ask(s.CommitPut());
  co_return PutDone{r.outcome, r.outcome == command::Outcome::kInserted ? r.number : 0};
}

}  // namespace stalkd::http
