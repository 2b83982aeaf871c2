// `auth` and the namespace rules (auth.cc), on the in-memory store answering at once and
// through DeferredStore answering every call late (as the Redis store does).
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "protocol/conversation.h"
#include "store/deferred_store.h"
#include "store/memory_store.h"

namespace stalkd::protocol {
namespace {

using command::Identity;

class StubHost final : public command::Host {
 public:
  command::HostStats CurrentStats() const override { return {}; }
};

// Tokens "<ns>.<n>" of namespace ns, "ns:token" for the two-word form, one admin account
// "root:pw"; a put limit per namespace.
class FakeAuthenticator final : public command::Authenticator {
 public:
  bool Authenticate(std::string_view ns, std::string_view credential,
                    Identity* who) const override {
    if (ns.empty() && credential == "root:pw") {
      *who = {Identity::Kind::kAdmin, {}, "root"};
      return true;
    }
    std::string key =
        ns.empty() ? std::string(credential) : std::string(ns) + ":" + std::string(credential);
    auto it = tokens.find(key);
    if (it == tokens.end()) return false;
    *who = {Identity::Kind::kNamespace, it->second, key};
    return true;
  }
  bool StillValid(const Identity& who) const override {
    return !who.scoped() || who.certificate || tokens.count(who.name) > 0;
  }
  bool AllowPut(const Identity& who) override {
    auto it = puts_left.find(who.ns);
    if (it == puts_left.end()) return true;
    if (it->second == 0) return false;
    it->second--;
    return true;
  }

  std::map<std::string, std::string> tokens{
      {"a.1", "a"}, {"b.1", "b"}, {"a:chosen", "a"}};  // credential -> namespace
  std::map<std::string, int> puts_left;
};

struct Client final : command::Client {
  Client(command::Store& store, const command::AuthPolicy& p) : conv(store, p, *this) {}
  void OnResult(const command::Result& r) override { conv.OnResult(r); }
  Conversation conv;
};

class AuthTest : public ::testing::TestWithParam<bool> {
 protected:
  AuthTest() : memory_(clock_, {}, &host_), deferred_(memory_) { policy_.authenticator = &auth_; }
  ~AuthTest() override { clients_.clear(); }
  command::Store& store() { return GetParam() ? static_cast<command::Store&>(deferred_) : memory_; }

  Client& NewClient() {
    clients_.push_back(std::make_unique<Client>(store(), policy_));
    return *clients_.back();
  }
  // Sends bytes and runs everything (late results included) until nothing moves.
  std::string Do(Client& c, std::string_view in) {
    Conversation& conv = c.conv;
    char* p = conv.PrepareInput(in.size());
    std::memcpy(p, in.data(), in.size());
    conv.CommitInput(in.size());
    for (int round = 0; round < 10000; round++) {
      for (auto& x : clients_) x->conv.Run(1000);
      store().Tick();
      bool moving = deferred_.Busy();
      for (auto& x : clients_) moving |= x->conv.runnable();
      if (!moving) break;
    }
    std::string out = conv.output();
    conv.output().clear();
    return out;
  }

