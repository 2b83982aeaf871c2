// Drives one MemoryStore (on a FakeClock) through several Conversations with command byte
// streams taken from the fuzzer input, interleaved with clock advances, ticks, closed
// inputs, dropped connections and floods of jobs (so that a big kick or purge is done in
// slices over several Ticks, and thousands of TTLs run out together). After every step it
// checks the engine's invariants (after a flood, every kUncheckedSteps-th step), that every
// reply is well formed (multi-part ones too: RESERVED-MANY, INSERTED-MANY), that replies
// agree with the engine (RESERVED jobs are reserved by that client, or detached; FOUND
// bodies match; EXISTS names a living job with a key; list-jobs' ids are one tube's jobs in
// one state, in order; stats and stats-job match the engine), that a late result
// (Client::OnResult) reaches only a conversation waiting for one, that no job outlives its
// TTL once time has been caught up with, and that the job counts match a model built from
// the replies: INSERTED (alone or in INSERTED-MANY) adds a job, EXISTS none; DELETED,
// DELETED-MANY n and PURGED n take jobs away, and so does expiry (the engine's
// counters().expired).
//
// Input format: a header byte (tick budget, --require-auth, memory cap), then a sequence of
// ops, each an op byte `code` followed by its arguments; the op is (code / 3) % 8 and its
// client code % 3:
//   0  raw bytes: a length byte (% 64), then that many bytes
//   1-3  a dictionary command (DictionaryCommand): bytes which, a, b; for which >= 192 an
//      extension command (ExtensionCommand), which reads one more byte
//   4  time passes: a byte, in tenths of a second (% 40)
//   5  the client's input is closed;  6  the client is dropped and reconnects
//   7  a byte `what`: % 8 == 0 toggles draining; == 1 floods (bytes which, count: see
//      Flood); == 2 floods with extension options (bytes which, count, options: FloodExt);
//      == 3 deletes (or makes again) the token "a.1" (FuzzAuthenticator)
// Sizes and step counts are capped so huge inputs stay fast.
#include <algorithm>
#include <cinttypes>
#include <cstdarg>
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

#define FUZZ_NAME "conversation_fuzz"
#include "base/check.h"
#include "base/clock.h"
#include "command/store.h"
#include "command/values.h"
#include "engine/engine.h"
#include "fuzz_support.h"
#include "protocol/conversation.h"
#include "store/memory_store.h"

namespace {

using stalkd::FakeClock;
using stalkd::kSecond;
using stalkd::Nanos;
using stalkd::command::Identity;
using stalkd::command::Outcome;
using stalkd::command::PutSlot;
using stalkd::command::Result;
using stalkd::command::Session;
using stalkd::command::Verb;
using stalkd::engine::Engine;
using stalkd::engine::EngineOptions;
using stalkd::engine::GlobalCounters;
using stalkd::engine::Job;
using stalkd::engine::JobExtra;
using stalkd::engine::JobState;
using stalkd::engine::JobStateName;
using stalkd::fuzz::Format;
using stalkd::fuzz::Input;
using stalkd::fuzz::StubHost;
using stalkd::protocol::Conversation;
using stalkd::store::MemoryStore;
using stalkd::store::MemoryStoreOptions;

constexpr size_t kMaxInput = 4096;
constexpr int kMaxOps = 400;
constexpr int kClients = 3;
constexpr size_t kMaxJobSize = 64;
// Floods per input, each of more than MemoryStore::kKickSlice (kPurgeSlice) jobs; every
// later check walks all the jobs, so they are few.
constexpr int kMaxFloods = 2;
// As many jobs as inputs without a flood make: few enough to check all of them often.
constexpr uint64_t kFewJobs = 256;
constexpr uint64_t kUncheckedSteps = 16;
// With more jobs the invariants are checked less often, so that checking costs a step about
// this many job visits on average.
constexpr uint64_t kCheckedJobsPerStep = 8;
// Time passes in steps of at most this, with a full Tick after each; large jumps (a stalled
// server) are part of what is fuzzed.
constexpr Nanos kMaxTickGap = stalkd::kForever;

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

// The first word of every reply (the extensions' after beanstalkd's).
constexpr std::string_view kReplyWords[] = {
    "RESERVED",      "FOUND",           "OK",          "INSERTED",
    "DELETED",       "USING",           "WATCHING",    "NOT_IGNORED",
    "DEADLINE_SOON", "TIMED_OUT",       "NOT_FOUND",   "RELEASED",
    "BURIED",        "TOUCHED",         "KICKED",      "PAUSED",
    "BAD_FORMAT",    "UNKNOWN_COMMAND", "JOB_TOO_BIG", "EXPECTED_CRLF",
    "OUT_OF_MEMORY", "DRAINING",        "EXISTS",      "RESERVED-MANY",
    "INSERTED-MANY", "DELETED-MANY",    "PURGED",      "TUBE-TRIES",
    "AUTHENTICATED", "UNAUTHORIZED",    "FORBIDDEN",   "RATE_LIMITED",
};

// Its index in kReplyWords, or std::size(kReplyWords) if it is no reply's.
constexpr size_t ReplyWordIndex(std::string_view word) {
  size_t i = 0;
  while (i < std::size(kReplyWords) && kReplyWords[i] != word) i++;
  return i;
}

// The index of a reply word known at compile time.
consteval size_t Word(std::string_view word) {
  size_t i = ReplyWordIndex(word);
  if (i == std::size(kReplyWords)) throw "not a reply word";
  return i;
}

// A reply's number: decimal digits, nothing else.
bool ParseNumber(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

// The next line of out from *pos (without its CRLF); *pos moves past the CRLF.
std::string_view NextLine(const std::string& out, size_t* pos) {
  size_t eol = out.find("\r\n", *pos);
  FUZZ_CHECK(eol != std::string::npos, "reply without CRLF");
  std::string_view line(out.data() + *pos, eol - *pos);
  *pos = eol + 2;
  return line;
}

class World;

// `auth` (docs/SECURITY.md): tokens "a.1" and "b.1" of namespaces a and b (a's can be
// revoked), "a a.2" (a's two-word form; its puts limited), and the admin account "root:pw".
class FuzzAuthenticator final : public stalkd::command::Authenticator {
 public:
  bool Authenticate(std::string_view ns, std::string_view credential,
                    Identity* who) const override {
    if (ns.empty() && credential == "root:pw") {
      *who = {Identity::Kind::kAdmin, {}, "root"};
      return true;
    }
    bool a = (ns.empty() && credential == "a.1" && !revoked) || (ns == "a" && credential == "a.2");
    bool b = ns.empty() && credential == "b.1";
    if (!a && !b) return false;
    *who = {Identity::Kind::kNamespace, a ? "a" : "b", std::string(credential)};
    return true;
  }
  bool StillValid(const Identity& who) const override { return !revoked || who.name != "a.1"; }
  bool AllowPut(const Identity& who) override { return who.name != "a.2" || puts_left-- > 0; }

  bool revoked = false;
  int puts_left = 3;
};

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
  World(EngineOptions opt, bool require_auth)
      : store_(clock_, MemoryStoreOptions{opt, kMaxJobSize}, &host_), engine_(store_.engine()) {
    auth_policy_ = {&authenticator_, require_auth};
    for (auto& c : clients_) c = std::make_unique<Client>(*this, store_);
  }
  const stalkd::command::AuthPolicy& auth_policy() const { return auth_policy_; }
  // A token of namespace a is deleted (or made again) while clients use it.
  void ToggleRevoked() { authenticator_.revoked = !authenticator_.revoked; }
  ~World() {
    for (auto& c : clients_) c.reset();
    engine_.CheckInvariants();
  }

  void Send(int k, std::string_view bytes) { clients_[k]->Send(bytes); }

  void Reopen(int k) {
    const Conversation& conv = clients_[k]->conv();
    // A purge dropped with its client has deleted the jobs of its slices so far, and nobody
    // hears how many (see Resync).
    if (conv.waiting() && !conv.waiting_for_client()) dropped_long_work_ = true;
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
      CheckInvariants(/*slice=*/next <= clock_.Now());
      Pump();
      if (next > clock_.Now()) {
        CheckExpiries();
        return;
      }
    }
    FUZZ_CHECK(false, "Tick never caught up");
  }

