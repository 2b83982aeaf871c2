// Unit tests of stalk's pure parts: base64, UTF-8, escapes, the YAML of stats replies, job
// lines, server addresses. The commands themselves are tested against real servers
// (tests/cli/).
#include <string>

#include <gtest/gtest.h>

#include "cli/codec.h"
#include "cli/conn.h"
#include "cli/errors.h"
#include "cli/job.h"
#include "cli/json.h"
#include "cli/yaml.h"

namespace stalkd::cli {
namespace {

std::string AllBytes() {
  std::string s;
  for (int i = 0; i < 256; i++) s += static_cast<char>(i);
  return s;
}

TEST(CliBase64, KnownValuesAndRoundTrips) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("foob"), "Zm9vYg==");
  std::string all = AllBytes();
  for (size_t n = 0; n <= all.size(); n++) {
    EXPECT_EQ(Base64Decode(Base64Encode(all.substr(0, n))), all.substr(0, n)) << n;
  }
  EXPECT_EQ(Base64Decode("Zm8"), "fo");  // padding is optional
}

TEST(CliBase64, RejectsWhatIsNotBase64) {
  EXPECT_FALSE(Base64Decode("Zm9v!"));
  EXPECT_FALSE(Base64Decode("Z"));
  EXPECT_FALSE(Base64Decode("Zm 9v"));
}

