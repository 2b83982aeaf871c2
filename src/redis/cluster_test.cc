#include "redis/cluster.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
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
using test::kMs;
using test::Server;
using test::WaitUntil;

// Starts a program, its output discarded; its PID (-1 if it could not be started).
pid_t Spawn(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

// The exit status of `pid` once it has ended (-1 if killed); `block`: waits for that.
std::optional<int> Exited(pid_t pid, bool block) {
  int status = 0;
  if (waitpid(pid, &status, block ? 0 : WNOHANG) != pid) return std::nullopt;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Runs a program to its end; its exit status (-1 if it could not be run or was killed).
int Run(std::vector<std::string> args) {
  pid_t pid = Spawn(std::move(args));
  return pid < 0 ? -1 : Exited(pid, true).value_or(-1);
}

std::string Text(const Reply& r) {
  return r.type == Reply::Type::kLost ? "(lost) " + r.str : r.str;
}

// A Redis Cluster of `masters` masters with `replicas` replicas each, made by
// `redis-cli --cluster create` from cluster-enabled redis-server children (node timeout
// 1000 ms), up once every node says cluster_state:ok and every replica is in sync.
class Cluster {
 public:
  Cluster(int masters, int replicas) {
    for (int i = 0; i < masters * (1 + replicas); i++) {
      nodes_.push_back(std::make_unique<Server>(
          std::vector<std::string>{"--cluster-enabled", "yes", "--cluster-config-file",
                                   "nodes.conf", "--cluster-node-timeout", "1000",
                                   "--cluster-require-full-coverage", "no",
                                   "--cluster-replica-validity-factor", "0"},
          false, true));
      nodes_.back()->Start();
    }
    std::vector<std::string> args = {"redis-cli", "--cluster", "create"};
    for (auto& n : nodes_) args.push_back(n->address());
    args.insert(args.end(), {"--cluster-replicas", std::to_string(replicas), "--cluster-yes"});
    EXPECT_EQ(Run(args), 0) << "redis-cli --cluster create failed";
    EXPECT_TRUE(WaitUntil(
        [&] {
          for (auto& n : nodes_) {
            if (Call(n->port(), {"CLUSTER", "INFO"}).str.find("cluster_state:ok") ==
                std::string::npos) {
              return false;
            }
            if (Role(n->port()) == "slave" &&
                Call(n->port(), {"INFO", "replication"}).str.find("master_link_status:up") ==
                    std::string::npos) {
              return false;
            }
          }
          return true;
        },
        20 * kSecond))
        << "the cluster did not come up";
  }

  std::string url() const {
    std::string out = "redis-cluster://";
    for (auto& n : nodes_) out += (out.back() == '/' ? "" : ",") + n->address();
    return out;
  }
  static std::string Role(int port) {
    Reply r = Call(port, {"ROLE"});
    return r.elements.empty() ? "" : r.elements[0].str;
  }
  // The node on `port`.
  Server& node(int port) {
    for (auto& n : nodes_) {
      if (n->port() == port) return *n;
    }
    ADD_FAILURE() << "no node on port " << port;
    return *nodes_[0];
  }
  // The port of the master serving `slot`, per the node on `asked`.
  static int Owner(int asked, int slot) {
    Reply r = Call(asked, {"CLUSTER", "SLOTS"});
    for (const Reply& range : r.elements) {
      if (range.elements[0].integer <= slot && slot <= range.elements[1].integer) {
        return static_cast<int>(range.elements[2].elements[1].integer);
      }
    }
    return 0;
  }
  std::string NodeId(int port) { return Call(port, {"CLUSTER", "MYID"}).str; }
  // Every master's port.
  std::vector<int> MasterPorts() {
    std::vector<int> out;
    for (auto& n : nodes_) {
      if (Role(n->port()) == "master") out.push_back(n->port());
    }
    return out;
  }
  // Marks `slot` migrating from `src` to `dst` (ports).
  void BeginMigration(int slot, int src, int dst) {
    std::string s = std::to_string(slot);
    EXPECT_EQ(Call(dst, {"CLUSTER", "SETSLOT", s, "IMPORTING", NodeId(src)}).str, "OK");
    EXPECT_EQ(Call(src, {"CLUSTER", "SETSLOT", s, "MIGRATING", NodeId(dst)}).str, "OK");
  }
  void MigrateKey(int src, int dst, const std::string& key) {
    Reply r = Call(src, {"MIGRATE", "127.0.0.1", std::to_string(dst), key, "0", "5000"});
    EXPECT_EQ(r.str, "OK") << Describe(r);
  }
  // Ends the migration: `slot` is `dst`'s, on every master.
  void EndMigration(int slot, int dst) {
    std::string id = NodeId(dst);
    for (int port : MasterPorts()) {
      EXPECT_EQ(Call(port, {"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", id}).str, "OK");
    }
  }

 private:
  std::vector<std::unique_ptr<Server>> nodes_;
};

class TestListener final : public ClusterLink::Listener {
 public:
  // Sets the master ready after its setup: `library` loaded (if any), then a PING.
  void OnMasterConnected(const std::string& master) override {
    connected.push_back(master);
    if (!library.empty()) {
      std::string_view load[] = {"FUNCTION", "LOAD", "REPLACE", library};
      link->SendSetup(master, load, [this](const Reply& r) {
        if (r.error()) setup_errors.push_back(r.str);
      });
    }
    std::string_view ping[] = {"PING"};
    link->SendSetup(master, ping, [this, master](const Reply& r) {
      if (r.str == "PONG" && setup_errors.empty()) link->SetReady(master);
    });
  }
  void OnMasterLost(const std::string& master, std::string_view) override {
    lost.push_back(master);
  }
  void OnMessage(std::string_view channel, std::string_view message) override {
    messages.emplace_back(channel, message);
  }
  void OnSubscribed(const std::string& node) override { subscribed.push_back(node); }
  void OnSubscriptionLost(std::string_view) override { subscription_lost++; }

  ClusterLink* link = nullptr;
  std::string library;
  std::vector<std::string> setup_errors;
  std::vector<std::string> connected;
  std::vector<std::string> lost;
  std::vector<std::pair<std::string, std::string>> messages;
  std::vector<std::string> subscribed;
  int subscription_lost = 0;
};

class ClusterLinkTest : public test::LinkFixture<ClusterLink, TestListener> {
 protected:
  // A command whose reply lands in the returned slot (first: answered).
  std::shared_ptr<std::pair<bool, Reply>> Start(std::string_view key,
                                                std::initializer_list<std::string_view> argv) {
    auto out = std::make_shared<std::pair<bool, Reply>>(false, Reply{});
    link_->Send(key, argv, [out](const Reply& r) { *out = {true, r}; });
    link_->Flush();
    return out;
  }
  Reply Roundtrip(std::string_view key, std::initializer_list<std::string_view> argv) {
    auto out = Start(key, argv);
    EXPECT_TRUE(RunUntil([&] { return out->first; })) << "no reply in time";
    return out->second;
  }
};

TEST(ClusterSlots, Crc16AndHashTags) {
  EXPECT_EQ(Crc16("123456789"), 0x31C3);  // the XMODEM check value
  EXPECT_EQ(Crc16(""), 0);
  EXPECT_EQ(KeySlot("foo"), 12182);
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("{user1000}.followers"));
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("user1000"));
  EXPECT_EQ(KeySlot("foo{}{bar}"), Crc16("foo{}{bar}") % kClusterSlots);  // empty tag: whole
  EXPECT_EQ(KeySlot("foo{{bar}}zap"), KeySlot("{bar"));
  EXPECT_EQ(KeySlot("foo{bar}{zap}"), KeySlot("bar"));
  EXPECT_EQ(KeySlot("{7}:j:12"), KeySlot("{7}"));
}

