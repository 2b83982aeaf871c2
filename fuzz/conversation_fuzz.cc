// Drives one Engine (on a FakeClock) through several Conversations with command byte
// streams taken from the fuzzer input, interleaved with clock advances, ticks, closed
// inputs and dropped connections. After every step it checks the engine's invariants, that
// every reply is well formed, that replies agree with the engine (RESERVED jobs are
// reserved by that client, FOUND bodies match, stats match the counters), and that the job
// counts match a model built from the INSERTED and DELETED replies.
//
// Input format: a header byte (tick budget, memory cap), then a sequence of ops, each an op
// byte followed by its arguments. Sizes and step counts are capped so huge inputs stay fast.
#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/check.h"
#include "base/clock.h"
#include "engine/engine.h"
#include "protocol/conversation.h"
#include "protocol/reply.h"

namespace {

using stalkd::FakeClock;
using stalkd::kSecond;
using stalkd::Nanos;
using stalkd::engine::Engine;
using stalkd::engine::EngineOptions;
using stalkd::engine::Event;
using stalkd::engine::GlobalCounters;
using stalkd::engine::Job;
using stalkd::engine::JobState;
using stalkd::protocol::Conversation;
using stalkd::protocol::Host;
using stalkd::protocol::HostStats;

constexpr size_t kMaxInput = 4096;
constexpr int kMaxOps = 400;
constexpr int kClients = 3;
constexpr size_t kMaxJobSize = 64;
// Time passes in steps of at most this, with a full Tick after each; large jumps (a stalled
// server) are part of what is fuzzed.
constexpr Nanos kMaxTickGap = stalkd::kForever;

#define FUZZ_CHECK(cond, ...)                                               \
  do {                                                                      \
    if (!(cond)) {                                                          \
      std::fprintf(stderr, "conversation_fuzz: check failed: %s: ", #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                    \
      std::fprintf(stderr, "\n");                                           \
      std::abort();                                                         \
    }                                                                       \
  } while (0)

class StubHost : public Host {
 public:
  HostStats CurrentStats() const override {
    HostStats h;
    h.pid = 1;
    h.version = "fuzz";
    return h;
  }
};

// Reads the fuzzer input.
class Input {
 public:
  Input(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  bool empty() const { return i_ >= n_; }
  uint8_t Byte() { return i_ < n_ ? d_[i_++] : 0; }
  std::string_view Bytes(size_t n) {
    n = std::min(n, n_ - i_);
    std::string_view s(reinterpret_cast<const char*>(d_ + i_), n);
    i_ += n;
    return s;
  }

 private:
  const uint8_t* d_;
  size_t n_;
  size_t i_ = 0;
};

class World;

struct Client {
  Client(Engine& e, const Host& h) : conv(e, h, this) {}
  Conversation conv;
};

class World {
 public:
  World(EngineOptions opt) : engine_(clock_, opt) {
    engine_.set_max_job_size(kMaxJobSize);
    for (auto& c : clients_) c = std::make_unique<Client>(engine_, host_);
  }
  ~World() {
    for (auto& c : clients_) c.reset();
    engine_.CheckInvariants();
  }

  void Send(int k, std::string_view bytes) {
    Client& c = *clients_[k];
    char* p = c.conv.PrepareInput(bytes.size());
    if (!bytes.empty()) std::memcpy(p, bytes.data(), bytes.size());
    c.conv.CommitInput(bytes.size());
  }

  void Reopen(int k) {
    clients_[k].reset();
    engine_.CheckInvariants();
    Deliver();
    clients_[k] = std::make_unique<Client>(engine_, host_);
    engine_.CheckInvariants();
  }

  void InputClosed(int k) {
    clients_[k]->conv.OnInputClosed();
    Drain(*clients_[k]);
    engine_.CheckInvariants();
  }

  void Advance(Nanos d) {
    while (d > kMaxTickGap) {
      AdvanceOnce(kMaxTickGap);
      d -= kMaxTickGap;
    }
    AdvanceOnce(d);
  }

  void AdvanceOnce(Nanos d) {
    clock_.Advance(d);
    for (int i = 0; i < 10000; i++) {
      Nanos next = engine_.Tick();
      engine_.CheckInvariants();
      Deliver();
      Pump();
      if (next > clock_.Now()) return;
    }
    FUZZ_CHECK(false, "Tick never caught up");
  }

  void set_draining(bool on) { engine_.set_draining(on); }

  // Runs every conversation one command at a time, delivering events right after each run
  // (so no event outlives its session), until nothing moves.
  void Pump() {
    for (int round = 0;; round++) {
      FUZZ_CHECK(round < 100000, "Pump does not settle");
      bool progress = false;
      for (auto& c : clients_) {
        size_t in_before = c->conv.buffered_input();
        bool more = c->conv.Run(1);
        engine_.CheckInvariants();
        if (more || c->conv.buffered_input() != in_before || !c->conv.output().empty()) {
          progress = true;
        }
        Drain(*c);
        if (Deliver()) progress = true;
        CheckModel();
      }
      if (!progress) return;
    }
  }

  // Hands pending engine events to their conversations. Returns true if there were any.
  bool Deliver() {
    std::vector<Event> ev;
    engine_.TakeEvents(&ev);
    for (const Event& e : ev) {
      Client* c = static_cast<Client*>(e.session->owner());
      FUZZ_CHECK(c->conv.session() == e.session, "event for a stale session");
      FUZZ_CHECK(c->conv.waiting(), "event for a conversation not waiting");
      FUZZ_CHECK(!e.session->waiting(), "event while still waiting");
      if (e.kind == Event::Kind::kReserved) {
        FUZZ_CHECK(e.job->state() == JobState::kReserved && e.job->reserver() == e.session,
                   "reserved event job %" PRIu64, e.job->id);
      }
      c->conv.OnEvent(e);
      engine_.CheckInvariants();
      Drain(*c);
    }
    return !ev.empty();
  }

  void CheckModel() {
    const GlobalCounters& g = engine_.counters();
    FUZZ_CHECK(g.total_jobs == inserted_, "total_jobs %" PRIu64 " vs %" PRIu64, g.total_jobs,
               inserted_);
    uint64_t live = g.ready + g.reserved + g.delayed + g.buried;
    FUZZ_CHECK(live == inserted_ - deleted_, "live %" PRIu64 " vs %" PRIu64, live,
               inserted_ - deleted_);
    FUZZ_CHECK(g.sessions == kClients, "sessions %" PRIu64, g.sessions);
    FUZZ_CHECK(g.urgent <= g.ready, "urgent");
    FUZZ_CHECK(g.waiting <= g.workers && g.workers <= g.sessions, "workers/waiting");
    FUZZ_CHECK(g.producers <= g.sessions, "producers");
    uint64_t tube_ready = 0, tube_reserved = 0, tube_total = 0;
    for (const auto* t : engine_.tubes()) {
      tube_ready += t->ready.size();
      tube_reserved += t->stat.reserved;
      tube_total += t->stat.total_jobs;
    }
    FUZZ_CHECK(tube_ready == g.ready && tube_reserved == g.reserved, "tube sums");
    (void)tube_total;  // tubes that vanished took their totals with them
  }

 private:
  // Parses and checks everything c has produced, then clears it (the peer read it).
  void Drain(Client& c) {
    std::string& out = c.conv.output();
    size_t pos = 0;
    while (pos < out.size()) {
      size_t eol = out.find("\r\n", pos);
      FUZZ_CHECK(eol != std::string::npos, "reply without CRLF");
      std::string line = out.substr(pos, eol - pos);
      pos = eol + 2;
      std::string word = line.substr(0, line.find(' '));
      std::string rest = line.size() > word.size() ? line.substr(word.size() + 1) : "";
      if (word == "RESERVED" || word == "FOUND") {
        uint64_t id = 0;
        unsigned n = 0;
        FUZZ_CHECK(std::sscanf(rest.c_str(), "%" SCNu64 " %u", &id, &n) == 2, "%s", line.c_str());
        FUZZ_CHECK(pos + n + 2 <= out.size(), "short body");
        FUZZ_CHECK(out.compare(pos + n, 2, "\r\n") == 0, "body without CRLF");
        const Job* j = engine_.Find(id);
        FUZZ_CHECK(j != nullptr, "%s: no such job", line.c_str());
        FUZZ_CHECK(j->body_size == n && out.compare(pos, n, j->data(), n) == 0, "body mismatch");
        if (word == "RESERVED") {
          FUZZ_CHECK(j->state() == JobState::kReserved && j->reserver() == c.conv.session(),
                     "RESERVED job %" PRIu64 " not reserved by this client", id);
        }
        pos += n + 2;
      } else if (word == "OK") {
        size_t n = std::strtoul(rest.c_str(), nullptr, 10);
        FUZZ_CHECK(pos + n + 2 <= out.size(), "short yaml");
        FUZZ_CHECK(out.compare(pos + n, 2, "\r\n") == 0, "yaml without CRLF");
        std::string yaml = out.substr(pos, n);
        FUZZ_CHECK(yaml.rfind("---\n", 0) == 0, "yaml header");
        if (yaml.rfind("---\ncurrent-jobs-urgent: ", 0) == 0) CheckStats(yaml);
        pos += n + 2;
      } else if (word == "INSERTED") {
        inserted_++;
        uint64_t id = std::strtoull(rest.c_str(), nullptr, 10);
        FUZZ_CHECK(engine_.Find(id) != nullptr, "inserted job %" PRIu64 " missing", id);
      } else if (word == "DELETED") {
        deleted_++;
      } else {
        static const char* const kWords[] = {
            "USING",         "WATCHING",   "NOT_IGNORED",     "DEADLINE_SOON", "TIMED_OUT",
            "NOT_FOUND",     "RELEASED",   "BURIED",          "TOUCHED",       "KICKED",
            "PAUSED",        "BAD_FORMAT", "UNKNOWN_COMMAND", "JOB_TOO_BIG",   "EXPECTED_CRLF",
            "OUT_OF_MEMORY", "DRAINING",
        };
        bool known = false;
        for (const char* w : kWords) known = known || word == w;
        FUZZ_CHECK(known, "unknown reply '%s'", line.c_str());
      }
    }
    out.clear();
  }

  // `stats` is answered from the counters at the moment of the command; with Run(1) nothing
  // else has happened since.
  void CheckStats(const std::string& yaml) {
    std::map<std::string, uint64_t> kv;
    size_t p = 4;
    while (p < yaml.size()) {
      size_t nl = yaml.find('\n', p);
      if (nl == std::string::npos) break;
      std::string l = yaml.substr(p, nl - p);
      size_t colon = l.find(": ");
      if (colon != std::string::npos) {
        kv[l.substr(0, colon)] = std::strtoull(l.c_str() + colon + 2, nullptr, 10);
      }
      p = nl + 1;
    }
    const GlobalCounters& g = engine_.counters();
    struct {
      const char* key;
      uint64_t want;
    } checks[] = {
        {"current-jobs-urgent", g.urgent},     {"current-jobs-ready", g.ready},
        {"current-jobs-reserved", g.reserved}, {"current-jobs-delayed", g.delayed},
        {"current-jobs-buried", g.buried},     {"total-jobs", inserted_},
        {"job-timeouts", g.timeouts},          {"current-tubes", engine_.tubes().size()},
        {"current-connections", kClients},     {"current-waiting", g.waiting},
        {"current-producers", g.producers},    {"current-workers", g.workers},
        {"max-job-size", kMaxJobSize},
    };
    for (const auto& c : checks) {
      auto it = kv.find(c.key);
      FUZZ_CHECK(it != kv.end(), "stats lacks %s", c.key);
      FUZZ_CHECK(it->second == c.want, "stats %s: %" PRIu64 " vs %" PRIu64, c.key, it->second,
                 c.want);
    }
    FUZZ_CHECK(kv["current-jobs-ready"] + kv["current-jobs-reserved"] + kv["current-jobs-delayed"] +
                       kv["current-jobs-buried"] ==
                   inserted_ - deleted_,
               "stats job sum");
  }

  FakeClock clock_;
  StubHost host_;
  Engine engine_;
  std::unique_ptr<Client> clients_[kClients];
  uint64_t inserted_ = 0;
  uint64_t deleted_ = 0;
};

const char* const kTubes[] = {"default", "t1", "t2", "-bad"};

// A well-formed (mostly) command, to reach deep states faster than raw bytes would.
std::string DictionaryCommand(Input& in) {
  uint8_t which = in.Byte();
  uint8_t a = in.Byte();
  uint8_t b = in.Byte();
  unsigned id = 1 + a % 12;
  const char* tube = kTubes[b % 4];
  char buf[160];
  switch (which % 24) {
    case 0:
    case 1:
    case 2: {
      unsigned size = b % 8;
      if (a == 255) size = kMaxJobSize + 1;
      std::string cmd(buf, static_cast<size_t>(snprintf(buf, sizeof buf, "put %u %u %u %u\r\n",
                                                        a % 3 == 0 ? 1023u + a % 2 : a * 7u,
                                                        (a / 8) % 3, 1 + b % 3, size)));
      cmd.append(size, static_cast<char>('a' + which % 26));
      cmd += (b & 0x80) ? "\r\n" : (b & 0x40 ? "!\r\n" : "\r\n");
      return cmd;
    }
    case 3:
      return "reserve\r\n";
    case 4:
      snprintf(buf, sizeof buf, "reserve-with-timeout %u\r\n", a % 3);
      return buf;
    case 5:
      snprintf(buf, sizeof buf, "delete %u\r\n", id);
      return buf;
    case 6:
      snprintf(buf, sizeof buf, "release %u %u %u\r\n", id, b * 5u, b % 3);
      return buf;
    case 7:
      snprintf(buf, sizeof buf, "bury %u %u\r\n", id, b);
      return buf;
    case 8:
      snprintf(buf, sizeof buf, "kick %u\r\n", b % 5);
      return buf;
    case 9:
      snprintf(buf, sizeof buf, "kick-job %u\r\n", id);
      return buf;
    case 10:
      snprintf(buf, sizeof buf, "touch %u\r\n", id);
      return buf;
    case 11:
      snprintf(buf, sizeof buf, "use %s\r\n", tube);
      return buf;
    case 12:
      snprintf(buf, sizeof buf, "watch %s\r\n", tube);
      return buf;
    case 13:
      snprintf(buf, sizeof buf, "ignore %s\r\n", tube);
      return buf;
    case 14:
      snprintf(buf, sizeof buf, "pause-tube %s %u\r\n", tube, a % 3);
      return buf;
    case 15:
      return "stats\r\n";
    case 16:
      snprintf(buf, sizeof buf, "stats-job %u\r\n", id);
      return buf;
    case 17:
      snprintf(buf, sizeof buf, "stats-tube %s\r\n", tube);
      return buf;
    case 18:
      snprintf(buf, sizeof buf, "peek %u\r\n", id);
      return buf;
    case 19: {
      static const char* const kPeeks[] = {"peek-ready\r\n", "peek-delayed\r\n", "peek-buried\r\n"};
      return kPeeks[a % 3];
    }
    case 20:
      snprintf(buf, sizeof buf, "reserve-job %u\r\n", id);
      return buf;
    case 21: {
      static const char* const kLists[] = {"list-tubes\r\n", "list-tube-used\r\n",
                                           "list-tubes-watched\r\n"};
      return kLists[a % 3];
    }
    case 22:
      return a % 8 == 0 ? "quit\r\n" : "stats\r\n";
    default:
      return std::string(static_cast<size_t>(a) + 200, 'z') + "\r\n";  // overlong line
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > kMaxInput) return -1;
  Input in(data, size);
  uint8_t header = in.Byte();
  EngineOptions opt;
  opt.tick_budget = 1 + header % 8;
  // Sometimes a tight memory cap (a job-table page alone is about 8 KiB).
  opt.max_memory = (header & 0x80) ? 9000 + (header & 0x70) * 16 : SIZE_MAX;
  World w(opt);
  bool draining = false;
  for (int op = 0; op < kMaxOps && !in.empty(); op++) {
    uint8_t code = in.Byte();
    int k = code % kClients;
    switch ((code / kClients) % 8) {
      case 0:  // raw bytes
        w.Send(k, in.Bytes(in.Byte() % 64));
        break;
      case 1:
      case 2:
      case 3:
        w.Send(k, DictionaryCommand(in));
        break;
      case 4:  // time passes
        w.Advance(static_cast<Nanos>(in.Byte() % 40) * (kSecond / 10));
        break;
      case 5:
        w.InputClosed(k);
        break;
      case 6:
        w.Reopen(k);
        break;
      case 7:
        if (in.Byte() % 8 == 0) {
          draining = !draining;
          w.set_draining(draining);
        }
        break;
    }
    w.Pump();
    w.CheckModel();
  }
  return 0;
}
