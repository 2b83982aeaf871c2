#include "http/co.h"

#include <memory>
#include <utility>

#include "http/exchange.h"
#include "http/response.h"

namespace stalkd::http {
namespace {

void InternalError(Exchange& ex) {
  Error(&ex.response, 500, "internal error");
  ex.response.extra_headers = ex.error_headers;
}

// A handler that waits for a store's late result, or works in slices.
class CoTask final : public Task {
 public:
  CoTask(Exchange& ex, Co<> co) : ex_(ex), co_(std::move(co)) {}

  bool Step(Response*) override {
    if (!ex_.flow.failed && co_.Continue(ex_.flow)) return true;
    if (!ex_.flow.failed) return false;
    co_ = Co<>();  // destroys the handler's coroutines where they stopped
    InternalError(ex_);
    return true;
  }
  void OnResult(const command::Result& r) override { Arrived(ex_.flow, r); }
  bool waiting() const override { return ex_.flow.waiting; }
  bool waits_for_client() const override { return ex_.flow.waits_for_client; }
  void Abandon() override {
    if (ex_.flow.waits_for_client) Arrived(ex_.flow, ex_.session.AbandonReserve());
  }

 private:
  Exchange& ex_;
  Co<> co_;
};

}  // namespace

void Serve(Exchange& ex, Co<> handler) {
  if (handler.Start(ex.flow)) return;
  if (ex.flow.failed) return InternalError(ex);
  ex.task = std::make_unique<CoTask>(ex, std::move(handler));
}

}  // namespace stalkd::http