TEST_F(ClusterLinkTest, RoutesByHashTagToEveryMaster) {
  Cluster cluster(3, 0);
  // The first seed is down: the slot map comes from the next.
  Open("redis-cluster://127.0.0.1:" + std::to_string(test::FreePort()) + "," +
       cluster.url().substr(std::string_view("redis-cluster://").size()));
  ASSERT_TRUE(RunUntil([&] { return link_->ready(); })) << "not ready";
  ASSERT_EQ(link_->masters().size(), 3u);
  EXPECT_EQ(listener_.connected.size(), 3u);
  // The slot function agrees with Redis'.
  int port = cluster.MasterPorts()[0];
  for (int i = 0; i < 300; i++) {
    std::string key = i % 3 == 0 ? "{" + std::to_string(i) + "}:j:" + std::to_string(i)
                                 : "k" + std::to_string(i * 7919) + (i % 2 ? "\xff" : "");
    ASSERT_EQ(KeySlot(key), Call(port, {"CLUSTER", "KEYSLOT", key}).integer) << key;
  }
  // Pipelined writes to partitions on every master, each on the master that serves it.
  std::set<std::string> used;
  int answered = 0;
  for (int p = 0; p < 64; p++) {
    std::string tag = "{" + std::to_string(p) + "}";
    used.insert(link_->master_of(KeySlot(tag)));
    link_->Send(tag, {"SET", tag + ":m", "v" + std::to_string(p)}, [&, tag](const Reply& r) {
      EXPECT_EQ(r.str, "OK");
      EXPECT_EQ(link_->answered_by(), link_->master_of(KeySlot(tag)));
      answered++;
    });
  }
  link_->Flush();
  EXPECT_EQ(used.size(), 3u);
  ASSERT_TRUE(RunUntil([&] { return answered == 64; }));
  for (int p = 0; p < 64; p++) {
    std::string tag = "{" + std::to_string(p) + "}";
    int owner = Cluster::Owner(port, KeySlot(tag));
    EXPECT_EQ(link_->master_of(KeySlot(tag)), "127.0.0.1:" + std::to_string(owner));
    EXPECT_EQ(Call(owner, {"GET", tag + ":m"}).str, "v" + std::to_string(p));
    EXPECT_EQ(Roundtrip(tag, {"GET", tag + ":m"}).str, "v" + std::to_string(p));
  }
  // One command to every master.
  std::map<std::string, std::string> roles;
  std::string_view role[] = {"ROLE"};
  link_->SendAll(role, [&](const std::string& m, const Reply& r) {
    roles[m] = r.elements.empty() ? Describe(r) : r.elements[0].str;
  });
  link_->Flush();
  ASSERT_TRUE(RunUntil([&] { return roles.size() == 3; }));
  for (auto& [m, r] : roles) EXPECT_EQ(r, "master") << m;
  EXPECT_EQ(link_->counters().moved, 0u);
  EXPECT_EQ(link_->in_flight(), 0u);
  // A master's setup redone (Reset): its slots wait meanwhile, then it is set up again.
  std::string again = link_->master_of(KeySlot("{0}"));
  link_->Reset(again, "setup failed, say");
  EXPECT_EQ(Roundtrip("{0}", {"GET", "{0}:m"}).str, "v0");
  EXPECT_EQ(listener_.lost, std::vector<std::string>{again});
  EXPECT_EQ(listener_.connected.size(), 4u);
  EXPECT_EQ(listener_.connected.back(), again);
}