  FakeClock clock_;
  StubHost host_;
  store::MemoryStore memory_;
  store::DeferredStore deferred_;
  FakeAuthenticator auth_;
  command::AuthPolicy policy_;
  std::vector<std::unique_ptr<Client>> clients_;
};

TEST_P(AuthTest, WithoutAuthNothingChanges) {
  Client& c = NewClient();
  EXPECT_EQ(Do(c, "use x\r\nput 0 0 1 1\r\nz\r\nlist-tubes\r\n"),
            "USING x\r\nINSERTED 1\r\nOK 18\r\n---\n- default\n- x\n\r\n");
  EXPECT_EQ(c.conv.identity(), nullptr);
}

TEST_P(AuthTest, AuthWithoutTokenStoreIsUnknown) {
  command::AuthPolicy none;
  Client c(store(), none);
  clients_.clear();
  std::string line = "auth a.1\r\n";
  std::memcpy(c.conv.PrepareInput(line.size()), line.data(), line.size());
  c.conv.CommitInput(line.size());
  c.conv.Run(10);
  EXPECT_EQ(c.conv.output(), "UNKNOWN_COMMAND\r\n");
}

// A TLS client certificate's identity (ProvenBy): the same set-up as `auth`, no reply.
TEST_P(AuthTest, CertificateIdentityStartsAuthenticatedWithoutAReply) {
  Client& c = NewClient();
  Identity who{Identity::Kind::kNamespace, "a", "CN=w"};
  who.certificate = true;
  c.conv.ProvenBy(who);
  EXPECT_EQ(Do(c, "list-tube-used\r\nlist-tubes-watched\r\nuse b/q\r\n"),
            "USING a/default\r\nOK 16\r\n---\n- a/default\n\r\nFORBIDDEN\r\n");
  ASSERT_NE(c.conv.identity(), nullptr);
  EXPECT_EQ(c.conv.identity()->ns, "a");
  // `auth` still replaces it.
  EXPECT_EQ(Do(c, "auth b.1\r\nlist-tube-used\r\n"), "AUTHENTICATED\r\nUSING b/default\r\n");

  Client& admin = NewClient();
  admin.conv.ProvenBy({Identity::Kind::kAdmin, {}, "CN=ops", true});
  EXPECT_EQ(Do(admin, "use b/q\r\n"), "USING b/q\r\n");
  EXPECT_FALSE(admin.conv.identity()->scoped());
}

TEST_P(AuthTest, BadTokensAndForms) {
  Client& c = NewClient();
  EXPECT_EQ(Do(c, "auth nope\r\n"), "UNAUTHORIZED\r\n");
  EXPECT_EQ(Do(c, "auth b chosen\r\n"), "UNAUTHORIZED\r\n");  // a's token, not b's
  EXPECT_EQ(Do(c, "auth\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(Do(c, "auth a b c\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(Do(c, "authx\r\n"), "UNKNOWN_COMMAND\r\n");
  EXPECT_EQ(c.conv.identity(), nullptr);
  EXPECT_EQ(Do(c, "auth a chosen\r\n"), "AUTHENTICATED\r\n");
  ASSERT_NE(c.conv.identity(), nullptr);
  EXPECT_EQ(c.conv.identity()->ns, "a");
}

TEST_P(AuthTest, NamespaceTooLongForATubeName) {
  auth_.tokens["long.1"] = std::string(195, 'n');  // "<ns>/default" is 203 bytes
  Client& c = NewClient();
  EXPECT_EQ(Do(c, "auth long.1\r\n"), "BAD_FORMAT\r\n");
  EXPECT_EQ(c.conv.identity(), nullptr);
  EXPECT_EQ(Do(c, "list-tube-used\r\n"), "USING default\r\n");
}

TEST_P(AuthTest, NamespaceTubes) {
  Client& c = NewClient();
  EXPECT_EQ(Do(c, "use zz\r\nauth a.1\r\n"), "USING zz\r\nAUTHENTICATED\r\n");
  // The used and watched tube is the namespace's "default", and nothing else is watched.
  EXPECT_EQ(Do(c, "list-tube-used\r\n"), "USING a/default\r\n");
  EXPECT_EQ(Do(c, "list-tubes-watched\r\n"), "OK 16\r\n---\n- a/default\n\r\n");
  for (const char* cmd : {"use b/q", "watch b/q", "ignore default", "stats-tube b/q",
                          "pause-tube b/q 1", "purge b/q ready", "list-jobs b/q ready 0 1",
                          "tube-tries b/q 1", "use a", "use a/", "use ab/q"}) {
    EXPECT_EQ(Do(c, std::string(cmd) + "\r\n"), "FORBIDDEN\r\n") << cmd;
  }
  EXPECT_EQ(Do(c, "use a/q\r\nwatch a/q\r\nignore a/default\r\n"),
            "USING a/q\r\nWATCHING 2\r\nWATCHING 1\r\n");
  EXPECT_EQ(Do(c, "put 0 0 1 1\r\nx\r\nreserve-with-timeout 0\r\n"),
            "INSERTED 1\r\nRESERVED 1 1\r\nx\r\n");
}

TEST_P(AuthTest, OtherNamespacesJobsDoNotExist) {
  Client& b = NewClient();
  Client& a = NewClient();
  EXPECT_EQ(Do(b, "auth b.1\r\nput 0 0 100 2\r\nhi\r\nput 0 0 100 2\r\nho\r\n"),
            "AUTHENTICATED\r\nINSERTED 1\r\nINSERTED 2\r\n");
  EXPECT_EQ(Do(a, "auth a.1\r\nput 0 0 100 1\r\nx\r\n"), "AUTHENTICATED\r\nINSERTED 3\r\n");
  for (const char* cmd : {"peek 1", "delete 1", "release 1 0 0", "bury 1 0", "touch 1",
                          "kick-job 1", "stats-job 1", "stats-job-ext 1", "reserve-job 1"}) {
    // Exactly what a job that does not exist gets.
    EXPECT_EQ(Do(a, std::string(cmd) + "\r\n"), "NOT_FOUND\r\n") << cmd;
    EXPECT_EQ(Do(a, std::string(cmd).replace(std::string(cmd).find(" 1"), 2, " 99") + "\r\n"),
              "NOT_FOUND\r\n")
        << cmd;
  }
  // Counted as commands on missing jobs are: cmd-delete went up by 2 (ids 1 and 99).
  EXPECT_EQ(memory_.count(command::Verb::kDelete), 2u);
  uint64_t many = memory_.count(command::Verb::kDeleteMany);
  EXPECT_EQ(Do(a, "delete-many 1 2 3 99\r\n"), "DELETED-MANY 1\r\n");
  EXPECT_EQ(Do(a, "delete-many 1 2\r\n"), "DELETED-MANY 0\r\n");
  EXPECT_EQ(memory_.count(command::Verb::kDeleteMany), many + 2);
  EXPECT_EQ(Do(a, "peek-ready\r\n"), "NOT_FOUND\r\n");  // a/default is empty now
  // b's jobs are all still there.
  EXPECT_EQ(Do(b, "peek 1\r\npeek 2\r\n"), "FOUND 1 2\r\nhi\r\nFOUND 2 2\r\nho\r\n");
  // list-tubes shows a namespace its own tubes only.
  EXPECT_EQ(Do(a, "list-tubes\r\n"), "OK 16\r\n---\n- a/default\n\r\n");
  EXPECT_EQ(Do(a, "stats-tube b/default\r\n"), "FORBIDDEN\r\n");
}

TEST_P(AuthTest, AdminSeesEverything) {
  Client& b = NewClient();
  Client& root = NewClient();
  EXPECT_EQ(Do(b, "auth b.1\r\nput 0 0 100 2\r\nhi\r\n"), "AUTHENTICATED\r\nINSERTED 1\r\n");
  EXPECT_EQ(Do(root, "auth root:pw\r\n"), "AUTHENTICATED\r\n");
  EXPECT_EQ(Do(root, "list-tube-used\r\npeek 1\r\nuse b/default\r\n"),
            "USING default\r\nFOUND 1 2\r\nhi\r\nUSING b/default\r\n");
  EXPECT_FALSE(root.conv.identity()->scoped());
}

TEST_P(AuthTest, RequireAuth) {
  policy_.require = true;
  Client& c = NewClient();
  for (const char* cmd : {"stats", "list-tubes", "use x", "reserve-with-timeout 0", "peek 1"}) {
    EXPECT_EQ(Do(c, std::string(cmd) + "\r\n"), "UNAUTHORIZED\r\n") << cmd;
  }
  // A put's body (put-ext's, put-many's block) is skipped, not read as commands.
  EXPECT_EQ(Do(c, "put 0 0 1 5\r\nstats\r\n"), "UNAUTHORIZED\r\n");
  EXPECT_EQ(Do(c, "put-ext 0 0 1 5 ttl=3\r\nstats\r\n"), "UNAUTHORIZED\r\n");
  EXPECT_EQ(Do(c, "put-many 1 13\r\n0 0 1 2\r\nhi\r\n\r\n"), "UNAUTHORIZED\r\n");
  EXPECT_EQ(Do(c, "bogus\r\n"), "UNKNOWN_COMMAND\r\n");
  EXPECT_EQ(Do(c, "auth a.1\r\nput 0 0 1 1\r\nx\r\n"), "AUTHENTICATED\r\nINSERTED 1\r\n");
  EXPECT_EQ(Do(c, "quit\r\n"), "");
  EXPECT_TRUE(c.conv.closing());
}

TEST_P(AuthTest, DeletedTokenEndsTheIdentity) {
  Client& c = NewClient();
  EXPECT_EQ(Do(c, "auth a.1\r\nput 0 0 1 1\r\nx\r\n"), "AUTHENTICATED\r\nINSERTED 1\r\n");
  auth_.tokens.erase("a.1");
  // Not back to anonymous (that would see every tube): refused until auth succeeds again.
  EXPECT_EQ(Do(c, "list-tubes\r\n"), "UNAUTHORIZED\r\n");
  EXPECT_EQ(Do(c, "put 0 0 1 1\r\nx\r\n"), "UNAUTHORIZED\r\n");
  EXPECT_EQ(c.conv.identity(), nullptr);
  EXPECT_EQ(Do(c, "auth a.1\r\n"), "UNAUTHORIZED\r\n");
  EXPECT_EQ(Do(c, "auth a chosen\r\npeek 1\r\n"), "AUTHENTICATED\r\nFOUND 1 1\r\nx\r\n");
}

TEST_P(AuthTest, PutRateLimit) {
  auth_.puts_left["a"] = 2;
  Client& c = NewClient();
  EXPECT_EQ(Do(c, "auth a.1\r\nput 0 0 1 1\r\nx\r\nput-ext 0 0 1 1\r\ny\r\n"),
            "AUTHENTICATED\r\nINSERTED 1\r\nINSERTED 2\r\n");
  EXPECT_EQ(Do(c, "put 0 0 1 1\r\nx\r\nput-many 1 13\r\n0 0 1 2\r\nhi\r\n\r\n"),
            "RATE_LIMITED\r\nRATE_LIMITED\r\n");
  EXPECT_EQ(Do(c, "stats-tube a/default\r\n").find("current-jobs-ready: 2\n") != std::string::npos,
            true);
}

INSTANTIATE_TEST_SUITE_P(Stores, AuthTest, ::testing::Bool(),
                         [](const auto& p) { return p.param ? "Deferred" : "Memory"; });

}  // namespace
}  // namespace stalkd::protocol
