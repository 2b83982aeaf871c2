#include "http/request.h"

#include <string>
#include <string_view>

#include <gtest/gtest.h>

namespace stalkd::http {
namespace {

using Status = RequestParser::Status;

// Feeds all of `data` (going on past kHead); returns the last status and how many bytes
// were used.
Status FeedAll(RequestParser& p, std::string_view data, size_t* used = nullptr) {
  Status st = Status::kNeedMore;
  size_t n = p.Feed(data, &st);
  if (st == Status::kHead) n += p.Feed(data.substr(n), &st);
  if (used) *used = n;
  return st;
}

TEST(RequestParserTest, StopsAfterTheHeadOfARequestWithABody) {
  BodyBudget budget(100);
  RequestParser p(8192, 1 << 16, 1 << 16, &budget);
  std::string head = "PUT /api/ns/q HTTP/1.1\r\nContent-Length: 60\r\n\r\n";
  std::string data = head + std::string(10, 'x');
  Status st;
  EXPECT_EQ(p.Feed(data, &st), head.size());  // no byte of the body
  EXPECT_EQ(st, Status::kHead);
  EXPECT_EQ(p.content_length(), 60u);
  EXPECT_TRUE(p.TakeBody(false));
  EXPECT_EQ(budget.used(), 60u);
  EXPECT_EQ(p.Feed(std::string_view(data).substr(head.size()), &st), 10u);
  EXPECT_EQ(st, Status::kNeedMore);
  p.Next();  // the request is gone: its room comes back
  EXPECT_EQ(budget.used(), 0u);
  // A second body of 60 does not fit beside a first; one received whole always does.
  p.Feed(head, &st);
  EXPECT_EQ(st, Status::kHead);
  EXPECT_TRUE(p.TakeBody(false));
  RequestParser q(8192, 1 << 16, 1 << 16, &budget);
  q.Feed(head, &st);
  EXPECT_FALSE(q.TakeBody(false));
  EXPECT_EQ(budget.refused(), 1u);
  EXPECT_TRUE(q.TakeBody(true));
  EXPECT_EQ(budget.used(), 120u);
  // Requests without a body do not stop.
  RequestParser g(8192, 1 << 16, 1 << 16, &budget);
  EXPECT_EQ(g.Feed("GET /x HTTP/1.1\r\n\r\n", &st), 19u);
  EXPECT_EQ(st, Status::kDone);
}

TEST(RequestParserTest, AChunkedBodyTakesItsBytesAsTheyArrive) {
  BodyBudget budget(25);
  RequestParser p(8192, 1 << 16, 1 << 16, &budget);
  Status st;
  std::string head = "PUT /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  EXPECT_EQ(p.Feed(head, &st), head.size());
  EXPECT_EQ(st, Status::kHead);
  EXPECT_EQ(p.content_length(), std::nullopt);
  EXPECT_TRUE(p.TakeBody(false));
  EXPECT_EQ(budget.used(), 0u);
  std::string in;  // what the parser left, as a connection keeps it
  auto feed = [&](std::string_view more) {
    in += more;
    in.erase(0, p.Feed(in, &st));
  };
  feed("a\r\n0123456789\r\n");
  EXPECT_EQ(st, Status::kNeedMore);
  EXPECT_EQ(budget.used(), 10u);
  feed("a\r\n0123456789\r\n");
  EXPECT_EQ(budget.used(), 20u);
  feed("a\r\n0123456789\r\n");  // 30 > 25
  EXPECT_EQ(st, Status::kError);
  EXPECT_EQ(p.error_status(), 503);
  EXPECT_EQ(p.error(), kBodiesBusy);
  p.Next();
  EXPECT_EQ(budget.used(), 0u);
}

TEST(RequestParserTest, AnnouncedBodyIsNotReservedWhole) {
  RequestParser p(8192, 4 << 20, 4 << 20);
  std::string head = "PUT /api/ns/q/bulk HTTP/1.1\r\nContent-Length: 4000000\r\n\r\n";
  size_t used = 0;
  EXPECT_EQ(FeedAll(p, head, &used), Status::kNeedMore);
  EXPECT_EQ(used, head.size());
  // A client that announces megabytes and sends nothing does not get them reserved.
  EXPECT_LE(p.request().body.capacity(), 64u * 1024);
  std::string body(4000000, 'x');
  EXPECT_EQ(FeedAll(p, body, &used), Status::kDone);
  EXPECT_EQ(used, body.size());
  EXPECT_EQ(p.request().body, body);
}

TEST(RequestParserTest, NextGivesBackALargeBody) {
  RequestParser p(8192, 4 << 20, 4 << 20);
  std::string req =
      "PUT /api/ns/q/bulk HTTP/1.1\r\nContent-Length: 1000000\r\n\r\n" + std::string(1000000, 'x');
  EXPECT_EQ(FeedAll(p, req), Status::kDone);
  EXPECT_GE(p.request().body.capacity(), 1000000u);
  p.Next();
  // A kept-alive connection does not hold on to the megabyte.
  EXPECT_TRUE(p.request().body.empty());
  EXPECT_LE(p.request().body.capacity(), 64u * 1024);
  // A small body's buffer is kept for the next request.
  EXPECT_EQ(FeedAll(p, "PUT /api/ns/q HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"), Status::kDone);
  EXPECT_EQ(p.request().body, "hello");
}

TEST(RequestParserTest, ExpectContinueOnlyForHttp11) {
  RequestParser p(8192, 1 << 16, 1 << 16);
  EXPECT_EQ(FeedAll(p, "PUT /a HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 3\r\n\r\n"),
            Status::kNeedMore);
  EXPECT_TRUE(p.head_done());
  EXPECT_TRUE(p.request().expect_continue);
  p.Next();
  // RFC 9110, 10.1.1: a server ignores an HTTP/1.0 request's 100-continue expectation.
  EXPECT_EQ(FeedAll(p, "PUT /a HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n"),
            Status::kNeedMore);
  EXPECT_TRUE(p.head_done());
  EXPECT_FALSE(p.request().expect_continue);
}

}  // namespace
}  // namespace stalkd::http
