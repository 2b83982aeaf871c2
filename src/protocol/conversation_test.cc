#include "protocol/conversation.h"

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/job_log.h"
#include "store/memory_store.h"

namespace stalkd::protocol {
namespace {

using command::Verb;
using engine::JobState;

class StubHost final : public command::Host {
 public:
  command::HostStats CurrentStats() const override {
    command::HostStats h;
    h.pid = 4242;
    h.version = "test";
    h.id = "abc";
    h.hostname = "host";
    return h;
  }
};

// One client: a Conversation whose late results come back through this object.
struct Client final : command::Client {
  explicit Client(command::Store& store) : conv(store, *this) {}
  void OnResult(const command::Result& r) override { conv.OnResult(r); }
  void Send(std::string_view bytes) {
    char* p = conv.PrepareInput(bytes.size());
    if (!bytes.empty()) std::memcpy(p, bytes.data(), bytes.size());
    conv.CommitInput(bytes.size());
  }
  std::string Take() {
    std::string s = conv.output();
    conv.output().clear();
    return s;
  }
  Conversation conv;
};

// A deterministic world: FakeClock, the in-memory store, Host and any number of clients.
class World {
 public:
  explicit World(store::MemoryStoreOptions opt = {})
      : store(clock, opt, &host), engine(store.engine()) {}
  ~World() {
    clients_.clear();  // conversations go before the engine
    engine.CheckInvariants();
  }

  Client& NewClient() {
    clients_.push_back(std::make_unique<Client>(store));
    engine.CheckInvariants();
    return *clients_.back();
  }
  void Drop(Client& c) {
    for (auto it = clients_.begin(); it != clients_.end(); ++it) {
      if (it->get() == &c) {
        clients_.erase(it);
        break;
      }
    }
    engine.CheckInvariants();
    Pump();
  }

  // Runs every client (late results arrive as they complete) until nothing moves.
  void Pump() {
    for (int round = 0;; round++) {
      ASSERT_LT(round, 1'000'000);
      bool progress = false;
      for (auto& c : clients_) {
        if (c->conv.runnable()) progress = true;
        c->conv.Run(1'000'000);
        engine.CheckInvariants();
      }
      if (!progress) break;
    }
  }
  void Tick() {
    store.Tick();
    engine.CheckInvariants();
    Pump();
  }
  void Advance(Nanos d) {
    clock.Advance(d);
    Tick();
  }

  // Sends bytes, runs everything, returns what c got.
  std::string Do(Client& c, std::string_view in) {
    c.Send(in);
    Pump();
    return c.Take();
  }

  uint64_t Ops(Verb v) const { return store.count(v); }

  FakeClock clock;
  StubHost host;
  store::MemoryStore store;
  engine::Engine& engine;