TEST_F(ClusterLinkTest, FollowsMovedAfterSlotMigration) {
  Cluster cluster(3, 0);
  Open(cluster.url());
  ASSERT_TRUE(RunUntil([&] { return link_->ready(); }));
  RunFor(200 * kMs);  // a slot-map refresh asked for while connecting is answered
  std::string key = "{moving}:k";
  int slot = KeySlot(key);
  ASSERT_EQ(Roundtrip(key, {"SET", key, "here"}).str, "OK");
  std::vector<int> masters = cluster.MasterPorts();
  int src = Cluster::Owner(masters[0], slot);
  int dst = masters[0] == src ? masters[1] : masters[0];
  cluster.BeginMigration(slot, src, dst);
  cluster.MigrateKey(src, dst, key);
  cluster.EndMigration(slot, dst);
  EXPECT_EQ(link_->master_of(slot), "127.0.0.1:" + std::to_string(src));  // not known yet
  std::string answered_by;
  link_->Send(key, {"GET", key}, [&](const Reply& r) {
    EXPECT_EQ(Text(r), "here");
    answered_by = link_->answered_by();
  });
  link_->Flush();
  ASSERT_TRUE(RunUntil([&] { return !answered_by.empty(); }));
  EXPECT_EQ(answered_by, "127.0.0.1:" + std::to_string(dst));  // after the MOVED
  EXPECT_EQ(link_->answered_by(), "");
  EXPECT_GE(link_->counters().moved, 1u);
  EXPECT_EQ(link_->master_of(slot), "127.0.0.1:" + std::to_string(dst));
  ASSERT_TRUE(RunUntil([&] { return link_->counters().refreshes >= 2; }));
  EXPECT_EQ(link_->master_of(slot), "127.0.0.1:" + std::to_string(dst));
}

