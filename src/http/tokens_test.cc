#include "http/tokens.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

namespace stalkd::http {
namespace {

using Status = TokenStore::Status;

class TokenStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/stalkd-tokens-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/tokens";
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string Contents() const {
    std::ifstream in(path_, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  void Write(const std::string& text) const {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out << text;
  }
  std::string Create(TokenStore* store, std::string_view ns, std::string_view desc = "d",
                     int64_t now_s = 100) {
    std::string token, error;
    EXPECT_EQ(store->Create(ns, desc, now_s, &token, &error), Status::kOk) << error;
    return token;
  }
  // The error of opening the file as it is now ("" if it opens).
  std::string OpenError() const {
    TokenStore store;
    std::string error;
    return store.Open(path_, &error) ? "" : error;
  }

  std::string dir_;
  std::string path_;
};

TEST_F(TokenStoreTest, CreateValidWrongNamespace) {
  TokenStore store;
  std::string error;
  ASSERT_TRUE(store.Open("", &error));
  std::string token = Create(&store, "ns");
  ASSERT_EQ(token.size(), 12u + 1 + 32);
  EXPECT_EQ(token[12], '.');
  std::string_view id;
  EXPECT_TRUE(store.Valid("ns", token, &id));
  EXPECT_EQ(id, token.substr(0, 12));
  EXPECT_FALSE(store.Valid("other", token));
  EXPECT_FALSE(store.Valid("ns", token.substr(0, 12)));  // the id is not the token
  std::string wrong = token;
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  EXPECT_FALSE(store.Valid("ns", wrong));
  EXPECT_FALSE(store.Valid("ns", ""));
  EXPECT_EQ(store.Find("ns", token), token.substr(0, 12));
  EXPECT_EQ(store.Find("ns", token.substr(0, 12)), token.substr(0, 12));
  EXPECT_EQ(store.Find("other", token), "");
}

TEST_F(TokenStoreTest, DeleteByTokenAndById) {
  TokenStore store;
  std::string error;
  ASSERT_TRUE(store.Open(path_, &error)) << error;
  std::string a = Create(&store, "ns"), b = Create(&store, "ns");
  EXPECT_EQ(store.Delete("other", a, &error), Status::kNotFound);
  EXPECT_EQ(store.Delete("ns", a, &error), Status::kOk);
  EXPECT_FALSE(store.Valid("ns", a));
  EXPECT_EQ(store.Delete("ns", a, &error), Status::kNotFound);
  EXPECT_EQ(store.Delete("ns", b.substr(0, 12), &error), Status::kOk);
  EXPECT_FALSE(store.Valid("ns", b));
  EXPECT_EQ(store.size(), 0u);
  EXPECT_EQ(store.Delete("ns", "nonsense", &error), Status::kNotFound);
}

TEST_F(TokenStoreTest, TokensAreRandom) {
  TokenStore store;
  std::string error;
  ASSERT_TRUE(store.Open("", &error));
  std::set<std::string> tokens, ids;
  for (int i = 0; i < 200; i++) {
    std::string t = Create(&store, "ns");
    tokens.insert(t);
    ids.insert(t.substr(0, 12));
  }
  EXPECT_EQ(tokens.size(), 200u);
  EXPECT_EQ(ids.size(), 200u);
  EXPECT_EQ(store.List("ns").size(), 200u);
}

TEST_F(TokenStoreTest, ListIsPerNamespaceOldestFirst) {
  TokenStore store;
  std::string error;
  ASSERT_TRUE(store.Open("", &error));
  std::string a = Create(&store, "ns", "second", 20);
  std::string b = Create(&store, "ns", "first", 10);
  Create(&store, "other", "elsewhere", 5);
  std::vector<TokenInfo> list = store.List("ns");
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].id, b.substr(0, 12));
  EXPECT_EQ(list[0].description, "first");
  EXPECT_EQ(list[0].created_s, 10);
  EXPECT_EQ(list[1].id, a.substr(0, 12));
  EXPECT_TRUE(store.List("none").empty());
}

TEST_F(TokenStoreTest, TheFileHoldsNoTokenAndReloads) {
  std::string a, b, error;
  {
    TokenStore store;
    ASSERT_TRUE(store.Open(path_, &error)) << error;
    a = Create(&store, "ns", "a description with spaces, 100% \"quoted\"\nand a newline", 7);
    b = Create(&store, "ns2", "", 8);
    ASSERT_EQ(store.SetLimit("ns", a, Limit{5, -1, 60}, &error), Status::kOk) << error;
  }
  std::string text = Contents();
  EXPECT_EQ(text.find(a.substr(13)), std::string::npos) << text;
  EXPECT_EQ(text.find(b.substr(13)), std::string::npos) << text;
  EXPECT_EQ(text.find(a), std::string::npos);
  EXPECT_TRUE(text.starts_with("stalkd-tokens 1\n")) << text;
  EXPECT_NE(text.find("%25"), std::string::npos) << text;
  EXPECT_EQ(text.find("with spaces"), std::string::npos) << text;
  struct stat st;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  TokenStore again;
  ASSERT_TRUE(again.Open(path_, &error)) << error;
  EXPECT_TRUE(again.Valid("ns", a));
  EXPECT_TRUE(again.Valid("ns2", b));
  EXPECT_FALSE(again.Valid("ns", b));
  std::vector<TokenInfo> list = again.List("ns");
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].description, "a description with spaces, 100% \"quoted\"\nand a newline");
  EXPECT_EQ(list[0].created_s, 7);
  EXPECT_EQ(again.List("ns2")[0].description, "");
  const Limit* l = again.throttler().Get("ns", a.substr(0, 12));
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->read, 5);
  EXPECT_EQ(l->write, -1);
  EXPECT_EQ(l->interval_s, 60);
  EXPECT_EQ(Contents(), text);  // loading writes nothing
}

