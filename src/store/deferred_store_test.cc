#include "store/deferred_store.h"

#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "command/owned_result.h"
#include "protocol/conversation.h"
#include "store/memory_store.h"

// The text protocol over a store whose every answer is late (DeferredStore over the
// in-memory store) answers byte for byte what it answers over the in-memory store itself.
namespace stalkd::store {
namespace {

struct TextClient final : command::Client {
  explicit TextClient(command::Store& store) : conv(store, *this) {}
  void OnResult(const command::Result& r) override { conv.OnResult(r); }
  protocol::Conversation conv;
};

// The in-memory store, used directly or through a DeferredStore.
class TextWorld {
 public:
  explicit TextWorld(bool deferred) : memory_(clock, Options(), nullptr) {
    if (deferred) deferred_ = std::make_unique<DeferredStore>(memory_);
  }
  ~TextWorld() {
    clients_.clear();
    memory_.engine().CheckInvariants();
  }
  static MemoryStoreOptions Options() {
    MemoryStoreOptions o;
    o.max_job_size = 100;
    return o;
  }
  command::Store& store() { return deferred_ ? *deferred_ : static_cast<command::Store&>(memory_); }

  TextClient& client(size_t i) {
    while (clients_.size() <= i) clients_.push_back(std::make_unique<TextClient>(store()));
    return *clients_[i];
  }
  void Drop(size_t i) {
    clients_[i]->conv.OnInputClosed();
    Settle();
    clients_[i].reset();
    Settle();
  }
  // Runs every client and ticks the store until nothing moves.
  void Settle() {
    for (int round = 0;; round++) {
      ASSERT_LT(round, 100000);
      bool progress = false;
      for (auto& c : clients_) {
        // As the server: only a conversation that says it can go on is run.
        if (!c || !c->conv.runnable()) continue;
        progress = true;
        c->conv.Run(1000000);
      }
      if (store().Busy()) progress = true;
      store().Tick();
      memory_.engine().CheckInvariants();
      if (!progress) break;
    }
  }
  // Sends bytes from client i, settles, and returns everything every client got.
  std::string Do(size_t i, std::string_view in) {
    command::FrontEnd& f = client(i).conv;
    if (!in.empty()) {
      char* p = f.PrepareInput(in.size());
      std::memcpy(p, in.data(), in.size());
      f.CommitInput(in.size());
    }
    Settle();
    std::string out;
    for (size_t k = 0; k < clients_.size(); k++) {
      if (!clients_[k] || clients_[k]->conv.output().empty()) continue;
      out += "[" + std::to_string(k) + "] " + clients_[k]->conv.output();
      clients_[k]->conv.output().clear();
    }
    return out;
  }
  void Advance(Nanos d) {
    clock.Advance(d);
    Settle();
  }
  void set_failing(bool on) { deferred_->set_failing(on); }

  FakeClock clock;

