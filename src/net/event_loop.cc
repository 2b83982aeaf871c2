#include "net/event_loop.h"

#include <errno.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

namespace stalkd::net {

EventLoop::EventLoop() : epfd_(epoll_create1(EPOLL_CLOEXEC)) {}

EventLoop::~EventLoop() {
  if (epfd_ >= 0) close(epfd_);
}

bool EventLoop::Add(int fd, uint32_t events, Handler* h) {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = h;
  return epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) == 0;
}

bool EventLoop::Modify(int fd, uint32_t events, Handler* h) {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = h;
  return epoll_ctl(epfd_, EPOLL_CTL_MOD, fd, &ev) == 0;
}

void EventLoop::Remove(int fd) { epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr); }

int EventLoop::Poll(int64_t timeout_ns) {
  epoll_event events[kMaxEvents];
  int n;
  if (timeout_ns < 0) {
    n = epoll_wait(epfd_, events, kMaxEvents, -1);
  } else {
    // Nanosecond timeouts: a timer due in 10 us must not wait for the next millisecond. The
    // kernel lets a poll of T end up to T/1000 late (its timer slack for poll-like calls,
    // select_estimate_accuracy; at least the thread's 50 us): 1 ms for a timer due in 1 s.
    // So a wait beyond kExactWait ends T/500 early, and the caller's next Poll waits for the
    // rest, which is short enough to end on time.
    if (timeout_ns > kExactWait) timeout_ns -= timeout_ns / 500;
    timespec ts{static_cast<time_t>(timeout_ns / 1'000'000'000),
                static_cast<long>(timeout_ns % 1'000'000'000)};
    n = epoll_pwait2(epfd_, events, kMaxEvents, &ts, nullptr);
    if (n < 0 && errno == ENOSYS) {  // kernels before 5.11: round up to milliseconds
      n = epoll_wait(
          epfd_, events, kMaxEvents,
          static_cast<int>(std::min<int64_t>((timeout_ns + 999'999) / 1'000'000, INT32_MAX)));
    }
  }
  if (n < 0) return errno == EINTR ? 0 : -1;
  for (int i = 0; i < n; i++) {
    static_cast<Handler*>(events[i].data.ptr)->OnEvents(events[i].events);
  }
  return n;
}

}  // namespace stalkd::net