TEST_F(ClusterLinkTest, AskAndTryAgainWaitForTheMigrationToEnd) {
  Cluster cluster(3, 0);
  Open(cluster.url());
  ASSERT_TRUE(RunUntil([&] { return link_->ready(); }));
  RunFor(200 * kMs);  // a slot-map refresh asked for while connecting is answered
  std::string a = "{mig}:a", b = "{mig}:b";
  int slot = KeySlot(a);
  ASSERT_EQ(Roundtrip(a, {"SET", a, "va"}).str, "OK");
  ASSERT_EQ(Roundtrip(b, {"SET", b, "vb"}).str, "OK");
  std::vector<int> masters = cluster.MasterPorts();
  int src = Cluster::Owner(masters[0], slot);
  int dst = masters[0] == src ? masters[1] : masters[0];
  cluster.BeginMigration(slot, src, dst);
  cluster.MigrateKey(src, dst, b);
  // The source answers ASK for b (gone) and TRYAGAIN for a and b together: neither is
  // followed, both wait while the slot migrates.
  auto get_b = Start(b, {"GET", b});
  auto mget = Start(a, {"MGET", a, b});
  // Another partition keeps being served meanwhile.
  std::string other = "{other}:k";
  ASSERT_NE(KeySlot(other), slot);
  EXPECT_EQ(Roundtrip(other, {"SET", other, "x"}).str, "OK");
  RunFor(300 * kMs);
  EXPECT_FALSE(get_b->first) << Text(get_b->second);
  EXPECT_FALSE(mget->first) << Text(mget->second);
  EXPECT_GE(link_->counters().retried, 4u);
  EXPECT_EQ(Call(dst, {"EXISTS", a}).integer, 0);  // nothing ran on the target
  cluster.MigrateKey(src, dst, a);
  cluster.EndMigration(slot, dst);
  ASSERT_TRUE(RunUntil([&] { return get_b->first && mget->first; }));
  EXPECT_EQ(Text(get_b->second), "vb");
  ASSERT_EQ(mget->second.elements.size(), 2u) << Describe(mget->second);
  EXPECT_EQ(mget->second.elements[0].str, "va");
  EXPECT_EQ(mget->second.elements[1].str, "vb");
  EXPECT_GE(link_->counters().moved, 1u);
  EXPECT_EQ(link_->master_of(slot), "127.0.0.1:" + std::to_string(dst));
}

TEST_F(ClusterLinkTest, RetryWindowEndsAStuckMigrationWithTheError) {
  Cluster cluster(3, 0);
  Open(cluster.url(), 300 * kMs);
  ASSERT_TRUE(RunUntil([&] { return link_->ready(); }));
  std::string key = "{stuck}:k";
  int slot = KeySlot(key);
  std::vector<int> masters = cluster.MasterPorts();
  int src = Cluster::Owner(masters[0], slot);
  int dst = masters[0] == src ? masters[1] : masters[0];
  cluster.BeginMigration(slot, src, dst);
  Nanos t0 = clock_.Now();
  Reply r = Roundtrip(key, {"GET", key});
  EXPECT_TRUE(r.ErrorIs("ASK ")) << Text(r);
  EXPECT_GE(clock_.Now() - t0, 200 * kMs);
}

