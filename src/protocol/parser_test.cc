#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "protocol/command.h"

namespace stalkd::protocol {
namespace {

constexpr ParseStatus kOk = ParseStatus::kOk;
constexpr ParseStatus kBad = ParseStatus::kBadFormat;
constexpr ParseStatus kUnknown = ParseStatus::kUnknownCommand;

struct Case {
  std::string line;
  ParseStatus status = ParseStatus::kOk;
  Verb verb = Verb::kUnknown;  // checked when status is kOk
  // Fields checked when status is kOk (all of them: unset ones must stay 0/empty).
  uint64_t id = 0;
  uint32_t pri = 0;
  uint32_t delay = 0;
  uint32_t ttr = 0;
  uint32_t bytes = 0;
  uint32_t count = 0;
  uint32_t timeout = 0;
  std::string tube;
  bool garbage = false;
  bool extended = false;
};

std::string Printable(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\0') {
      out += "\\0";
    } else {
      out += c;
    }
  }
  return out.size() > 60 ? out.substr(0, 60) + "...(" + std::to_string(out.size()) + ")" : out;
}

void PrintTo(const Case& c, std::ostream* os) { *os << '"' << Printable(c.line) << '"'; }

class ParserTable : public ::testing::TestWithParam<Case> {};

TEST_P(ParserTable, Parses) {
  const Case& c = GetParam();
  Command cmd;
  cmd.id = 777;  // must be reset by ParseCommand
  ParseStatus st = ParseCommand(c.line, &cmd);
  ASSERT_EQ(static_cast<int>(st), static_cast<int>(c.status)) << Printable(c.line);
  if (st != kOk) return;
  EXPECT_EQ(static_cast<int>(cmd.verb), static_cast<int>(c.verb));
  EXPECT_EQ(cmd.id, c.id);
  EXPECT_EQ(cmd.pri, c.pri);
  EXPECT_EQ(cmd.delay, c.delay);
  EXPECT_EQ(cmd.ttr, c.ttr);
  EXPECT_EQ(cmd.bytes, c.bytes);
  EXPECT_EQ(cmd.count, c.count);
  EXPECT_EQ(cmd.timeout, c.timeout);
  EXPECT_EQ(std::string(cmd.tube), c.tube);
  EXPECT_EQ(cmd.trailing_garbage, c.garbage);
  EXPECT_EQ(cmd.extended, c.extended);
}

Case Make(std::string line, ParseStatus st, Verb v = Verb::kUnknown) {
  Case c;
  c.line = std::move(line);
  c.status = st;
  c.verb = v;
  return c;
}
Case Ok(std::string line, Verb v) { return Make(std::move(line), kOk, v); }
Case Bad(std::string line) { return Make(std::move(line), kBad); }
Case Unknown(std::string line) { return Make(std::move(line), kUnknown); }
Case WithId(Case c, uint64_t id) {
  c.id = id;
  return c;
}
Case WithTube(Case c, std::string t) {
  c.tube = std::move(t);
  return c;
}
Case Extended(Case c) {
  c.extended = true;
  return c;
}
Case Put(std::string line, uint32_t pri, uint32_t delay, uint32_t ttr, uint32_t bytes,
         bool garbage = false) {
  Case c = Ok(std::move(line), Verb::kPut);
  c.pri = pri;
  c.delay = delay;
  c.ttr = ttr;
  c.bytes = bytes;
  c.garbage = garbage;
  return c;
}

