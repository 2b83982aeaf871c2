#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// An HTTP/1.1 request as stalkd's HTTP front ends need it, and the parser that reads one
// from a connection's buffered input. The parsing itself is Boost.Beast's (basic_parser,
// fed from our own buffer); this file keeps Beast out of every other translation unit.
namespace stalkd::http {

enum class Method : uint8_t { kGet, kHead, kPut, kPost, kDelete, kOther };

struct Request {
  Method method = Method::kOther;
  std::string target;  // as received: path and query, still percent-encoded
  int version = 11;    // 10 or 11
  bool keep_alive = true;
  // The header fields the handlers read; the others are parsed and dropped.
  std::string token;             // X-Token
  std::string authorization;     // Authorization
  std::string request_id;        // X-Request-ID, if the client sent one
  std::string requested_with;    // X-Requested-With (the dashboard's changing requests)
  bool expect_continue = false;  // Expect: 100-continue
  std::vector<std::pair<std::string, std::string>> attributes;  // Job-Attr-<name>: value
  std::string body;

  void Clear();
};

// Reads one request at a time: Feed() the buffered input until it reports kDone (the
// request is in request()), then Next() for the following one. Header and body limits are
// enforced as the bytes arrive, so an oversized request is refused before it is buffered.
class RequestParser {
 public:
  enum class Status : uint8_t { kNeedMore, kDone, kError };

  // body_limit: a request's body; bulk_limit: the body of a bulk publish (a target whose
  // path ends in "/bulk"). Over either: kError with status 413.
  RequestParser(uint32_t header_limit, uint64_t body_limit, uint64_t bulk_limit);
  ~RequestParser();
  RequestParser(const RequestParser&) = delete;
  RequestParser& operator=(const RequestParser&) = delete;

  // Parses from `data`; returns how many bytes it consumed. kError: `error_status()` is the
  // HTTP status to answer (400, 413, 431) and `error()` says why.
  size_t Feed(std::string_view data, Status* status);
  // Starts on the next request (after kDone or before the first).
  void Next();
  // Whether any byte of the current request has arrived.
  bool started() const;
  // The request line and headers have been parsed; the body may still be arriving.
  bool head_done() const;

  // The request being parsed (valid until Next).
  Request& request();
  int error_status() const { return error_status_; }
  const std::string& error() const { return error_; }

 private:
  class Impl;
  Status Fail(int status, std::string why);

  uint32_t header_limit_;
  uint64_t body_limit_;
  uint64_t bulk_limit_;
  Impl& impl();  // made on first use after Next

  std::unique_ptr<Impl> impl_;  // null between requests
  int error_status_ = 400;
  std::string error_;
};

}  // namespace stalkd::http
