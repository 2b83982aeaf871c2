#include "http/front_end.h"

#include "base/check.h"
#include "http/response.h"

namespace stalkd::http {

// Request line and headers: lmstfy's server (Go's net/http) allows 1 MiB; 8 KiB is what
// proxies allow and far above what its clients send.
constexpr uint32_t kHeaderLimit = 8192;

HttpFrontEnd::HttpFrontEnd(Service& service, command::Store& store, command::Client& client)
    : service_(service),
      session_(store.Open(client)),
      parser_(kHeaderLimit, service.body_limit(), service.bulk_body_limit(), service.body_budget(),
              service.big_body_route()) {}

HttpFrontEnd::~HttpFrontEnd() {
  if (task_ && task_->waiting()) task_->Abandon();
  task_.reset();
  exchange_.reset();
}

char* HttpFrontEnd::PrepareInput(size_t n) {
  if (in_begin_ == in_.size()) {
    in_.clear();
    in_begin_ = 0;
  } else if (in_begin_ > 0 && in_begin_ >= in_.size() / 2) {
    in_.erase(0, in_begin_);
    in_begin_ = 0;
  }
  size_t at = in_.size();
  in_.resize(at + n);
  return in_.data() + at;
}

void HttpFrontEnd::CommitInput(size_t n) {
  // PrepareInput grew the buffer by the n it was asked for; keep what was written.
  (void)n;
  needs_input_ = false;
}

bool HttpFrontEnd::runnable() const {
  if (closing_) return false;
  if (task_) return !task_->waiting();
  return buffered_input() > 0 && !needs_input_;
}

bool HttpFrontEnd::Run(size_t max_steps) {
  size_t steps = 0;
  while (!closing_ && out_.size() < kOutputHighWater) {
    if (task_) {
      if (task_->waiting()) return false;
      if (steps == max_steps) return true;
      steps++;
      // A slice of long work is a loop iteration's share: the other connections go next.
      if (!task_->Step(&exchange_->response)) return !task_->waiting();
      Finish();
      continue;
    }
    if (buffered_input() == 0 || needs_input_) return false;
    if (steps == max_steps) return true;
    steps++;
    if (!NextRequest()) return false;
  }
  return false;
}

bool HttpFrontEnd::NextRequest() {
  RequestParser::Status st;
  size_t n = parser_.Feed(std::string_view(in_).substr(in_begin_), &st);
  in_begin_ += n;
  if (in_begin_ == in_.size()) {
    std::string().swap(in_);  // an idle connection holds no input buffer
    in_begin_ = 0;
  }
  switch (st) {
    case RequestParser::Status::kHead:
      if (request_started_ == 0) request_started_ = service_.clock().Now();
      ScreenHead();
      return true;
    case RequestParser::Status::kNeedMore:
      needs_input_ = true;
      if (request_started_ == 0 && parser_.started()) request_started_ = service_.clock().Now();
      if (input_closed_) Refuse(400, "malformed request");
      return false;
    case RequestParser::Status::kError:
      Refuse(parser_.error_status(), parser_.error());
      return false;
    case RequestParser::Status::kDone:
      break;
  }
  request_started_ = 0;
  continue_sent_ = false;
  NewExchange();
  service_.Handle(*exchange_);
  if (exchange_->task) {
    task_ = std::move(exchange_->task);
  } else {
    Finish();
  }
  return true;
}

void HttpFrontEnd::NewExchange() {
  exchange_.reset(new Exchange{parser_.request(),
                               *session_,
                               service_.clock().Now(),
                               {},
                               {},
                               {},
                               {},
                               {},
                               Exchange::Limited::kNo,
                               {},
                               {}});
}

void HttpFrontEnd::ScreenHead() {
  Request& req = parser_.request();
  std::optional<uint64_t> length = parser_.content_length();
  if (length && buffered_input() >= *length) {
    // The body came whole with its head: it is answered as it is, like any request (a
    // refusal keeps the connection), and holds its room only while answered.
    parser_.TakeBody(/*whole=*/true);
    return;
  }
  // The body is still arriving. What would be refused once it is here is refused now,
  // before a byte of it is read (and without 100 Continue); the connection closes, since
  // the body is not read. Then the body takes its room, or is refused 503.
  NewExchange();
  bool admitted = service_.Screen(*exchange_);
  if (admitted && !parser_.TakeBody(/*whole=*/false)) {
    exchange_->response = {};
    Error(&exchange_->response, 503, kBodiesBusy);
    admitted = false;
  }
  if (!admitted) {
    req.keep_alive = false;
    uint64_t here = buffered_input();
    Finish();
    Linger(length ? std::optional<uint64_t>(*length - std::min(*length, here)) : std::nullopt);
    return;
  }
  exchange_.reset();
  if (req.expect_continue && !continue_sent_) {
    out_.append("HTTP/1.1 100 Continue\r\n\r\n");
    continue_sent_ = true;
  }
}

void HttpFrontEnd::Finish() {
  Exchange& ex = *exchange_;
  std::string id = NewRequestId();
  bool close = !ex.request.keep_alive;
  AppendResponse(ex.response, id, close, ex.request.method == Method::kHead, &out_);
  service_.Answered(ex, service_.clock().Now());
  task_.reset();
  exchange_.reset();
  parser_.Next();
  if (close) closing_ = true;
}

void HttpFrontEnd::Refuse(int status, const std::string& why) {
  Response r;
  Error(&r, status, why);
  AppendResponse(r, NewRequestId(), /*close=*/true, /*head=*/false, &out_);
  closing_ = true;
  // What is still to come of this request: the rest of an announced body, else unknown.
  // (Known once the head is parsed; a refusal of the head itself leaves it unknown.)
  std::optional<uint64_t> length;
  if (parser_.head_done()) length = parser_.content_length();
  uint64_t here = buffered_input();
  std::optional<uint64_t> unread;
  if (length) unread = *length - std::min(*length, here);
  in_.clear();
  in_begin_ = 0;
  if (!exchange_) parser_.Next();  // the body's room goes back now
  Linger(unread);
}

void HttpFrontEnd::Linger(std::optional<uint64_t> unread) {
  if (input_closed_) return;
  linger_ = std::min(unread.value_or(kLingerBytes), kLingerBytes);
  if (linger_ == 0) return;
  linger_until_ = service_.clock().Now() + kLingerTime;
  if (BodyBudget* b = service_.body_budget()) b->Lingered();
}

void HttpFrontEnd::Discarded(size_t n) {
  linger_ -= std::min<uint64_t>(n, linger_);
  if (BodyBudget* b = service_.body_budget()) b->Discarded(n);
}

void HttpFrontEnd::TimeOut() {
  if (closing_ || request_started_ == 0) return;
  Refuse(408, "request timeout");
}

void HttpFrontEnd::OnResult(const command::Result& r) {
  STALKD_CHECK(task_ && task_->waiting());
  task_->OnResult(r);
}

void HttpFrontEnd::OnInputClosed() {
  input_closed_ = true;
  if (task_ && task_->waiting() && task_->waits_for_client()) task_->Abandon();
  if (!task_ && parser_.started() && buffered_input() == 0) {
    // The peer closed in the middle of a request: nothing to answer it with.
    closing_ = true;
  }
}

}  // namespace stalkd::http