// stalkd's rule (REDIS-STORE.md §2.6): a function declares only the bare partition tag, which
// never exists, so a migrating slot's source answers ASK before running it even though the
// partition's keys are still there; the call waits and runs once, on the target, after.
TEST_F(ClusterLinkTest, FunctionsOnABareTagPauseWhileTheirSlotMigrates) {
  Cluster cluster(3, 0);
  listener_.library =
      "#!lua name=clustertest\n"
      "redis.register_function('bump', function(keys, args)\n"
      "  return redis.call('INCR', keys[1] .. ':n')\n"
      "end)\n";
  Open(cluster.url());
  ASSERT_TRUE(RunUntil([&] { return link_->ready(); }));
  EXPECT_TRUE(listener_.setup_errors.empty()) << listener_.setup_errors[0];
  std::set<std::string> used;
  for (int p = 0; p < 16; p++) {
    std::string tag = "{" + std::to_string(p) + "}";
    used.insert(link_->master_of(KeySlot(tag)));
    EXPECT_EQ(Roundtrip(tag, {"FCALL", "bump", "1", tag}).integer, 1) << tag;
  }
  EXPECT_EQ(used.size(), 3u);  // loaded on every master
  std::string tag = "{3}";
  int slot = KeySlot(tag);
  std::vector<int> masters = cluster.MasterPorts();
  int src = Cluster::Owner(masters[0], slot);
  int dst = masters[0] == src ? masters[1] : masters[0];
  cluster.BeginMigration(slot, src, dst);
  auto call = Start(tag, {"FCALL", "bump", "1", tag});
  RunFor(200 * kMs);
  EXPECT_FALSE(call->first) << Text(call->second);
  EXPECT_EQ(Call(src, {"GET", tag + ":n"}).str, "1");  // it did not run on the source
  cluster.MigrateKey(src, dst, tag + ":n");
  cluster.EndMigration(slot, dst);
  ASSERT_TRUE(RunUntil([&] { return call->first; }));
  EXPECT_EQ(call->second.integer, 2) << Text(call->second);
  EXPECT_EQ(Call(dst, {"GET", tag + ":n"}).str, "2");
}

TEST_F(ClusterLinkTest, KilledMasterWaitsForPromotionWhileOthersServe) {
  Cluster cluster(3, 1);
  Open(cluster.url(), 15 * kSecond);
  ASSERT_TRUE(RunUntil([&] { return link_->ready(); }));
  std::string victim_key = "{victim}:k", other_key;
  int victim_slot = KeySlot(victim_key);
  std::string victim = link_->master_of(victim_slot);
  for (int i = 0; other_key.empty(); i++) {
    std::string k = "{o" + std::to_string(i) + "}:k";
    if (link_->master_of(KeySlot(k)) != victim) other_key = k;
  }
  ASSERT_EQ(Roundtrip(victim_key, {"SET", victim_key, "1"}).str, "OK");
  std::string_view wait[] = {"WAIT", "1", "2000"};
  auto synced = std::make_shared<std::pair<bool, Reply>>();
  link_->SendTo(victim, wait, [synced](const Reply& r) { *synced = {true, r}; });
  link_->Flush();
  ASSERT_TRUE(RunUntil([&] { return synced->first; }));
  EXPECT_EQ(synced->second.integer, 1);
  // In flight on the victim when it dies: a blocked BLPOP.
  auto blocked = Start(victim_key, {"BLPOP", "{victim}:list", "0"});
  RunFor(50 * kMs);
  ASSERT_FALSE(blocked->first);
  int victim_port = std::stoi(victim.substr(victim.rfind(':') + 1));
  Nanos killed = clock_.Now();
  cluster.node(victim_port).Kill();
  ASSERT_TRUE(RunUntil([&] { return blocked->first; }));
  EXPECT_EQ(blocked->second.type, Reply::Type::kLost) << Text(blocked->second);
  // Its partition waits; the others are served at once.
  auto incr = Start(victim_key, {"INCR", victim_key});
  EXPECT_EQ(Roundtrip(other_key, {"SET", other_key, "fine"}).str, "OK");
  EXPECT_FALSE(incr->first);
  ASSERT_TRUE(RunUntil([&] { return incr->first; }, 15 * kSecond)) << "no promotion";
  EXPECT_EQ(incr->second.integer, 2) << Text(incr->second);  // the acknowledged SET survived
  Nanos waited = clock_.Now() - killed;
  std::string promoted = link_->master_of(victim_slot);
  EXPECT_NE(promoted, victim);
  EXPECT_EQ(Cluster::Role(std::stoi(promoted.substr(promoted.rfind(':') + 1))), "master");
  EXPECT_NE(std::find(listener_.lost.begin(), listener_.lost.end(), victim), listener_.lost.end());
  EXPECT_EQ(link_->masters().size(), 3u);
  printf("kill -9 of a master to its partition served again: %lld ms\n",
         static_cast<long long>(waited / kMs));
  EXPECT_TRUE(RunUntil([&] { return link_->ready(); }));
}