std::vector<Case> Cases() {
  std::vector<Case> v;
  // ---- put
  v.push_back(Put("put 1 2 3 4", 1, 2, 3, 4));
  v.push_back(Put("put 0 0 0 0", 0, 0, 0, 0));
  v.push_back(Put("put   1  2   3    4", 1, 2, 3, 4));  // spaces before numbers
  v.push_back(Put("put 4294967295 4294967295 4294967295 4294967295", UINT32_MAX, UINT32_MAX,
                  UINT32_MAX, UINT32_MAX));
  v.push_back(Put("put 007 0 0 010", 7, 0, 0, 10));
  v.push_back(Put("put 1 2 3 4 ", 1, 2, 3, 4, true));
  v.push_back(Put("put 1 2 3 4x", 1, 2, 3, 4, true));
  v.push_back(Put("put 1 2 3 4 5", 1, 2, 3, 4, true));
  v.push_back(Bad("put 4294967296 0 0 0"));
  v.push_back(Bad("put 0 4294967296 0 0"));
  v.push_back(Bad("put 0 0 4294967296 0"));
  v.push_back(Bad("put 0 0 0 4294967296"));
  v.push_back(Bad("put 0 0 0 99999999999999999999999"));
  v.push_back(Bad("put -1 0 0 0"));
  v.push_back(Bad("put +1 0 0 0"));
  v.push_back(Bad("put 1 2 3"));
  v.push_back(Bad("put 1 2 3 "));
  v.push_back(Bad("put "));
  v.push_back(Bad("put 1x 2 3 4"));      // "x" is not a space before the next number
  v.push_back(Unknown("put\t1 2 3 4"));  // only a space follows the verb
  v.push_back(Unknown("put"));
  v.push_back(Unknown("putx 1 2 3 4"));
  v.push_back(Unknown("PUT 1 2 3 4"));
  // ---- peek family
  v.push_back(WithId(Ok("peek 1", Verb::kPeek), 1));
  v.push_back(WithId(Ok("peek 0", Verb::kPeek), 0));
  v.push_back(WithId(Ok("peek    42", Verb::kPeek), 42));
  v.push_back(WithId(Ok("peek 18446744073709551615", Verb::kPeek), UINT64_MAX));
  v.push_back(Bad("peek 18446744073709551616"));
  v.push_back(Bad("peek 99999999999999999999"));
  v.push_back(Bad("peek 1 "));
  v.push_back(Bad("peek 1x"));
  v.push_back(Bad("peek "));
  v.push_back(Bad("peek -1"));
  v.push_back(Unknown("peek"));  // "peek " needs the space; nothing else matches
  v.push_back(Unknown("peekx"));
  v.push_back(Ok("peek-ready", Verb::kPeekReady));
  v.push_back(Ok("peek-delayed", Verb::kPeekDelayed));
  v.push_back(Ok("peek-buried", Verb::kPeekBuried));
  v.push_back(Bad("peek-ready "));
  v.push_back(Bad("peek-readyx"));
  v.push_back(Bad("peek-delayed 1"));
  v.push_back(Bad("peek-buriedx"));
  v.push_back(Unknown("peek-"));
  // ---- reserve family
  v.push_back(Ok("reserve", Verb::kReserve));
  v.push_back(Bad("reservex"));
  v.push_back(Bad("reserve "));
  v.push_back(Bad("reserve-with-timeout"));  // matched as "reserve" + "-with-timeout"
  v.push_back(Bad("reserve-job"));
  {
    Case c = Ok("reserve-with-timeout 5", Verb::kReserveWithTimeout);
    c.timeout = 5;
    v.push_back(c);
    c.line = "reserve-with-timeout   0";
    c.timeout = 0;
    v.push_back(c);
    c.line = "reserve-with-timeout 2147483647";  // INT_MAX: 1.13 keeps it in an int
    c.timeout = INT32_MAX;
    v.push_back(c);
    // 1.13 reads the timeout with an end pointer: whatever follows the digits is ignored.
    c.line = "reserve-with-timeout 0x";
    c.timeout = 0;
    v.push_back(c);
    c.line = "reserve-with-timeout 0 5";
    v.push_back(c);
    c.line = "reserve-with-timeout 0 ";
    v.push_back(c);
    c.line = "reserve-with-timeout 0x10";
    v.push_back(c);
    c.line = "reserve-with-timeout 00\t";
    v.push_back(c);
    c.line = "reserve-with-timeout 7-1";
    c.timeout = 7;
    v.push_back(c);
    c.line = "reserve-with-timeout 12.5";
    c.timeout = 12;
    v.push_back(c);
  }
  v.push_back(Bad("reserve-with-timeout -1"));
  v.push_back(Bad("reserve-with-timeout -0"));
  v.push_back(Bad("reserve-with-timeout +1"));
  v.push_back(Bad("reserve-with-timeout \t1"));  // only spaces are skipped
  v.push_back(Bad("reserve-with-timeout 2147483648"));
  v.push_back(Bad("reserve-with-timeout 4294967295"));
  v.push_back(Bad("reserve-with-timeout 4294967296"));
  v.push_back(Bad("reserve-with-timeout 18446744073709551616 x"));
  v.push_back(Bad("reserve-with-timeout "));
  v.push_back(Bad("reserve-with-timeout x"));
  v.push_back(Bad("reserve-with-timeout x0"));
  v.push_back(WithId(Ok("reserve-job 3", Verb::kReserveJob), 3));
  v.push_back(Bad("reserve-job "));
  v.push_back(Bad("reserve-job 3 4"));
  // ---- job commands
  v.push_back(WithId(Ok("delete 5", Verb::kDelete), 5));
  v.push_back(Bad("delete x"));
  v.push_back(Bad("delete 5 "));
  v.push_back(Unknown("delete"));
  v.push_back(Unknown("deletex 5"));
  {
    Case c = WithId(Ok("release 1 2 3", Verb::kRelease), 1);
    c.pri = 2;
    c.delay = 3;
    v.push_back(c);
    c.line = "release 18446744073709551615  4294967295 4294967295";
    c.id = UINT64_MAX;
    c.pri = UINT32_MAX;
    c.delay = UINT32_MAX;
    v.push_back(c);
  }
  v.push_back(Bad("release 1 2"));
  v.push_back(Bad("release 1 2 3 4"));
  v.push_back(Bad("release 1 4294967296 0"));
  v.push_back(Bad("release 18446744073709551616 0 0"));
  v.push_back(Unknown("release"));
  {
    Case c = WithId(Ok("bury 1 2", Verb::kBury), 1);
    c.pri = 2;
    v.push_back(c);
  }
  v.push_back(Bad("bury 1"));
  v.push_back(Bad("bury 1 2 3"));
  v.push_back(Unknown("bury"));
  {
    Case c = Ok("kick 10", Verb::kKick);
    c.count = 10;
    v.push_back(c);
    c.line = "kick 4294967295";
    c.count = UINT32_MAX;
    v.push_back(c);
  }
  // kick's count is read as beanstalkd's strtoul(): white space and a sign before it,
  // anything after it ignored, the low 32 bits kept; only no number or u64 overflow is bad.
  {
    Case c = Ok("kick 4294967296", Verb::kKick);
    c.count = 0;
    v.push_back(c);
    c.line = "kick 4294967297";
    c.count = 1;
    v.push_back(c);
    c.line = "kick 1 2";
    v.push_back(c);
    c.line = "kick 1x";
    v.push_back(c);
    c.line = "kick  \t+1";
    v.push_back(c);
    c.line = "kick -1";
    c.count = UINT32_MAX;
    v.push_back(c);
    c.line = "kick 18446744073709551615";
    v.push_back(c);
  }
  v.push_back(Bad("kick 18446744073709551616"));
  v.push_back(Bad("kick "));
  v.push_back(Bad("kick x"));
  v.push_back(Bad("kick -"));
  v.push_back(Bad("kick +-1"));
  v.push_back(Unknown("kick"));
  v.push_back(WithId(Ok("kick-job 5", Verb::kKickJob), 5));
  v.push_back(Bad("kick-job x"));
  v.push_back(Unknown("kick-job"));
  v.push_back(WithId(Ok("touch 9", Verb::kTouch), 9));
  v.push_back(Bad("touch 9 9"));
  v.push_back(Unknown("touch"));
  // ---- stats
  v.push_back(Ok("stats", Verb::kStats));
  v.push_back(Bad("stats "));
  v.push_back(Bad("statsx"));
  v.push_back(Bad("stats-tube"));  // "stats" + "-tube"
  v.push_back(Bad("stats-job"));
  v.push_back(WithId(Ok("stats-job 1", Verb::kStatsJob), 1));
  v.push_back(Bad("stats-job 1 "));
  v.push_back(Bad("stats-job "));
  v.push_back(WithTube(Ok("stats-tube foo", Verb::kStatsTube), "foo"));
  v.push_back(Bad("stats-tube "));
  v.push_back(Bad("stats-tube -foo"));
  v.push_back(Bad("stats-tube foo bar"));
  // ---- stats-ext, stats-tube-ext, stats-job-ext: beanstalkd's verbs, extended. beanstalkd
  // reads them as "stats" with something after it: BAD_FORMAT.
  v.push_back(Extended(Ok("stats-ext", Verb::kStats)));
  v.push_back(Bad("stats-ext "));
  v.push_back(Bad("stats-ext x"));
  v.push_back(Bad("stats-extx"));
  v.push_back(Bad("stats-tube-ext"));
  v.push_back(Bad("stats-tube-ext "));
  v.push_back(Bad("stats-tube-ext -foo"));
  v.push_back(Extended(WithTube(Ok("stats-tube-ext foo", Verb::kStatsTube), "foo")));
  v.push_back(
      Extended(WithTube(Ok("stats-tube-ext stats-tube-ext", Verb::kStatsTube), "stats-tube-ext")));
  v.push_back(Bad("stats-job-ext"));
  v.push_back(Bad("stats-job-ext x"));
  v.push_back(Bad("stats-job-ext 1 "));
  v.push_back(Extended(WithId(Ok("stats-job-ext 7", Verb::kStatsJob), 7)));
  v.push_back(Extended(WithId(Ok("stats-job-ext  7", Verb::kStatsJob), 7)));
  v.push_back(WithTube(Ok("stats-tube stats-ext", Verb::kStatsTube), "stats-ext"));
  v.push_back(Unknown("STATS-EXT"));
  // ---- tubes
  v.push_back(WithTube(Ok("use foo", Verb::kUse), "foo"));
  v.push_back(WithTube(Ok("use a_b", Verb::kUse), "a_b"));
  v.push_back(WithTube(Ok("use A-Za-z0-9+/;.$_()", Verb::kUse), "A-Za-z0-9+/;.$_()"));
  v.push_back(WithTube(Ok("use " + std::string(200, 'a'), Verb::kUse), std::string(200, 'a')));
  v.push_back(Bad("use " + std::string(201, 'a')));
  v.push_back(Bad("use -foo"));
  v.push_back(WithTube(Ok("use foo-", Verb::kUse), "foo-"));
  v.push_back(Bad("use foo bar"));
  v.push_back(Bad("use  foo"));  // no spaces skipped before a tube name
  v.push_back(Bad("use foo "));
  v.push_back(Bad("use a*b"));
  v.push_back(Bad("use a!b"));
  v.push_back(Bad("use \xc3\xa9"));
  v.push_back(Bad("use "));
  v.push_back(Unknown("use"));
  v.push_back(WithTube(Ok("watch x", Verb::kWatch), "x"));
  v.push_back(Bad("watch " + std::string(201, 'b')));
  v.push_back(Bad("watch "));
  v.push_back(Unknown("watch"));
  v.push_back(WithTube(Ok("ignore x", Verb::kIgnore), "x"));
  v.push_back(Bad("ignore -x"));
  v.push_back(Unknown("ignore"));
  v.push_back(Ok("list-tubes", Verb::kListTubes));
  v.push_back(Ok("list-tube-used", Verb::kListTubeUsed));
  v.push_back(Ok("list-tubes-watched", Verb::kListTubesWatched));
  v.push_back(Bad("list-tubes "));
  v.push_back(Bad("list-tubesx"));
  v.push_back(Bad("list-tube-usedx"));
  v.push_back(Bad("list-tubes-watchedx"));
  v.push_back(Bad("list-tubes-watche"));  // matched as list-tubes + "-watche"
  v.push_back(Unknown("list-tube"));
  v.push_back(Unknown("list"));
  // ---- quit: anything after it is ignored
  v.push_back(Ok("quit", Verb::kQuit));
  v.push_back(Ok("quitxyz", Verb::kQuit));
  v.push_back(Ok("quit 1 2 3", Verb::kQuit));
  v.push_back(Unknown("qui"));
  // ---- pause-tube: beanstalkd's read_tube_name, prefix without the space
  {
    Case c = WithTube(Ok("pause-tube foo 5", Verb::kPauseTube), "foo");
    c.delay = 5;
    v.push_back(c);
    c.line = "pause-tubefoo 5";
    v.push_back(c);
    c.line = "pause-tube    foo    5";
    v.push_back(c);
    c.line = "pause-tube foo 0";
    c.delay = 0;
    v.push_back(c);
    c.line = "pause-tube " + std::string(200, 'p') + " 0";
    c.tube = std::string(200, 'p');
    v.push_back(c);
    c.line = "pause-tube 5 4294967295";
    c.tube = "5";
    c.delay = UINT32_MAX;
    v.push_back(c);
  }
  v.push_back(Bad("pause-tube foo"));
  v.push_back(Bad("pause-tube foo "));
  v.push_back(Bad("pause-tube foo 5x"));
  v.push_back(Bad("pause-tube foo 5 "));
  v.push_back(Bad("pause-tube foo bar"));
  v.push_back(Bad("pause-tube foo -1"));
  v.push_back(Bad("pause-tube foo 4294967296"));
  v.push_back(Bad("pause-tube"));
  v.push_back(Bad("pause-tube "));
  v.push_back(Bad("pause-tube 5"));
  v.push_back(Bad("pause-tube *foo 5"));
  // A run of name characters that is no valid name: the store refuses it (BAD_FORMAT)
  // after counting the command, as beanstalkd does.
  v.push_back(WithTube(Ok("pause-tube -foo 0", Verb::kPauseTube), "-foo"));
  v.push_back(WithTube(Ok("pause-tube " + std::string(201, 'p') + " 0", Verb::kPauseTube),
                       std::string(201, 'p')));
  // ---- every numeric argument, as 1.13's read_u32/read_u64 read it: spaces (not tabs)
  // before it, no sign, decimal digits; for these commands nothing may follow the last one.
  const std::pair<std::string, Verb> kIdVerbs[] = {
      {"peek", Verb::kPeek},   {"reserve-job", Verb::kReserveJob}, {"delete", Verb::kDelete},
      {"touch", Verb::kTouch}, {"kick-job", Verb::kKickJob},       {"stats-job", Verb::kStatsJob},
  };
  for (const auto& [verb, code] : kIdVerbs) {
    v.push_back(WithId(Ok(verb + "  7", code), 7));
    for (const char* arg : {"+7", "-7", "\t7", "7x", "7 ", "7 7", "0x7", "18446744073709551616"}) {
      v.push_back(Bad(verb + " " + arg));
    }
  }
  for (std::string bad : {"+1", "-1", "\t1", "1x", "4294967296", "0x1"}) {
    v.push_back(Bad("release 1 " + bad + " 0"));
    v.push_back(Bad("release 1 0 " + bad));
    v.push_back(Bad("bury 1 " + bad));
    v.push_back(Bad("pause-tube foo " + bad));
  }
  v.push_back(Bad("release 1 0 1 "));
  v.push_back(Bad("bury 1 1 "));
  for (std::string bad : {"+1", "-1", "\t1", "1x", "4294967296", "x"}) {
    v.push_back(Bad("put " + bad + " 0 0 0"));
    v.push_back(Bad("put 0 " + bad + " 0 0"));
    v.push_back(Bad("put 0 0 " + bad + " 0"));
  }
  v.push_back(Bad("put 0 0 0 +1"));
  v.push_back(Bad("put 0 0 0 \t1"));
  v.push_back(Put("put 0 0 0 1\t", 0, 0, 0, 1, true));  // after the size: the conversation's
  // ---- NUL bytes, empty line, unknown verbs
  v.push_back(Bad(std::string("peek 1\0", 7)));
  v.push_back(
      Bad(std::string("peek \0"
                      "1",
                      7)));
  v.push_back(Bad(std::string("\0", 1)));
  v.push_back(Bad(std::string("foo\0bar", 7)));  // checked before the verb
  v.push_back(Bad(std::string("quit\0", 5)));
  v.push_back(Bad(std::string("use a\0b", 7)));
  v.push_back(Unknown(""));
  v.push_back(Unknown(" "));
  v.push_back(Unknown(" stats"));
  v.push_back(Unknown("frobnicate"));
  return v;
}