  // Time has been caught up with: no job lives past its TTL, but a reserved one (which goes
  // when its reservation ends).
  void CheckExpiries() const {
    Nanos now = clock_.Now();
    engine_.ForEachJob([now](const Job& j) {
      const JobExtra* x = j.extra();
      if (!x || !x->has_ttl() || x->expires_at > now) return;
      FUZZ_CHECK(j.state() == JobState::kReserved && x->expire_pending,
                 "job %" PRIu64 " (%s) outlived its TTL by %" PRId64 " ns", j.id,
                 JobStateName(j.state()), static_cast<int64_t>(now - x->expires_at));
    });
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
  // kUncheckedSteps-th step or, with more than kCheckedJobsPerStep * kUncheckedSteps jobs,
  // every (jobs / kCheckedJobsPerStep)-th (and at the end of the flood and of the input).
  // A `slice` (a Tick that left work for the next, its budget spent: expiries, promotions,
  // timeouts by the thousand) is checked as a step after a flood is, even with few jobs.
  void CheckInvariants(bool slice = false) {
    uint64_t live = Live();
    if ((live <= kFewJobs && !slice) ||
        ++unchecked_steps_ >= std::max(kUncheckedSteps, live / kCheckedJobsPerStep)) {
      engine_.CheckInvariants();
      unchecked_steps_ = 0;
    }
  }

  // What a flood puts: `n` jobs into tube `tube` (kTubes), delayed by `delay` seconds or
  // ready (0), each buried after its put if `bury`, with put-ext options if `options`.
  struct FloodSpec {
    uint8_t tube = 0;
    uint32_t n = 0;
    uint32_t pri = 0;
    uint32_t delay = 0;
    bool bury = false;
    const stalkd::command::PutOptions* options = nullptr;
    bool keys = false;  // each job a key of its own (the same in every such flood)
  };

  // Fills tube `which` with `n` jobs, so that a big kick is done in slices: delayed ones,
  // or buried ones (each put, reserved by id and buried).
  void Flood(uint8_t which, uint32_t n) {
    FloodSpec f;
    f.tube = which % 3;
    f.n = n;
    f.bury = (which & 0x10) != 0;
    f.pri = which / 32u;
    f.delay = f.bury ? 0 : 1 + which % 4u;
    Flood(f);
  }

  // As Flood, with the lifecycle extensions: `opts` picks the jobs' state (bits 0-1: ready,
  // delayed, buried, ready), a TTL (bit 2; bits 5-6: 1 to 4 seconds), tries (bit 3; bit 7:
  // 1 or 2) and keys (bit 4). Without TTL or tries, more than kPurgeSlice jobs (plus
  // `count`), so that a purge is done in slices; with them, 64 to 319 jobs: TTLs running
  // out together and tries running out in bulk are timer work, done in slices of the tick
  // budget (at most 8 here), and more jobs would only make inputs slower.
  void FloodExt(uint8_t which, uint8_t count, uint8_t opts) {
    uint32_t n = (opts & 0x0c) ? 64u + count : stalkd::store::MemoryStore::kPurgeSlice + 1 + count;
    stalkd::command::PutOptions o;
    if (opts & 0x04) o.ttl_s = 1 + (opts >> 5) % 4u;
    if (opts & 0x08) o.tries = 1 + (opts >> 7);
    FloodSpec f;
    f.tube = which % 3;
    f.n = n;
    f.pri = which / 8u;
    f.delay = opts % 4 == 1 ? 1 + which % 4u : 0;
    f.bury = opts % 4 == 2;
    f.options = &o;
    f.keys = (opts & 0x10) != 0;
    Flood(f);
  }

  // This is setup, not what is fuzzed, so it calls a store session of its own directly
  // rather than through the text protocol (thousands of commands each would make such
  // inputs many times slower).
  void Flood(const FloodSpec& f) {
    FloodClient fc;
    std::unique_ptr<Session> s = store_.Open(fc);
    FUZZ_CHECK(s->Use(kTubes[f.tube]).outcome == Outcome::kUsing, "flood: use");
    stalkd::command::PutOptions o;
    if (f.options) o = *f.options;
    char key[16];
    for (uint32_t i = 0; i < f.n; i++) {
      if (f.keys)
        o.key = std::string_view(key, static_cast<size_t>(snprintf(key, sizeof key, "f%u", i)));
      stalkd::command::PutArgs args{f.pri, f.delay, 1, 0, false};
      if (f.options) {
        args.verb = Verb::kPutExt;
        args.options = &o;
      }
      PutSlot slot = s->BeginPut(args);
      if (!slot.data) break;  // out of memory
      FUZZ_CHECK(slot.size == 2, "flood: slot size %zu", slot.size);
      std::memcpy(slot.data, "\r\n", 2);
      Result r = s->CommitPut();
      if (r.outcome == Outcome::kExists) {
        FUZZ_CHECK(f.keys && engine_.Find(r.number) != nullptr, "flood: EXISTS %" PRIu64, r.number);
        continue;  // an earlier flood's job has this key
      }
      if (r.outcome != Outcome::kInserted) break;  // draining or out of memory
      inserted_++;
      FUZZ_CHECK(engine_.Find(r.number) != nullptr, "flood: job %" PRIu64 " missing", r.number);
      if (!f.bury) continue;
      uint64_t id = r.number;
      r = s->ReserveJob(id);
      if (r.outcome == Outcome::kNotFound) continue;  // a waiting reserve has taken it
      FUZZ_CHECK(r.outcome == Outcome::kReserved && r.job.id == id, "flood: reserve-job");
      FUZZ_CHECK(ReservedBy(*engine_.Find(id), *s), "flood: job %" PRIu64 " not reserved", id);
      FUZZ_CHECK(s->Bury(id, f.pri).outcome == Outcome::kBuried, "flood: bury");
    }
    s.reset();
    engine_.CheckInvariants();
  }

  // Jobs in the engine, in any state.
  uint64_t Live() const {
    const GlobalCounters& g = engine_.counters();
    return g.ready + g.reserved + g.delayed + g.buried;
  }

  // Some conversation waits for a kick or a purge done in slices (a purge's deletions are
  // heard of only when it ends, with PURGED).
  bool LongWorkPending() const {
    for (const auto& c : clients_) {
      const Conversation& conv = c->conv();
      if (conv.waiting() && !conv.waiting_for_client()) return true;
    }
    return false;
  }

  // A purge (or kick) was dropped with its client: once no other is in progress, the jobs
  // the model has and the engine has not are those its slices deleted.
  void Resync() {
    if (!dropped_long_work_ || LongWorkPending()) return;
    uint64_t live = Live(), want = inserted_ - deleted_ - engine_.counters().expired;
    FUZZ_CHECK(live <= want, "live %" PRIu64 " above the model's %" PRIu64, live, want);
    deleted_ += want - live;
    dropped_long_work_ = false;
  }

  // `live` jobs agree with the model: exactly, unless a purge may be under way.
  void CheckLive(uint64_t live, const char* what) const {
    uint64_t want = inserted_ - deleted_ - engine_.counters().expired;
    if (LongWorkPending() || dropped_long_work_) {
      FUZZ_CHECK(live <= want, "%s: live %" PRIu64 " above the model's %" PRIu64, what, live, want);
    } else {
      FUZZ_CHECK(live == want,
                 "%s: live %" PRIu64 " vs the model's %" PRIu64 " (inserted %" PRIu64
                 ", deleted %" PRIu64 ", expired %" PRIu64 ")",
                 what, live, want, inserted_, deleted_, engine_.counters().expired);
    }
  }

  void CheckModel() {
    const GlobalCounters& g = engine_.counters();
    FUZZ_CHECK(g.total_jobs == inserted_, "total_jobs %" PRIu64 " vs %" PRIu64, g.total_jobs,
               inserted_);
    FUZZ_CHECK(g.expired >= last_expired_, "expired went down");
    last_expired_ = g.expired;
    FUZZ_CHECK(deleted_ + g.expired <= inserted_,
               "deleted %" PRIu64 " + expired %" PRIu64 " above inserted %" PRIu64, deleted_,
               g.expired, inserted_);
    Resync();
    CheckLive(Live(), "model");
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
    auto replies = [this](size_t word) { return replies_[word]; };
    auto count = [this](Verb v) { return store_.count(v); };
    // Floods count their puts in cmd-put and cmd-put-ext; a put-many's entries are counted
    // once, as the batch.
    uint64_t batches = count(Verb::kPutMany);
    FUZZ_CHECK(inserted_ <= count(Verb::kPut) + count(Verb::kPutExt) + 1000 * batches,
               "INSERTED vs cmd-put*");
    FUZZ_CHECK(replies(Word("INSERTED")) + replies(Word("EXISTS")) <=
                   count(Verb::kPut) + count(Verb::kPutExt),
               "INSERTED/EXISTS vs cmd-put, cmd-put-ext");
    FUZZ_CHECK(replies(Word("INSERTED-MANY")) <= batches, "INSERTED-MANY vs cmd-put-many");
    FUZZ_CHECK(in_many_ <= 1000 * batches, "INSERTED-MANY's lines vs cmd-put-many");
    FUZZ_CHECK(replies(Word("DELETED")) <= count(Verb::kDelete), "DELETED vs cmd-delete");
    FUZZ_CHECK(replies(Word("DELETED-MANY")) <= count(Verb::kDeleteMany), "DELETED-MANY vs cmd");
    FUZZ_CHECK(replies(Word("PURGED")) <= count(Verb::kPurge), "PURGED vs cmd-purge");
    FUZZ_CHECK(replies(Word("TUBE-TRIES")) <= count(Verb::kTubeTries), "TUBE-TRIES vs cmd");
    FUZZ_CHECK(replies(Word("RESERVED-MANY")) <= count(Verb::kReserveExt), "RESERVED-MANY vs cmd");
    FUZZ_CHECK(reserved_in_many_ <= 1000 * count(Verb::kReserveExt), "RESERVED-MANY's jobs");
    FUZZ_CHECK(replies(Word("RESERVED")) <= count(Verb::kReserve) +
                                                count(Verb::kReserveWithTimeout) +
                                                count(Verb::kReserveJob),
               "RESERVED vs cmd-reserve*");
    FUZZ_CHECK(replies(Word("FOUND")) <= count(Verb::kPeek) + count(Verb::kPeekReady) +
                                             count(Verb::kPeekDelayed) + count(Verb::kPeekBuried),
               "FOUND vs cmd-peek*");
    FUZZ_CHECK(replies(Word("RELEASED")) <= count(Verb::kRelease), "RELEASED vs cmd-release");
    FUZZ_CHECK(replies(Word("BURIED")) <= count(Verb::kBury), "BURIED vs cmd-bury");
    FUZZ_CHECK(replies(Word("TOUCHED")) <= count(Verb::kTouch), "TOUCHED vs cmd-touch");
    FUZZ_CHECK(replies(Word("KICKED")) <= count(Verb::kKick) + count(Verb::kKickJob),
               "KICKED vs cmd-kick*");
    FUZZ_CHECK(replies(Word("PAUSED")) <= count(Verb::kPauseTube), "PAUSED vs cmd-pause-tube");
    FUZZ_CHECK(replies(Word("USING")) <= count(Verb::kUse) + count(Verb::kListTubeUsed),
               "USING vs cmd-use");
    FUZZ_CHECK(replies(Word("WATCHING")) + replies(Word("NOT_IGNORED")) <=
                   count(Verb::kWatch) + count(Verb::kIgnore),
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
      case Outcome::kReservedMany: {
        FUZZ_CHECK(
            r.jobs != nullptr && r.jobs->size() == r.number && r.number >= 1 && r.number <= 1000,
            "late RESERVED-MANY of %" PRIu64 " jobs", r.number);
        const stalkd::engine::Session* by = nullptr;
        for (const stalkd::command::JobView& v : *r.jobs) {
          const Job* j = engine_.Find(v.id);
          FUZZ_CHECK(j != nullptr, "late RESERVED-MANY %" PRIu64 ": no such job", v.id);
          bool detached = j->state() == JobState::kReserved && j->reserver() == engine_.detached();
          FUZZ_CHECK(detached || ReservedBy(*j, conv.session()),
                     "late RESERVED-MANY %" PRIu64 " not reserved by this client or detached",
                     v.id);
          FUZZ_CHECK(by == nullptr || by == j->reserver(), "late RESERVED-MANY: mixed reservers");
          by = j->reserver();
          FUZZ_CHECK(detached || !by->waiting(), "late RESERVED-MANY while still waiting");
          FUZZ_CHECK(v.body == std::string_view(j->data(), j->body_size), "late body");
        }
        break;
      }
      case Outcome::kTimedOut:
      case Outcome::kDeadlineSoon:
      case Outcome::kKicked:
      case Outcome::kPurged:
        break;
      default:
        FUZZ_CHECK(false, "late result with outcome %d", static_cast<int>(r.outcome));
    }
    late_results_++;
  }

  // Parses and checks everything conv has produced, then clears it (the peer read it).
  // `late`: it is a late result's reply.
  void Drain(Conversation& conv, bool late = false) {
    std::string& out = conv.output();
    size_t pos = 0;
    while (pos < out.size()) {
      std::string_view line = NextLine(out, &pos);
      std::string_view word = line.substr(0, line.find(' '));
      std::string_view rest = line.size() > word.size() ? line.substr(word.size() + 1) : "";
      size_t w = ReplyWordIndex(word);
      FUZZ_CHECK(w < std::size(kReplyWords), "unknown reply '%.*s'", Len(line), line.data());
      replies_[w]++;
      uint64_t n = 0;
      if (word == "RESERVED" || word == "FOUND") {
        const Job* j = CheckJobReply(out, &pos, line, rest);
        if (word == "RESERVED") {
          FUZZ_CHECK(ReservedBy(*j, conv.session()),
                     "RESERVED job %" PRIu64 " not reserved by this client", j->id);
        }
      } else if (word == "RESERVED-MANY") {
        n = Number(line, rest, 1, 1000);
        const stalkd::engine::Session* by = nullptr;
        for (uint64_t i = 0; i < n; i++) {
          FUZZ_CHECK(pos < out.size(), "RESERVED-MANY %" PRIu64 " ends after %" PRIu64, n, i);
          std::string_view l = NextLine(out, &pos);
          FUZZ_CHECK(l.starts_with("RESERVED "), "in RESERVED-MANY: '%.*s'", Len(l), l.data());
          const Job* j = CheckJobReply(out, &pos, l, l.substr(9));
          bool detached = j->state() == JobState::kReserved && j->reserver() == engine_.detached();
          FUZZ_CHECK(detached || ReservedBy(*j, conv.session()),
                     "RESERVED-MANY's job %" PRIu64 " not reserved by this client or detached",
                     j->id);
          FUZZ_CHECK(i == 0 || by == j->reserver(), "RESERVED-MANY: mixed reservers");
          by = j->reserver();
        }
        reserved_in_many_ += n;
      } else if (word == "INSERTED-MANY") {
        n = Number(line, rest, 1, 1000);
        for (uint64_t i = 0; i < n; i++) {
          FUZZ_CHECK(pos < out.size(), "INSERTED-MANY %" PRIu64 " ends after %" PRIu64, n, i);
          std::string_view l = NextLine(out, &pos);
          std::string_view w2 = l.substr(0, l.find(' '));
          std::string_view r2 = l.size() > w2.size() ? l.substr(w2.size() + 1) : "";
          if (w2 == "INSERTED") {
            Inserted(l, r2);
          } else if (w2 == "EXISTS") {
            Exists(l, r2);
          } else {
            FUZZ_CHECK(l == "JOB_TOO_BIG" || l == "DRAINING" || l == "OUT_OF_MEMORY",
                       "in INSERTED-MANY: '%.*s'", Len(l), l.data());
          }
          in_many_++;
        }
      } else if (word == "OK") {
        n = Number(line, rest, 0, out.size());
        FUZZ_CHECK(pos + n + 2 <= out.size(), "short yaml");
        FUZZ_CHECK(out.compare(pos + n, 2, "\r\n") == 0, "yaml without CRLF");
        std::string yaml = out.substr(pos, n);
        FUZZ_CHECK(yaml.starts_with("---\n"), "yaml header");
        if (yaml.starts_with("---\ncurrent-jobs-urgent: ")) CheckStats(yaml);
        if (yaml.starts_with("---\nid: ")) CheckJobStats(yaml);
        if (yaml.starts_with("---\nnext: ")) CheckJobList(yaml);
        pos += n + 2;
      } else if (word == "INSERTED") {
        Inserted(line, rest);
      } else if (word == "EXISTS") {
        Exists(line, rest);
      } else if (word == "DELETED-MANY") {
        deleted_ += Number(line, rest, 0, 1000);
      } else if (word == "PURGED") {
        // A purge is answered at once if its first slice was its last (fewer jobs than a
        // slice), and late (by Tick) if not.
        constexpr uint64_t kSlice = MemoryStore::kPurgeSlice;
        n = late ? Number(line, rest, kSlice, UINT64_MAX) : Number(line, rest, 0, kSlice - 1);
        deleted_ += n;
      } else if (word == "TUBE-TRIES" || word == "WATCHING") {
        Number(line, rest, 0, UINT32_MAX);
      } else if (word == "KICKED") {
        // As PURGED: late only after a full first slice.
        if (late) Number(line, rest, MemoryStore::kKickSlice, UINT32_MAX);
        if (!rest.empty()) Number(line, rest, 0, UINT32_MAX);
      } else if (word == "USING") {
        FUZZ_CHECK(stalkd::command::IsValidTubeName(rest), "'%.*s'", Len(line), line.data());
      } else {
        FUZZ_CHECK(rest.empty(), "'%.*s' has arguments", Len(line), line.data());
        if (word == "DELETED") deleted_++;
      }
    }
    out.clear();
  }

 private:
  static int Len(std::string_view s) { return static_cast<int>(s.size()); }

  // The number a reply line carries (`rest`), within [min, max].
  static uint64_t Number(std::string_view line, std::string_view rest, uint64_t min, uint64_t max) {
    uint64_t n = 0;
    FUZZ_CHECK(ParseNumber(rest, &n) && n >= min && n <= max, "bad number in '%.*s'", Len(line),
               line.data());
    return n;
  }

  void Inserted(std::string_view line, std::string_view rest) {
    inserted_++;
    uint64_t id = Number(line, rest, 1, UINT64_MAX);
    FUZZ_CHECK(engine_.Find(id) != nullptr, "inserted job %" PRIu64 " missing", id);
  }

  // EXISTS names a living job that has a key.
  void Exists(std::string_view line, std::string_view rest) {
    uint64_t id = Number(line, rest, 1, UINT64_MAX);
    const Job* j = engine_.Find(id);
    FUZZ_CHECK(j != nullptr, "EXISTS %" PRIu64 ": no such job", id);
    FUZZ_CHECK(j->extra() != nullptr && j->extra()->key_len > 0, "EXISTS %" PRIu64 ": no key", id);
  }

  // A "RESERVED <id> <bytes>" or "FOUND <id> <bytes>" line (`rest`: after the word) and the
  // body at *pos, which must be the job's; *pos moves past it.
  const Job* CheckJobReply(const std::string& out, size_t* pos, std::string_view line,
                           std::string_view rest) {
    size_t sp = rest.find(' ');
    uint64_t id = 0, n = 0;
    FUZZ_CHECK(sp != std::string_view::npos && ParseNumber(rest.substr(0, sp), &id) &&
                   ParseNumber(rest.substr(sp + 1), &n),
               "'%.*s'", Len(line), line.data());
    FUZZ_CHECK(*pos + n + 2 <= out.size(), "short body");
    FUZZ_CHECK(out.compare(*pos + n, 2, "\r\n") == 0, "body without CRLF");
    const Job* j = engine_.Find(id);
    FUZZ_CHECK(j != nullptr, "'%.*s': no such job", Len(line), line.data());
    FUZZ_CHECK(j->body_size == n && out.compare(*pos, n, j->data(), n) == 0, "body mismatch");
    *pos += n + 2;
    return j;
  }

  // "key: value" lines after the "---\n" of a YAML reply.
  static std::map<std::string, std::string> YamlMap(const std::string& yaml) {
    std::map<std::string, std::string> kv;
    size_t p = 4;
    while (p < yaml.size()) {
      size_t nl = yaml.find('\n', p);
      if (nl == std::string::npos) break;
      std::string l = yaml.substr(p, nl - p);
      size_t colon = l.find(": ");
      if (colon != std::string::npos) kv[l.substr(0, colon)] = l.substr(colon + 2);
      p = nl + 1;
    }
    return kv;
  }

  // stats-job, answered at the moment of the command: the job lives, in that state, and each
  // extension key it shows applies to it (stats-job-ext shows them; plain stats-job, which a
  // raw input can send too, shows none, so their absence proves nothing here).
  void CheckJobStats(const std::string& yaml) {
    std::map<std::string, std::string> kv = YamlMap(yaml);
    uint64_t id = std::strtoull(kv["id"].c_str(), nullptr, 10);
    const Job* j = engine_.Find(id);
    FUZZ_CHECK(j != nullptr, "stats-job %" PRIu64 ": no such job", id);
    FUZZ_CHECK(kv["state"] == JobStateName(j->state()), "stats-job %" PRIu64 ": state %s vs %s", id,
               kv["state"].c_str(), JobStateName(j->state()));
    const JobExtra* x = j->extra();
    bool tries = kv.count("tries-left") != 0;
    FUZZ_CHECK(!tries || (x && x->limited), "stats-job %" PRIu64 ": tries-left", id);
    if (tries) {
      FUZZ_CHECK(std::strtoull(kv["tries-left"].c_str(), nullptr, 10) == x->tries_left,
                 "stats-job %" PRIu64 ": tries-left %s vs %u", id, kv["tries-left"].c_str(),
                 x->tries_left);
    }
    FUZZ_CHECK(kv.count("ttl-left") == 0 || (x && (x->has_ttl() || x->expire_pending)),
               "stats-job %" PRIu64 ": ttl-left", id);
    FUZZ_CHECK(kv.count("key") == 0 || (x && x->key_len > 0), "stats-job %" PRIu64 ": key", id);
    if (kv.count("bury-reason")) {
      const std::string& r = kv["bury-reason"];
      FUZZ_CHECK(
          x && j->state() == JobState::kBuried && (r == "bury" || r == "timeout" || r == "release"),
          "stats-job %" PRIu64 ": bury-reason %s", id, r.c_str());
    }
  }

  // list-jobs: ids in increasing order, all living jobs of one tube in one state, at most
  // 1000; `next` is 0 or past the last.
  void CheckJobList(const std::string& yaml) {
    size_t p = 10;  // after "---\nnext: "
    size_t nl = yaml.find('\n', p);
    uint64_t next = 0;
    FUZZ_CHECK(
        nl != std::string::npos && ParseNumber(std::string_view(yaml).substr(p, nl - p), &next),
        "list-jobs: next");
    p = nl + 1;
    if (yaml.compare(p, std::string::npos, "ids: []\n") == 0) return;
    FUZZ_CHECK(yaml.compare(p, 5, "ids:\n") == 0, "list-jobs: ids");
    p += 5;
    uint64_t last = 0, count = 0;
    const Job* first = nullptr;
    while (p < yaml.size()) {
      nl = yaml.find('\n', p);
      uint64_t id = 0;
      FUZZ_CHECK(nl != std::string::npos && yaml.compare(p, 2, "- ") == 0 &&
                     ParseNumber(std::string_view(yaml).substr(p + 2, nl - p - 2), &id),
                 "list-jobs: id line");
      p = nl + 1;
      FUZZ_CHECK(id > last, "list-jobs: %" PRIu64 " after %" PRIu64, id, last);
      last = id;
      const Job* j = engine_.Find(id);
      FUZZ_CHECK(j != nullptr, "list-jobs: %" PRIu64 ": no such job", id);
      if (!first) first = j;
      FUZZ_CHECK(j->tube == first->tube && j->state() == first->state(),
                 "list-jobs: %" PRIu64 " is not like %" PRIu64, id, first->id);
      count++;
    }
    FUZZ_CHECK(count >= 1 && count <= 1000, "list-jobs: %" PRIu64 " ids", count);
    FUZZ_CHECK(next == 0 || next > last, "list-jobs: next %" PRIu64 " after %" PRIu64, next, last);
  }

  // `stats` is answered from the counters at the moment of the command; with Run(1) nothing
  // else has happened since.
  void CheckStats(const std::string& yaml) {
    std::map<std::string, uint64_t> kv;
    for (const auto& [k, v] : YamlMap(yaml)) kv[k] = std::strtoull(v.c_str(), nullptr, 10);
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
        {"total-expired-jobs", g.expired},
        {"total-tries-exhausted", g.tries_exhausted},
        {"cmd-put-ext", store_.count(Verb::kPutExt)},
        {"cmd-put-many", store_.count(Verb::kPutMany)},
        {"cmd-reserve-ext", store_.count(Verb::kReserveExt)},
        {"cmd-delete-many", store_.count(Verb::kDeleteMany)},
        {"cmd-purge", store_.count(Verb::kPurge)},
        {"cmd-list-jobs", store_.count(Verb::kListJobs)},
        {"cmd-tube-tries", store_.count(Verb::kTubeTries)},
    };
    // `stats` answers beanstalkd's keys only; `stats-ext` adds stalkd's, from
    // total-expired-jobs on: a reply has all of them or none.
    bool extended = kv.count("total-expired-jobs") != 0;
    bool past_beanstalkd = false;
    for (const auto& c : checks) {
      past_beanstalkd = past_beanstalkd || std::string_view(c.key) == "total-expired-jobs";
      auto it = kv.find(c.key);
      if (past_beanstalkd && !extended) {
        FUZZ_CHECK(it == kv.end(), "plain stats has stalkd's %s", c.key);
        continue;
      }
      FUZZ_CHECK(it != kv.end(), "stats lacks %s", c.key);
      FUZZ_CHECK(it->second == c.want, "stats %s: %" PRIu64 " vs %" PRIu64, c.key, it->second,
                 c.want);
    }
    CheckLive(kv["current-jobs-ready"] + kv["current-jobs-reserved"] + kv["current-jobs-delayed"] +
                  kv["current-jobs-buried"],
              "stats");
  }