TEST_F(TokenStoreTest, OpenMakesAMissingFileAndRefusesAnUnwritablePlace) {
  TokenStore store;
  std::string error;
  ASSERT_TRUE(store.Open(path_, &error)) << error;
  EXPECT_EQ(Contents(), "stalkd-tokens 1\nend 0\n");
  TokenStore nowhere;
  EXPECT_FALSE(nowhere.Open(dir_ + "/missing/tokens", &error));
  EXPECT_NE(error.find("missing/tokens.tmp"), std::string::npos) << error;
}

TEST_F(TokenStoreTest, CorruptOrTruncatedFilesAreErrors) {
  std::string token, error;
  {
    TokenStore store;
    ASSERT_TRUE(store.Open(path_, &error)) << error;
    token = Create(&store, "ns");
    ASSERT_EQ(store.SetLimit("ns", token, Limit{1, 1, 1}, &error), Status::kOk);
  }
  const std::string good = Contents();
  ASSERT_EQ(OpenError(), "");
  // Every proper prefix is refused: the end line counts the records.
  for (size_t n = 0; n < good.size(); n++) {
    Write(good.substr(0, n));
    EXPECT_NE(OpenError(), "") << "prefix of " << n << " bytes opened";
  }
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    s.replace(at, from.size(), to);
    Write(s);
    return OpenError();
  };
  EXPECT_NE(with("stalkd-tokens 1", "stalkd-tokens 2").find("unsupported version"),
            std::string::npos);
  EXPECT_NE(with("stalkd-tokens 1", "hello").find(":1: not a stalkd token file"),
            std::string::npos);
  EXPECT_NE(with("end 2", "end 3").find(":4: the end line counts 3 records"), std::string::npos);
  EXPECT_NE(with("end 2\n", "end 2\nextra\n").find("after the end line"), std::string::npos);
  EXPECT_NE(with("limit ns", "limit nx").find("no token of its namespace"), std::string::npos);
  EXPECT_NE(with(" 1 1 1\n", " 0 0 1\n").find("can't be 0"), std::string::npos);
  EXPECT_NE(with(" ns ", " n%zz ").find("bad escape"), std::string::npos);
  EXPECT_NE(with("token ", "tokn ").find("unknown record"), std::string::npos);
  EXPECT_NE(with(" 100 ", " 1x0 ").find("bad creation time"), std::string::npos);
  EXPECT_NE(with(" d\n", " d extra\n").find("6 fields"), std::string::npos);
  std::string token_line = good.substr(good.find("token "));
  token_line = token_line.substr(0, token_line.find('\n') + 1);
  EXPECT_NE(with(token_line, token_line + token_line).find("again"), std::string::npos);
  Write("\x01\x02\xff garbage");
  EXPECT_NE(OpenError(), "");
  Write("");
  EXPECT_NE(OpenError().find("empty file"), std::string::npos);
}

