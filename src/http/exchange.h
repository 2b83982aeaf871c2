#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "command/store.h"
#include "http/co.h"
#include "http/request.h"

// What an HTTP handler works with: the request, the connection's store session, and the
// response it fills in. A handler that cannot answer at once (a consume that waits, a
// scrape done in slices) leaves a Task behind, which the front end drives until it answers.
namespace stalkd::http {

struct Response {
  int status = 200;
  std::string body;
  std::string_view content_type = "application/json; charset=utf-8";
  std::string_view extra_headers;  // whole lines, each ending in CRLF
};

// A request still being answered.
class Task {
 public:
  virtual ~Task() = default;
  // Does the next bounded piece of work; true once *resp holds the answer. Called again
  // (next step, or next loop iteration) while it returns false and is not waiting.
  virtual bool Step(Response* resp) = 0;
  // A store call returned kPending: its result. Only takes the result (it must not call
  // the store); the next Step carries on.
  virtual void OnResult(const command::Result& r) = 0;
  // Waiting for OnResult.
  virtual bool waiting() const = 0;
  // The wait ends when the client goes away (a consume's long poll).
  virtual bool waits_for_client() const { return false; }
  // The client went away during the wait: end it (Session::AbandonReserve).
  virtual void Abandon() {}
};

// One request being handled.
struct Exchange {
  Request& request;
  command::Session& session;
  Nanos now;  // when the request was complete
  Response response;
  std::unique_ptr<Task> task;  // set by a handler that has not answered yet
  std::string_view route;      // the route's name for metrics ("" until routed)
  // A request the rate limit counted (lmstfy's throttler): whose, and which kind, so that
  // one that does not succeed is given back.
  std::string limited_ns, limited_token;
  enum class Limited : uint8_t { kNo, kProduce, kConsume } limited = Limited::kNo;
  Flow flow;  // the handler's coroutines (co.h)
  // Extra headers of the 500 a store's kInternalError answers (whole lines, ending in CRLF).
  std::string_view error_headers;
};

// Runs a request's handler: to its end if no store call waits (then ex.response holds the
// answer), or until one does (then ex.task drives it on: OnResult, Step). A store call
// answered kInternalError ends it with 500 {"error": "internal error"}.
void Serve(Exchange& ex, Co<> handler);

// What a listener serves: the lmstfy API or the admin API.
class Service {
 public:
  virtual ~Service() = default;
  // Answers ex.request into ex.response, or sets ex.task.
  virtual void Handle(Exchange& ex) = 0;
  // A request whose head has arrived and whose body is still arriving: false (and the
  // refusal in ex.response, ex.route named) if Handle would refuse it whatever its body
  // (no route, bad names, no or a wrong token or account). It counts nothing (no rate
  // limit) and calls no store; Handle checks again once the body is here.
  virtual bool Screen(Exchange& ex) {
    (void)ex;
    return true;
  }
  // A request is answered (for metrics and logs).
  virtual void Answered(const Exchange& ex, Nanos done) = 0;
  virtual const Clock& clock() const = 0;
  // Limits of the requests it accepts: any body, and a big route's (big_body_route: by
  // default a bulk publish).
  virtual uint64_t body_limit() const = 0;
  virtual uint64_t bulk_body_limit() const { return body_limit(); }
  virtual BigBodyRoute big_body_route() const { return &IsBulkPath; }
  // Where the bodies of its requests take their room (null: nowhere, uncounted).
  BodyBudget* body_budget() const { return body_budget_; }
  void set_body_budget(BodyBudget* budget) { body_budget_ = budget; }

 private:
  BodyBudget* body_budget_ = nullptr;
};

}  // namespace stalkd::http