  FakeClock clock_;
  StubHost host_;
  FuzzAuthenticator authenticator_;
  stalkd::command::AuthPolicy auth_policy_;
  MemoryStore store_;
  Engine& engine_;
  std::unique_ptr<Client> clients_[kClients];
  uint64_t inserted_ = 0;           // INSERTED replies (alone or in INSERTED-MANY), flood puts
  uint64_t deleted_ = 0;            // DELETED, DELETED-MANY n, PURGED n (and dropped purges)
  uint64_t in_many_ = 0;            // lines of INSERTED-MANY replies
  uint64_t reserved_in_many_ = 0;   // jobs of RESERVED-MANY replies
  uint64_t last_expired_ = 0;       // engine counters().expired, last seen
  bool dropped_long_work_ = false;  // see Resync
  uint64_t late_results_ = 0;       // results delivered through Client::OnResult
  uint64_t unchecked_steps_ = 0;    // steps since the invariants were last checked
  uint64_t replies_[std::size(kReplyWords)] = {};  // by first word
};

Client::Client(World& w, stalkd::command::Store& store) : w_(w) {
  conv_ = std::make_unique<Conversation>(store, w.auth_policy(), *this);
}

void Client::OnResult(const Result& r) {
  FUZZ_CHECK(conv_ != nullptr && !closing_, "late result for a session being opened or closed");
  w_.CheckLateResult(*conv_, r);
  conv_->OnResult(r);
  w_.Drain(*conv_, /*late=*/true);
}