INSTANTIATE_TEST_SUITE_P(All, ParserTable, ::testing::ValuesIn(Cases()));

TEST(Parser, TubeViewPointsIntoLine) {
  std::string line = "watch abc";
  Command cmd;
  ASSERT_EQ(ParseCommand(line, &cmd), kOk);
  EXPECT_EQ(cmd.tube.data(), line.data() + 6);
}

// A pause-tube that parsed but has an invalid name still reports the name: beanstalkd has
// counted the command by then (the conversation counts it).
TEST(Parser, PauseTubeLeavesTheNameCheckToTheStore) {
  Command cmd;
  ASSERT_EQ(ParseCommand("pause-tube -x 5", &cmd), ParseStatus::kOk);
  EXPECT_EQ(cmd.verb, Verb::kPauseTube);
  EXPECT_EQ(cmd.tube, "-x");
  EXPECT_EQ(cmd.delay, 5u);
  ASSERT_EQ(ParseCommand("pause-tube x y", &cmd), kBad);
  EXPECT_TRUE(cmd.tube.empty());
}

TEST(Parser, ResetsCommand) {
  Command cmd;
  ASSERT_EQ(ParseCommand("put 1 2 3 4 x", &cmd), kOk);
  EXPECT_TRUE(cmd.trailing_garbage);
  ASSERT_EQ(ParseCommand("stats", &cmd), kOk);
  EXPECT_FALSE(cmd.trailing_garbage);
  EXPECT_EQ(cmd.pri, 0u);
  EXPECT_EQ(cmd.bytes, 0u);
  EXPECT_EQ(ParseCommand("nope", &cmd), kUnknown);
  EXPECT_EQ(cmd.verb, Verb::kUnknown);
}

