#pragma once

#include <cstdint>

#include "base/intrusive_list.h"
#include "net/event_loop.h"
#include "protocol/conversation.h"

namespace stalkd::server {

class Server;
struct ConnectionTag;

// One client socket: reads into its Conversation, writes what the conversation produces.
// Flags record which of the server's work lists it is on, so it is never listed twice.
class Connection final : public net::EventLoop::Handler, public ListNode<ConnectionTag> {
 public:
  Connection(Server& server, int fd);
  ~Connection() override;  // closes the fd; the conversation closes the engine session
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void OnEvents(uint32_t events) override;
  // Writes pending output. Returns false if the connection is finished (error, or closing
  // with nothing left to send).
  bool Flush();
  // Re-computes which epoll events this connection wants.
  void UpdateInterest();

  protocol::Conversation& conversation() { return conversation_; }
  bool dead() const { return dead_; }
  void Kill();  // marks the connection for closing at the end of the iteration

  bool on_runnable : 1 = false;
  bool on_dirty : 1 = false;
  bool on_closed : 1 = false;
  bool on_blocked : 1 = false;
  // -f 0: replies wait in the output buffer until the binlog is durable as far as they
  // depend on (Conversation::need_mark); meanwhile the connection runs no commands and
  // does not write.
  bool on_held : 1 = false;
  // While the output buffer is at/above the high-water mark: when it got there or the peer
  // last took any of it, whichever is later; 0 while it is below the mark.
  Nanos blocked_since() const { return blocked_since_; }

  // Bytes read per read() call.
  static constexpr size_t kReadChunk = 64 * 1024;
  // Input kept buffered before reading pauses (the conversation consumes it first).
  static constexpr size_t kMaxBufferedInput = 256 * 1024;

 private:
  void Read();

  // One per open connection: ordered to minimise padding (the flags above, dead_,
  // interest_ and fd_ share one word).
  bool dead_ : 1 = false;
  uint16_t interest_ = 0;  // epoll events: EPOLLIN, EPOLLOUT, EPOLLRDHUP all fit
  int fd_;
  Server& server_;
  Nanos blocked_since_ = 0;
  protocol::Conversation conversation_;
};

}  // namespace stalkd::server
