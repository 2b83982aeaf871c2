// Drives one MemoryStore (on a FakeClock) through several Conversations with command byte
// streams taken from the fuzzer input, interleaved with clock advances, ticks, closed
// inputs, dropped connections and floods of jobs (so that a big kick is done in slices over
// several Ticks). After every step it checks the engine's invariants (after a flood, every
// kUncheckedSteps-th step), that every reply is well formed, that replies agree with the
// engine (RESERVED jobs are reserved by that client, FOUND bodies match, stats match the
// counters), that a late result (Client::OnResult) reaches only a conversation waiting for
// one, and that the job counts match a model built from the INSERTED and DELETED replies.
//
// Input format: a header byte (tick budget, memory cap), then a sequence of ops, each an op
// byte followed by its arguments. Sizes and step counts are capped so huge inputs stay fast.
#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "base/check.h"
#include "base/clock.h"
#include "command/store.h"
#include "command/values.h"
#include "engine/engine.h"
#include "protocol/conversation.h"
#include "store/memory_store.h"

namespace {

using stalkd::FakeClock;
using stalkd::kSecond;
using stalkd::Nanos;
using stalkd::command::Outcome;
using stalkd::command::PutSlot;
using stalkd::command::Result;
using stalkd::command::Session;
using stalkd::command::Verb;
using stalkd::engine::Engine;
using stalkd::engine::EngineOptions;
using stalkd::engine::GlobalCounters;
using stalkd::engine::Job;
using stalkd::engine::JobState;
using stalkd::protocol::Conversation;
using stalkd::store::MemoryStore;
using stalkd::store::MemoryStoreOptions;

constexpr size_t kMaxInput = 4096;
constexpr int kMaxOps = 400;
constexpr int kClients = 3;
constexpr size_t kMaxJobSize = 64;
// Floods per input, each of more than MemoryStore::kKickSlice jobs; every later check walks
// all the jobs, so they are few.
constexpr int kMaxFloods = 2;
// As many jobs as inputs without a flood make: few enough to check all of them often.
constexpr uint64_t kFewJobs = 256;
constexpr int kUncheckedSteps = 16;
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

class StubHost final : public stalkd::command::Host {
 public:
  stalkd::command::HostStats CurrentStats() const override {
    stalkd::command::HostStats h;
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

// Whether j is reserved by store session s. The engine knows a session by its owner, which
// for a MemoryStore is the command::Session.
bool ReservedBy(const Job& j, const Session& s) {
  if (j.state() != JobState::kReserved || j.reserver() == nullptr) return false;
  return dynamic_cast<const Session*>(j.reserver()->owner()) == &s;
}

// A flood's session: nothing it does waits, so it never gets a late result.
class FloodClient final : public stalkd::command::Client {
 public:
  void OnResult(const Result&) override { FUZZ_CHECK(false, "late result for a flood"); }
};

const char* const kTubes[] = {"default", "t1", "t2", "-bad"};

// The first word of every reply.
constexpr std::string_view kReplyWords[] = {
    "RESERVED",      "FOUND",           "OK",          "INSERTED",
    "DELETED",       "USING",           "WATCHING",    "NOT_IGNORED",
    "DEADLINE_SOON", "TIMED_OUT",       "NOT_FOUND",   "RELEASED",
    "BURIED",        "TOUCHED",         "KICKED",      "PAUSED",
    "BAD_FORMAT",    "UNKNOWN_COMMAND", "JOB_TOO_BIG", "EXPECTED_CRLF",
    "OUT_OF_MEMORY", "DRAINING",
};

// Its index in kReplyWords, or std::size(kReplyWords) if it is no reply's.
size_t ReplyWordIndex(std::string_view word) {
  size_t i = 0;
  while (i < std::size(kReplyWords) && kReplyWords[i] != word) i++;
  return i;
}

class World;

// One client: a Conversation whose late results come back through OnResult, which checks
// them, forwards them and drains the reply at once (as the server would write it), so no
// reply is lost when the client is dropped later.
class Client final : public stalkd::command::Client {
 public:
  Client(World& w, stalkd::command::Store& store);
  ~Client() {
    closing_ = true;  // closing the session must hand this client nothing
    conv_.reset();
  }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  void OnResult(const Result& r) override;
  Conversation& conv() { return *conv_; }
  void Send(std::string_view bytes) {
    char* p = conv_->PrepareInput(bytes.size());
    if (!bytes.empty()) std::memcpy(p, bytes.data(), bytes.size());
    conv_->CommitInput(bytes.size());
  }

 private:
  World& w_;
  std::unique_ptr<Conversation> conv_;  // null while it is being opened
  bool closing_ = false;
};

class World {
 public:
  explicit World(EngineOptions opt)
      : store_(clock_, MemoryStoreOptions{opt, kMaxJobSize}, &host_), engine_(store_.engine()) {
    for (auto& c : clients_) c = std::make_unique<Client>(*this, store_);
  }
  ~World() {
    for (auto& c : clients_) c.reset();
    engine_.CheckInvariants();
  }

  void Send(int k, std::string_view bytes) { clients_[k]->Send(bytes); }

  void Reopen(int k) {
    clients_[k].reset();  // late results it completes for others are checked as they come
    CheckInvariants();
    clients_[k] = std::make_unique<Client>(*this, store_);
    CheckInvariants();
  }

  void InputClosed(int k) {
    clients_[k]->conv().OnInputClosed();
    Drain(clients_[k]->conv());
    CheckInvariants();
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
      Nanos next = store_.Tick();
      CheckInvariants();
      Pump();
      if (next > clock_.Now()) return;
    }
    FUZZ_CHECK(false, "Tick never caught up");
  }

  void set_draining(bool on) { store_.SetDraining(on); }

  // Runs every conversation one command at a time (late results arrive, and are drained,
  // as they complete) until nothing moves.
  void Pump() {
    for (int round = 0;; round++) {
      FUZZ_CHECK(round < 100000, "Pump does not settle");
      bool progress = false;
      for (auto& c : clients_) {
        Conversation& conv = c->conv();
        size_t in_before = conv.buffered_input();
        uint64_t late_before = late_results_;
        bool more = conv.Run(1);
        if (!more && conv.buffered_input() == in_before && conv.output().empty() &&
            late_results_ == late_before) {
          continue;  // nothing happened
        }
        progress = true;
        CheckInvariants();
        Drain(conv);
        CheckModel();
      }
      if (!progress) return;
    }
  }

  // The engine's invariants walk every job. With few jobs they are checked after every
  // step; after a flood (thousands of jobs, and a Tick per tick budget of them) after every
  // kUncheckedSteps-th step (and at the end of the flood and of the input).
  void CheckInvariants() {
    if (inserted_ - deleted_ <= kFewJobs || ++unchecked_steps_ >= kUncheckedSteps) {
      engine_.CheckInvariants();
      unchecked_steps_ = 0;
    }
  }

  // Fills tube `which` with `n` jobs, so that a big kick is done in slices: delayed ones,
  // or buried ones (each put, reserved by id and buried). This is setup, not what is
  // fuzzed, so it calls a store session of its own directly rather than through the text
  // protocol (thousands of commands each would make such inputs many times slower).
  void Flood(uint8_t which, uint32_t n) {
    FloodClient fc;
    std::unique_ptr<Session> s = store_.Open(fc);
    FUZZ_CHECK(s->Use(kTubes[which % 3]).outcome == Outcome::kUsing, "flood: use");
    bool bury = (which & 0x10) != 0;
    uint32_t pri = which / 32u;
    uint32_t delay = bury ? 0 : 1 + which % 4u;
    for (uint32_t i = 0; i < n; i++) {
      PutSlot slot = s->BeginPut({pri, delay, 1, 0, false});
      if (!slot.data) break;  // out of memory
      FUZZ_CHECK(slot.size == 2, "flood: slot size %zu", slot.size);
      std::memcpy(slot.data, "\r\n", 2);
      Result r = s->CommitPut();
      if (r.outcome != Outcome::kInserted) break;  // draining or out of memory
      inserted_++;
      FUZZ_CHECK(engine_.Find(r.number) != nullptr, "flood: job %" PRIu64 " missing", r.number);
      if (!bury) continue;
      uint64_t id = r.number;
      r = s->ReserveJob(id);
      if (r.outcome == Outcome::kNotFound) continue;  // a waiting reserve has taken it
      FUZZ_CHECK(r.outcome == Outcome::kReserved && r.job.id == id, "flood: reserve-job");
      FUZZ_CHECK(ReservedBy(*engine_.Find(id), *s), "flood: job %" PRIu64 " not reserved", id);
      FUZZ_CHECK(s->Bury(id, pri).outcome == Outcome::kBuried, "flood: bury");
    }
    s.reset();
    engine_.CheckInvariants();
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
    // Every successful answer was to a command the store counted.
    auto replies = [this](std::string_view word) { return replies_[ReplyWordIndex(word)]; };
    auto count = [this](Verb v) { return store_.count(v); };
    FUZZ_CHECK(inserted_ <= count(Verb::kPut), "INSERTED vs cmd-put");
    FUZZ_CHECK(deleted_ <= count(Verb::kDelete), "DELETED vs cmd-delete");
    FUZZ_CHECK(replies("RESERVED") <= count(Verb::kReserve) + count(Verb::kReserveWithTimeout) +
                                          count(Verb::kReserveJob),
               "RESERVED vs cmd-reserve*");
    FUZZ_CHECK(replies("FOUND") <= count(Verb::kPeek) + count(Verb::kPeekReady) +
                                       count(Verb::kPeekDelayed) + count(Verb::kPeekBuried),
               "FOUND vs cmd-peek*");
    FUZZ_CHECK(replies("RELEASED") <= count(Verb::kRelease), "RELEASED vs cmd-release");
    FUZZ_CHECK(replies("BURIED") <= count(Verb::kBury), "BURIED vs cmd-bury");
    FUZZ_CHECK(replies("TOUCHED") <= count(Verb::kTouch), "TOUCHED vs cmd-touch");
    FUZZ_CHECK(replies("KICKED") <= count(Verb::kKick) + count(Verb::kKickJob),
               "KICKED vs cmd-kick*");
    FUZZ_CHECK(replies("PAUSED") <= count(Verb::kPauseTube), "PAUSED vs cmd-pause-tube");
    FUZZ_CHECK(replies("USING") <= count(Verb::kUse) + count(Verb::kListTubeUsed),
               "USING vs cmd-use");
    FUZZ_CHECK(
        replies("WATCHING") + replies("NOT_IGNORED") <= count(Verb::kWatch) + count(Verb::kIgnore),
        "WATCHING vs cmd-watch/ignore");
  }

  // A late result for conv: checked before conv takes it.
  void CheckLateResult(const Conversation& conv, const Result& r) {
    FUZZ_CHECK(conv.waiting(), "late result for a conversation not waiting");
    switch (r.outcome) {
      case Outcome::kReserved: {
        const Job* j = engine_.Find(r.job.id);
        FUZZ_CHECK(j != nullptr, "late RESERVED %" PRIu64 ": no such job", r.job.id);
        FUZZ_CHECK(ReservedBy(*j, conv.session()),
                   "late RESERVED %" PRIu64 " not reserved by this client", r.job.id);
        FUZZ_CHECK(!j->reserver()->waiting(), "late RESERVED while still waiting");
        FUZZ_CHECK(r.job.body == std::string_view(j->data(), j->body_size), "late body");
        break;
      }
      case Outcome::kTimedOut:
      case Outcome::kDeadlineSoon:
      case Outcome::kKicked:
        break;
      default:
        FUZZ_CHECK(false, "late result with outcome %d", static_cast<int>(r.outcome));
    }
    late_results_++;
  }

  // Parses and checks everything conv has produced, then clears it (the peer read it).
  void Drain(Conversation& conv) {
    std::string& out = conv.output();
    size_t pos = 0;
    while (pos < out.size()) {
      size_t eol = out.find("\r\n", pos);
      FUZZ_CHECK(eol != std::string::npos, "reply without CRLF");
      std::string line = out.substr(pos, eol - pos);
      pos = eol + 2;
      std::string word = line.substr(0, line.find(' '));
      std::string rest = line.size() > word.size() ? line.substr(word.size() + 1) : "";
      size_t w = ReplyWordIndex(word);
      FUZZ_CHECK(w < std::size(kReplyWords), "unknown reply '%s'", line.c_str());
      replies_[w]++;
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
          FUZZ_CHECK(ReservedBy(*j, conv.session()),
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
      }
    }
    out.clear();
  }

 private:
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
        {"current-jobs-urgent", g.urgent},
        {"current-jobs-ready", g.ready},
        {"current-jobs-reserved", g.reserved},
        {"current-jobs-delayed", g.delayed},
        {"current-jobs-buried", g.buried},
        {"total-jobs", inserted_},
        {"job-timeouts", g.timeouts},
        {"current-tubes", engine_.tubes().size()},
        {"current-connections", kClients},
        {"current-waiting", g.waiting},
        {"current-producers", g.producers},
        {"current-workers", g.workers},
        {"max-job-size", kMaxJobSize},
        {"cmd-put", store_.count(Verb::kPut)},
        {"cmd-reserve", store_.count(Verb::kReserve)},
        {"cmd-reserve-with-timeout", store_.count(Verb::kReserveWithTimeout)},
        {"cmd-delete", store_.count(Verb::kDelete)},
        {"cmd-kick", store_.count(Verb::kKick)},
        {"cmd-stats", store_.count(Verb::kStats)},
        {"cmd-pause-tube", store_.count(Verb::kPauseTube)},
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
  MemoryStore store_;
  Engine& engine_;
  std::unique_ptr<Client> clients_[kClients];
  uint64_t inserted_ = 0;
  uint64_t deleted_ = 0;
  uint64_t late_results_ = 0;                      // results delivered through Client::OnResult
  int unchecked_steps_ = 0;                        // steps since the invariants were last checked
  uint64_t replies_[std::size(kReplyWords)] = {};  // by first word
};

Client::Client(World& w, stalkd::command::Store& store) : w_(w) {
  conv_ = std::make_unique<Conversation>(store, *this);
}

void Client::OnResult(const Result& r) {
  FUZZ_CHECK(conv_ != nullptr && !closing_, "late result for a session being opened or closed");
  w_.CheckLateResult(*conv_, r);
  conv_->OnResult(r);
  w_.Drain(*conv_);
}

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
      // Now and then more than a kick slice, for after a flood.
      snprintf(buf, sizeof buf, "kick %u\r\n", (a & 0x80) ? 1000u + b * 8u : b % 5u);
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
  int floods = 0;
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
      case 7: {
        uint8_t what = in.Byte();
        if (what % 8 == 0) {
          draining = !draining;
          w.set_draining(draining);
        } else if (what % 8 == 1 && floods < kMaxFloods) {
          floods++;
          uint8_t which = in.Byte();
          w.Flood(which, stalkd::store::MemoryStore::kKickSlice + 1 + in.Byte() * 4u);
        }
        break;
      }
    }
    w.Pump();
    w.CheckModel();
  }
  return 0;
}