TEST_F(TokenStoreTest, AFailedWriteChangesNothing) {
  TokenStore store;
  std::string error;
  ASSERT_TRUE(store.Open(path_, &error)) << error;
  std::string a = Create(&store, "ns");
  const std::string before = Contents();
  // The temporary file cannot be made (a directory is in its place; this holds for root
  // too, unlike permissions).
  ASSERT_EQ(mkdir((path_ + ".tmp").c_str(), 0700), 0);
  std::string token = "unchanged";
  EXPECT_EQ(store.Create("ns", "x", 1, &token, &error), Status::kFailed);
  EXPECT_NE(error.find("tokens.tmp"), std::string::npos) << error;
  EXPECT_EQ(token, "unchanged");
  EXPECT_EQ(store.Delete("ns", a, &error), Status::kFailed);
  EXPECT_EQ(store.SetLimit("ns", a, Limit{1, 1, 1}, &error), Status::kFailed);
  EXPECT_TRUE(store.Valid("ns", a));
  EXPECT_EQ(store.List("ns").size(), 1u);
  EXPECT_EQ(store.throttler().Get("ns", a.substr(0, 12)), nullptr);
  EXPECT_EQ(Contents(), before);
  // Once writable again, changes go through and the stray directory is no obstacle left.
  ASSERT_EQ(rmdir((path_ + ".tmp").c_str()), 0);
  EXPECT_EQ(store.Delete("ns", a, &error), Status::kOk);
  EXPECT_NE(Contents(), before);
}

TEST_F(TokenStoreTest, AnUnwritableDirectoryFailsCreate) {
  if (geteuid() == 0) GTEST_SKIP() << "root writes anywhere";
  TokenStore store;
  std::string error;
  ASSERT_TRUE(store.Open(path_, &error)) << error;
  ASSERT_EQ(chmod(dir_.c_str(), 0500), 0);
  std::string token;
  EXPECT_EQ(store.Create("ns", "x", 1, &token, &error), Status::kFailed);
  EXPECT_EQ(store.size(), 0u);
  chmod(dir_.c_str(), 0700);
}

TEST_F(TokenStoreTest, LimitsBelongToTokensAndGoWithThem) {
  TokenStore store;
  std::string error;
  ASSERT_TRUE(store.Open(path_, &error)) << error;
  std::string a = Create(&store, "ns");
  std::string id = a.substr(0, 12);
  EXPECT_EQ(store.SetLimit("ns", "000000000000", Limit{1, 1, 1}, &error), Status::kNotFound);
  EXPECT_EQ(store.SetLimit("other", a, Limit{1, 1, 1}, &error), Status::kNotFound);
  EXPECT_EQ(store.SetLimit("ns", a, Limit{0, 0, 1}, &error), Status::kInvalid);
  EXPECT_EQ(error, "the read and write of limiter can't be 0 at the same time");
  ASSERT_EQ(store.SetLimit("ns", id, Limit{1, 0, 60}, &error), Status::kOk);
  EXPECT_TRUE(store.throttler().Allow("ns", id, Kind::kConsume, kSecond));
  EXPECT_FALSE(store.throttler().Allow("ns", id, Kind::kConsume, kSecond));
  EXPECT_EQ(store.RemoveLimit("ns", a, &error), Status::kOk);
  EXPECT_TRUE(store.throttler().Allow("ns", id, Kind::kConsume, kSecond));
  EXPECT_EQ(store.RemoveLimit("ns", a, &error), Status::kOk);  // none: nothing to do
  ASSERT_EQ(store.SetLimit("ns", a, Limit{1, 0, 60}, &error), Status::kOk);
  ASSERT_EQ(store.Delete("ns", id, &error), Status::kOk);
  EXPECT_EQ(store.throttler().size(), 0u);
  TokenStore again;
  ASSERT_TRUE(again.Open(path_, &error)) << error;
  EXPECT_EQ(again.throttler().size(), 0u);
}

