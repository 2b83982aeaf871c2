#include "http/json.h"

#include <string>
#include <string_view>

#include <gtest/gtest.h>

namespace stalkd::http {
namespace {

std::string Coerced(std::string_view s) {
  std::string scratch;
  return std::string(CoerceUtf8(s, &scratch));
}

constexpr std::string_view kReplacement = "\xef\xbf\xbd";  // U+FFFD

TEST(JsonTest, ValidUtf8IsKept) {
  for (std::string_view s : {"", "plain ascii", "caf\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
                             "\xed\x9f\xbf", "\xee\x80\x80", "\xf4\x8f\xbf\xbf", "a\x01z"}) {
    std::string scratch;
    EXPECT_EQ(CoerceUtf8(s, &scratch), s);
    EXPECT_EQ(CoerceUtf8(s, &scratch).data(), s.data()) << "copied a valid string";
  }
}

TEST(JsonTest, EachInvalidByteIsAReplacementCharacter) {
  // As Go's utf8.DecodeRuneInString (and so encoding/json) reads them.
  auto r = [](int n) {
    std::string s;
    for (int i = 0; i < n; i++) s += kReplacement;
    return s;
  };
  EXPECT_EQ(Coerced("\xff"), r(1));
  EXPECT_EQ(Coerced("a\xffz"), "a" + r(1) + "z");
  EXPECT_EQ(Coerced("\xc0\xaf"), r(2));          // overlong '/'
  EXPECT_EQ(Coerced("\xe0\x80\xaf"), r(3));      // overlong, three bytes
  EXPECT_EQ(Coerced("\xed\xa0\x80"), r(3));      // a surrogate
  EXPECT_EQ(Coerced("\xf4\x90\x80\x80"), r(4));  // above U+10FFFF
  EXPECT_EQ(Coerced("\xe2\x82"), r(2));          // cut short
  EXPECT_EQ(Coerced("\xe2\x82z"), r(2) + "z");
  EXPECT_EQ(Coerced("\x80\xc3\xa9"), r(1) + "\xc3\xa9");  // a stray continuation byte
}

TEST(JsonTest, WriterWritesValidUtf8) {
  std::string out;
  JsonWriter w(&out);
  w.StartObject();
  w.Key("k\xfe");
  w.String("d\xff\xc3\xa9");
  w.EndObject();
  EXPECT_EQ(out, "{\"k" + std::string(kReplacement) + "\":\"d" + std::string(kReplacement) +
                     "\xc3\xa9\"}");
}

}  // namespace
}  // namespace stalkd::http