TEST_F(ClusterLinkTest, ReshardUnderLoadLosesNothing) {
  Cluster cluster(3, 0);
  Open(cluster.url(), 10 * kSecond);
  ASSERT_TRUE(RunUntil([&] { return link_->ready(); }));
  std::vector<int> masters = cluster.MasterPorts();
  int src = masters[0], dst = masters[1];
  // The slots redis-cli moves first are the source's lowest: half the keys there.
  int lowest = kClusterSlots;
  for (int s = 0; s < kClusterSlots; s++) {
    if (link_->master_of(s) == "127.0.0.1:" + std::to_string(src)) {
      lowest = s;
      break;
    }
  }
  constexpr int kMoved = 200;
  std::vector<std::string> keys;
  for (int i = 0; keys.size() < 120; i++) {
    std::string key = "{r" + std::to_string(i) + "}:n";
    int slot = KeySlot(key);
    bool moving = slot >= lowest && slot < lowest + kMoved;
    if (moving == (keys.size() % 2 == 0)) keys.push_back(key);
  }
  std::vector<int64_t> acked(keys.size(), 0);
  std::vector<std::string> errors;
  size_t in_flight = 0, next = 0;
  auto top_up = [&] {
    while (in_flight < 64) {
      size_t k = next++ % keys.size();
      in_flight++;
      link_->Send(keys[k], {"INCR", keys[k]}, [&, k](const Reply& r) {
        in_flight--;
        if (r.type == Reply::Type::kInteger) {
          acked[k]++;
        } else {
          errors.push_back(Text(r));
        }
      });
    }
    link_->Flush();
  };
  top_up();
  RunFor(100 * kMs);
  pid_t cli = Spawn({"redis-cli", "--cluster", "reshard", "127.0.0.1:" + std::to_string(src),
                     "--cluster-from", cluster.NodeId(src), "--cluster-to", cluster.NodeId(dst),
                     "--cluster-slots", std::to_string(kMoved), "--cluster-yes"});
  ASSERT_GT(cli, 0);
  std::optional<int> done;
  Nanos t0 = clock_.Now();
  while (!done && clock_.Now() - t0 < 60 * kSecond) {
    top_up();
    RunUntil([&] { return in_flight < 32; }, 100 * kMs);
    done = Exited(cli, false);
  }
  if (!done) {
    kill(cli, SIGKILL);
    Exited(cli, true);
  }
  ASSERT_EQ(done.value_or(-2), 0) << "redis-cli --cluster reshard";
  Nanos took = clock_.Now() - t0;
  top_up();
  ASSERT_TRUE(RunUntil([&] { return in_flight == 0; }, 10 * kSecond));
  EXPECT_TRUE(errors.empty()) << errors.size() << " errors, first: " << errors[0];
  int64_t total = 0;
  for (size_t k = 0; k < keys.size(); k++) {
    total += acked[k];
    Reply r = Roundtrip(keys[k], {"GET", keys[k]});
    EXPECT_EQ(r.str, std::to_string(acked[k]))
        << keys[k] << " on " << link_->master_of(KeySlot(keys[k]));
  }
  EXPECT_EQ(link_->master_of(lowest), "127.0.0.1:" + std::to_string(dst));
  EXPECT_GE(link_->counters().moved, 1u);
  printf(
      "reshard of %d slots under load: %lld ms, %lld INCRs acknowledged, %llu MOVED followed, "
      "%llu ASK/TRYAGAIN retries\n",
      kMoved, static_cast<long long>(took / kMs), static_cast<long long>(total),
      static_cast<unsigned long long>(link_->counters().moved),
      static_cast<unsigned long long>(link_->counters().retried));
}

