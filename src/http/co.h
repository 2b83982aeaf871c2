#pragma once

#include <coroutine>
#include <cstddef>
#include <exception>
#include <optional>
#include <utility>

#include "command/owned_result.h"
#include "command/store.h"

// Request handlers as C++20 coroutines, so that a sequence of store calls (StatsJob then
// Delete; Stats, ListTubes, then each StatsTube) reads as it runs and still works when any
// call answers later (command::Outcome::kPending).
//
//   Co<> Handler(...) {
//     Result r = co_await Ask(s.StatsJob(id));   // at once, or once the result arrived
//     bool ok = co_await Helper(...);            // a Co<bool>
//     co_await Slice();                          // a step of long work: others go first
//   }
//
// A result that is not pending is used at once: nothing suspends, and a handler over the
// in-memory store runs to its end inside the call that started it. A pending one suspends
// the coroutines until the front end's Client::OnResult stored a deep copy of the result
// (Flow::late); the front end resumes them later from its Run, never from OnResult (which
// must not call the store). A result's views last until the handler's next store call, as
// ever. A call answered kInternalError ends the handler there: it is destroyed, and the
// request is answered 500.
//
// Keep co_await out of conditions: write `bool ok = co_await F(); if (!ok) ...`, never
// `if (!co_await F())`. g++ 12 miscompiles a co_await of a Co<bool> inside an if
// condition (the coroutine stops there and is never resumed); clang does not.
namespace stalkd::http {

// Where a request's coroutines keep what their driver needs: the innermost suspended one,
// and the late result it waits for.
struct Flow {
  std::coroutine_handle<> suspended;
  command::OwnedResult late;
  bool waiting = false;           // for a store call's late result
  bool waits_for_client = false;  // ... of a reserve, which ends if the client goes away
  bool failed = false;            // a call answered kInternalError
};

template <class T = void>
class Co;

namespace co_detail {

// Coroutine frames: a request makes a few and frees them soon, so freed ones are kept for
// reuse (per thread, by size in 64-byte steps). Plain new and delete under ASan, which
// then sees every frame's use after free.
void* AllocateFrame(size_t n);
void FreeFrame(void* p, size_t n) noexcept;

struct PromiseBase {
  static void* operator new(size_t n) { return AllocateFrame(n); }
  static void operator delete(void* p, size_t n) noexcept { FreeFrame(p, n); }

  Flow* flow = nullptr;
  std::coroutine_handle<> continuation;  // the caller, resumed when this one ends
  bool inline_ = false;                  // the caller resumed it and waits inside that call

  std::suspend_always initial_suspend() noexcept { return {}; }
  struct Final {
    bool await_ready() const noexcept { return false; }
    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) const noexcept {
      PromiseBase& p = h.promise();
      // Ended inside its caller's co_await: back there. Ended after a suspension: the
      // caller is suspended too and carries on now.
      if (p.inline_ || !p.continuation) return std::noop_coroutine();
      return p.continuation;
    }
    void await_resume() const noexcept {}
  };
  Final final_suspend() noexcept { return {}; }
  void unhandled_exception() { std::terminate(); }
};

template <class T>
struct Promise : PromiseBase {
  std::optional<T> value;
  Co<T> get_return_object();
  void return_value(T v) { value.emplace(std::move(v)); }
  T take() { return std::move(*value); }
};

template <>
struct Promise<void> : PromiseBase {
  Co<void> get_return_object();
  void return_void() {}
  void take() {}
};

}  // namespace co_detail

// A coroutine that starts when awaited (or started by a driver) and owns its frame.
template <class T>
class [[nodiscard]] Co {
 public:
  using promise_type = co_detail::Promise<T>;
  using Handle = std::coroutine_handle<promise_type>;

  Co() = default;
  explicit Co(Handle h) : h_(h) {}
  Co(Co&& o) noexcept : h_(std::exchange(o.h_, {})) {}
  Co& operator=(Co&& o) noexcept {
    if (this != &o) {
      if (h_) h_.destroy();
      h_ = std::exchange(o.h_, {});
    }
    return *this;
  }
  ~Co() {
    if (h_) h_.destroy();
  }

  // Driving a top-level coroutine: runs it until it ends or suspends; true once it ended.
  bool Start(Flow& flow) {
    h_.promise().flow = &flow;
    return Resume(h_, flow);
  }
  // Resumes it where it is suspended (flow.suspended); true once it ended.
  bool Continue(Flow& flow) { return Resume(flow.suspended, flow); }
  bool done() const { return h_.done(); }
  explicit operator bool() const { return static_cast<bool>(h_); }

  // Awaiting it from another coroutine: it runs at once, inside the caller's co_await.
  bool await_ready() const noexcept { return false; }
  template <class P>
  bool await_suspend(std::coroutine_handle<P> caller) {
    promise_type& p = h_.promise();
    p.flow = caller.promise().flow;
    p.continuation = caller;
    p.inline_ = true;
    h_.resume();
    p.inline_ = false;
    return !h_.done();  // suspended inside: the caller stays suspended until it ends
  }
  T await_resume() { return h_.promise().take(); }

 private:
  bool Resume(std::coroutine_handle<> h, Flow& flow) {
    flow.suspended = {};
    h.resume();
    return h_.done();
  }

  Handle h_;
};

namespace co_detail {
template <class T>
Co<T> Promise<T>::get_return_object() {
  return Co<T>(std::coroutine_handle<Promise<T>>::from_promise(*this));
}
inline Co<void> Promise<void>::get_return_object() {
  return Co<void>(std::coroutine_handle<Promise<void>>::from_promise(*this));
}
}  // namespace co_detail

// A store call's result, at once or once it has arrived: co_await Ask(s.Peek(id)). A
// reserve's wait (client_waits) ends when the client goes away (Session::AbandonReserve).
class Ask {
 public:
  explicit Ask(const command::Result& r, bool client_waits = false)
      : r_(r), client_waits_(client_waits) {}
  bool await_ready() const noexcept {
    return r_.outcome != command::Outcome::kPending &&
           r_.outcome != command::Outcome::kInternalError;
  }
  template <class P>
  void await_suspend(std::coroutine_handle<P> h) noexcept {
    flow_ = h.promise().flow;
    flow_->suspended = h;
    if (r_.outcome == command::Outcome::kInternalError) {
      flow_->failed = true;  // never resumed: the driver destroys the coroutines
    } else {
      flow_->waiting = true;
      flow_->waits_for_client = client_waits_;
    }
  }
  command::Result await_resume() const noexcept { return flow_ ? flow_->late.result() : r_; }

 private:
  command::Result r_;
  bool client_waits_;
  Flow* flow_ = nullptr;
};

// A step of long work is done: the driver lets other connections go first.
struct Slice {
  bool await_ready() const noexcept { return false; }
  template <class P>
  void await_suspend(std::coroutine_handle<P> h) noexcept {
    h.promise().flow->suspended = h;
  }
  void await_resume() const noexcept {}
};

// The late result arrived (Client::OnResult): the driver may resume, or, if the store
// could not tell what happened (kInternalError), must end the coroutines.
inline void Arrived(Flow& flow, const command::Result& r) {
  flow.late.Assign(r);
  flow.waiting = false;
  flow.waits_for_client = false;
  if (r.outcome == command::Outcome::kInternalError) flow.failed = true;
}

}  // namespace stalkd::http
