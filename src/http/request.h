#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
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
  std::string host;              // Host
  std::string origin;            // Origin (a browser's cross-site check, admin listener)
  std::string sec_fetch_site;    // Sec-Fetch-Site (likewise)
  bool expect_continue = false;  // Expect: 100-continue
  std::vector<std::pair<std::string, std::string>> attributes;  // Job-Attr-<name>: value
  std::string body;

  void Clear();
};

// a == b, ASCII letters compared without case (header names, tokens of header values).
bool EqualsNoCase(std::string_view a, std::string_view b);

// Which request paths take the larger of a service's two body limits.
using BigBodyRoute = bool (*)(std::string_view path);
// A bulk publish: a path ending in "/bulk".
inline bool IsBulkPath(std::string_view path) { return path.ends_with("/bulk"); }

// The answer (503) to a body that does not fit in the BodyBudget.
inline constexpr std::string_view kBodiesBusy = "too many request bodies arriving, retry later";

// What the bodies of the requests being received hold in all, across every HTTP connection
// of a server (docs/HTTP.md, "Request bodies"): a body takes its announced length once its
// request's head has passed the checks (a chunked body its bytes as they arrive) and gives
// it back when the request has been answered or its connection has gone. However many
// connections a client opens, the bodies it sends slowly hold at most `limit` bytes.
class BodyBudget {
 public:
  explicit BodyBudget(uint64_t limit) : limit_(limit) {}

  // Takes n bytes; false (nothing taken, one more refusal counted) if that would pass the
  // limit, unless `always` (a body already received whole with its head, held only while
  // its request is answered: a client cannot stretch that).
  bool Take(uint64_t n, bool always) {
    if (!always && n > limit_ - std::min(used_, limit_)) {
      refused_++;
      return false;
    }
    used_ += n;
    return true;
  }
  void Give(uint64_t n) { used_ -= n; }

  uint64_t used() const { return used_; }
  uint64_t limit() const { return limit_; }
  uint64_t refused() const { return refused_; }  // a counter

  // Connections closed after a refusal left a body unread (they half-close and read the
  // rest away first, bounded: HttpFrontEnd), and the bytes so read: counters.
  void Lingered() { lingered_++; }
  void Discarded(uint64_t n) { discarded_ += n; }
  uint64_t lingered() const { return lingered_; }
  uint64_t discarded() const { return discarded_; }

 private:
  uint64_t limit_;
  uint64_t used_ = 0;
  uint64_t refused_ = 0;
  uint64_t lingered_ = 0;
  uint64_t discarded_ = 0;
};

// Reads one request at a time: Feed() the buffered input until it reports kDone (the
// request is in request()), then Next() for the following one. Header and body limits are
// enforced as the bytes arrive, so an oversized request is refused before it is buffered.
// A request with a body stops once at kHead, its head parsed and no byte of its body read,
// so that the caller can refuse it, or take its room in the BodyBudget (TakeBody), first.
class RequestParser {
 public:
  enum class Status : uint8_t { kNeedMore, kHead, kDone, kError };

  // body_limit: a request's body; bulk_limit: the body of a route that `big_route` names
  // by its path (as received, without the query; by default a bulk publish, a path ending
  // in "/bulk"). Over either: kError with status 413. budget: where bodies take their room
  // (null: nowhere); a chunked body past it is kError with status 503.
  RequestParser(uint32_t header_limit, uint64_t body_limit, uint64_t bulk_limit,
                BodyBudget* budget = nullptr, BigBodyRoute big_route = &IsBulkPath);
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
  // The body's announced length (Content-Length); none for a chunked body.
  std::optional<uint64_t> content_length() const;
  // At kHead: takes the body's room in the budget (its announced length; a chunked body
  // takes its bytes as they arrive), given back at Next or destruction. `whole`: the body
  // has already arrived, so it is always taken. False: refused, nothing taken.
  bool TakeBody(bool whole);

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
  BigBodyRoute big_route_;
  BodyBudget* budget_;
  Impl& impl();  // made on first use after Next

  std::unique_ptr<Impl> impl_;  // null between requests
  int error_status_ = 400;
  std::string error_;
};

}  // namespace stalkd::http