 private:
  std::vector<std::unique_ptr<Client>> clients_;
};

class ConversationTest : public ::testing::Test {
 protected:
  World w_;
};

TEST_F(ConversationTest, PipelinedCommandsAnsweredInOrder) {
  Client& c = w_.NewClient();
  EXPECT_EQ(w_.Do(c,
                  "put 0 0 60 3\r\nabc\r\n"
                  "use foo\r\n"
                  "put 5 0 60 1\r\nx\r\n"
                  "list-tube-used\r\n"
                  "peek 1\r\n"
                  "peek-ready\r\n"
                  "bogus\r\n"
                  "delete 1\r\n"
                  "delete 1\r\n"
                  "watch foo\r\n"
                  "ignore default\r\n"
                  "ignore foo\r\n"
                  "reserve-with-timeout 0\r\n"
                  "reserve-with-timeout 0\r\n"
                  "list-tube-used\r\n"),
            "INSERTED 1\r\n"
            "USING foo\r\n"
            "INSERTED 2\r\n"
            "USING foo\r\n"
            "FOUND 1 3\r\nabc\r\n"
            "FOUND 2 1\r\nx\r\n"
            "UNKNOWN_COMMAND\r\n"
            "DELETED\r\n"
            "NOT_FOUND\r\n"
            "WATCHING 2\r\n"
            "WATCHING 1\r\n"
            "NOT_IGNORED\r\n"
            "RESERVED 2 1\r\nx\r\n"
            "TIMED_OUT\r\n"
            "USING foo\r\n");
}

TEST_F(ConversationTest, JobLifecycleReplies) {
  Client& c = w_.NewClient();
  EXPECT_EQ(w_.Do(c, "put 2000 0 10 2\r\nhi\r\nreserve\r\n"),
            "INSERTED 1\r\nRESERVED 1 2\r\nhi\r\n");
  EXPECT_EQ(w_.Do(c, "touch 1\r\ntouch 2\r\nrelease 1 3 0\r\nrelease 1 3 0\r\n"),
            "TOUCHED\r\nNOT_FOUND\r\nRELEASED\r\nNOT_FOUND\r\n");
  EXPECT_EQ(w_.Do(c, "reserve-job 1\r\nbury 1 7\r\nbury 1 7\r\npeek-buried\r\n"),
            "RESERVED 1 2\r\nhi\r\nBURIED\r\nNOT_FOUND\r\nFOUND 1 2\r\nhi\r\n");
  EXPECT_EQ(w_.Do(c, "kick-job 1\r\nkick-job 1\r\npeek-delayed\r\n"),
            "KICKED\r\nNOT_FOUND\r\nNOT_FOUND\r\n");
  EXPECT_EQ(w_.engine.Find(1)->pri, 7u);
  EXPECT_EQ(w_.Do(c, "put 0 5 10 1\r\nd\r\npeek-delayed\r\nkick 10\r\nkick 10\r\n"),
            "INSERTED 2\r\nFOUND 2 1\r\nd\r\nKICKED 1\r\nKICKED 0\r\n");
  EXPECT_EQ(w_.Do(c, "pause-tube default 10\r\npause-tube nope 1\r\npause-tube -x 1\r\n"),
            "PAUSED\r\nNOT_FOUND\r\nBAD_FORMAT\r\n");
  // beanstalkd counts a pause-tube that parsed, even with a bad name.
  EXPECT_EQ(w_.Ops(Verb::kPauseTube), 3u);
  EXPECT_EQ(w_.Do(c, "quit\r\n"), "");
  EXPECT_TRUE(c.conv.closing());
}

TEST_F(ConversationTest, StatsReplies) {
  Client& c = w_.NewClient();
  w_.Do(c, "put 0 0 60 1\r\nx\r\n");
  std::string out = w_.Do(c, "stats\r\n");
  ASSERT_EQ(out.substr(0, 3), "OK ");
  size_t eol = out.find("\r\n");
  size_t n = std::stoul(out.substr(3, eol - 3));
  EXPECT_EQ(out.size(), eol + 2 + n + 2);
  EXPECT_EQ(out.substr(out.size() - 2), "\r\n");
  std::string body = out.substr(eol + 2, n);
  EXPECT_NE(body.find("current-jobs-ready: 1\n"), std::string::npos);
  EXPECT_NE(body.find("cmd-put: 1\n"), std::string::npos);
  EXPECT_NE(body.find("total-jobs: 1\n"), std::string::npos);
  EXPECT_NE(body.find("current-connections: 1\n"), std::string::npos);
  EXPECT_NE(body.find("current-producers: 1\n"), std::string::npos);
  EXPECT_NE(body.find("pid: 4242\n"), std::string::npos);
  out = w_.Do(c, "stats-job 1\r\nstats-job 2\r\nstats-tube default\r\nstats-tube nope\r\n");
  EXPECT_NE(out.find("state: ready\n"), std::string::npos);
  EXPECT_NE(out.find("NOT_FOUND\r\nOK "), std::string::npos);
  EXPECT_NE(out.find("name: \"default\"\n"), std::string::npos);
  EXPECT_EQ(out.substr(out.size() - 11), "NOT_FOUND\r\n");
  EXPECT_EQ(w_.Do(c, "list-tubes\r\n"), "OK 14\r\n---\n- default\n\r\n");
  EXPECT_EQ(w_.Do(c, "watch a\r\nlist-tubes-watched\r\n"),
            "WATCHING 2\r\nOK 18\r\n---\n- default\n- a\n\r\n");
}

TEST_F(ConversationTest, PutBodySplitAtEveryByte) {
  const std::string msg = "put 3 0 60 7\r\nhe\r\nllo\r\nlist-tube-used\r\n";
  for (size_t cut = 0; cut <= msg.size(); cut++) {
    World w;
    Client& c = w.NewClient();
    c.Send(msg.substr(0, cut));
    w.Pump();
    c.Send(msg.substr(cut));
    w.Pump();
    EXPECT_EQ(c.Take(), "INSERTED 1\r\nUSING default\r\n") << "cut at " << cut;
    engine::Job* j = w.engine.Find(1);
    ASSERT_NE(j, nullptr);
    EXPECT_EQ(std::string(j->data(), j->data_size()), "he\r\nllo\r\n");
  }
  // And one byte at a time.
  World w;
  Client& c = w.NewClient();
  for (char ch : msg) {
    c.Send(std::string_view(&ch, 1));
    w.Pump();
  }
  EXPECT_EQ(c.Take(), "INSERTED 1\r\nUSING default\r\n");
}

TEST_F(ConversationTest, ZeroByteBody) {
  Client& c = w_.NewClient();
  EXPECT_EQ(w_.Do(c, "put 0 0 60 0\r\n\r\npeek 1\r\n"), "INSERTED 1\r\nFOUND 1 0\r\n\r\n");
}

TEST_F(ConversationTest, JobTooBigSkipsBody) {
  w_.store.set_max_job_size(10);
  Client& c = w_.NewClient();
  // The body looks like commands; it must not run.
  EXPECT_EQ(w_.Do(c, "put 0 0 60 11\r\nstats\r\nabcd\r\nlist-tube-used\r\n"),
            "JOB_TOO_BIG\r\nUSING default\r\n");
  // Split across reads.
  c.Send("put 0 0 60 20\r\n0123456789");
  w_.Pump();
  EXPECT_EQ(c.Take(), "");
  c.Send("0123456789\r");
  w_.Pump();
  EXPECT_EQ(c.Take(), "");
  EXPECT_EQ(w_.Do(c, "\nlist-tube-used\r\n"), "JOB_TOO_BIG\r\nUSING default\r\n");
  // The size check comes before the trailing-garbage check.
  EXPECT_EQ(w_.Do(c, "put 0 0 60 11 junk\r\n01234567890\r\nlist-tube-used\r\n"),
            "JOB_TOO_BIG\r\nUSING default\r\n");
  EXPECT_EQ(w_.Do(c, "put 0 0 60 10\r\n0123456789\r\n"), "INSERTED 1\r\n");
  EXPECT_EQ(w_.engine.counters().total_jobs, 1u);
  EXPECT_EQ(w_.Ops(Verb::kPut), 4u);
}

TEST_F(ConversationTest, PutTrailingGarbageDoesNotSkipBody) {
  Client& c = w_.NewClient();
  // As in beanstalkd, the body is then read as a command line.
  EXPECT_EQ(w_.Do(c, "put 0 0 60 1 x\r\nx\r\n"), "BAD_FORMAT\r\nUNKNOWN_COMMAND\r\n");
  EXPECT_EQ(w_.engine.counters().total_jobs, 0u);
  EXPECT_EQ(w_.engine.counters().producers, 0u);
}

TEST_F(ConversationTest, ExpectedCrlf) {
  Client& c = w_.NewClient();
  EXPECT_EQ(w_.Do(c, "put 0 0 60 3\r\nabcde\r\n"), "EXPECTED_CRLF\r\nUNKNOWN_COMMAND\r\n");
  EXPECT_EQ(w_.engine.counters().total_jobs, 0u);
  EXPECT_EQ(w_.engine.Find(1), nullptr);
  EXPECT_EQ(w_.Do(c, "put 0 0 60 3\r\nabc\r\n"), "INSERTED 2\r\n");
  // The 3 data bytes are "x\n\r"; the "\n" left over starts the next line.
  EXPECT_EQ(w_.Do(c, "put 0 0 60 1\r\nx\n\r\n"), "EXPECTED_CRLF\r\n");
  EXPECT_EQ(w_.Do(c, "list-tube-used\r\n"), "UNKNOWN_COMMAND\r\n");
}

TEST_F(ConversationTest, LineLengthLimit) {
  Client& c = w_.NewClient();
  // 222 characters + CRLF = 224 bytes: a line (here an unknown command).
  EXPECT_EQ(w_.Do(c, std::string(222, 'a') + "\r\n"), "UNKNOWN_COMMAND\r\n");
  // A real command padded to 222 characters with spaces before a number.
  std::string put = "put " + std::string(222 - 12, ' ') + "0 0 60 1";
  ASSERT_EQ(put.size(), 222u);
  EXPECT_EQ(w_.Do(c, put + "\r\nx\r\n"), "INSERTED 1\r\n");
  // 223 characters + CRLF = 225: BAD_FORMAT once, the rest of the line dropped.
  EXPECT_EQ(w_.Do(c, std::string(223, 'a') + "\r\nlist-tube-used\r\n"),
            "BAD_FORMAT\r\nUSING default\r\n");
  EXPECT_EQ(w_.Do(c, " " + put + "\r\nlist-tube-used\r\n"), "BAD_FORMAT\r\nUSING default\r\n");
  // A much longer line, with stray CRs, arriving in pieces.
  std::string big;
  for (int i = 0; i < 3000; i++) big += (i % 97 == 0) ? '\r' : 'b';
  for (size_t i = 0; i < big.size(); i += 100) {
    c.Send(big.substr(i, 100));
    w_.Pump();
  }
  EXPECT_EQ(c.Take(), "BAD_FORMAT\r\n");
  c.Send("\r");
  w_.Pump();
  EXPECT_EQ(c.Take(), "");
  EXPECT_EQ(w_.Do(c, "\nlist-tube-used\r\n"), "USING default\r\n");
  // A 223-character line whose CRLF arrives later.
  c.Send(std::string(223, 'c'));
  w_.Pump();
  EXPECT_EQ(c.Take(), "");
  EXPECT_FALSE(c.conv.runnable());
  EXPECT_EQ(w_.Do(c, "\r\nlist-tube-used\r\n"), "BAD_FORMAT\r\nUSING default\r\n");
}

TEST_F(ConversationTest, NulInLine) {
  Client& c = w_.NewClient();
  EXPECT_EQ(w_.Do(c, std::string("stats\0\r\nquitx\0\r\n", 16)), "BAD_FORMAT\r\nBAD_FORMAT\r\n");
  EXPECT_FALSE(c.conv.closing());
}

TEST_F(ConversationTest, QuitClosesAndIgnoresTheRest) {
  Client& c = w_.NewClient();
  EXPECT_EQ(w_.Do(c, "list-tube-used\r\nquitxyz\r\nlist-tube-used\r\n"), "USING default\r\n");
  EXPECT_TRUE(c.conv.closing());
  EXPECT_FALSE(c.conv.runnable());
  EXPECT_FALSE(c.conv.Run(10));
  EXPECT_EQ(c.Take(), "");
}

TEST_F(ConversationTest, WaitingReserveServedByAnotherConversation) {
  Client& worker = w_.NewClient();
  Client& producer = w_.NewClient();
  EXPECT_EQ(w_.Do(worker, "watch jobs\r\nreserve\r\nlist-tube-used\r\n"), "WATCHING 2\r\n");
  EXPECT_TRUE(worker.conv.waiting());
  EXPECT_FALSE(worker.conv.runnable());
  EXPECT_EQ(w_.engine.counters().waiting, 1u);
  EXPECT_EQ(w_.Do(producer, "use jobs\r\nput 1 0 60 4\r\nwork\r\n"),
            "USING jobs\r\nINSERTED 1\r\n");
  // The pipelined command after reserve ran once the reserve was answered.
  EXPECT_EQ(worker.Take(), "RESERVED 1 4\r\nwork\r\nUSING default\r\n");
  EXPECT_FALSE(worker.conv.waiting());
  EXPECT_EQ(w_.engine.Find(1)->state(), JobState::kReserved);
  EXPECT_EQ(w_.Do(producer, "delete 1\r\n"), "NOT_FOUND\r\n");
  EXPECT_EQ(w_.Do(worker, "delete 1\r\n"), "DELETED\r\n");
}

TEST_F(ConversationTest, RunnableAgainAfterEvent) {
  Client& c = w_.NewClient();
  Client& p = w_.NewClient();
  c.Send("reserve\r\nlist-tube-used\r\n");
  EXPECT_FALSE(c.conv.Run(10));
  EXPECT_TRUE(c.conv.waiting());
  EXPECT_FALSE(c.conv.runnable());
  p.Send("put 0 0 60 1\r\nx\r\n");
  EXPECT_FALSE(p.conv.Run(10));  // the put hands the job to c at once
  EXPECT_FALSE(c.conv.waiting());
  EXPECT_EQ(c.Take(), "RESERVED 1 1\r\nx\r\n");
  EXPECT_TRUE(c.conv.runnable());  // the pipelined command can run now
  EXPECT_FALSE(c.conv.Run(10));
  EXPECT_EQ(c.Take(), "USING default\r\n");
}

TEST_F(ConversationTest, PausedTubeStats) {
  Client& c = w_.NewClient();
  EXPECT_EQ(w_.Do(c, "pause-tube default 10\r\n"), "PAUSED\r\n");
  w_.Advance(3 * kSecond);
  std::string out = w_.Do(c, "stats-tube default\r\n");
  EXPECT_NE(out.find("cmd-pause-tube: 1\npause: 10\npause-time-left: 7\n"), std::string::npos)
      << out;
  w_.Advance(7 * kSecond);
  out = w_.Do(c, "stats-tube default\r\n");
  EXPECT_NE(out.find("pause: 0\npause-time-left: 0\n"), std::string::npos) << out;
}

TEST_F(ConversationTest, ReserveWithTimeoutExpires) {
  Client& c = w_.NewClient();
  EXPECT_EQ(w_.Do(c, "reserve-with-timeout 2\r\nlist-tube-used\r\n"), "");
  w_.Advance(kSecond);
  EXPECT_EQ(c.Take(), "");
  w_.Advance(kSecond);
  EXPECT_EQ(c.Take(), "TIMED_OUT\r\nUSING default\r\n");
}

TEST_F(ConversationTest, DeadlineSoon) {
  Client& c = w_.NewClient();
  EXPECT_EQ(w_.Do(c, "put 0 0 1 1\r\na\r\nreserve\r\nreserve\r\n"),
            "INSERTED 1\r\nRESERVED 1 1\r\na\r\nDEADLINE_SOON\r\n");
  EXPECT_EQ(w_.Do(c, "put 0 0 10 1\r\nb\r\nreserve\r\n"), "INSERTED 2\r\nRESERVED 2 1\r\nb\r\n");
  // Job 1 expires; job 2's deadline comes within a second while waiting.
  EXPECT_EQ(w_.Do(c, "delete 1\r\nreserve\r\n"), "DELETED\r\n");
  w_.Advance(8 * kSecond);
  EXPECT_EQ(c.Take(), "");
  w_.Advance(kSecond);
  EXPECT_EQ(c.Take(), "DEADLINE_SOON\r\n");
}

TEST_F(ConversationTest, TtrExpiryVisibleInStatsJob) {
  Client& a = w_.NewClient();
  EXPECT_EQ(w_.Do(a, "put 0 0 2 1\r\na\r\nreserve\r\n"), "INSERTED 1\r\nRESERVED 1 1\r\na\r\n");
  w_.Advance(2 * kSecond);
  std::string out = w_.Do(a, "stats-job 1\r\n");
  EXPECT_NE(out.find("state: ready\n"), std::string::npos);
  EXPECT_NE(out.find("timeouts: 1\n"), std::string::npos);
  EXPECT_EQ(w_.Do(a, "release 1 0 0\r\n"), "NOT_FOUND\r\n");
}

TEST_F(ConversationTest, InputClosedWhileWaiting) {
  Client& c = w_.NewClient();
  EXPECT_EQ(w_.Do(c, "reserve\r\n"), "");
  c.conv.OnInputClosed();
  EXPECT_TRUE(c.conv.input_closed());
  EXPECT_TRUE(c.conv.closing());
  EXPECT_EQ(c.Take(), "TIMED_OUT\r\n");
  EXPECT_EQ(w_.engine.counters().waiting, 0u);
  w_.engine.CheckInvariants();
  // A later job is not handed to it.
  Client& p = w_.NewClient();
  EXPECT_EQ(w_.Do(p, "put 0 0 60 1\r\nx\r\n"), "INSERTED 1\r\n");
  EXPECT_EQ(w_.engine.Find(1)->state(), JobState::kReady);
  EXPECT_EQ(c.Take(), "");
}

TEST_F(ConversationTest, InputClosedWhenIdleStaysOpenForOutput) {
  Client& c = w_.NewClient();
  c.Send("list-tube-used\r\n");
  c.conv.OnInputClosed();
  w_.Pump();
  EXPECT_EQ(c.Take(), "USING default\r\n");
  EXPECT_FALSE(c.conv.waiting());
}

TEST_F(ConversationTest, ClosingConversationReleasesJobsAndDiscardsPartialPut) {
  Client& a = w_.NewClient();
  Client& b = w_.NewClient();
  EXPECT_EQ(w_.Do(a, "put 0 0 60 1\r\nx\r\nreserve\r\nput 0 0 60 10\r\nabc"),
            "INSERTED 1\r\nRESERVED 1 1\r\nx\r\n");
  EXPECT_EQ(w_.Do(b, "reserve\r\n"), "");
  w_.Drop(a);
  EXPECT_EQ(b.Take(), "RESERVED 1 1\r\nx\r\n");
  EXPECT_EQ(w_.engine.Find(2), nullptr);
  EXPECT_EQ(w_.engine.counters().sessions, 1u);
}

TEST_F(ConversationTest, DrainingPut) {
  Client& c = w_.NewClient();
  w_.engine.set_draining(true);
  EXPECT_EQ(w_.Do(c, "put 0 0 60 1\r\nx\r\nlist-tube-used\r\n"), "DRAINING\r\nUSING default\r\n");
  w_.engine.set_draining(false);
  EXPECT_EQ(w_.Do(c, "put 0 0 60 1\r\nx\r\n"), "INSERTED 2\r\n");
}

TEST(ConversationMemory, OutOfMemorySkipsBody) {
  store::MemoryStoreOptions opt;
  opt.engine.max_memory = 20000;
  World w(opt);
  Client& c = w.NewClient();
  std::string body(5000, 'z');
  std::string out;
  int inserted = 0;
  for (int i = 0; i < 10; i++) {
    out = w.Do(c, "put 0 0 60 5000\r\n" + body + "\r\nlist-tube-used\r\n");
    if (out.rfind("INSERTED", 0) == 0) inserted++;
  }
  EXPECT_GE(inserted, 1);
  EXPECT_LT(inserted, 10);
  EXPECT_EQ(out, "OUT_OF_MEMORY\r\nUSING default\r\n");
  EXPECT_EQ(w.Do(c, "delete 1\r\nput 0 0 60 5000\r\n" + body + "\r\n"),
            "DELETED\r\nINSERTED " + std::to_string(inserted + 1) + "\r\n");
}

TEST_F(ConversationTest, KickOfManyBuriedJobsIsSliced) {
  Client& c = w_.NewClient();
  std::string in;
  for (int i = 0; i < 5000; i++) in += "put 0 0 60 1\r\nk\r\n";
  c.Send(in);
  w_.Pump();
  c.Take();
  auto bury = [&](uint64_t first, uint64_t last) {
    std::string cmds;
    for (uint64_t id = first; id <= last; id++) {
      cmds += "reserve-job " + std::to_string(id) + "\r\nbury " + std::to_string(id) + " 0\r\n";
    }
    w_.Do(c, cmds);
  };
  bury(1, 5000);
  EXPECT_EQ(w_.engine.counters().buried, 5000u);
  // Also a delayed job: kick works on buried jobs only while there are any.
  EXPECT_EQ(w_.Do(c, "put 0 100 60 1\r\nd\r\n"), "INSERTED 5001\r\n");
  c.Send("kick 5000\r\nlist-tube-used\r\n");
  EXPECT_FALSE(c.conv.Run(10));  // the command and its first slice; the rest is pending
  EXPECT_TRUE(c.conv.waiting());
  int ticks = 0;
  while (c.conv.output().empty()) {
    // Each Tick does one more slice, and says more work is left until the last.
    Nanos next = w_.store.Tick();
    w_.engine.CheckInvariants();
    ticks++;
    ASSERT_LT(ticks, 100);
    if (c.conv.output().empty()) {
      EXPECT_EQ(next, w_.clock.Now());
    }
  }
  EXPECT_EQ(ticks, 4);  // four more slices
  EXPECT_EQ(c.Take(), "KICKED 5000\r\n");
  EXPECT_EQ(w_.engine.counters().buried, 0u);
  EXPECT_EQ(w_.engine.counters().ready, 5000u);
  EXPECT_EQ(w_.engine.counters().delayed, 1u);
  EXPECT_FALSE(c.conv.Run(1));
  EXPECT_EQ(c.Take(), "USING default\r\n");
  // Asking for more than there are ends early, and then the delayed one is kicked.
  bury(1, 2500);
  c.Send("kick 100000\r\nkick 100000\r\n");
  w_.Pump();
  for (int i = 0; i < 2; i++) w_.Tick();
  EXPECT_EQ(c.Take(), "KICKED 2500\r\nKICKED 1\r\n");
}

TEST_F(ConversationTest, InputClosedDuringALongKickStillAnswersEverything) {
  Client& c = w_.NewClient();
  std::string in;
  for (int i = 0; i < 1500; i++) in += "put 0 100 60 1\r\nd\r\n";
  w_.Do(c, in);
  c.Send("kick 1500\r\nlist-tube-used\r\n");
  EXPECT_FALSE(c.conv.Run(10));
  EXPECT_TRUE(c.conv.waiting());
  EXPECT_FALSE(c.conv.waiting_for_client());  // a kick is not abandoned by a hang-up
  c.conv.OnInputClosed();
  EXPECT_FALSE(c.conv.closing());
  w_.Tick();
  EXPECT_EQ(c.Take(), "KICKED 1500\r\nUSING default\r\n");
  // A reserve is: it waits for the client.
  Client& w = w_.NewClient();
  w.Send("watch empty\r\nignore default\r\nreserve\r\n");
  w_.Pump();
  EXPECT_TRUE(w.conv.waiting_for_client());
  w.conv.OnInputClosed();
  EXPECT_TRUE(w.conv.closing());
  EXPECT_EQ(w.Take(), "WATCHING 2\r\nWATCHING 1\r\nTIMED_OUT\r\n");
}

TEST_F(ConversationTest, OutputHighWaterStopsProcessing) {
  w_.store.set_max_job_size(2 << 20);
  Client& c = w_.NewClient();
  const size_t n = (1 << 20) + 1000;
  std::string body(n, 'q');
  EXPECT_EQ(w_.Do(c, "put 0 0 60 " + std::to_string(n) + "\r\n" + body + "\r\n"), "INSERTED 1\r\n");
  c.Send("peek 1\r\npeek 1\r\nlist-tube-used\r\n");
  EXPECT_FALSE(c.conv.Run(100));
  EXPECT_EQ(c.conv.output().size(), std::string("FOUND 1 1049576\r\n").size() + n + 2);
  EXPECT_GT(c.conv.buffered_input(), 0u);
  EXPECT_FALSE(c.conv.Run(100));  // still blocked
  EXPECT_GT(c.conv.buffered_input(), 0u);
  c.Take();
  EXPECT_FALSE(c.conv.Run(100));
  EXPECT_GE(c.conv.output().size(), n);
  c.Take();
  w_.Pump();
  EXPECT_EQ(c.Take(), "USING default\r\n");
  EXPECT_EQ(c.conv.buffered_input(), 0u);
}

TEST_F(ConversationTest, RunStopsAtMaxSteps) {
  Client& c = w_.NewClient();
  c.Send("list-tube-used\r\nlist-tube-used\r\nlist-tube-used\r\n");
  EXPECT_TRUE(c.conv.Run(2));
  EXPECT_EQ(c.Take(), "USING default\r\nUSING default\r\n");
  EXPECT_TRUE(c.conv.runnable());
  EXPECT_FALSE(c.conv.Run(2));
  EXPECT_EQ(c.Take(), "USING default\r\n");
  EXPECT_FALSE(c.conv.runnable());
}

TEST_F(ConversationTest, IncompleteLineIsNotRunnable) {
  Client& c = w_.NewClient();
  c.Send("list-tube");
  EXPECT_TRUE(c.conv.runnable());
  EXPECT_FALSE(c.conv.Run(10));
  EXPECT_FALSE(c.conv.runnable());
  c.Send("-used\r\n");
  EXPECT_TRUE(c.conv.runnable());
  EXPECT_FALSE(c.conv.Run(10));
  EXPECT_EQ(c.Take(), "USING default\r\n");
}

TEST_F(ConversationTest, InputBufferHeldOnlyWhileInputIsBuffered) {
  Client& c = w_.NewClient();
  EXPECT_EQ(c.conv.input_capacity(), 0u);
  c.Send("list-tube");
  EXPECT_FALSE(c.conv.Run(10));
  EXPECT_GT(c.conv.input_capacity(), 0u);  // the partial line is kept
  c.Send("-used\r\nreserve\r\nlist-tube-used\r\n");
  w_.Pump();
  EXPECT_EQ(c.Take(), "USING default\r\n");
  EXPECT_EQ(c.conv.buffered_input(), std::string("list-tube-used\r\n").size());  // waiting
  EXPECT_GT(c.conv.input_capacity(), 0u);
  Client& p = w_.NewClient();
  EXPECT_EQ(w_.Do(p, "put 0 0 60 1\r\nx\r\n"), "INSERTED 1\r\n");
  EXPECT_EQ(c.Take(), "RESERVED 1 1\r\nx\r\nUSING default\r\n");
  // Everything answered: an idle conversation holds no input buffer.
  EXPECT_EQ(c.conv.buffered_input(), 0u);
  EXPECT_EQ(c.conv.input_capacity(), 0u);
}

TEST_F(ConversationTest, CommandCounters) {
  Client& c = w_.NewClient();
  w_.Do(c,
        "put 0 0 60 1\r\nx\r\npeek 1\r\npeek-ready\r\npeek-delayed\r\npeek-buried\r\n"
        "reserve-with-timeout 0\r\nrelease 1 0 0\r\nreserve\r\nbury 1 0\r\nkick 1\r\n"
        "kick-job 1\r\nreserve-job 1\r\ntouch 1\r\ndelete 1\r\nuse a\r\nwatch a\r\nignore a\r\n"
        "stats\r\nstats-job 1\r\nstats-tube a\r\nlist-tubes\r\nlist-tube-used\r\n"
        "list-tubes-watched\r\npause-tube a 0\r\n");
  for (int v = 0; v < static_cast<int>(command::kFirstExtensionVerb); v++) {
    EXPECT_EQ(w_.Ops(static_cast<Verb>(v)), 1u) << "verb " << v;
  }
  // The extensions' counters, one each (a malformed line counts nothing).
  w_.Do(c,
        "put-ext 0 0 60 1 tries=2\r\nx\r\nput-many 1 13\r\n0 0 60 1\r\ny\r\n\r\n"
        "reserve-ext 0 count=2\r\ndelete-many 2 3\r\npurge a all\r\nlist-jobs default ready 0 "
        "5\r\ntube-tries a 3\r\nreserve-ext x\r\n");
  for (size_t v = command::kFirstExtensionVerb; v < command::kEndExtensionVerb; v++) {
    EXPECT_EQ(w_.Ops(static_cast<Verb>(v)), 1u) << "verb " << v;
  }
}

TEST_F(ConversationTest, BigBodyThenSmallCommands) {
  w_.store.set_max_job_size(200000);
  Client& c = w_.NewClient();
  std::string body(150000, 'b');
  EXPECT_EQ(w_.Do(c, "put 0 0 60 150000\r\n" + body + "\r\n"), "INSERTED 1\r\n");
  EXPECT_EQ(w_.Do(c, "list-tube-used\r\n"), "USING default\r\n");
  std::string out = w_.Do(c, "reserve\r\n");
  EXPECT_EQ(out.size(), std::string("RESERVED 1 150000\r\n").size() + 150002);
}

// A log that counts one position per change and remembers each job's latest change, as
// storage::Binlog does.
class CountingLog : public engine::JobLog {
 public:
  bool Admit(const engine::Job&) override { return true; }
  void Put(const engine::Job& j) override { marks_[j.id] = ++mark_; }
  void Update(const engine::Job& j) override { marks_[j.id] = ++mark_; }
  void Delete(const engine::Job& j) override {
    ++mark_;
    marks_.erase(j.id);
  }
  int64_t Mark() const override { return mark_; }
  int64_t MarkOf(const engine::Job& j) const override { return marks_.at(j.id); }

