#include "http/request.h"

#include <string>
#include <string_view>

#include <gtest/gtest.h>

namespace stalkd::http {
namespace {

using Status = RequestParser::Status;

// Feeds all of `data`; returns the last status and how many bytes were used.
Status FeedAll(RequestParser& p, std::string_view data, size_t* used = nullptr) {
  Status st = Status::kNeedMore;
  size_t n = p.Feed(data, &st);
  if (used) *used = n;
  return st;
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
