#include "net/event_loop.h"

#include <errno.h>
#include <sys/epoll.h>
#include <unistd.h>

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

int EventLoop::Poll(int timeout_ms) {
  epoll_event events[kMaxEvents];
  int n = epoll_wait(epfd_, events, kMaxEvents, timeout_ms);
  if (n < 0) return errno == EINTR ? 0 : -1;
  for (int i = 0; i < n; i++) {
    static_cast<Handler*>(events[i].data.ptr)->OnEvents(events[i].events);
  }
  return n;
}

}  // namespace stalkd::net