 private:
  MemoryStore memory_;
  std::unique_ptr<DeferredStore> deferred_;
  std::vector<std::unique_ptr<TextClient>> clients_;
};

// One step of a script: a client's bytes, time passing, or a client going away.
struct Step {
  size_t client;
  std::string bytes;
  Nanos advance = 0;
  bool drop = false;
};

std::vector<std::string> Play(bool deferred, const std::vector<Step>& script) {
  TextWorld w(deferred);
  std::vector<std::string> out;
  for (const Step& s : script) {
    if (s.drop) {
      w.Drop(s.client);
      out.push_back("(dropped)");
    } else if (s.advance) {
      w.Advance(s.advance);
      out.push_back(w.Do(s.client, ""));
    } else {
      out.push_back(w.Do(s.client, s.bytes));
    }
  }
  return out;
}

std::string Many(int n, std::string_view line) {
  std::string s;
  for (int i = 0; i < n; i++) s += line;
  return s;
}

// put-many with its block made of (line, body) entries.
std::string PutMany(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string block;
  for (const auto& [line, body] : entries) block += line + "\r\n" + body + "\r\n";
  return "put-many " + std::to_string(entries.size()) + " " + std::to_string(block.size()) +
         "\r\n" + block + "\r\n";
}

TEST(DeferredStoreText, EveryCommandAnswersAsOverTheMemoryStore) {
  std::vector<Step> script = {
      {0, "use jobs\r\nput 5 0 60 3\r\nabc\r\nput 1 0 60 2\r\nhi\r\n"},
      {0, "peek 1\r\npeek-ready\r\npeek-delayed\r\npeek-buried\r\npeek 99\r\n"},
      {0, "put 0 10 60 1\r\nd\r\nput 0 0 60 200\r\n"},
      {0, Many(200, "x") + "\r\nput 0 0 60 1\r\nxy\r\nlist-tube-used\r\nlist-tubes\r\n"},
      {1, "watch jobs\r\nignore default\r\nignore jobs\r\nlist-tubes-watched\r\nreserve\r\n"},
      {1, "stats-job 2\r\nrelease 2 7 0\r\nreserve-with-timeout 0\r\nbury 2 3\r\n"},
      {1, "kick 1\r\nreserve-job 2\r\ntouch 2\r\ndelete 2\r\ndelete 2\r\nkick-job 3\r\n"},
      {0, "stats-tube jobs\r\nstats-tube nope\r\npause-tube jobs 0\r\nstats\r\n"},
      // The extensions.
      {0,
       "put-ext 3 0 60 2 tries=2 ttl=100 key=k1 attr.a=1 attr.b=x\r\nhm\r\n"
       "put-ext 3 0 60 2 key=k1\r\nhm\r\nstats-job 6\r\n"},
      {0, PutMany({{"0 0 60 1", "a"}, {"0 0 60 2 key=k2", "bb"}, {"0 0 60 1", "c"}}) +
              PutMany({{"0 0 60 1 key=k2", "z"}, {"0 0 60 3 tries=2", "zzz"}}) +
              PutMany({{"0 0 60 3 tries=0", "zzz"}}) + PutMany({{"0 0 60 101", Many(101, "L")}})},
      {1, "reserve-ext 0 count=3 ttr=5\r\nreserve-ext 0 count=2 freeze-tries detached\r\n"},
      {1,
       "list-jobs jobs reserved 1 100\r\nlist-jobs jobs ready 1 2\r\n"
       "delete-many 7 8 9 999\r\ntube-tries jobs 3\r\nstats-tube jobs\r\n"},
      {0, "purge jobs ready\r\npurge jobs all\r\npurge nope ready\r\nlist-jobs jobs all 1 1\r\n"},
      // A reserve that waits, served by another client's put; one that times out.
      {2, "watch w\r\nreserve\r\n"},
      {0, "use w\r\nput 0 0 1 4\r\nwork\r\n"},
      {2, "reserve-with-timeout 2\r\n"},
      {2, "", kSecond},
      {2, "", 2 * kSecond},
      {3, "watch w\r\nreserve-ext 5 count=2\r\n"},
      {0, PutMany({{"0 0 60 1", "q"}, {"0 0 60 1", "r"}})},
      // A kick of more than a slice answers late in the memory store too.
      {0, "use big\r\n" + Many(1200, "put 0 100 60 1\r\nb\r\n") + "use w\r\n"},
      {4, "use big\r\n"},
      {4, "kick 2000\r\nstats-tube big\r\npurge big all\r\n"},
      // Pipelined input after a pending command stays in order.
      {0, PutMany({{"0 0 1 1", "m"}}) + "stats-job 1\r\nlist-tube-used\r\nquit\r\n"},
      // A reserve whose client goes away.
      {5, "watch idle\r\nreserve\r\n"},
      {5, "", 0, true},
      {1, "stats\r\n"},
  };
  std::vector<std::string> direct = Play(false, script);
  std::vector<std::string> deferred = Play(true, script);
  ASSERT_EQ(direct.size(), deferred.size());
  for (size_t i = 0; i < direct.size(); i++) {
    EXPECT_EQ(direct[i], deferred[i]) << "step " << i;
  }
  // The script did what it says: put-many answered, a waiting reserve was served.
  EXPECT_NE(direct[9].find("INSERTED-MANY 3\r\nINSERTED"), std::string::npos) << direct[9];
  EXPECT_NE(direct[14].find("[2] RESERVED"), std::string::npos) << direct[14];
  EXPECT_NE(direct[22].find("KICKED 1200"), std::string::npos) << direct[22];
}

// stats-ext & co. answered late: each reply keeps its kind (the extension keys or not).
TEST(DeferredStoreText, ExtendedStatsAnswerLateAsTheyAsked) {
  std::vector<Step> script = {
      {0, "put-ext 0 0 60 1 tries=2 attr.a=1\r\nx\r\n"},
      {0,
       "stats-job-ext 1\r\nstats-job 1\r\nstats-tube-ext default\r\nstats-tube default\r\n"
       "stats-ext\r\nstats\r\nstats-job-ext 1\r\n"},
  };
  std::vector<std::string> direct = Play(false, script);
  std::vector<std::string> deferred = Play(true, script);
  EXPECT_EQ(direct, deferred);
  auto count = [&](std::string_view key) {
    size_t n = 0;
    for (size_t p = deferred[1].find(key); p != std::string::npos;
         p = deferred[1].find(key, p + 1)) {
      n++;
    }
    return n;
  };
  EXPECT_EQ(count("\ntries-left: 2\n"), 2u) << deferred[1];
  EXPECT_EQ(count("\nattr.a: \"1\"\n"), 2u);
  EXPECT_EQ(count("\ndefault-tries: 0\n"), 1u);
  EXPECT_EQ(count("\nmemory-used: "), 1u);
  EXPECT_EQ(count("\ncmd-put-ext: 1\n"), 1u);
  EXPECT_EQ(count("\ncmd-stats: "), 2u);
}

TEST(DeferredStoreText, AStoreThatCannotTellAnswersInternalError) {
  TextWorld w(true);
  w.set_failing(true);
  EXPECT_EQ(w.Do(0, "use t\r\nput 0 0 60 1\r\na\r\n" +
                        PutMany({{"0 0 60 1", "b"}, {"0 0 60 1", "c"}}) + "peek 1\r\n"),
            "[0] USING t\r\nINTERNAL_ERROR\r\nINSERTED-MANY 2\r\nINTERNAL_ERROR\r\n"
            "INTERNAL_ERROR\r\nINTERNAL_ERROR\r\n");
  w.set_failing(false);
  EXPECT_EQ(w.Do(0, "peek 3\r\n"), "[0] FOUND 3 1\r\nc\r\n");  // the puts were made
}

TEST(DeferredStore, AnswersLaterOnTheNextTick) {
  FakeClock clock;
  MemoryStore memory(clock, {}, nullptr);
  DeferredStore store(memory);
  struct Got final : command::Client {
    void OnResult(const command::Result& r) override { got.emplace_back(r); }
    std::vector<command::OwnedResult> got;
  } client;
  std::unique_ptr<command::Session> s = store.Open(client);
  EXPECT_EQ(s->Use("t").outcome, command::Outcome::kUsing);  // at once
  command::PutArgs a;
  a.bytes = 2;
  command::PutSlot slot = s->BeginPut(a);
  ASSERT_TRUE(slot.data);
  std::memcpy(slot.data, "ok\r\n", 4);
  EXPECT_EQ(s->CommitPut().outcome, command::Outcome::kPending);
  EXPECT_TRUE(store.Busy());
  EXPECT_TRUE(client.got.empty());
  store.Tick();
  ASSERT_EQ(client.got.size(), 1u);
  EXPECT_EQ(client.got[0].result().outcome, command::Outcome::kInserted);
  EXPECT_FALSE(store.Busy());
  // A reserve that waits in the memory store, abandoned.
  EXPECT_EQ(s->Watch("empty").outcome, command::Outcome::kWatching);
  EXPECT_EQ(s->Ignore("default").outcome, command::Outcome::kWatching);
  EXPECT_EQ(s->Reserve(kForever).outcome, command::Outcome::kPending);
  store.Tick();
  EXPECT_EQ(client.got.size(), 1u);
  EXPECT_EQ(s->AbandonReserve().outcome, command::Outcome::kTimedOut);
  // A reserve answered at once by the memory store, abandoned before its delivery.
  EXPECT_EQ(s->Watch("t").outcome, command::Outcome::kWatching);
  EXPECT_EQ(s->Reserve(0).outcome, command::Outcome::kPending);
  EXPECT_EQ(s->AbandonReserve().outcome, command::Outcome::kTimedOut);
  store.Tick();
  EXPECT_EQ(client.got.size(), 1u);
  // The job body outlives the store's next call in the copy.
  EXPECT_EQ(s->Peek(1).outcome, command::Outcome::kPending);
  store.Tick();
  ASSERT_EQ(client.got.size(), 2u);
  EXPECT_EQ(s->Stats().outcome, command::Outcome::kPending);
  store.Tick();
  ASSERT_EQ(client.got.size(), 3u);
  EXPECT_EQ(client.got[1].result().job.body, "ok");
  EXPECT_EQ(client.got[2].result().stats->tubes, 3u);
}

TEST(OwnedResult, CopiesWhatTheResultViews) {
  command::JobExtensionStats x;
  command::Attribute attrs[] = {{"name", "value"}};
  std::string key = "key";
  x.key = key;
  x.attributes = attrs;
  command::JobStats js;
  std::string tube = "tube";
  js.tube = tube;
  js.state = "ready";
  js.extension = &x;
  command::Result r = command::Result::Of(command::Outcome::kJobStats);
  r.job_stats = &js;
  command::OwnedResult o(r);
  tube = "xxxx";
  key = "yyy";
  command::OwnedResult moved(std::move(o));
  command::OwnedResult copied(moved);
  for (const command::OwnedResult* p : {&moved, &copied}) {
    const command::JobStats& c = *p->result().job_stats;
    EXPECT_NE(&c, &js);
    EXPECT_EQ(c.tube, "tube");
    EXPECT_EQ(c.state, "ready");
    ASSERT_TRUE(c.extension);
    EXPECT_EQ(c.extension->key, "key");
    ASSERT_EQ(c.extension->attributes.size(), 1u);
    EXPECT_EQ(c.extension->attributes[0].value, "value");
  }
  std::vector<std::string_view> names = {"a", "b"};
  command::Result l = command::Result::Of(command::Outcome::kTubeList);
  l.tubes = &names;
  command::OwnedResult ol(l);
  ASSERT_EQ(ol.result().tubes->size(), 2u);
  EXPECT_NE(ol.result().tubes, &names);
  EXPECT_EQ((*ol.result().tubes)[1], "b");
}

}  // namespace
}  // namespace stalkd::store