TEST(CliUtf8, WellFormedOnly) {
  EXPECT_TRUE(IsUtf8(""));
  EXPECT_TRUE(IsUtf8("plain"));
  EXPECT_TRUE(IsUtf8("h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x98\x80"));
  EXPECT_TRUE(IsUtf8(std::string("nul\0inside", 10)));
  EXPECT_FALSE(IsUtf8("\xff"));
  EXPECT_FALSE(IsUtf8("\xc0\xaf"));          // overlong
  EXPECT_FALSE(IsUtf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(IsUtf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsUtf8("\xe2\x9c"));          // cut short
}

TEST(CliPrintable, EscapesWhatATerminalShouldNotGet) {
  EXPECT_EQ(Printable("a\tb\nc"), "a\tb\nc");
  EXPECT_EQ(Printable(std::string("\0\x1b[2J\x7f", 6)), "\\x00\\x1b[2J\\x7f");
  EXPECT_EQ(Printable("\xff\xc3\xa9"), "\\xff\xc3\xa9");
  EXPECT_EQ(Printable("back\\slash"), "back\\\\slash");
}

TEST(CliYaml, DictsOfBothVersions) {
  Dict d = ParseDict("---\nid: 5\ntube: \"a\\\"b\\\\c\\x01\"\nstate: ready\nbroken line\n");
  EXPECT_EQ(d.Number("id"), 5u);
  EXPECT_EQ(d.Get("tube"), std::string("a\"b\\c\x01"));
  EXPECT_TRUE(d.items()[1].second.quoted);
  EXPECT_EQ(d.Get("state"), "ready");
  EXPECT_FALSE(d.items()[2].second.quoted);
  EXPECT_EQ(d.items().size(), 3u);
  EXPECT_EQ(d.Number("state", 7), 7u);
  EXPECT_EQ(d.Number("missing", 9), 9u);
}

TEST(CliYaml, Lists) {
  EXPECT_EQ(ParseList("---\n- default\n- \"quoted\"\n"),
            (std::vector<std::string>{"default", "quoted"}));
  EXPECT_EQ(ParseList("---\nnext: 0\nids:\n- 1\n- 22\n"), (std::vector<std::string>{"1", "22"}));
  EXPECT_TRUE(ParseList("---\nids: []\n").empty());
}

TEST(CliJsonValue, StatsValuesKeepTheirType) {
  Dict d = ParseDict(
      "---\npid: 12\nrusage-utime: 0.001735\nversion: \"1.13\"\ndraining: false\nid: "
      "682f7d769a490bdd\nzero: 0\nos: #1 SMP\n");
  Json j;
  j.Object(d);
  EXPECT_EQ(j.text(),
            "{\"pid\":12,\"rusage-utime\":0.001735,\"version\":\"1.13\",\"draining\":false,"
            "\"id\":\"682f7d769a490bdd\",\"zero\":0,\"os\":\"#1 SMP\"}");
}

TEST(CliJobLine, RoundTripsEveryField) {
  JobRecord j;
  j.id = 42;
  j.tube = "t.x";
  j.state = "buried";
  j.pri = 4294967295u;
  j.ttr = 7;
  j.body = AllBytes();
  j.tries = 0;
  j.ttl = 100;
  j.key = "k";
  j.attrs = {{"a", "1"}, {"b-c", "x"}};
  for (bool text : {false, true}) {
    std::string line = JobToJson(j, text);
    EXPECT_NE(line.find("\"body64\""), std::string::npos);  // not UTF-8: base64 either way
    JobRecord back = JobFromJson(line);
    EXPECT_EQ(back.id, 42u);
    EXPECT_EQ(back.tube, j.tube);
    EXPECT_EQ(back.state, j.state);
    EXPECT_EQ(back.pri, j.pri);
    EXPECT_EQ(back.ttr, j.ttr);
    EXPECT_EQ(back.body, j.body);
    EXPECT_EQ(back.tries, j.tries);
    EXPECT_EQ(back.ttl, j.ttl);
    EXPECT_EQ(back.key, j.key);
    EXPECT_EQ(back.attrs, j.attrs);
  }
}

TEST(CliJobLine, TextBodiesAndDefaults) {
  JobRecord j;
  j.body = std::string("caf\xc3\xa9\0", 6);
  std::string line = JobToJson(j, true);
  EXPECT_EQ(line,
            "{\"tube\":\"default\",\"state\":\"ready\",\"pri\":1024,\"ttr\":60,\"delay\":0,"
            "\"body\":\"caf\xc3\xa9\\u0000\"}");
  EXPECT_EQ(JobFromJson(line).body, j.body);
  JobRecord d = JobFromJson("{\"body\":\"x\",\"unknown\":[1,2]}");
  EXPECT_EQ(d.tube, "default");
  EXPECT_EQ(d.state, "ready");
  EXPECT_EQ(d.pri, 1024u);
  EXPECT_EQ(d.ttr, 60u);
  EXPECT_FALSE(d.HasExtensions());
  EXPECT_EQ(JobFromJson("{\"body\":\"x\",\"delay\":30}").state, "delayed");
  EXPECT_EQ(JobFromJson("{\"body\":\"x\",\"delay\":30,\"state\":\"ready\"}").state, "ready");
}

TEST(CliJobLine, BadLinesSayWhy) {
  auto why = [](const std::string& line) {
    try {
      JobFromJson(line);
    } catch (const Failure& f) {
      EXPECT_EQ(f.code(), kExitInput);
      return std::string(f.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(why("{").find("not JSON"), std::string::npos);
  EXPECT_NE(why("{} x").find("not JSON"), std::string::npos);
  EXPECT_NE(why("[]").find("object"), std::string::npos);
  EXPECT_NE(why("{}").find("no body"), std::string::npos);
  EXPECT_NE(why("{\"body\":\"a\",\"body64\":\"YQ==\"}").find("both"), std::string::npos);
  // where and what, in words
  EXPECT_EQ(why("{\"body\":\"a\",}"),
            "not JSON at column 13: a field name in double quotes should be here (a comma too "
            "many?)");
  EXPECT_EQ(why("{\"body\":\"a\""),
            "not JSON: the line ends before the job does (a } or a \" "
            "missing?)");
  EXPECT_EQ(why("{\"body\":\"a\",\"ttr\":\"60\"}"),
            "\"ttr\" must be a whole number from 0 to 4294967295, not \"60\"");
  EXPECT_NE(why("{\"body\":\"a\",\"pri\":4294967296}").find("\"pri\""), std::string::npos);
  EXPECT_NE(why("{\"body\":\"a\",\"ttr\":\"60\"}").find("\"ttr\""), std::string::npos);
  EXPECT_NE(why("{\"body\":\"a\",\"state\":\"held\"}").find("state"), std::string::npos);
  EXPECT_NE(why("{\"body\":1}").find("string"), std::string::npos);
  EXPECT_NE(why("{\"body64\":\"***\"}").find("base64"), std::string::npos);
  EXPECT_NE(why("{\"body\":\"a\",\"attrs\":{\"x\":1}}").find("attrs.x"), std::string::npos);
}

TEST(CliAddress, Forms) {
  Address a = ParseAddress("example.com:11301");
  EXPECT_EQ(a.host, "example.com");
  EXPECT_EQ(a.port, "11301");
  a = ParseAddress("10.0.0.5");
  EXPECT_EQ(a.port, "11300");
  a = ParseAddress("[::1]:12");
  EXPECT_EQ(a.host, "::1");
  EXPECT_EQ(a.port, "12");
  a = ParseAddress("::1");
  EXPECT_EQ(a.host, "::1");
  EXPECT_EQ(a.port, "11300");
  a = ParseAddress("unix:/run/stalkd.sock");
  EXPECT_EQ(a.path, "/run/stalkd.sock");
  for (const char* bad :
       {"", "host:", "host:0", "host:65536", "host:12x", "[::1", "[::1]x", ":11300", "unix:"}) {
    EXPECT_THROW(ParseAddress(bad), Failure) << bad;
  }
}

}  // namespace
}  // namespace stalkd::cli