// put-ext's options from the bits of c (a, b pick their values): tries, ttl (0 to 3 s: 0 is
// none), a key from a small set (so that EXISTS happens), attributes.
std::string PutOptions(uint8_t a, uint8_t b, uint8_t c) {
  std::string o;
  if (c & 0x01) o += Format(" tries=%u", 1 + a % 3u);
  if (c & 0x02) o += Format(" ttl=%u", b % 4u);
  if (c & 0x04) o += Format(" key=k%u", a % 4u);
  if (c & 0x08) o += Format(" attr.n=v%u attr.Z_-9=%u", b % 10u, a);
  return o;
}

// A malformed option or argument, to append to an extension command's line.
const char* Malformed(uint8_t c) {
  static const char* const kBad[] = {
      " tries=0",
      " tries=1 tries=2",
      " key=",
      " bogus",
      " attr.=x",
      " ttl=-1",
      " count=0",
      " ttr=0",
      " x",
      " 4294967296",
      " key=a\x7f",
      " count=1001",
      " detached detached",
      " attr.a=1 attr.a=2",
      " ttl=",
      " freeze-tries freeze-tries",
  };
  return kBad[c % std::size(kBad)];
}

// One of the extension commands of docs/EXTENSIONS.md: well-formed mostly, malformed when
// the top three bits of c are set.
std::string ExtensionCommand(uint8_t which, uint8_t a, uint8_t b, uint8_t c) {
  bool bad = (c & 0xe0) == 0xe0;
  std::string junk = bad ? Malformed(a ^ b) : "";
  unsigned id = 1 + a % 12;
  const char* tube = kTubes[b % 4];
  static const char* const kStates[] = {"ready", "delayed", "buried", "all", "reserved", "dead"};
  switch (which % 8) {
    case 0:
    case 1: {  // put-ext
      unsigned size = b % 8;
      if (a == 255) size = kMaxJobSize + 1;
      std::string cmd = Format("put-ext %u %u %u %u", a % 3 == 0 ? 1023u + a % 2 : a * 7u,
                               (a / 8) % 3, 1 + b % 3, size);
      cmd += PutOptions(a, b, c) + junk + "\r\n";
      cmd.append(size, static_cast<char>('a' + which % 26));
      return cmd + ((c & 0x10) && (b & 0x40) ? "!\r\n" : "\r\n");
    }
    case 2: {  // put-many: 1 to 4 entries
      unsigned count = 1 + a % 4;
      std::string block;
      for (unsigned i = 0; i < count; i++) {
        uint8_t ai = static_cast<uint8_t>(a + i * 37), bi = static_cast<uint8_t>(b + i * 11);
        unsigned size = bi % 5;
        if (ai == 255) size = kMaxJobSize + 1;
        block += Format("%u %u %u %u", ai % 3 == 0 ? 1023u + i : ai * 3u, (ai / 8) % 2, 1 + bi % 3,
                        size);
        block += PutOptions(ai, bi, static_cast<uint8_t>(c + i)) + "\r\n";
        block.append(size, static_cast<char>('A' + i));
        block += "\r\n";
      }
      size_t bytes = block.size();
      if (bad) {
        switch (c % 3) {
          case 0:
            count++;  // an entry short
            break;
          case 1:
            block.insert(block.find(' '), junk);  // a malformed entry
            bytes = block.size();
            break;
          default:
            bytes--;  // the block's last CRLF is off by one
            break;
        }
      }
      return Format("put-many %u %zu\r\n", count, bytes) + block + "\r\n";
    }
    case 3:
    case 4: {  // reserve-ext
      std::string cmd = Format("reserve-ext %u", a % 3);
      // Now and then a whole batch, for after a flood.
      if (b & 0x03) cmd += Format(" count=%u", (b & 0x80) ? 1000u : 1 + b % 4u);
      if (c & 0x01) cmd += Format(" ttr=%u", 1 + c % 3u);
      if (c & 0x02) cmd += " freeze-tries";
      if (c & 0x04) cmd += " detached";
      return cmd + junk + "\r\n";
    }
    case 5: {  // delete-many
      std::string cmd = "delete-many";
      for (unsigned i = 0, n = 1 + c % 5; i < n && !(bad && c % 2); i++) {
        cmd += Format(" %u", 1 + (a + i * (b | 1)) % 12);
      }
      return cmd + junk + "\r\n";
    }
    case 6:  // purge
      return Format("purge %s %s%s\r\n", tube, kStates[bad ? 4 + c % 2 : c % 4], junk.c_str());
    default:
      if (c & 0x01) {
        return Format("tube-tries %s %u%s\r\n", tube, (c >> 1) % 4, junk.c_str());
      } else {
        static const char* const kListStates[] = {"ready", "delayed", "reserved", "buried"};
        return Format("list-jobs %s %s %u %u%s\r\n", tube,
                      bad ? kStates[3 + c % 3] : kListStates[c / 2 % 4], a % 3 == 0 ? 0 : id,
                      (b & 0x80) ? 1000 : 1 + b % 4, junk.c_str());
      }
  }
}

