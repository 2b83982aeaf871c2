#include "redis/link.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "base/clock.h"
#include "net/event_loop.h"
#include "redis/resp.h"
#include "redis/test_servers.h"

namespace stalkd::redis {
namespace {

using test::Call;
using test::FreePort;
using test::kMs;
using test::Server;
using test::Sleep;
using test::WaitUntil;

// Sets the link ready after one setup command (PING), unless told to leave that to the test.
class TestListener final : public Link::Listener {
 public:
  void OnConnected() override {
    connected++;
    if (!auto_ready) return;
    link->SendSetup({"PING"}, [this](const Reply& r) {
      if (r.str == "PONG") link->SetReady();
    });
  }
  void OnLost(std::string_view why) override { lost.emplace_back(why); }
  void OnMessage(std::string_view channel, std::string_view message) override {
    messages.emplace_back(channel, message);
  }

  Link* link = nullptr;
  bool auto_ready = true;
  int connected = 0;
  std::vector<std::string> lost;
  std::vector<std::pair<std::string, std::string>> messages;
};

class LinkTest : public test::LinkFixture<Link, TestListener> {
 protected:
  // Sends one command and runs until its reply.
  Reply Roundtrip(std::initializer_list<std::string_view> argv) {
    auto out = std::make_shared<std::pair<bool, Reply>>(
        false, Reply{Reply::Type::kLost, 0, "no reply in time", {}});
    link_->Send(argv, [out](const Reply& r) { *out = {true, r}; });
    link_->Flush();
    EXPECT_TRUE(RunUntil([&] { return out->first; })) << "no reply in time";
    return out->second;
  }
};

TEST(LinkUrl, ParsesRedisAndSentinelUrls) {
  StoreUrl u;
  std::string error;
  ASSERT_TRUE(ParseStoreUrl("redis://127.0.0.1:6380/3", &u, &error)) << error;
  EXPECT_EQ(u.kind, StoreUrl::Kind::kRedis);
  ASSERT_EQ(u.endpoints.size(), 1u);
  EXPECT_EQ(u.endpoints[0].host, "127.0.0.1");
  EXPECT_EQ(u.endpoints[0].port, 6380);
  EXPECT_EQ(u.db, 3);
  ASSERT_TRUE(ParseStoreUrl("redis://localhost", &u, &error)) << error;
  EXPECT_EQ(u.endpoints[0].host, "127.0.0.1");
  EXPECT_EQ(u.endpoints[0].port, 6379);
  EXPECT_EQ(u.db, 0);
  ASSERT_TRUE(ParseStoreUrl("redis-sentinel://10.0.0.1:26379,localhost/jobs", &u, &error));
  EXPECT_EQ(u.kind, StoreUrl::Kind::kSentinel);
  ASSERT_EQ(u.endpoints.size(), 2u);
  EXPECT_EQ(u.endpoints[0].host, "10.0.0.1");
  EXPECT_EQ(u.endpoints[1].host, "127.0.0.1");
  EXPECT_EQ(u.endpoints[1].port, 26379);
  EXPECT_EQ(u.master_name, "jobs");
}

TEST(LinkUrl, ParsesClusterUrls) {
  StoreUrl u;
  std::string error;
  ASSERT_TRUE(ParseStoreUrl("redis-cluster://10.0.0.1:7000,localhost", &u, &error)) << error;
  EXPECT_EQ(u.kind, StoreUrl::Kind::kCluster);
  ASSERT_EQ(u.endpoints.size(), 2u);
  EXPECT_EQ(u.endpoints[0].host, "10.0.0.1");
  EXPECT_EQ(u.endpoints[0].port, 7000);
  EXPECT_EQ(u.endpoints[1].host, "127.0.0.1");
  EXPECT_EQ(u.endpoints[1].port, 6379);
  EXPECT_EQ(u.db, 0);
  ASSERT_TRUE(ParseStoreUrl("redis-cluster://127.0.0.1:7001/0", &u, &error)) << error;
  EXPECT_EQ(u.kind, StoreUrl::Kind::kCluster);
  ASSERT_EQ(u.endpoints.size(), 1u);
  EXPECT_EQ(u.endpoints[0].port, 7001);
}

TEST(LinkUrl, TakesCredentialsAndNeverRepeatsThePassword) {
  StoreUrl u;
  std::string error;
  ASSERT_TRUE(ParseStoreUrl("redis://stalkd:s%40cr%3At@127.0.0.1:6380/2", &u, &error)) << error;
  EXPECT_EQ(u.auth.user, "stalkd");
  EXPECT_EQ(u.auth.password, "s@cr:t");
  EXPECT_EQ(u.endpoints[0].port, 6380);
  EXPECT_EQ(u.db, 2);
  ASSERT_TRUE(ParseStoreUrl("redis://:pw@localhost", &u, &error)) << error;
  EXPECT_EQ(u.auth.user, "");
  EXPECT_EQ(u.auth.password, "pw");
  ASSERT_TRUE(ParseStoreUrl("redis-sentinel://app@10.0.0.1,10.0.0.2/jobs", &u, &error));
  EXPECT_EQ(u.auth.user, "app");
  EXPECT_EQ(u.auth.password, "");
  ASSERT_EQ(u.endpoints.size(), 2u);
  EXPECT_EQ(u.master_name, "jobs");
  ASSERT_TRUE(ParseStoreUrl("redis-cluster://u:p@ss@127.0.0.1:7000", &u, &error));
  EXPECT_EQ(u.auth.password, "p@ss");  // the last '@' of the authority ends them
  ASSERT_TRUE(ParseStoreUrl("redis://127.0.0.1", &u, &error));
  EXPECT_EQ(u.auth.user + u.auth.password, "");
  // Errors show the URL without its credentials; logs show it redacted.
  EXPECT_FALSE(ParseStoreUrl("redis://u:hunter2@127.0.0.1:x", &u, &error));
  EXPECT_EQ(error.find("hunter2"), std::string::npos) << error;
  EXPECT_NE(error.find("not a port"), std::string::npos) << error;
  EXPECT_FALSE(ParseStoreUrl("redis://u:hunter2@10.0.0.1:1,10.0.0.2:2", &u, &error));
  EXPECT_EQ(error.find("hunter2"), std::string::npos) << error;
  EXPECT_EQ(RedactStoreUrl("redis://u:hunter2@127.0.0.1:6379/1"), "redis://u:***@127.0.0.1:6379/1");
  EXPECT_EQ(RedactStoreUrl("redis://:x@127.0.0.1"), "redis://:***@127.0.0.1");
  EXPECT_EQ(RedactStoreUrl("redis://u@127.0.0.1"), "redis://u@127.0.0.1");
  EXPECT_EQ(RedactStoreUrl("redis-sentinel://10.0.0.1/m"), "redis-sentinel://10.0.0.1/m");
}

TEST(LinkUrl, RejectsMalformedUrlsSayingWhy) {
  struct Case {
    const char* url;
    const char* says;
  } cases[] = {
      {"http://127.0.0.1:6379", "none of redis[s]://"},
      {"redis://", "names no host"},
      {"redis://127.0.0.1:0", "not a port"},
      {"redis://127.0.0.1:65536", "not a port"},
      {"redis://127.0.0.1:x", "not a port"},
      {"redis://redis.example.com:6379", "not a numeric IPv4 address"},
      {"redis://[::1]:6379", "IPv6"},
      {"redis://127.0.0.1:6379/x", "not a database number"},
      {"redis://u:p%4@127.0.0.1:6379", "%XX"},
      {"redis://127.0.0.1:6379?timeout=1", "options"},
      {"redis://127.0.0.1:6379,127.0.0.1:6380", "one server"},
      {"redis-sentinel://127.0.0.1:26379", "names no master"},
      {"redis-sentinel://127.0.0.1:26379/", "names no master"},
      {"redis-sentinel://127.0.0.1:26379,nowhere/m", "not a numeric IPv4 address"},
      {"redis-cluster://", "names no host"},
      {"redis-cluster://127.0.0.1:7000/1", "database 0 only"},
      {"redis-cluster://127.0.0.1:7000,127.0.0.1:x", "not a port"},
      {"redis-cluster://127.0.0.1:7000?x=1", "options"},
  };
  for (const Case& c : cases) {
    StoreUrl u;
    std::string error;
    EXPECT_FALSE(ParseStoreUrl(c.url, &u, &error)) << c.url;
    EXPECT_TRUE(error.starts_with("--store: ")) << error;
    EXPECT_NE(error.find(c.says), std::string::npos) << c.url << " → " << error;
  }
}

TEST_F(LinkTest, PipelinedCommandsAnswerInOrder) {
  Server redis;
  redis.Start();
  Open("redis://" + redis.address());
  ASSERT_TRUE(RunUntil([&] { return link_->ready(); }));
  EXPECT_EQ(link_->master(), redis.address());
  EXPECT_EQ(link_->why_not_ready(), "");
  constexpr int kCommands = 2000;
  std::vector<int64_t> got;
  for (int i = 0; i < kCommands; i++) {
    link_->Send({"INCR", "counter"}, [&](const Reply& r) {
      EXPECT_EQ(r.type, Reply::Type::kInteger);
      got.push_back(r.integer);
    });
  }
  EXPECT_TRUE(got.empty());  // no callback inside Send
  EXPECT_EQ(link_->in_flight(), static_cast<size_t>(kCommands));
  link_->Flush();
  ASSERT_TRUE(RunUntil([&] { return got.size() == kCommands; }));
  for (int i = 0; i < kCommands; i++) ASSERT_EQ(got[i], i + 1);
  EXPECT_EQ(link_->in_flight(), 0u);
  EXPECT_EQ(listener_.connected, 1);
  EXPECT_TRUE(listener_.lost.empty());
}

TEST_F(LinkTest, LargeValueRoundTrip) {
  Server redis;
  redis.Start();
  Open("redis://" + redis.address());
  ASSERT_TRUE(RunUntil([&] { return link_->ready(); }));
  std::string big(20 << 20, '\0');
  for (size_t i = 0; i < big.size(); i++) big[i] = static_cast<char>(i * 7 + i / 4096);
  Nanos start = clock_.Now();
  EXPECT_EQ(Roundtrip({"SET", "big", big}).str, "OK");
  Reply r = Roundtrip({"GET", "big"});
  ASSERT_EQ(r.type, Reply::Type::kString);
  EXPECT_TRUE(r.str == big);
  EXPECT_EQ(Roundtrip({"STRLEN", "big"}).integer, 20 << 20);
  std::printf("20 MiB SET + GET: %lld ms\n", static_cast<long long>((clock_.Now() - start) / kMs));
}

TEST_F(LinkTest, ArgumentsAndRepliesAreBinarySafe) {
  Server redis;
  redis.Start();
  Open("redis://" + redis.address());
  ASSERT_TRUE(RunUntil([&] { return link_->ready(); }));
  const std::string key("k\0\r\n*1\r\n", 8);
  const std::string value("\0$3\r\nabc\r\n\0\xff", 13);
  EXPECT_EQ(Roundtrip({"SET", key, value}).str, "OK");
  Reply r = Roundtrip({"GET", key});
  EXPECT_EQ(r.type, Reply::Type::kString);
  EXPECT_EQ(r.str, value);
  EXPECT_EQ(Roundtrip({"STRLEN", key}).integer, 13);
  EXPECT_EQ(Roundtrip({"GET", "k"}).type, Reply::Type::kNil);  // the key is not cut at NUL
  Reply e = Roundtrip({"NOSUCHCOMMAND"});
  EXPECT_EQ(e.type, Reply::Type::kError);
  EXPECT_TRUE(e.ErrorIs("ERR")) << e.str;
  Reply a = Roundtrip({"RPUSH", "list", "a", std::string("\0", 1), ""});
  EXPECT_EQ(a.integer, 3);
  a = Roundtrip({"LRANGE", "list", "0", "-1"});
  ASSERT_EQ(a.type, Reply::Type::kArray);
  ASSERT_EQ(a.elements.size(), 3u);
  EXPECT_EQ(a.elements[1].str, std::string("\0", 1));
  EXPECT_EQ(a.elements[2].str, "");
}

TEST_F(LinkTest, InFlightCommandsLostWhenServerKilledThenReconnects) {
  Server redis;
  redis.Start();
  Open("redis://" + redis.address());
  ASSERT_TRUE(RunUntil([&] { return link_->ready(); }));
  std::vector<Reply> replies;
  auto keep = [&](const Reply& r) { replies.push_back(r); };
  link_->Send({"PING"}, keep);
  link_->Send({"BLPOP", "nothing", "0"}, keep);  // blocks: in flight when the server dies
  link_->Flush();
  ASSERT_TRUE(RunUntil([&] { return replies.size() == 1; }));
  redis.Kill();
  // Written to a dead connection before the loop has seen it die: the write error is
  // reported by the loop, not by Send or Flush.
  link_->Send({"PING"}, keep);
  link_->Flush();
  link_->Send({"PING"}, keep);
  link_->Flush();
  EXPECT_EQ(replies.size(), 1u);
  ASSERT_TRUE(RunUntil([&] { return replies.size() == 4; }));
  for (size_t i = 1; i < 4; i++) {
    EXPECT_EQ(replies[i].type, Reply::Type::kLost);
    EXPECT_TRUE(replies[i].error());
    EXPECT_TRUE(replies[i].str.starts_with("connection lost, fate unknown: ")) << replies[i].str;
  }
  ASSERT_TRUE(RunUntil([&] { return !listener_.lost.empty(); }));
  EXPECT_EQ(listener_.lost.size(), 1u);
  EXPECT_FALSE(link_->ready());
  EXPECT_EQ(link_->master(), "");

  // Sent while down: waits, then goes out once the server is back on its port.
  link_->Send({"SET", "after", "1"}, keep);
  link_->Flush();
  RunFor(100 * kMs);
  EXPECT_EQ(replies.size(), 4u);
  EXPECT_EQ(link_->in_flight(), 1u);
  redis.Start();
  ASSERT_TRUE(RunUntil([&] { return replies.size() == 5; }));
  EXPECT_EQ(replies[4].str, "OK");
  EXPECT_TRUE(link_->ready());
  EXPECT_EQ(listener_.connected, 2);
  EXPECT_EQ(listener_.lost.size(), 1u);
  EXPECT_EQ(Roundtrip({"GET", "after"}).str, "1");
}

TEST_F(LinkTest, CommandsQueuedBeforeReadyAreSentAfterSetReady) {
  Server redis;
  redis.Start();
  listener_.auto_ready = false;
  Open("redis://" + redis.address() + "/2");
  std::vector<std::string> order;
  link_->Send({"SET", "q", "queued"}, [&](const Reply& r) { order.push_back("queued " + r.str); });
  link_->Send({"GET", "q"}, [&](const Reply& r) { order.push_back("get " + r.str); });
  ASSERT_TRUE(RunUntil([&] { return listener_.connected == 1; }));
  RunFor(50 * kMs);
  EXPECT_TRUE(order.empty());
  EXPECT_EQ(Call(redis.port(), {"EXISTS", "q"}, 2).integer, 0);  // not sent yet
  EXPECT_EQ(link_->in_flight(), 2u);
  link_->SendSetup({"SET", "q", "setup"}, [&](const Reply& r) {
    order.push_back("setup " + r.str);
    link_->SetReady();
  });
  ASSERT_TRUE(RunUntil([&] { return order.size() == 3; }));
  EXPECT_EQ(order, (std::vector<std::string>{"setup OK", "queued OK", "get queued"}));
  // The db of the URL was selected.
  EXPECT_EQ(Call(redis.port(), {"GET", "q"}, 2).str, "queued");
  EXPECT_EQ(Call(redis.port(), {"EXISTS", "q"}).integer, 0);
}

// Reset and SendSetup call nothing back from inside: the kLost and OnLost they cause come
// from the dispatch or Poll that follows.
TEST_F(LinkTest, ResetDuringSetupReconnectsAndCallsBackLater) {
  Server redis;
  redis.Start();
  listener_.auto_ready = false;
  Open("redis://" + redis.address());
  ASSERT_TRUE(RunUntil([&] { return listener_.connected == 1; }));
  EXPECT_EQ(link_->master(), redis.address());
  std::vector<Reply> replies;
  auto keep = [&](const Reply& r) { replies.push_back(r); };
  link_->SendSetup({"PING"}, keep);  // written; the Reset drops its answer
  link_->Reset("a setup check failed");
  EXPECT_TRUE(replies.empty());
  EXPECT_TRUE(listener_.lost.empty());
  link_->SendSetup({"PING"}, keep);  // not in setup any more
  EXPECT_TRUE(replies.empty());
  EXPECT_EQ(link_->in_flight(), 2u);
  ASSERT_TRUE(RunUntil([&] { return replies.size() == 2 && listener_.lost.size() == 1; }));
  EXPECT_EQ(replies[0].type, Reply::Type::kLost);
  EXPECT_NE(replies[0].str.find("a setup check failed"), std::string::npos) << replies[0].str;
  EXPECT_EQ(replies[1].type, Reply::Type::kLost);
  EXPECT_TRUE(replies[1].str.starts_with("not connected: ")) << replies[1].str;
  EXPECT_NE(listener_.lost[0].find("a setup check failed"), std::string::npos);
  listener_.auto_ready = true;
  ASSERT_TRUE(RunUntil([&] { return link_->ready(); }));
  EXPECT_EQ(listener_.connected, 2);
  EXPECT_EQ(Roundtrip({"PING"}).str, "PONG");
}

TEST_F(LinkTest, RetryWindowExpiresWithNothingListening) {
  int port = FreePort();
  Open("redis://127.0.0.1:" + std::to_string(port), 300 * kMs);
  Nanos start = clock_.Now();
  Reply got;
  Nanos answered = 0;
  link_->Send({"PING"}, [&](const Reply& r) {
    got = r;
    answered = clock_.Now();
  });
  ASSERT_TRUE(RunUntil([&] { return answered != 0; }));
  EXPECT_EQ(got.type, Reply::Type::kLost);
  EXPECT_TRUE(got.str.starts_with("not connected: ")) << got.str;
  EXPECT_NE(got.str.find("Connection refused"), std::string::npos) << got.str;
  EXPECT_GE(answered - start, 300 * kMs);
  EXPECT_LT(answered - start, 600 * kMs);
  EXPECT_EQ(listener_.connected, 0);
  EXPECT_TRUE(listener_.lost.empty());
  EXPECT_EQ(link_->in_flight(), 0u);
  EXPECT_NE(link_->why_not_ready().find("Connection refused"), std::string::npos);
  EXPECT_EQ(link_->master(), "");
}

// A replica is refused (ROLE), a master demoted under the link answers READONLY and the link
// lets go of it, and comes back when it is a master again.
TEST_F(LinkTest, ReplicaRefusedAndDemotedMasterLeft) {
  Server a, b;
  a.Start();
  b.Start();
  Open("redis://" + b.address(), 400 * kMs);
  ASSERT_TRUE(RunUntil([&] { return link_->ready(); }));
  EXPECT_EQ(Roundtrip({"SET", "x", "1"}).str, "OK");

  ASSERT_EQ(Call(b.port(), {"REPLICAOF", "127.0.0.1", std::to_string(a.port())}).str, "OK");
  Reply r = Roundtrip({"SET", "x", "2"});
  EXPECT_TRUE(r.ErrorIs("READONLY")) << r.str;  // delivered as it is
  ASSERT_TRUE(RunUntil([&] { return !listener_.lost.empty(); }));
  EXPECT_NE(listener_.lost[0].find("read-only"), std::string::npos) << listener_.lost[0];

  // Reconnecting finds a replica: not ready, and waiting commands say why.
  Reply refused = Roundtrip({"PING"});
  EXPECT_EQ(refused.type, Reply::Type::kLost);
  EXPECT_NE(refused.str.find("is not a master (ROLE: [slave"), std::string::npos) << refused.str;
  EXPECT_EQ(listener_.connected, 1);

  ASSERT_EQ(Call(b.port(), {"REPLICAOF", "NO", "ONE"}).str, "OK");
  ASSERT_TRUE(RunUntil([&] { return link_->ready(); }, 3 * kSecond));
  EXPECT_EQ(listener_.connected, 2);
  EXPECT_EQ(Roundtrip({"SET", "x", "3"}).str, "OK");
}

TEST_F(LinkTest, PubSubDeliversAndResubscribesAfterReconnect) {
  Server redis;
  redis.Start();
  Open("redis://" + redis.address(), 5 * kSecond, {"one"});
  ASSERT_TRUE(RunUntil([&] { return link_->ready(); }));
  // Subscribed before the link was connected: a PUBLISH once ready reaches it.
  EXPECT_EQ(Roundtrip({"PUBLISH", "one", "hello"}).integer, 1);
  ASSERT_TRUE(RunUntil([&] { return listener_.messages.size() == 1; }));
  EXPECT_EQ(listener_.messages[0], std::make_pair(std::string("one"), std::string("hello")));

  // A channel added while connected is subscribed at once.
  link_->Subscribe("two");
  ASSERT_TRUE(RunUntil([&] {
    return Roundtrip({"PUBSUB", "NUMSUB", "two"}).elements.at(1).integer == 1;
  }));
  EXPECT_EQ(Roundtrip({"PUBLISH", "two", std::string("bin\0ary", 7)}).integer, 1);
  ASSERT_TRUE(RunUntil([&] { return listener_.messages.size() == 2; }));
  EXPECT_EQ(listener_.messages[1].second, std::string("bin\0ary", 7));

  redis.Kill();
  ASSERT_TRUE(RunUntil([&] { return !listener_.lost.empty(); }));
  redis.Start();
  ASSERT_TRUE(RunUntil([&] { return link_->ready(); }));
  EXPECT_EQ(Roundtrip({"PUBLISH", "one", "again"}).integer, 1);
  EXPECT_EQ(Roundtrip({"PUBLISH", "two", "again"}).integer, 1);
  ASSERT_TRUE(RunUntil([&] { return listener_.messages.size() == 4; }));
  EXPECT_EQ(listener_.messages[2], std::make_pair(std::string("one"), std::string("again")));
  EXPECT_EQ(listener_.messages[3], std::make_pair(std::string("two"), std::string("again")));
}

// Sentinel: the first sentinel of the URL is down, the second knows the master. The master
// SIGKILLed with a command in flight (kLost; Sentinel promotes a replica, the link follows),
// then a FAILOVER (the old master stays up: Sentinel moves the link).
TEST_F(LinkTest, SentinelDiscoveryAndFailover) {
  Server master;
  master.Start();
  std::vector<std::string> of = {"--replicaof", "127.0.0.1", std::to_string(master.port())};
  Server replica1(of), replica2(of);
  replica1.Start();
  replica2.Start();
  auto linked = [](const Server& s) {
    return Call(s.port(), {"INFO", "replication"}).str.find("master_link_status:up") !=
           std::string::npos;
  };
  ASSERT_TRUE(WaitUntil([&] { return linked(replica1) && linked(replica2); }));
  const std::string name = "stalkd";
  Server sentinel(
      {"sentinel monitor " + name + " 127.0.0.1 " + std::to_string(master.port()) + " 1",
       "sentinel down-after-milliseconds " + name + " 1000",
       "sentinel failover-timeout " + name + " 5000"},
      /*sentinel=*/true);
  sentinel.Start();
  ASSERT_TRUE(WaitUntil([&] {
    Reply r = Call(sentinel.port(), {"SENTINEL", "replicas", name});
    return r.type == Reply::Type::kArray && r.elements.size() == 2;
  }));
  auto sentinel_says = [&] {
    Reply r = Call(sentinel.port(), {"SENTINEL", "get-master-addr-by-name", name});
    return r.elements.size() == 2 ? r.elements[0].str + ":" + r.elements[1].str : "?";
  };
  // Sentinel has finished any failover (its flags for the master are just "master").
  auto settled = [&] {
    Reply r = Call(sentinel.port(), {"SENTINEL", "master", name});
    for (size_t i = 0; i + 1 < r.elements.size(); i += 2) {
      if (r.elements[i].str == "flags") return r.elements[i + 1].str == "master";
    }
    return false;
  };

  int dead = FreePort();
  Open("redis-sentinel://127.0.0.1:" + std::to_string(dead) + "," + sentinel.address() + "/" +
       name);
  ASSERT_TRUE(RunUntil([&] { return link_->ready(); }));
  EXPECT_EQ(link_->master(), master.address());
  EXPECT_EQ(Roundtrip({"SET", "before", "1"}).str, "OK");
  EXPECT_EQ(Roundtrip({"WAIT", "2", "5000"}).integer, 2);

  // The master dies with a command in flight.
  std::vector<Reply> replies;
  link_->Send({"BLPOP", "nothing", "0"}, [&](const Reply& r) { replies.push_back(r); });
  link_->Send({"PING"}, [&](const Reply& r) { replies.push_back(r); });
  link_->Flush();
  RunFor(20 * kMs);
  Nanos start = clock_.Now();
  master.Kill();
  ASSERT_TRUE(RunUntil([&] { return replies.size() == 2; }));
  EXPECT_EQ(replies[0].type, Reply::Type::kLost);
  EXPECT_EQ(replies[1].type, Reply::Type::kLost);
  std::string promoted;
  ASSERT_TRUE(RunUntil(
      [&] {
        promoted = link_->master();
        return link_->ready() && promoted != master.address() && promoted != "";
      },
      15 * kSecond))
      << "not ready: " << link_->why_not_ready() << "\nsentinel's log:\n"
      << sentinel.Log();
  std::printf("master SIGKILLed: on the promoted replica in %lld ms\n",
              static_cast<long long>((clock_.Now() - start) / kMs));
  EXPECT_EQ(promoted, sentinel_says());
  ASSERT_EQ(listener_.lost.size(), 1u);
  EXPECT_EQ(listener_.connected, 2);
  EXPECT_EQ(Roundtrip({"GET", "before"}).str, "1");
  EXPECT_EQ(Roundtrip({"SET", "after", "1"}).str, "OK");

  // A FAILOVER, once Sentinel has finished the last one: the promoted master stays up, so
  // only Sentinel (+switch-master, or the re-check) moves the link.
  ASSERT_TRUE(WaitUntil(settled, 15 * kSecond)) << sentinel.Log();
  start = clock_.Now();
  ASSERT_TRUE(WaitUntil([&] {
    return Call(sentinel.port(), {"SENTINEL", "FAILOVER", name}).str == "OK";
  })) << sentinel.Log();
  ASSERT_TRUE(RunUntil(
      [&] { return link_->ready() && link_->master() != promoted && link_->master() != ""; },
      10 * kSecond))
      << "not ready: " << link_->why_not_ready() << "\nsentinel's log:\n"
      << sentinel.Log();
  std::printf("FAILOVER (from asking): on the new master in %lld ms\n",
              static_cast<long long>((clock_.Now() - start) / kMs));
  EXPECT_EQ(link_->master(), sentinel_says());
  ASSERT_EQ(listener_.lost.size(), 2u);
  EXPECT_TRUE(listener_.lost[1].starts_with("sentinel: ")) << listener_.lost[1];
  std::printf("left the demoted master because: %s\n", listener_.lost[1].c_str());
  EXPECT_EQ(listener_.connected, 3);
  EXPECT_EQ(Roundtrip({"GET", "after"}).str, "1");
  EXPECT_EQ(Roundtrip({"SET", "last", "1"}).str, "OK");
}

}  // namespace
}  // namespace stalkd::redis