TEST_F(TokenStoreTest, ChosenTokensArePerNamespaceAndSurviveReload) {
  std::string error;
  {
    TokenStore store;
    ASSERT_TRUE(store.Open(path_, &error)) << error;
    const std::string mine = "lmstfy-token-0123456789";
    ASSERT_EQ(store.CreateChosen("ns", "d", 1, mine, &error), Status::kOk) << error;
    EXPECT_EQ(store.CreateChosen("ns", "d", 1, mine, &error), Status::kExists);
    // The same token in another namespace is another token, with another id.
    ASSERT_EQ(store.CreateChosen("other", "d", 1, mine, &error), Status::kOk) << error;
    std::string_view id_ns, id_other;
    ASSERT_TRUE(store.Valid("ns", mine, &id_ns));
    ASSERT_TRUE(store.Valid("other", mine, &id_other));
    EXPECT_NE(id_ns, id_other);
    EXPECT_EQ(store.Find("ns", mine), id_ns);
    // Deleted by the token itself (it has no "<id>." form).
    EXPECT_EQ(store.Delete("ns", mine, &error), Status::kOk) << error;
    EXPECT_FALSE(store.Valid("ns", mine));
    EXPECT_TRUE(store.Valid("other", mine));
  }
  TokenStore reloaded;
  ASSERT_TRUE(reloaded.Open(path_, &error)) << error;
  EXPECT_TRUE(reloaded.Valid("other", "lmstfy-token-0123456789"));
  EXPECT_FALSE(reloaded.Valid("ns", "lmstfy-token-0123456789"));
}

// A chosen token's id is random: one derived from the token (its SHA-256, as before) would
// let whoever can list ids test guesses of a weak chosen token offline.
TEST_F(TokenStoreTest, AChosenTokensIdIsRandom) {
  const std::string mine = "lmstfy-token-0123456789";
  const std::string derived = "1ce9687027e9";  // sha256("ns\n" + mine), its first 12 hex digits
  std::set<std::string> ids;
  for (int i = 0; i < 2; i++) {
    TokenStore store;
    std::string error;
    ASSERT_EQ(store.CreateChosen("ns", "d", 1, mine, &error), Status::kOk) << error;
    std::string_view id;
    ASSERT_TRUE(store.Valid("ns", mine, &id));
    EXPECT_EQ(id.size(), 12u);
    EXPECT_NE(id, derived);
    ids.emplace(id);
  }
  EXPECT_EQ(ids.size(), 2u);  // two stores, two ids
}

// A file written when chosen tokens' ids were derived from them loads as it is.
TEST_F(TokenStoreTest, AFileWithADerivedIdLoads) {
  const std::string mine = "lmstfy-token-0123456789";
  Write(
      "stalkd-tokens 1\ntoken 1ce9687027e9 7 "
      "1ce9687027e99d19b33b334fc7c630b0ad2b96eec685538799977d69f3f14a5d ns d\nlimit ns "
      "1ce9687027e9 1 0 60\nend 2\n");
  TokenStore store;
  std::string error;
  ASSERT_TRUE(store.Open(path_, &error)) << error;
  std::string_view id;
  ASSERT_TRUE(store.Valid("ns", mine, &id));
  EXPECT_EQ(id, "1ce9687027e9");
  EXPECT_NE(store.throttler().Get("ns", id), nullptr);
  EXPECT_EQ(store.Delete("ns", "1ce9687027e9", &error), Status::kOk) << error;
  EXPECT_FALSE(store.Valid("ns", mine));
}

}  // namespace
}  // namespace stalkd::http