TEST_F(ClusterLinkTest, DeadMasterWithoutReplicaLeavesItsSlotsWaitingThenLost) {
  Cluster cluster(3, 0);
  Open(cluster.url(), 600 * kMs);
  EXPECT_EQ(link_->why_not_ready(), "no master known for 16384 slots");
  ASSERT_TRUE(RunUntil([&] { return link_->ready(); }));
  EXPECT_EQ(link_->why_not_ready(), "");
  std::string dead_key = "{dead}:k", other_key;
  std::string dead = link_->master_of(KeySlot(dead_key));
  for (int i = 0; other_key.empty(); i++) {
    std::string k = "{o" + std::to_string(i) + "}:k";
    if (link_->master_of(KeySlot(k)) != dead) other_key = k;
  }
  cluster.node(std::stoi(dead.substr(dead.rfind(':') + 1))).Kill();
  ASSERT_TRUE(RunUntil([&] { return !link_->ready(); }));
  EXPECT_NE(link_->why_not_ready().find(dead), std::string::npos) << link_->why_not_ready();
  Nanos t0 = clock_.Now();
  auto waiting = Start(dead_key, {"SET", dead_key, "x"});
  EXPECT_EQ(Roundtrip(other_key, {"SET", other_key, "y"}).str, "OK");
  EXPECT_FALSE(waiting->first);
  ASSERT_TRUE(RunUntil([&] { return waiting->first; }));
  EXPECT_EQ(waiting->second.type, Reply::Type::kLost);
  EXPECT_TRUE(waiting->second.str.starts_with("not connected: ")) << waiting->second.str;
  EXPECT_GE(clock_.Now() - t0, 500 * kMs);
  EXPECT_EQ(link_->in_flight(), 0u);
}

TEST_F(ClusterLinkTest, PubSubReachesSubscriberFromEveryNodeAndAfterItDies) {
  Cluster cluster(3, 0);
  Open(cluster.url(), 5 * kSecond, {"events"});
  ASSERT_TRUE(RunUntil([&] { return listener_.subscribed.size() == 1; }));
  std::string node = listener_.subscribed[0];
  std::vector<int> masters = cluster.MasterPorts();
  for (int port : masters) {
    EXPECT_GE(Call(port, {"PUBLISH", "events", "from " + std::to_string(port)}).integer, 0);
  }
  ASSERT_TRUE(RunUntil([&] { return listener_.messages.size() == masters.size(); }));
  // Each in its own time: a message published on another node comes over the cluster bus.
  std::set<std::pair<std::string, std::string>> got(listener_.messages.begin(),
                                                    listener_.messages.end());
  for (int port : masters) EXPECT_EQ(got.count({"events", "from " + std::to_string(port)}), 1u);
  // The subscribed node dies: the subscription moves to another node.
  cluster.node(std::stoi(node.substr(node.rfind(':') + 1))).Kill();
  ASSERT_TRUE(RunUntil([&] { return listener_.subscribed.size() == 2; }));
  EXPECT_EQ(listener_.subscription_lost, 1);
  EXPECT_NE(listener_.subscribed[1], node);
  listener_.messages.clear();
  int published = 0;
  for (int port : masters) {
    if ("127.0.0.1:" + std::to_string(port) == node) continue;
    Call(port, {"PUBLISH", "events", "again"});
    published++;
  }
  ASSERT_TRUE(
      RunUntil([&] { return listener_.messages.size() == static_cast<size_t>(published); }));
  EXPECT_EQ(listener_.messages[0].second, "again");
}

}  // namespace
}  // namespace stalkd::redis