TEST(Parser, IsValidTubeName) {
  EXPECT_TRUE(IsValidTubeName("default"));
  EXPECT_TRUE(IsValidTubeName("_"));
  EXPECT_TRUE(IsValidTubeName("a_b"));
  EXPECT_TRUE(IsValidTubeName("a-"));
  EXPECT_TRUE(IsValidTubeName("+/;.$_()"));
  EXPECT_TRUE(IsValidTubeName("0"));
  EXPECT_TRUE(IsValidTubeName(std::string(200, 'x')));
  EXPECT_FALSE(IsValidTubeName(std::string(201, 'x')));
  EXPECT_FALSE(IsValidTubeName(""));
  EXPECT_FALSE(IsValidTubeName("-"));
  EXPECT_FALSE(IsValidTubeName("-a"));
  EXPECT_FALSE(IsValidTubeName("a b"));
  EXPECT_FALSE(IsValidTubeName("a\r"));
  for (char c : std::string("!\"#%&'*,:<=>?@[\\]^`{|}~")) {
    EXPECT_FALSE(IsValidTubeName(std::string("a") + c)) << c;
  }
  EXPECT_FALSE(IsValidTubeName("\x80"));
}

// IsNameChar must not match the terminator of its character list.
TEST(Parser, IsValidTubeNameRejectsNul) {
  EXPECT_FALSE(IsValidTubeName(std::string("a\0", 2)));
  EXPECT_FALSE(IsValidTubeName(std::string("\0", 1)));
}

// Every verb's table entry is reachable: each verb appears at least once in the table.
TEST(Parser, TableCoversEveryVerb) {
  std::vector<bool> seen(static_cast<size_t>(Verb::kPauseTube) + 1);
  for (const Case& c : Cases()) {
    if (c.status == kOk) seen[static_cast<size_t>(c.verb)] = true;
  }
  for (size_t i = 1; i < seen.size(); i++) EXPECT_TRUE(seen[i]) << "verb " << i;
}

}  // namespace
}  // namespace stalkd::protocol
