#include "http/request.h"

#include <algorithm>

#include "base/check.h"

#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>

namespace stalkd::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using boost::beast::error_code;

bool EqualsNoCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); i++) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

namespace {

constexpr std::string_view kAttrPrefix = "job-attr-";
// A body's buffer: reserved up to this for an announced length (the rest grows as the bytes
// arrive, so a client that announces a large body and sends nothing costs little), and
// given back between requests when it grew beyond it (a kept-alive connection does not
// hold a bulk publish's megabytes).
constexpr size_t kBodyReserve = 64 * 1024;

}  // namespace

void Request::Clear() {
  method = Method::kOther;
  target.clear();
  version = 11;
  keep_alive = true;
  token.clear();
  authorization.clear();
  request_id.clear();
  requested_with.clear();
  host.clear();
  origin.clear();
  sec_fetch_site.clear();
  expect_continue = false;
  attributes.clear();
  if (body.capacity() > kBodyReserve) {
    std::string().swap(body);
  } else {
    body.clear();
  }
}

// Beast's parser calls these as the request's parts arrive; they copy out what the
// handlers need into the Request.
class RequestParser::Impl final : public bhttp::basic_parser<true> {
 public:
  Impl() : r_(request) {}
  ~Impl() override {
    if (budget_) budget_->Give(taken_);
  }
  Request request;
  BodyBudget* budget_ = nullptr;
  uint64_t taken_ = 0;          // of budget_
  bool take_chunks_ = false;    // a chunked body takes its bytes as they arrive
  bool over_budget_ = false;    // a chunk did not fit
  bool head_reported_ = false;  // Feed said kHead

 private:
  void on_request_impl(bhttp::verb method, beast::string_view, beast::string_view target,
                       int version, error_code&) override {
    switch (method) {
      case bhttp::verb::get:
        r_.method = Method::kGet;
        break;
      case bhttp::verb::head:
        r_.method = Method::kHead;
        break;
      case bhttp::verb::put:
        r_.method = Method::kPut;
        break;
      case bhttp::verb::post:
        r_.method = Method::kPost;
        break;
      case bhttp::verb::delete_:
        r_.method = Method::kDelete;
        break;
      default:
        r_.method = Method::kOther;
    }
    r_.target.assign(target.data(), target.size());
    r_.version = version;
  }
  void on_response_impl(int, beast::string_view, int, error_code& ec) override {
    ec = bhttp::error::bad_method;  // never called for a request parser
  }
  void on_field_impl(bhttp::field name, beast::string_view name_string, beast::string_view value,
                     error_code& ec) override {
    std::string_view v(value.data(), value.size());
    if (name == bhttp::field::authorization) {
      r_.authorization.assign(v);
      return;
    }
    std::string_view n(name_string.data(), name_string.size());
    if (EqualsNoCase(n, "x-token")) {
      r_.token.assign(v);
    } else if (EqualsNoCase(n, "x-request-id")) {
      r_.request_id.assign(v);
    } else if (EqualsNoCase(n, "x-requested-with")) {
      r_.requested_with.assign(v);
    } else if (EqualsNoCase(n, "host")) {
      r_.host.assign(v);
    } else if (EqualsNoCase(n, "origin")) {
      r_.origin.assign(v);
    } else if (EqualsNoCase(n, "sec-fetch-site")) {
      r_.sec_fetch_site.assign(v);
    } else if (EqualsNoCase(n, "expect")) {
      // An HTTP/1.0 client's expectation is ignored (RFC 9110, 10.1.1).
      r_.expect_continue = r_.version >= 11 && EqualsNoCase(v, "100-continue");
    } else if (EqualsNoCase(n, "transfer-encoding")) {
      // Only chunked is understood; Beast would read any other coding as the body's end
      // at the connection's close, which a request cannot have.
      if (!EqualsNoCase(v, "chunked")) ec = bhttp::error::bad_transfer_encoding;
    } else if (n.size() >= kAttrPrefix.size() &&
               EqualsNoCase(n.substr(0, kAttrPrefix.size()), kAttrPrefix)) {
      AddAttribute(n.substr(kAttrPrefix.size()), v);
    }
  }
  void on_header_impl(error_code& ec) override {
    r_.keep_alive = keep_alive();
    // The route's body limit: a bulk publish may carry many jobs. A body announced larger
    // is refused now, before it is sent (or, with 100-continue, asked for).
    std::string_view path = std::string_view(r_.target).substr(0, r_.target.find('?'));
    route_limit_ = big_route_(path) ? bulk_limit_ : limit_;
    if (boost::optional<std::uint64_t> n = content_length(); n && *n > route_limit_) {
      ec = bhttp::error::body_limit;
    }
  }
  void on_body_init_impl(const boost::optional<std::uint64_t>& length, error_code& ec) override {
    if (length && *length > route_limit_) {
      ec = bhttp::error::body_limit;
      return;
    }
    if (length) r_.body.reserve(static_cast<size_t>(std::min<uint64_t>(*length, kBodyReserve)));
  }
  size_t on_body_impl(beast::string_view body, error_code& ec) override { return Append(body, ec); }
  void on_chunk_header_impl(std::uint64_t, beast::string_view, error_code&) override {}
  size_t on_chunk_body_impl(std::uint64_t, beast::string_view body, error_code& ec) override {
    return Append(body, ec);
  }

