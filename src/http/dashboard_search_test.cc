#include "http/dashboard_search.h"

#include <algorithm>
#include <string>

#include <gtest/gtest.h>

namespace stalkd::http::dash {
namespace {

constexpr size_t npos = std::string_view::npos;

// Scans `body` in pieces of `piece` bytes as a search over several steps does; every match
// position found (each piece from where the last match was not).
std::vector<size_t> ScanInPieces(std::string_view body, std::string_view needle, bool fold,
                                 size_t piece) {
  std::vector<size_t> found;
  for (size_t begin = 0; begin < body.size(); begin += piece) {
    size_t at = FindInBody(body, begin, begin + piece, needle, fold);
    if (at != npos) found.push_back(at);
  }
  return found;
}

TEST(FindInBodyTest, WholeBody) {
  EXPECT_EQ(FindInBody("hello world", 0, 11, "world", false), 6u);
  EXPECT_EQ(FindInBody("hello world", 0, 11, "World", false), npos);
  EXPECT_EQ(FindInBody("hello world", 0, 100, "d", false), 10u);  // end past the body
  EXPECT_EQ(FindInBody("abc", 0, 3, "abcd", false), npos);
  EXPECT_EQ(FindInBody("abc", 0, 3, "", false), npos);
  EXPECT_EQ(FindInBody("", 0, 0, "a", false), npos);
}

TEST(FindInBodyTest, FoldsAsciiLettersOnly) {
  EXPECT_EQ(FindInBody("Hello WORLD", 0, 11, "world", true), 6u);
  EXPECT_EQ(FindInBody("x\xC3\x89y", 0, 4, "\xC3\xA9", true), npos);  // É is not é
  EXPECT_EQ(FindInBody(std::string_view("a\0B", 3), 0, 3, std::string_view("\0b", 2), true), 1u);
}

TEST(FindInBodyTest, AMatchAcrossPiecesIsFoundOnceInThePieceWhereItEnds) {
  std::string body(100, '.');
  body.replace(8, 6, "needle");  // bytes 8..13
  for (size_t piece = 1; piece <= 20; piece++) {
    std::vector<size_t> found = ScanInPieces(body, "needle", false, piece);
    ASSERT_EQ(found.size(), 1u) << "piece " << piece;
    EXPECT_EQ(found[0], 8u);
  }
  // Only the part of the piece is searched, plus the bytes before it a match may start in.
  EXPECT_EQ(FindInBody(body, 13, 30, "needle", false), 8u);    // its last byte, 13, is here
  EXPECT_EQ(FindInBody(body, 14, 30, "needle", false), npos);  // ended in the piece before
  EXPECT_EQ(FindInBody(body, 0, 14, "needle", false), 8u);
  EXPECT_EQ(FindInBody(body, 0, 13, "needle", false), npos);  // not whole yet
}

TEST(FindInBodyTest, BinaryBodies) {
  std::string body("\x00\xff\x00\xfe", 4);
  EXPECT_EQ(FindInBody(body, 0, 4, std::string_view("\x00\xfe", 2), false), 2u);
}

TEST(SearchCursorTest, RoundTrip) {
  for (command::StateFilter s : {command::StateFilter::kReady, command::StateFilter::kDelayed,
                                 command::StateFilter::kReserved, command::StateFilter::kBuried}) {
    SearchCursor c{s, 18446744073709551615u};
    std::optional<SearchCursor> back = ParseCursor(CursorText(c));
    ASSERT_TRUE(back);
    EXPECT_EQ(back->state, s);
    EXPECT_EQ(back->from, c.from);
  }
  EXPECT_EQ(CursorText({command::StateFilter::kDelayed, 42}), "delayed:42");
}

TEST(SearchCursorTest, Invalid) {
  for (std::string_view bad :
       {"", "ready", "ready:", "ready:0", "all:5", "nope:5", ":5", "ready:-1", "ready:5x",
        "ready:18446744073709551616", "ready:000000000000000000001"}) {
    EXPECT_FALSE(ParseCursor(bad)) << bad;
  }
}

// The worst inputs of a naive search (bytes x needle length comparisons, ~268 million for
// this step): found right, in a bounded number of comparisons per byte of the piece.
TEST(FindInBodyTest, WorstCaseNeedlesCostAFewComparisonsPerByte) {
  const size_t n = kSearchSliceBytes;
  std::string body(n, 'a');
  std::string tail = std::string(kMaxSearchText - 1, 'a') + "b";  // fails at its last byte
  std::string head = "b" + std::string(kMaxSearchText - 1, 'a');  // fails at its first
  const uint64_t bound = 3 * n + kMaxSearchText * kMaxSearchText;
  for (bool fold : {false, true}) {
    for (const std::string& needle : {tail, head}) {
      uint64_t comparisons = 0;
      EXPECT_EQ(FindInBody(body, 0, n, needle, fold, &comparisons), npos);
      EXPECT_LE(comparisons, bound) << fold << needle.front();
      // And where it is: the end of the body for `tail`, its middle for `head`.
      std::string hit(n, fold ? 'A' : 'a');
      char b = fold ? 'B' : 'b';
      size_t want = n / 2;
      if (needle == tail) {
        hit += b;
        want = n + 1 - needle.size();
      } else {
        hit.insert(n / 2, 1, b);
      }
      comparisons = 0;
      EXPECT_EQ(FindInBody(hit, 0, hit.size(), needle, fold, &comparisons), want);
      EXPECT_LE(comparisons, bound) << fold << needle.front();
    }
  }
}

}  // namespace
}  // namespace stalkd::http::dash