 private:
  int64_t mark_ = 0;
  std::map<uint64_t, int64_t> marks_;
};

TEST_F(ConversationTest, NeedMarkFollowsWhatEachReplyShows) {
  CountingLog log;
  w_.engine.set_log(&log);
  Client& p = w_.NewClient();
  Client& c = w_.NewClient();
  EXPECT_EQ(w_.Do(p, "put 0 0 60 1\r\na\r\n"), "INSERTED 1\r\n");  // position 1
  EXPECT_EQ(p.conv.session().need_mark(), 1);
  EXPECT_EQ(w_.Do(p, "put 0 0 60 1\r\nb\r\n"), "INSERTED 2\r\n");  // position 2
  EXPECT_EQ(p.conv.session().need_mark(), 2);
  // Showing job 1 depends on its put only, not on job 2's; the reserve is not a change.
  EXPECT_EQ(w_.Do(c, "reserve\r\n"), "RESERVED 1 1\r\na\r\n");
  EXPECT_EQ(log.Mark(), 2);
  EXPECT_EQ(c.conv.session().need_mark(), 1);
  EXPECT_EQ(w_.Do(c, "peek 2\r\n"), "FOUND 2 1\r\nb\r\n");
  EXPECT_EQ(c.conv.session().need_mark(), 2);
  // The session's own state depends on nothing.
  EXPECT_EQ(w_.Do(c, "use t\r\n"), "USING t\r\n");
  EXPECT_EQ(c.conv.session().need_mark(), 2);
  // A change depends on its own record; other replies on every change so far.
  EXPECT_EQ(w_.Do(c, "release 1 0 0\r\n"), "RELEASED\r\n");  // position 3
  EXPECT_EQ(c.conv.session().need_mark(), 3);
  Client& s = w_.NewClient();
  EXPECT_TRUE(w_.Do(s, "stats\r\n").starts_with("OK "));
  EXPECT_EQ(s.conv.session().need_mark(), 3);
  // A job handed to a waiting reserve later: that job's latest change.
  Client& wt = w_.NewClient();
  EXPECT_EQ(w_.Do(wt, "watch t\r\nignore default\r\nreserve\r\n"), "WATCHING 2\r\nWATCHING 1\r\n");
  int64_t before = wt.conv.session().need_mark();
  EXPECT_EQ(w_.Do(c, "put 0 0 60 1\r\nc\r\n"), "INSERTED 3\r\n");  // position 4, in t
  EXPECT_EQ(wt.Take(), "RESERVED 3 1\r\nc\r\n");
  EXPECT_EQ(wt.conv.session().need_mark(), std::max<int64_t>(before, 4));
  // Job 1 reserved again: it depends on its release, not on the later put of job 3.
  Client& r = w_.NewClient();
  EXPECT_EQ(w_.Do(r, "reserve\r\n"), "RESERVED 1 1\r\na\r\n");
  EXPECT_EQ(r.conv.session().need_mark(), 3);
  w_.engine.set_log(nullptr);
}

}  // namespace
}  // namespace stalkd::protocol