// A well-formed (mostly) command, to reach deep states faster than raw bytes would.
std::string DictionaryCommand(Input& in) {
  uint8_t which = in.Byte();
  uint8_t a = in.Byte();
  uint8_t b = in.Byte();
  if (which >= 192) return ExtensionCommand(which - 192, a, b, in.Byte());
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
      return "stats-ext\r\n";
    case 16:  // -ext: the job's extension fields are checked (CheckJobStats)
      snprintf(buf, sizeof buf, "stats-job-ext %u\r\n", id);
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
    case 22: {
      if (a % 8 == 0) return "quit\r\n";
      if (a % 8 != 1) return "stats\r\n";
      static const char* const kAuths[] = {"auth a.1\r\n",     "auth b.1\r\n",  "auth a a.2\r\n",
                                           "auth root:pw\r\n", "auth nope\r\n", "auth\r\n"};
      return kAuths[b % std::size(kAuths)];
    }
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
  World w(opt, (header & 0x08) != 0);  // --require-auth
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
        } else if (what % 8 == 3) {
          w.ToggleRevoked();
        } else if (what % 8 == 2 && floods < kMaxFloods) {
          floods++;
          uint8_t which = in.Byte();
          uint8_t count = in.Byte();
          w.FloodExt(which, count, in.Byte());
        }
        break;
      }
    }
    w.Pump();
    w.CheckModel();
  }
  return 0;
}
