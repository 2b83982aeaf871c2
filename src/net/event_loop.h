#pragma once

#include <cstdint>

namespace stalkd::net {

// A thin epoll wrapper: level-triggered interest per fd, many events per wake-up.
class EventLoop {
 public:
  class Handler {
   public:
    virtual ~Handler() = default;
    // `events` is the epoll event mask (EPOLLIN, EPOLLOUT, EPOLLRDHUP, EPOLLHUP, EPOLLERR).
    virtual void OnEvents(uint32_t events) = 0;
  };

  EventLoop();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  bool ok() const { return epfd_ >= 0; }
  // `h` must stay valid until Remove(fd) (or until the loop is destroyed).
  bool Add(int fd, uint32_t events, Handler* h);
  bool Modify(int fd, uint32_t events, Handler* h);
  void Remove(int fd);

  // Waits up to timeout_ns (negative: forever) and dispatches up to kMaxEvents events.
  // Returns the number dispatched, or -1 on a real error (EINTR counts as 0).
  int Poll(int64_t timeout_ns);

  static constexpr int kMaxEvents = 256;
  // Waits up to this long end on time (the kernel's slack is then the thread's 50 us); a
  // longer one may return a little early (see Poll), with no event.
  static constexpr int64_t kExactWait = 50'000'000;

 private:
  int epfd_;
};

}  // namespace stalkd::net
