#include "http/dashboard_put.h"

#include "http/dashboard_call.h"
#include "http/put_job.h"

// The dashboard's put: a job from the page's form (or a copy of a job, edited), put into a
// tube through the connection's session as a text client's put would be.
namespace stalkd::http::dash {

using command::Outcome;
using command::Result;

ActionError PutRefusal(Outcome o) {
  switch (o) {
    case Outcome::kJobTooBig:
      return {413, "job too big"};
    case Outcome::kDraining:
      return {503, "server is draining"};
    case Outcome::kOutOfMemory:
      return {503, "out of memory"};
    default:
      return {500, "internal error"};
  }
}

// POST /dashboard/api/tubes/:tube/put?pri=&delay=&ttr=, the body the job's. The tube need
// not exist (a put makes it).
Co<> DashboardCall::Put(const std::string& tube) {
  if (!command::IsValidTubeName(tube)) co_return Fail(&resp(), 400, "invalid tube name");
  std::optional<uint64_t> pri = Number("pri", kPutDefaultPri, 0, UINT32_MAX);
  if (!pri) co_return;
  std::optional<uint64_t> delay = Number("delay", 0, 0, UINT32_MAX);
  if (!delay) co_return;
  std::optional<uint64_t> ttr = Number("ttr", kPutDefaultTtrS, 0, UINT32_MAX);
  if (!ttr) co_return;
  Result use = co_await Ask(s_.Use(tube));
  if (use.outcome != Outcome::kUsing) co_return Fail(&resp(), 400, "invalid tube name");
  command::PutArgs args;
  args.pri = static_cast<uint32_t>(*pri);
  args.delay_s = static_cast<uint32_t>(*delay);
  args.ttr_s = static_cast<uint32_t>(*ttr);
  args.verb = command::Verb::kPut;
  PutDone put = co_await PutJob(s_, args, ex_.request.body);
  co_await Ask(s_.Use(kDefaultTube));  // the connection keeps no tube alive
  if (put.outcome != Outcome::kInserted) {
    ActionError e = PutRefusal(put.outcome);
    co_return Fail(&resp(), e.status, e.text);
  }
  Ok(&resp());
  resp().status = 201;
  JsonWriter w(&resp().body);
  w.StartObject();
  w.Key("id");
  w.Uint(put.id);
  w.Key("tube");
  w.String(tube);
  w.EndObject();
}

}  // namespace stalkd::http::dash
