#include "http/co.h"

#include <memory>
#include <utility>

#include "http/exchange.h"
#include "http/response.h"

namespace stalkd::http {

namespace co_detail {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kPool = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kPool = false;
#else
constexpr bool kPool = true;
#endif
#else
constexpr bool kPool = true;
#endif

constexpr size_t kStep = 64;
constexpr size_t kClasses = 32;  // frames up to 2 KiB
constexpr size_t kKeep = 64;     // frames kept per class

class FrameCache {
 public:
  FrameCache() = default;
  FrameCache(const FrameCache&) = delete;
  FrameCache& operator=(const FrameCache&) = delete;
  ~FrameCache() {
    for (List& l : lists_) {
      while (l.head) ::operator delete(Pop(l));
    }
  }
  void* Allocate(size_t n) {
    size_t c = (n + kStep - 1) / kStep;
    if (c >= kClasses) return ::operator new(n);
    List& l = lists_[c];
    return l.head ? Pop(l) : ::operator new(c* kStep);
  }
  void Free(void* p, size_t n) {
    size_t c = (n + kStep - 1) / kStep;
    if (c >= kClasses || lists_[c].count == kKeep) return ::operator delete(p);
    List& l = lists_[c];
    *static_cast<void**>(p) = l.head;
    l.head = p;
    l.count++;
  }

 private:
  struct List {
    void* head = nullptr;
    size_t count = 0;
  };
  static void* Pop(List& l) {
    void* p = l.head;
    l.head = *static_cast<void**>(p);
    l.count--;
    return p;
  }
  List lists_[kClasses];
};

thread_local FrameCache cache;

}  // namespace

void* AllocateFrame(size_t n) { return kPool ? cache.Allocate(n) : ::operator new(n); }
void FreeFrame(void* p, size_t n) noexcept {
  if (kPool) return cache.Free(p, n);
  ::operator delete(p);
}

}  // namespace co_detail

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