  size_t Append(beast::string_view body, error_code& ec) {
    if (r_.body.size() + body.size() > route_limit_) {
      ec = bhttp::error::body_limit;
      return 0;
    }
    if (take_chunks_) {
      if (!budget_->Take(body.size(), false)) {
        over_budget_ = true;
        ec = bhttp::error::body_limit;
        return 0;
      }
      taken_ += body.size();
    }
    r_.body.append(body.data(), body.size());
    return body.size();
  }

  // The attribute name in lower case, as lmstfy's server keeps it (strings.ToLower of the
  // header name after the prefix), the value without surrounding blanks; an empty value is
  // no attribute, and a repeated name (in any case) keeps its first value.
  void AddAttribute(std::string_view raw_name, std::string_view raw_value) {
    size_t b = raw_value.find_first_not_of(" \t");
    if (b == std::string_view::npos) return;
    size_t e = raw_value.find_last_not_of(" \t");
    std::string_view value = raw_value.substr(b, e - b + 1);
    std::string name(raw_name);
    for (char& c : name) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    for (const auto& a : r_.attributes) {
      if (a.first == name) return;
    }
    r_.attributes.emplace_back(std::move(name), std::string(value));
  }

 public:
  uint64_t limit_ = 0;       // a request's body
  uint64_t bulk_limit_ = 0;  // a bulk publish's body
  BigBodyRoute big_route_ = &IsBulkPath;

 private:
  uint64_t route_limit_ = 0;
  void on_finish_impl(error_code&) override { r_.keep_alive = keep_alive(); }

  Request& r_;
};

RequestParser::RequestParser(uint32_t header_limit, uint64_t body_limit, uint64_t bulk_limit,
                             BodyBudget* budget, BigBodyRoute big_route)
    : header_limit_(header_limit),
      body_limit_(body_limit),
      bulk_limit_(bulk_limit),
      big_route_(big_route),
      budget_(budget) {
  Next();
}

RequestParser::~RequestParser() = default;

void RequestParser::Next() {
  // An idle connection keeps no parser: the next request's first byte makes one.
  impl_.reset();
}

RequestParser::Impl& RequestParser::impl() {
  if (impl_) return *impl_;
  impl_ = std::make_unique<Impl>();
  impl_->header_limit(header_limit_);
  impl_->body_limit(bulk_limit_);
  impl_->limit_ = body_limit_;
  impl_->bulk_limit_ = bulk_limit_;
  impl_->big_route_ = big_route_;
  impl_->budget_ = budget_;
  // Not eager until the head is through: put() stops after it (kHead).
  impl_->eager(false);
  return *impl_;
}

bool RequestParser::started() const { return impl_ && impl_->got_some(); }

bool RequestParser::head_done() const { return impl_ && impl_->is_header_done(); }

std::optional<uint64_t> RequestParser::content_length() const {
  if (!impl_ || impl_->chunked()) return std::nullopt;
  boost::optional<std::uint64_t> n = impl_->content_length();
  return n ? std::optional<uint64_t>(*n) : std::nullopt;
}

bool RequestParser::TakeBody(bool whole) {
  Impl& p = impl();
  if (!budget_) return true;
  std::optional<uint64_t> n = content_length();
  if (!n) {
    p.take_chunks_ = true;
    return true;
  }
  if (!budget_->Take(*n, whole)) return false;
  p.taken_ += *n;
  return true;
}

Request& RequestParser::request() { return impl().request; }

RequestParser::Status RequestParser::Fail(int status, std::string why) {
  error_status_ = status;
  error_ = std::move(why);
  return Status::kError;
}

size_t RequestParser::Feed(std::string_view data, Status* status) {
  Impl& p = impl();
  STALKD_CHECK(!p.is_done());
  size_t used = 0;
  while (used < data.size() && !p.is_done()) {
    error_code ec;
    if (!p.is_header_done()) {
      // The head is request line and headers up to the blank line: at most header_limit_.
      std::string_view rest = data.substr(used);
      size_t end = rest.find("\r\n\r\n");
      size_t head = end == std::string_view::npos ? rest.size() : end + 4;
      if (head > header_limit_) {
        *status = Fail(431, "request header fields too large");
        return used;
      }
    }
    size_t n = p.put(boost::asio::const_buffer(data.data() + used, data.size() - used), ec);
    used += n;
    if (ec == bhttp::error::need_more) break;
    if (ec == bhttp::error::body_limit && p.over_budget_) {
      *status = Fail(503, std::string(kBodiesBusy));
      return used;
    }
    if (ec == bhttp::error::body_limit) {
      *status = Fail(413, "body too large");
      return used;
    }
    if (ec == bhttp::error::header_limit) {
      *status = Fail(431, "request header fields too large");
      return used;
    }
    if (ec) {
      *status = Fail(400, "malformed request");
      return used;
    }
    if (p.is_header_done() && !p.head_reported_) {
      p.head_reported_ = true;
      p.eager(true);
      if (!p.is_done()) {
        *status = Status::kHead;
        return used;
      }
    }
    if (n == 0) break;
  }
  *status = p.is_done() ? Status::kDone : Status::kNeedMore;
  return used;
}

}  // namespace stalkd::http
