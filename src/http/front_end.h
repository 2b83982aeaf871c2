#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "command/front_end.h"
#include "command/store.h"
#include "http/exchange.h"
#include "http/request.h"

namespace stalkd::http {

// One HTTP/1.1 client, without sockets: bytes in, response bytes out, like the text
// protocol's Conversation. Requests are parsed one at a time (Boost.Beast, request.h) and
// answered in order by the listener's Service through this connection's store session;
// pipelined requests wait in the buffer while one is answered. A request that cannot be
// answered at once leaves a Task: one that waits (a long-poll consume) blocks the
// connection as a waiting reserve does; one that works in slices takes a step per Run step.
// A malformed or oversized request is answered with lmstfy's error JSON and the connection
// closes after it.
class HttpFrontEnd final : public command::FrontEnd {
 public:
  HttpFrontEnd(Service& service, command::Store& store, command::Client& client);
  ~HttpFrontEnd() override;
  HttpFrontEnd(const HttpFrontEnd&) = delete;
  HttpFrontEnd& operator=(const HttpFrontEnd&) = delete;

  char* PrepareInput(size_t n) override;
  void CommitInput(size_t n) override;
  bool Run(size_t max_steps) override;
  void OnResult(const command::Result& r) override;
  void OnInputClosed() override;

  std::string& output() override { return out_; }
  bool closing() const override { return closing_; }
  bool waiting() const override { return task_ && task_->waiting(); }
  bool waiting_for_client() const override { return waiting() && task_->waits_for_client(); }
  bool input_closed() const override { return input_closed_; }
  bool runnable() const override;
  size_t buffered_input() const override { return in_.size() - in_begin_; }
  const command::Session& session() const override { return *session_; }
  size_t output_keep() const override { return 0; }
  uint64_t linger_bytes() const override { return linger_; }
  void Discarded(size_t n) override;

  // A refusal's lingering close ends by this time, whatever is still unread (0: none).
  Nanos linger_until() const { return linger_until_; }
  // The most a lingering close reads, and for how long.
  static constexpr uint64_t kLingerBytes = 8 << 20;
  static constexpr Nanos kLingerTime = 5 * kSecond;

  // When the request now arriving began to (for the slow-client timeout); 0: none is.
  Nanos request_started() const { return closing_ ? 0 : request_started_; }
  // Answers 408 and closes: the request took too long to arrive.
  void TimeOut();

 private:
  // Parses and dispatches the next request; false if there was none complete.
  bool NextRequest();
  // A request's head has arrived and its body has not all: screens it (Service::Screen)
  // and takes its body's room, or answers the refusal and closes.
  void ScreenHead();
  void NewExchange();
  void Finish();
  void Refuse(int status, const std::string& why);
  // Closing with `unread` bytes of the request still to come (unknown: the bound): they
  // are read and thrown away first, up to kLingerBytes and kLingerTime.
  void Linger(std::optional<uint64_t> unread);

  Service& service_;
  std::unique_ptr<command::Session> session_;
  RequestParser parser_;
  std::string in_;
  size_t in_begin_ = 0;
  bool needs_input_ = false;  // the buffered input holds no complete request
  bool input_closed_ = false;
  bool closing_ = false;
  Nanos request_started_ = 0;
  bool continue_sent_ = false;          // "100 Continue" went out for the request now arriving
  std::unique_ptr<Exchange> exchange_;  // the request being answered
  std::unique_ptr<Task> task_;          // its unfinished part
  std::string out_;
  uint64_t linger_ = 0;  // bytes still to read and discard before the close
  Nanos linger_until_ = 0;
};

}  // namespace stalkd::http
