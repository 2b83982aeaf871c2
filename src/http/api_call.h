#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "http/api.h"
#include "http/co.h"
#include "http/exchange.h"
#include "http/response.h"
#include "http/url.h"

// One lmstfy API request on its way through lmstfy's middleware and handler: the class the
// API's route files share (api.cc routes and admits a request; api_publish.cc publishes,
// api_consume.cc consumes, peeks and acks, api_queue.cc answers a queue's size, destroys it
// and handles its dead letters), and lmstfy's defaults and limits they all use. Internal to
// the API: only those files include it.
namespace stalkd::http::api {

// lmstfy's defaults (its server/handlers/setup.go) and limits (queue.go).
inline constexpr uint32_t kDefaultTtlS = 86400;
inline constexpr uint32_t kDefaultTtrS = 120;
inline constexpr uint32_t kDefaultTries = 1;
inline constexpr uint64_t kMaxConsumeCount = 100;
inline constexpr size_t kMaxBulkJobs = 64;
inline constexpr size_t kLmstfyMaxBody = 65535;  // "must be smaller than 64kB"
// Jobs a dead-letter delete or respawn handles per step.
inline constexpr uint32_t kSliceJobs = 1000;

// Go's encoding/json writes a map's keys in sorted order, so lmstfy's gin.H replies have
// them sorted; ours are written in the same order.

// A job id as lmstfy's JSON shows it: a string of decimal digits.
std::string JobIdString(uint64_t id);
// 1 to 20 digits; id 0 is valid and names no job.
std::optional<uint64_t> ParseJobId(std::string_view s);

enum class Throttle : uint8_t { kNone, kProduce, kConsume };
enum class Handler : uint8_t {
  kPublish,
  kRepublish,
  kPublishBulk,
  kConsume,
  kDelete,
  kPeekQueue,
  kPeekJob,
  kSize,
  kDeadLetterSize,
  kDestroyQueue,
  kPeekDeadLetter,
  kRespawnDeadLetter,
  kDeleteDeadLetter,
};
struct Route;

class Call {
 public:
  Call(Exchange& ex, Access& access, const ApiOptions& options)
      : ex_(ex), s_(ex.session), access_(access), options_(options) {}

  // Routes, admits (names, pool, token, rate limit) and handles the request.
  Co<> Run();
  // Only routes and admits (no rate limit): false if Run would refuse it whatever its
  // body (ApiService::Screen).
  bool Screen();

 private:
  // The request's route; none: answered (400 malformed, 404 no route).
  std::optional<Route> Routed();
  Response& resp() { return ex_.response; }
  void Fail(int status, std::string_view text) { Error(&resp(), status, text); }
  // The middleware: names, pool, token, rate limit. false: answered.
  bool Admit(bool multi, bool token, Throttle throttle);
  // A numeric query parameter as lmstfy parses it; false: answered 400 "invalid <name>".
  bool Uint(std::string_view name, uint64_t def, int bits, uint64_t* out);

  // api_publish.cc
  // A publish's query parameters, as the job's (beanstalkd priority: 255 - lmstfy's).
  struct PutParams {
    uint32_t pri = 0, delay_s = 0, ttl_s = 0, tries = 0;
  };
  Co<> Publish(bool republish);
  Co<> PublishBulk();
  // Reads and checks them in lmstfy's order; false: answered 400.
  bool ReadPutParams(PutParams* p);
  // Puts one job into tube_; false: answered with the failure.
  Co<bool> Put(std::string_view body, const PutParams& p, std::span<const command::Attribute> attrs,
               uint64_t* id);

  // api_consume.cc
  Co<> Consume();
  Co<> Delete();
  Co<> PeekQueue();
  Co<> PeekJob();
  // Deletes job `id` if it is in tube_ (an ack; a republish's old job).
  Co<> DeleteInTube(uint64_t id);

  // api_queue.cc
  Co<> Size(bool dead);
  Co<> DestroyQueue();
  Co<> PeekDeadLetter();
  Co<> RespawnDeadLetter();
  Co<> DeleteDeadLetter();

  Exchange& ex_;
  command::Session& s_;
  Access& access_;
  const ApiOptions& options_;
  Target target_;
  std::string ns_, queue_, tube_;
  std::vector<std::string> queues_, tubes_;  // a consume's
};

}  // namespace stalkd::http::api
