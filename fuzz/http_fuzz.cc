// Drives one MemoryStore (on a FakeClock) through several HTTP connections (HttpFrontEnd,
// docs/HTTP.md; for inputs of odd length through a store::DeferredStore, which answers
// every call late, so that the front ends' waits for late results are fuzzed too) with
// request bytes taken from the fuzzer input: lmstfy's API (ApiService)
// on clients 0 and 1, and on client 2 the admin API (AdminService) or the API, by the
// header byte. The bytes arrive in chunks (PrepareInput/CommitInput), interleaved with
// Run steps, clock advances and Ticks (late results come back through Client::OnResult, as
// the server's Connection forwards them), closed inputs, dropped connections, 408 timeouts,
// draining and floods of buried jobs (so that dead-letter respawn and delete take several
// slices).
//
// Checked after every step:
// - The output is a sequence of well-formed HTTP/1.1 responses: a status line with a known
//   reason, only the headers stalkd sends (Content-Type and a Content-Length that matches
//   the body unless 204; an X-Request-ID of 32 lower-case hex digits, unique in the run;
//   Connection: close; WWW-Authenticate), a JSON body that parses (text for /metrics), no
//   body after HEAD. A 100 Continue at most once per request.
// - Responses match requests: every request the service handled is answered once, in
//   order, with the status and close flag it was answered with (Service::Answered); any
//   other response is a refusal (400, 408, 413, 431) with Connection: close. After a
//   response with Connection: close, or once the front end is closing, nothing more is
//   written. One request is handled at a time.
// - Answers agree with the engine at the moment they are made (direct mode only): a published job
// exists in
//   its tube with its body and attributes; a consumed job is reserved (detached) with the
//   answered body, tries and attributes; peeks show the job that is there; sizes are the
//   tube's counts; a delete leaves no such job in the tube; a dead-letter delete or
//   respawn answered at once took the jobs at the head of the dead letter, in order.
// - A head whose body is still arriving is screened (Service::Screen, the real services'
//   route, name, token and account checks): a refusal is a 4xx answered at once with
//   Connection: close, an admission is followed by that request's Handle or by a 503 of the
//   bodies' budget (a BodyBudget of 64 or 4096 bytes, by the header byte), at once for a
//   Content-Length, or when a chunk of a chunked body does not fit; a front end
//   lingers (reads a refused body away) only while closing and for at most kLingerBytes;
//   when every connection is gone the budget holds nothing.
// - The rate limiter gives back no more than it counted; nothing is answered 500; the
//   engine's invariants hold; Run leaves nothing runnable behind; the front end's runnable()
//   agrees with what Run does.
//
// Input format: a header byte (see Header), then ops, each an op byte `code` followed by
// its arguments; the op is (code / 3) % 8 and its client code % 3:
//   0  raw bytes: a length (Length), then that many bytes, sent as one chunk
//   1, 2  a dictionary request (Request): bytes which, a, b, c, t; sent in up to 3 chunks
//   3  time passes: a byte, in tenths of a second (% 40; 255: an hour)
//   4  the client's input is closed
//   5  the client is dropped (as the server does: OnInputClosed, then destroyed)
//   6  a byte `what`: % 8 == 0 toggles draining; 1 floods (bytes which, count: Flood); 2
//      buries a job by id over a text session (byte); 3 times the request out (408); 4 runs
//      a front end that is not runnable and checks nothing happens; 5 reserves a job by id
//      over the text session and keeps it; 7 toggles recovery (the admin API answers
//      only probes); 6: a Run of every client
//   7  trickle: a chunk size byte, a length (Length), then bytes sent chunk by chunk
#include <rapidjson/document.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#define FUZZ_NAME "http_fuzz"
#include "base/clock.h"
#include "command/store.h"
#include "command/values.h"
#include "engine/engine.h"
#include "fuzz_support.h"
#include "http/admin.h"
#include "http/api.h"
#include "http/exchange.h"
#include "http/front_end.h"
#include "http/metrics.h"
#include "http/response.h"
#include "http/throttle.h"
#include "http/tokens.h"
#include "http/url.h"
#include "store/deferred_store.h"
#include "store/memory_store.h"

namespace {

using stalkd::FakeClock;
using stalkd::kSecond;
using stalkd::Nanos;
using stalkd::command::Outcome;
using stalkd::command::Result;
using stalkd::command::Session;
using stalkd::engine::Engine;
using stalkd::engine::EngineOptions;
using stalkd::engine::Job;
using stalkd::engine::JobExtra;
using stalkd::engine::JobState;
using stalkd::engine::Tube;
using stalkd::fuzz::Format;
using stalkd::fuzz::Input;
using stalkd::fuzz::StubHost;
using stalkd::http::HttpFrontEnd;
using stalkd::store::MemoryStore;
using stalkd::store::MemoryStoreOptions;
namespace http = stalkd::http;

constexpr size_t kMaxInput = 16384;
constexpr int kMaxOps = 300;
constexpr int kClients = 3;
constexpr int kMaxFloods = 2;
constexpr const char* kToken = "tok";  // valid for every namespace

int Len(std::string_view s) { return static_cast<int>(std::min<size_t>(s.size(), 2000)); }

// The header byte.
struct Header {
  explicit Header(uint8_t h) : bits(h) {}
  bool admin() const { return bits & 0x01; }             // client 2 speaks the admin API
  bool accounts() const { return bits & 0x02; }          // the admin API needs basic auth
  int64_t read_limit() const { return bits >> 2 & 3; }   // consumes per second; 0: none
  int64_t write_limit() const { return bits >> 4 & 3; }  // publishes per second; 0: none
  bool tight_memory() const { return bits & 0x40; }
  size_t max_job_size() const { return bits & 0x80 ? 16 : 128; }
  uint8_t bits;
};

std::string AccountsFile() {
  static std::string path;
  if (path.empty()) {
    path = Format("/tmp/stalkd-http-fuzz-accounts.%d", static_cast<int>(getpid()));
    FILE* f = std::fopen(path.c_str(), "w");
    FUZZ_CHECK(f != nullptr, "cannot write %s", path.c_str());
    std::fputs("# fuzz\nadmin:pw\nops:a:b\n", f);
    std::fclose(f);
  }
  return path;
}

// A flood's and the text client's session: nothing it does waits.
class QuietClient final : public stalkd::command::Client {
 public:
  void OnResult(const Result&) override { FUZZ_CHECK(false, "late result for a text session"); }
};

class World;

// One HTTP connection: a front end whose late results come back through OnResult, and what
// the checks know of it.
class Conn final : public stalkd::command::Client {
 public:
  Conn(int k, http::Service& service, stalkd::command::Store& store) : k_(k) {
    fe_ = std::make_unique<HttpFrontEnd>(service, store, *this);
  }
  ~Conn() {
    closing_ = true;  // closing the session must hand this client nothing
    fe_.reset();
  }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  void OnResult(const Result& r) override;
  HttpFrontEnd& fe() { return *fe_; }
  int index() const { return k_; }

  // An answered request whose response is still to be read from the output.
  struct Answer {
    int status;
    bool head;
    bool close;
  };
  std::deque<Answer> answers;
  uint64_t handled = 0;   // Service::Handle calls, and Screen calls that answered
  uint64_t screened = 0;  // heads screened before their bodies (Service::Screen)
  uint64_t budget_refusals = 0;
  bool screening = false;     // a head was admitted by Screen; its Handle has not come
  uint64_t answered = 0;      // Service::Answered calls
  bool done_writing = false;  // wrote Connection: close, or closes without a response
  bool dead = false;          // the server would have closed it: reopened at the next send
  int continues = 0;          // 100 Continue since the last final response
  bool admin_ = false;

 private:
  int k_;
  std::unique_ptr<HttpFrontEnd> fe_;
  bool closing_ = false;
};

// The Access of the API: token "tok" in every namespace, and tokens made by the admin API
// in theirs; "tok" has a small rate limit in namespaces "ns" and "n2".
class FuzzAccess final : public http::Access {
 public:
  FuzzAccess(http::TokenStore& tokens, const Header& h) : tokens_(tokens) {
    http::Limit l;
    l.read = h.read_limit();
    l.write = h.write_limit();
    l.interval_s = 1;
    if (l.read > 0 || l.write > 0) {
      for (const char* ns : {"ns", "n2"}) FUZZ_CHECK(limits_.Set(ns, kTokenId, l), "Set");
    }
  }
  bool Valid(std::string_view ns, std::string_view token, std::string* id) const override {
    std::string_view made;
    if (token == kToken) {
      *id = kTokenId;
    } else if (tokens_.Valid(ns, token, &made)) {
      *id = made;
    } else {
      return false;
    }
    return true;
  }
  bool Allow(std::string_view ns, std::string_view id, bool produce, Nanos now) override {
    bool ok = Limits(id).Allow(ns, id, Kind(produce), now);
    if (ok) allowed_[produce]++;
    return ok;
  }
  void Refund(std::string_view ns, std::string_view id, bool produce, Nanos counted_at,
              Nanos now) override {
    refunded_[produce]++;
    FUZZ_CHECK(refunded_[produce] <= allowed_[produce], "refunded more than allowed");
    FUZZ_CHECK(counted_at <= now, "refunded before it was counted");
    Limits(id).Refund(ns, id, Kind(produce), counted_at, now);
  }

 private:
  static constexpr std::string_view kTokenId = "fuzz";  // a made token's id is 12 hex digits
  static http::Kind Kind(bool produce) {
    return produce ? http::Kind::kProduce : http::Kind::kConsume;
  }
  http::Throttler& Limits(std::string_view id) {
    return id == kTokenId ? limits_ : tokens_.throttler();
  }

  http::TokenStore& tokens_;
  http::Throttler limits_;
  uint64_t allowed_[2] = {};
  uint64_t refunded_[2] = {};
};

class FuzzAdminHost final : public http::AdminHost, public http::ApiObserver {
 public:
  FuzzAdminHost(const bool& draining, const bool& recovering)
      : draining_(draining), recovering_(recovering), metrics_(4) {}
  std::string_view version() const override { return "fuzz"; }
  bool ready() const override { return !draining_ && !recovering_; }
  bool recovering() const override { return recovering_; }
  // Over a few steps: the stats, then a tube a step, then 40 lines a step.
  http::Co<> ScrapeMetrics(Session& s, http::Response* resp) override {
    return http::Scrape(s, metrics_, {}, resp, 1, 40);
  }
  void OnRequest(std::string_view route, int status, Nanos latency) override {
    FUZZ_CHECK(!route.empty(), "a request answered without a route (status %d)", status);
    FUZZ_CHECK(latency >= 0, "negative latency");
    metrics_.ObserveHttp(route, status, latency);
  }

 private:
  const bool& draining_;
  const bool& recovering_;
  http::Metrics metrics_;
};

// The Service the front ends see: the real one, with checks around it.
class CheckedService final : public http::Service {
 public:
  CheckedService(World& w, http::Service& inner) : w_(w), inner_(inner) {}
  void Handle(http::Exchange& ex) override;
  bool Screen(http::Exchange& ex) override;
  void Answered(const http::Exchange& ex, Nanos done) override;
  const stalkd::Clock& clock() const override { return inner_.clock(); }
  uint64_t body_limit() const override { return inner_.body_limit(); }
  uint64_t bulk_body_limit() const override { return inner_.bulk_body_limit(); }

 private:
  World& w_;
  http::Service& inner_;
  std::vector<uint64_t> dead_before_;  // the dead letter of the request's tube, at Handle
  bool immediate_ = false;             // the request was answered within Handle
};

// The bodies being received: what the front ends take from the budget (BodyBudget), by the
// header byte a tight one, so that bodies still arriving are refused 503 too.
uint64_t BudgetLimit(bool tight) { return tight ? 64 : 4096; }

std::string Base64(std::string_view s) {
  std::string out;
  http::AppendBase64(s, &out);
  return out;
}

bool IsHex32(std::string_view s) {
  if (s.size() != 32) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

class World {
 public:
  World(const Header& h, EngineOptions opt, bool deferred)
      : header_(h),
        store_(clock_, MemoryStoreOptions{opt, h.max_job_size()}, &host_),
        engine_(store_.engine()),
        access_(tokens_, h),
        admin_host_(draining_, recovering_),
        api_(clock_, access_, &admin_host_, ApiOptions(h)),
        admin_(clock_, tokens_, admin_host_),
        checked_api_(*this, api_),
        checked_admin_(*this, admin_) {
    std::string error;
    FUZZ_CHECK(tokens_.Open("", &error), "tokens: %s", error.c_str());
    if (h.accounts()) {
      FUZZ_CHECK(admin_.LoadAccounts(AccountsFile(), &error), "accounts: %s", error.c_str());
    }
    admin_.set_observer(&admin_host_);
    checked_api_.set_body_budget(&budget_);
    checked_admin_.set_body_budget(&budget_);
    text_ = store_.Open(text_client_);
    if (deferred) deferred_ = std::make_unique<stalkd::store::DeferredStore>(store_);
    for (int k = 0; k < kClients; k++) Open(k);
  }
  ~World() {
    for (auto& c : clients_) c.reset();
    text_.reset();
    engine_.CheckInvariants();
    // Every body's room went back with its request or its connection.
    FUZZ_CHECK(budget_.used() == 0, "the bodies' budget holds %" PRIu64 " bytes of no request",
               budget_.used());
  }

  static http::ApiOptions ApiOptions(const Header& h) {
    http::ApiOptions o;
    o.max_job_size = h.max_job_size();
    return o;
  }

  Engine& engine() { return engine_; }
  FakeClock& clock() { return clock_; }
  const std::string& last_token() const { return last_token_; }
  bool is_admin(int k) const { return k == 2 && header_.admin(); }

  void Open(int k) {
    bool admin = is_admin(k);
    clients_[k] = std::make_unique<Conn>(k, admin ? checked_admin_ : checked_api_, http_store());
    clients_[k]->admin_ = admin;
  }

  // The server drops a connection: it stops waiting, then goes.
  void Drop(int k) {
    Conn& c = *clients_[k];
    c.fe().OnInputClosed();
    c.fe().output().clear();  // never sent
    c.answers.clear();
    clients_[k].reset();
    CheckInvariants();
    Open(k);
    CheckInvariants();
  }

  Conn* ConnOf(const Session& s) {
    for (auto& c : clients_) {
      if (c && &c->fe().session() == &s) return c.get();
    }
    FUZZ_CHECK(false, "a request from no connection");
    return nullptr;
  }

  // Sends bytes on connection k in chunks of at most `chunk` bytes (0: one chunk), running
  // everything between chunks.
  void Send(int k, std::string_view bytes, size_t chunk = 0) {
    if (clients_[k]->dead || clients_[k]->fe().input_closed()) Drop(k);
    if (chunk == 0) chunk = bytes.size();
    do {
      size_t n = std::min(chunk, bytes.size());
      HttpFrontEnd& f = clients_[k]->fe();
      char* p = f.PrepareInput(n);
      if (n > 0) std::memcpy(p, bytes.data(), n);
      f.CommitInput(n);
      bytes.remove_prefix(n);
      Pump();
      if (clients_[k]->dead) return;  // the rest would go nowhere
    } while (!bytes.empty());
  }

  void InputClosed(int k) {
    Conn& c = *clients_[k];
    if (c.fe().input_closed()) return;
    c.fe().OnInputClosed();
    Pump();
  }

  void TimeOut(int k) {
    if (clients_[k]->dead) return;  // the server has closed it: it times nothing out
    clients_[k]->fe().TimeOut();
    Pump();
  }

  // Run on a front end with nothing to do does nothing.
  void IdleRun(int k) {
    HttpFrontEnd& f = clients_[k]->fe();
    if (f.runnable()) return;
    size_t in = f.buffered_input();
    size_t out = f.output().size();
    bool waiting = f.waiting();
    FUZZ_CHECK(!f.Run(100), "Run of a front end that is not runnable ran out of steps");
    FUZZ_CHECK(f.buffered_input() == in && f.output().size() == out && f.waiting() == waiting,
               "Run of a front end that is not runnable did something");
  }

  void toggle_recovering() { recovering_ = !recovering_; }
  void set_draining(bool on) {
    draining_ = on;
    store_.SetDraining(on);
  }

  void Advance(Nanos d) {
    clock_.Advance(d);
    for (int i = 0; i < 10000; i++) {
      Nanos next = http_store().Tick();
      CheckInvariants();
      Pump();
      if (next > clock_.Now()) return;
    }
    FUZZ_CHECK(false, "Tick never caught up");
  }

  // Runs every front end one step at a time until none is runnable, reading (and
  // checking) the output after each step, as the server would.
  void Pump() {
    for (int round = 0;; round++) {
      FUZZ_CHECK(round < 200000, "Pump does not settle");
      bool progress = false;
      for (auto& c : clients_) {
        HttpFrontEnd& f = c->fe();
        if (!f.output().empty()) Drain(*c);  // a late result's
        if (!f.runnable()) {
          Settle(*c);
          continue;
        }
        bool more = f.Run(1);
        progress = true;
        if (more) FUZZ_CHECK(f.runnable(), "Run stopped for max_steps but is not runnable");
        Drain(*c);
        CheckInvariants();
      }
      if (!progress && deferred_ && deferred_->Busy()) {
        deferred_->Tick();  // the late results: the next round takes them
        progress = true;
      }
      if (!progress) return;
    }
  }

  // A front end with nothing to run: the server closes it once its output is written if it
  // is closing, or if its peer is done and nothing is left to answer.
  void Settle(Conn& c) {
    HttpFrontEnd& f = c.fe();
    if (c.dead || !f.output().empty()) return;
    if (f.closing() || (f.input_closed() && !f.runnable() && !f.waiting())) {
      c.dead = true;
      c.done_writing = true;
    }
  }

  // The engine's invariants: with few jobs after every step, with many now and then.
  void CheckInvariants() {
    // A refusal before a body was read closes lingering: bounded, and only when closing.
    for (auto& c : clients_) {
      if (!c) continue;
      uint64_t linger = c->fe().linger_bytes();
      FUZZ_CHECK(linger <= HttpFrontEnd::kLingerBytes, "lingers for %" PRIu64 " bytes", linger);
      FUZZ_CHECK(linger == 0 || c->fe().closing(), "lingers without closing");
    }
    if (flooded_ && ++unchecked_ % 64 != 0) return;
    engine_.CheckInvariants();
  }

  void Flood(uint8_t which, uint32_t count);
  void TextBury(uint64_t id);
  void TextReserve(uint64_t id);

  // Reads everything c has written and checks it (see the top of the file).
  void Drain(Conn& c);

  // Checks of answers against the engine (CheckedService::Answered).
  void CheckAnswer(const Conn& c, const http::Exchange& ex,
                   const std::vector<uint64_t>& dead_before, bool immediate);
  std::vector<uint64_t> DeadLetter(std::string_view tube) const {
    std::vector<uint64_t> ids;
    if (const Tube* t = engine_.FindTube(tube)) {
      for (const Job* j : t->buried) ids.push_back(j->id);
    }
    return ids;
  }

 private:
  void CheckJob(const rapidjson::Value& v, std::string_view ns, bool consumed, bool immediate,
                std::string_view tube);
  void CheckFinal(Conn& c, int status, bool close, bool head, std::string_view content_type,
                  std::string_view body);

  Header header_;
  FakeClock clock_;
  StubHost host_;
  MemoryStore store_;
  // Deferred mode: the HTTP front ends' store, whose every answer is late (the text session
  // and the floods use store_ itself).
  std::unique_ptr<stalkd::store::DeferredStore> deferred_;
  stalkd::command::Store& http_store() {
    return deferred_ ? static_cast<stalkd::command::Store&>(*deferred_) : store_;
  }
  Engine& engine_;
  http::TokenStore tokens_;
  FuzzAccess access_;
  bool draining_ = false;
  bool recovering_ =
      false;  // the admin API answers only probes (an admin listener during recovery)
  FuzzAdminHost admin_host_;
  http::ApiService api_;
  http::AdminService admin_;
  CheckedService checked_api_;
  CheckedService checked_admin_;
  http::BodyBudget budget_{BudgetLimit(header_.tight_memory())};
  QuietClient text_client_;
  std::unique_ptr<Session> text_;  // a beanstalkd client's session, for bury and reserve
  std::unique_ptr<Conn> clients_[kClients];
  std::set<std::string> request_ids_;
  std::string last_token_;  // the last token the admin API made
  bool flooded_ = false;
  uint64_t unchecked_ = 0;

 public:
  int floods = 0;
};

void Conn::OnResult(const Result& r) {
  FUZZ_CHECK(fe_ != nullptr && !closing_, "late result for a connection being opened or closed");
  FUZZ_CHECK(fe_->waiting(), "late result for a connection not waiting");
  fe_->OnResult(r);
}

void CheckedService::Handle(http::Exchange& ex) {
  Conn* c = w_.ConnOf(ex.session);
  if (c->screening) {  // its head was screened and admitted (counted there); its body is here
    c->screening = false;
  } else {
    FUZZ_CHECK(c->handled == c->answered, "a request handled while another is being answered");
    c->handled++;
  }
  FUZZ_CHECK(!c->fe().closing(), "a request handled on a closing connection");
  dead_before_.clear();
  http::Target t;
  if (t.Parse(ex.request.target) && t.segments().size() >= 4 && t.segments()[3] == "deadletter") {
    dead_before_ = w_.DeadLetter(t.segments()[1] + "/" + t.segments()[2]);
  }
  inner_.Handle(ex);
  immediate_ = ex.task == nullptr;
}

// A head whose body is still arriving (HttpFrontEnd::ScreenHead): refused here, or refused
// 503 by the body budget right after an admission, it is answered at once (Answered) without
// a Handle; the connection then closes, lingering for the rest of the body.
bool CheckedService::Screen(http::Exchange& ex) {
  Conn* c = w_.ConnOf(ex.session);
  FUZZ_CHECK(c->handled == c->answered, "a head screened while a request is being answered");
  FUZZ_CHECK(!c->fe().closing(), "a head screened on a closing connection");
  bool admitted = inner_.Screen(ex);
  FUZZ_CHECK(admitted == (ex.response.status == 0 || ex.response.status == 200),
             "Screen %s with status %d", admitted ? "admitted" : "refused", ex.response.status);
  if (!admitted) {
    FUZZ_CHECK(ex.response.status >= 400 && ex.response.status < 500, "screened %d",
               ex.response.status);
  }
  c->screened++;
  c->handled++;  // answered now (a refusal) or by Handle once the body is here
  c->screening = admitted;
  return admitted;
}

void CheckedService::Answered(const http::Exchange& ex, Nanos done) {
  Conn* c = w_.ConnOf(ex.session);
  if (c->screening) {
    // Admitted by Screen, then refused 503 for the budget before its body was read.
    c->screening = false;
    FUZZ_CHECK(ex.response.status == 503 && !ex.request.keep_alive,
               "a screened request answered %d without a Handle", ex.response.status);
    FUZZ_CHECK(c->handled == c->answered + 1, "a budget refusal out of turn");
    c->answered++;
    c->budget_refusals++;
    c->answers.push_back({ex.response.status, false, true});
    inner_.Answered(ex, done);
    return;
  }
  FUZZ_CHECK(c->handled == c->answered + 1, "answered %" PRIu64 " of %" PRIu64 " requests",
             c->answered + 1, c->handled);
  c->answered++;
  FUZZ_CHECK(done >= ex.now, "answered before it was asked");
  c->answers.push_back(
      {ex.response.status, ex.request.method == http::Method::kHead, !ex.request.keep_alive});
  w_.CheckAnswer(*c, ex, dead_before_, immediate_);
  immediate_ = false;
  inner_.Answered(ex, done);
}

// The first value of header `name` in head lines (without the status line), or nullopt.
struct Head {
  int status = 0;
  std::string_view reason;
  std::vector<std::pair<std::string_view, std::string_view>> fields;
  const std::string_view* Find(std::string_view name) const {
    for (const auto& [k, v] : fields) {
      if (k == name) return &v;
    }
    return nullptr;
  }
};

void World::Drain(Conn& c) {
  std::string& out = c.fe().output();
  if (out.empty()) return;
  FUZZ_CHECK(!c.done_writing, "connection %d wrote %zu bytes after its last response: '%.*s'",
             c.index(), out.size(), Len(out), out.data());
  std::string_view rest = out;
  while (!rest.empty()) {
    size_t end = rest.find("\r\n\r\n");
    FUZZ_CHECK(end != std::string_view::npos, "a response head without its end: '%.*s'", Len(rest),
               rest.data());
    std::string_view head = rest.substr(0, end + 2);
    rest.remove_prefix(end + 4);
    Head h;
    size_t eol = head.find("\r\n");
    std::string_view line = head.substr(0, eol);
    head.remove_prefix(eol + 2);
    FUZZ_CHECK(line.size() > 13 && line.starts_with("HTTP/1.1 ") && line[12] == ' ',
               "status line '%.*s'", Len(line), line.data());
    std::optional<uint64_t> st = http::ParseUint(line.substr(9, 3), 16);
    FUZZ_CHECK(st && *st >= 100 && *st <= 599, "status '%.*s'", Len(line), line.data());
    h.status = static_cast<int>(*st);
    h.reason = line.substr(13);
    FUZZ_CHECK(h.reason != "Unknown", "status %d has no reason phrase", h.status);
    while (!head.empty()) {
      eol = head.find("\r\n");
      std::string_view field = head.substr(0, eol);
      head.remove_prefix(eol + 2);
      size_t colon = field.find(": ");
      FUZZ_CHECK(colon != std::string_view::npos && colon > 0, "header line '%.*s'", Len(field),
                 field.data());
      std::string_view name = field.substr(0, colon);
      FUZZ_CHECK(h.Find(name) == nullptr, "header %.*s twice", Len(name), name.data());
      FUZZ_CHECK(name == "Content-Type" || name == "Content-Length" || name == "X-Request-ID" ||
                     name == "Connection" || name == "WWW-Authenticate",
                 "unexpected header '%.*s'", Len(field), field.data());
      h.fields.emplace_back(name, field.substr(colon + 2));
    }
    if (h.status == 100) {
      FUZZ_CHECK(h.reason == "Continue" && h.fields.empty(), "interim response '%.*s'", Len(line),
                 line.data());
      FUZZ_CHECK(++c.continues == 1, "a second 100 Continue for one request");
      continue;
    }
    FUZZ_CHECK(h.status >= 200, "interim status %d", h.status);
    c.continues = 0;
    const std::string_view* id = h.Find("X-Request-ID");
    FUZZ_CHECK(id && IsHex32(*id), "X-Request-ID");
    FUZZ_CHECK(request_ids_.emplace(*id).second, "X-Request-ID %.*s again", Len(*id), id->data());
    const std::string_view* conn = h.Find("Connection");
    FUZZ_CHECK(!conn || *conn == "close", "Connection: %.*s", Len(*conn), conn->data());
    bool close = conn != nullptr;
    bool head_request = false;
    if (!c.answers.empty()) {
      Conn::Answer a = c.answers.front();
      c.answers.pop_front();
      FUZZ_CHECK(a.status == h.status, "answered %d, wrote %d", a.status, h.status);
      FUZZ_CHECK(a.close == close, "answered with close %d, wrote close %d", a.close, close);
      head_request = a.head;
    } else {
      // A refusal of a request the service never saw: malformed, too large, too slow; or of
      // an admitted head whose chunked body ran past the bodies' budget as it arrived (the
      // parser refuses it 503, as a Content-Length past the budget is refused at admission).
      bool chunks_over_budget = h.status == 503 && c.screening;
      FUZZ_CHECK(h.status == 400 || h.status == 408 || h.status == 413 || h.status == 431 ||
                     chunks_over_budget,
                 "a response to no request: %d", h.status);
      if (chunks_over_budget) {
        c.screening = false;
        c.budget_refusals++;
      }
      FUZZ_CHECK(close, "a refusal without Connection: close");
      FUZZ_CHECK(c.fe().closing(), "a refusal, and the connection stays open");
    }
    std::string_view body;
    std::string_view type;
    if (h.status == 204) {
      FUZZ_CHECK(!h.Find("Content-Length") && !h.Find("Content-Type"), "204 with a body");
    } else {
      const std::string_view* length = h.Find("Content-Length");
      const std::string_view* ct = h.Find("Content-Type");
      FUZZ_CHECK(length && ct, "status %d without Content-Length or Content-Type", h.status);
      type = *ct;
      std::optional<uint64_t> n = http::ParseUint(*length, 64);
      FUZZ_CHECK(n.has_value(), "Content-Length: %.*s", Len(*length), length->data());
      if (head_request) {
        body = "";
      } else {
        FUZZ_CHECK(*n <= rest.size(), "Content-Length %" PRIu64 " beyond the %zu bytes written", *n,
                   rest.size());
        body = rest.substr(0, *n);
        rest.remove_prefix(*n);
      }
    }
    CheckFinal(c, h.status, close, head_request, type, body);
    if (close) {
      FUZZ_CHECK(rest.empty(), "%zu bytes after a response with Connection: close", rest.size());
      FUZZ_CHECK(c.fe().closing(), "Connection: close, and the connection stays open");
      c.done_writing = true;
    }
  }
  FUZZ_CHECK(c.answers.empty(), "%zu answered requests without a response", c.answers.size());
  out.clear();
}

void World::CheckFinal(Conn& c, int status, bool close, bool head, std::string_view type,
                       std::string_view body) {
  (void)close;
  FUZZ_CHECK(status != 500, "500: '%.*s'", Len(body), body.data());
  if (status == 204 || head) return;
  if (type == "text/plain; version=0.0.4; charset=utf-8") {
    FUZZ_CHECK(status == 200 && c.admin_, "a text response");
    FUZZ_CHECK(!body.empty() && body.back() == '\n', "metrics text ends without a newline");
    FUZZ_CHECK(body.find("\n\n") == std::string_view::npos, "metrics text has an empty line");
    return;
  }
  FUZZ_CHECK(type == "application/json; charset=utf-8", "Content-Type %.*s", Len(type),
             type.data());
  rapidjson::Document d;
  d.Parse<rapidjson::kParseValidateEncodingFlag>(body.data(), body.size());
  FUZZ_CHECK(!d.HasParseError(), "body is not JSON (in UTF-8): '%.*s'", Len(body), body.data());
  if (status >= 400) {
    FUZZ_CHECK(d.IsObject() && d.MemberCount() == 1, "error body '%.*s'", Len(body), body.data());
    bool error = d.HasMember("error") && d["error"].IsString();
    bool msg = d.HasMember("msg") && d["msg"].IsString();
    bool not_ready = c.admin_ && status == 503 && d.HasMember("status") &&
                     (d["status"] == "draining" || d["status"] == "recovering");
    FUZZ_CHECK(error || (msg && (status == 404 || status == 429)) || not_ready, "error body '%.*s'",
               Len(body), body.data());
  }
  // The admin API's new token: later requests may use it.
  if (c.admin_ && status == 201 && d.IsObject() && d.HasMember("token")) {
    FUZZ_CHECK(d["token"].IsString(), "token");
    last_token_ = d["token"].GetString();
  }
}

// A job of consume or peek, against the engine.
void World::CheckJob(const rapidjson::Value& v, std::string_view ns, bool consumed, bool immediate,
                     std::string_view tube) {
  FUZZ_CHECK(v.IsObject(), "job is not an object");
  FUZZ_CHECK(v.MemberCount() == (consumed ? 9u : 8u), "job has %u fields", v.MemberCount());
  for (const char* k : {"job_id", "data", "namespace", "queue"}) {
    FUZZ_CHECK(v.HasMember(k) && v[k].IsString(), "job's %s", k);
  }
  for (const char* k : {"elapsed_ms", "remain_tries", "ttl"}) {
    FUZZ_CHECK(v.HasMember(k) && v[k].IsInt64() && v[k].GetInt64() >= 0, "job's %s", k);
  }
  FUZZ_CHECK(v.HasMember("attributes"), "job's attributes");
  std::optional<uint64_t> id = http::ParseUint(v["job_id"].GetString(), 64);
  FUZZ_CHECK(id.has_value(), "job_id");
  const Job* j = engine_.Find(*id);
  FUZZ_CHECK(j != nullptr, "job %" PRIu64 " answered, and there is no such job", *id);
  std::string job_tube = std::string(v["namespace"].GetString()) + "/" + v["queue"].GetString();
  FUZZ_CHECK(v["namespace"].GetString() == ns, "namespace");
  FUZZ_CHECK(j->tube->name() == job_tube, "job %" PRIu64 " is in %s, answered as in %s", *id,
             j->tube->name().c_str(), job_tube.c_str());
  if (!tube.empty()) FUZZ_CHECK(job_tube == tube, "job of another tube");
  FUZZ_CHECK(v["data"].GetString() == Base64(std::string_view(j->data(), j->body_size)),
             "job %" PRIu64 ": data", *id);
  const JobExtra* x = j->extra();
  uint64_t tries = x && x->limited ? x->tries_left : 65535;
  FUZZ_CHECK(v["remain_tries"].GetUint64() == tries, "job %" PRIu64 ": remain_tries", *id);
  if (consumed) {
    FUZZ_CHECK(v.HasMember("msg") && v["msg"] == "new job", "msg");
    // A consume that waited is answered after its job came, and others ran meanwhile (a
    // text client may bury or release a detached job): only an answer made at once knows.
    FUZZ_CHECK(
        !immediate || (j->state() == JobState::kReserved && j->reserver() == engine_.detached()),
        "consumed job %" PRIu64 " is not reserved detached", *id);
  }
  const rapidjson::Value& attrs = v["attributes"];
  size_t n = 0;
  if (x) {
    x->ForEachAttribute([&](stalkd::engine::JobAttribute a) {
      n++;
      std::string name(a.name);
      FUZZ_CHECK(attrs.IsObject() && attrs.HasMember(name.c_str()) &&
                     attrs[name.c_str()].IsString() && attrs[name.c_str()].GetString() == a.value,
                 "job %" PRIu64 ": attribute %s", *id, name.c_str());
    });
  }
  if (n == 0) {
    FUZZ_CHECK(attrs.IsNull(), "job %" PRIu64 ": attributes of a job without", *id);
  } else {
    FUZZ_CHECK(attrs.MemberCount() == n, "job %" PRIu64 ": attributes", *id);
  }
}

void World::CheckAnswer(const Conn& c, const http::Exchange& ex,
                        const std::vector<uint64_t>& dead_before, bool immediate) {
  const http::Response& r = ex.response;
  FUZZ_CHECK(!ex.route.empty(), "no route for %s", ex.request.target.c_str());
  if (c.admin_) {
    // With accounts, the token and limit routes (by their decoded path) need one.
    http::Target t;
    if (!header_.accounts() || r.status == 401 || !t.Parse(ex.request.target)) return;
    const std::vector<std::string>& seg = t.segments();
    bool guarded =
        (seg.size() >= 2 && seg[0] == "token") || (seg.size() == 1 && seg[0] == "limits");
    if (!guarded || r.status == 404) return;
    std::string_view a = ex.request.authorization;
    FUZZ_CHECK(a == "Basic YWRtaW46cHc=" || a == "Basic b3BzOmE6Yg==",
               "%s answered %d without an account", ex.request.target.c_str(), r.status);
    return;
  }
  std::string_view route = ex.route;
  if (r.status == 429) {
    FUZZ_CHECK(route == "publish" || route == "publish_bulk" || route == "consume", "429 on %.*s",
               Len(route), route.data());
  }
  if (r.status >= 300 && !(route == "consume" && r.status == 404)) return;
  http::Target t;
  FUZZ_CHECK(t.Parse(ex.request.target), "a routed request with a bad target");
  const std::vector<std::string>& seg = t.segments();
  std::string ns = seg[1];
  std::string tube = ns + "/" + seg[2];
  const Tube* tb = engine_.FindTube(tube);
  rapidjson::Document d;
  if (r.status != 204) {
    d.Parse(r.body.data(), r.body.size());
    FUZZ_CHECK(!d.HasParseError(), "%.*s: not JSON", Len(route), route.data());
  }
  // Deferred: the answer was made from results that arrived over several Ticks, with other
  // requests run in between; the engine now need not agree with it.
  if (deferred_) return;
  if (route == "publish" || route == "republish") {
    FUZZ_CHECK(r.status == 201, "%.*s %d", Len(route), route.data(), r.status);
    std::optional<uint64_t> id = http::ParseUint(d["job_id"].GetString(), 64);
    const Job* j = id ? engine_.Find(*id) : nullptr;
    FUZZ_CHECK(j != nullptr && j->tube->name() == tube, "published job missing");
    FUZZ_CHECK(std::string_view(j->data(), j->body_size) == ex.request.body, "published body");
    const JobExtra* x = j->extra();
    size_t n = 0;
    if (x) {
      x->ForEachAttribute([&](stalkd::engine::JobAttribute a) {
        FUZZ_CHECK(n < ex.request.attributes.size() && ex.request.attributes[n].first == a.name &&
                       ex.request.attributes[n].second == a.value,
                   "published attribute %zu", n);
        n++;
      });
    }
    FUZZ_CHECK(n == ex.request.attributes.size(), "published attributes");
  } else if (route == "publish_bulk") {
    FUZZ_CHECK(r.status == 201, "bulk %d", r.status);
    rapidjson::Document sent;
    sent.Parse(ex.request.body.data(), ex.request.body.size());
    FUZZ_CHECK(!sent.HasParseError() && sent.IsArray(), "bulk of no array published");
    const rapidjson::Value& ids = d["job_ids"];
    FUZZ_CHECK(ids.IsArray() && ids.Size() == sent.Size(), "bulk: job_ids");
    for (rapidjson::SizeType i = 0; i < ids.Size(); i++) {
      std::optional<uint64_t> id = http::ParseUint(ids[i].GetString(), 64);
      const Job* j = id ? engine_.Find(*id) : nullptr;
      FUZZ_CHECK(j != nullptr && j->tube->name() == tube, "bulk job %u missing", i);
      rapidjson::Document one;
      one.Parse(j->data(), j->body_size);
      FUZZ_CHECK(!one.HasParseError() && one == sent[i], "bulk job %u is not element %u", i, i);
    }
  } else if (route == "consume") {
    if (r.status == 404) {
      FUZZ_CHECK(
          r.body == "{\"msg\":\"no job available\"}" || r.body == "{\"error\":\"pool not found\"}",
          "consume 404: %s", r.body.c_str());
      return;
    }
    FUZZ_CHECK(r.status == 200, "consume %d", r.status);
    if (d.IsArray()) {
      FUZZ_CHECK(d.Size() >= 1 && d.Size() <= 100, "consumed %u jobs", d.Size());
      std::string first_tube;
      for (const rapidjson::Value& v : d.GetArray()) {
        CheckJob(v, ns, true, immediate, first_tube);
        first_tube = ns + "/" + v["queue"].GetString();
      }
    } else {
      CheckJob(d, ns, true, immediate, "");
    }
  } else if (route == "peek_job" || route == "peek_queue") {
    FUZZ_CHECK(r.status == 200, "peek %d", r.status);
    CheckJob(d, ns, false, true, tube);
    if (route == "peek_queue") {
      FUZZ_CHECK(tb && tb->ready.top() &&
                     tb->ready.top()->id == http::ParseUint(d["job_id"].GetString(), 64),
                 "peek_queue: not the next ready job");
    }
  } else if (route == "delete") {
    FUZZ_CHECK(r.status == 204, "delete %d", r.status);
    std::optional<uint64_t> id = http::ParseUint(seg[4], 64);
    const Job* j = id ? engine_.Find(*id) : nullptr;
    FUZZ_CHECK(!j || j->tube->name() != tube ||
                   (j->state() == JobState::kReserved && j->reserver() != engine_.detached()),
               "job %" PRIu64 " is still there after its delete", *id);
  } else if (route == "size" || route == "deadletter_size") {
    FUZZ_CHECK(r.status == 200 && d["size"].IsUint64(), "size");
    uint64_t want = !tb ? 0 : route == "size" ? tb->ready.size() : tb->buried.size();
    FUZZ_CHECK(d["size"].GetUint64() == want, "%.*s: %" PRIu64 ", not %" PRIu64, Len(route),
               route.data(), d["size"].GetUint64(), want);
  } else if (route == "peek_deadletter") {
    size_t n = tb ? tb->buried.size() : 0;
    FUZZ_CHECK(d["deadletter_size"].GetUint64() == n, "peek_deadletter: size");
    std::string head = n ? std::to_string(tb->buried.front()->id) : "";
    FUZZ_CHECK(d["deadletter_head"].GetString() == head, "peek_deadletter: head");
  } else if (route == "respawn_deadletter" || route == "delete_deadletter") {
    if (!immediate) return;  // other requests ran between its slices
    std::optional<std::string_view> l = t.Query("limit");
    std::optional<int64_t> limit = l ? http::ParseInt64(*l) : 1;
    FUZZ_CHECK(limit && *limit > 0, "limit");
    size_t n = std::min<size_t>(dead_before.size(), static_cast<size_t>(*limit));
    if (route == "respawn_deadletter") {
      FUZZ_CHECK(d["count"].GetUint64() == n, "respawned %" PRIu64 " of %zu",
                 d["count"].GetUint64(), n);
    }
    // The first n of the dead letter went (respawned jobs are ready, or taken by a waiting
    // consume); the others stay, in order.
    std::vector<uint64_t> now = DeadLetter(tube);
    FUZZ_CHECK(now.size() == dead_before.size() - n, "%.*s: %zu dead letters left of %zu",
               Len(route), route.data(), now.size(), dead_before.size());
    FUZZ_CHECK(std::equal(now.begin(), now.end(), dead_before.begin() + static_cast<ptrdiff_t>(n)),
               "%.*s did not take the dead letter's head", Len(route), route.data());
  }
}

// Puts `count` jobs into tube ns/q or ns/r (by `which`), buried (in id order or backwards)
// or ready, over a text session.
void World::Flood(uint8_t which, uint32_t count) {
  flooded_ = true;
  QuietClient client;
  std::unique_ptr<Session> s = store_.Open(client);
  const char* tube = which & 1 ? "ns/r" : "ns/q";
  FUZZ_CHECK(s->Use(tube).outcome == Outcome::kUsing, "use");
  std::vector<uint64_t> ids;
  for (uint32_t i = 0; i < count; i++) {
    stalkd::command::PutArgs args;
    args.pri = which;
    args.ttr_s = 100;
    args.bytes = 1;
    stalkd::command::PutSlot slot = s->BeginPut(args);
    if (!slot.data) break;
    std::memcpy(slot.data, "x\r\n", 3);
    Result r = s->CommitPut();
    if (r.outcome != Outcome::kInserted) break;
    ids.push_back(r.number);
  }
  if (which & 2) {
    // A consume may have taken some (it waited): those stay its.
    std::erase_if(ids,
                  [&](uint64_t id) { return s->ReserveJob(id).outcome != Outcome::kReserved; });
    if (which & 4) std::reverse(ids.begin(), ids.end());
    for (uint64_t id : ids) FUZZ_CHECK(s->Bury(id, 0).outcome == Outcome::kBuried, "flood: bury");
  }
  s.reset();
  engine_.CheckInvariants();
  Pump();
}

void World::TextBury(uint64_t id) {
  if (text_->ReserveJob(id).outcome == Outcome::kReserved) {
    FUZZ_CHECK(text_->Bury(id, 0).outcome == Outcome::kBuried, "bury");
  }
  Pump();
}

void World::TextReserve(uint64_t id) {
  text_->ReserveJob(id);
  Pump();
}

// ------------------------------------------------------------------ the request dictionary

struct Req {
  std::string method = "GET";
  std::string target;
  std::vector<std::string> headers;  // whole lines, without CRLF
  std::string body;
  bool has_body = false;
};

const char* const kNamespaces[] = {"ns", "ns", "n2", "-x", "n%73", "n.s", "ns", "n2"};
const char* const kQueues[] = {"q", "r", "q,r", "r,q,q", "_u", "q,,r", "%71", "q"};
const char* const kNumbers[] = {"0", "1", "2", "3", "x", "", "4294967296", "007"};

const char* Number(uint8_t v) { return kNumbers[v % 8]; }

// Appends `&name=value` (the first gets '?' in Build).
void AddParam(std::string* q, const char* name, std::string_view value) {
  *q += '&';
  *q += name;
  *q += '=';
  *q += value;
}

std::string Build(Req r, uint8_t t, const std::string& query) {
  if (!query.empty()) r.target += "?" + query.substr(1);
  bool chunked = t & 0x01;
  bool expect = t & 0x02;
  bool close = t & 0x04;
  bool http10 = (t & 0x18) == 0x18;
  std::string s = r.method + " " + r.target + (http10 ? " HTTP/1.0\r\n" : " HTTP/1.1\r\n");
  s += "Host: stalkd\r\n";
  for (const std::string& h : r.headers) s += h + "\r\n";
  if (close) s += "Connection: close\r\n";
  if (http10 && !close && (t & 0x20)) s += "Connection: keep-alive\r\n";
  if (r.has_body || !r.body.empty()) {
    if (expect) s += "Expect: 100-continue\r\n";
    if (chunked) {
      s += "Transfer-Encoding: chunked\r\n\r\n";
      size_t half = r.body.size() / 2;
      for (std::string_view part :
           {std::string_view(r.body).substr(0, half), std::string_view(r.body).substr(half)}) {
        if (!part.empty()) s += Format("%zx\r\n", part.size()) + std::string(part) + "\r\n";
      }
      s += "0\r\n\r\n";
      return s;
    }
    s += Format("Content-Length: %zu\r\n\r\n", r.body.size());
    return s + r.body;
  }
  return s + "\r\n";
}

// The token, as a header or a query parameter, by `t`.
void AddToken(Req* r, std::string* query, uint8_t t, const std::string& made) {
  switch (t % 10) {
    case 0:
    case 1:
    case 2:
      r->headers.push_back("X-Token: tok");
      break;
    case 3:
      AddParam(query, "token", "tok");
      break;
    case 4:
      r->headers.push_back("X-Token: :tok");
      break;
    case 5:
      r->headers.push_back("x-token: default:tok");
      break;
    case 6:
      r->headers.push_back("X-Token: " + (made.empty() ? std::string("nope") : made));
      break;
    case 7:
      r->headers.push_back("X-Token: pool:tok");
      break;
    case 8:
      r->headers.push_back("X-Token: bad");
      break;
    default:
      break;  // none
  }
}

const char* const kAttrs[] = {
    "Job-Attr-Color: red",
    "job-attr-color: blue",
    "JOB-ATTR-SIZE:  big ",
    "Job-Attr-x_y-z: 1",
    "Job-Attr-bad.name: v",
    "Job-Attr-E: ",
    "Job-Attr-Long: " /* value appended */,
    "Job-Attr-: empty",
};

std::string PublishBody(uint8_t a, uint8_t b, size_t max_job_size) {
  size_t size = b % 8;
  if (a == 255) size = max_job_size + 1;
  if (a == 254) size = max_job_size;
  return std::string(size, static_cast<char>('a' + a % 26));
}

std::string BulkBody(uint8_t a, uint8_t b) {
  switch (b % 8) {
    case 0:
      return "[\"a\", {\"k\":[1,2]} ,3]";
    case 1:
      return Format("[%u]", a);
    case 2:
      return "[]";
    case 3:
      return "null";
    case 4:
      return "{\"a\":1}";
    case 5: {
      std::string s = "[";
      for (int i = 0; i < 64 + a % 2; i++) s += i ? ",1" : "1";
      return s + "]";
    }
    case 6:
      return "[\"x\\\"]\", [[]], \"\\u0041\"]";
    default:
      return "[1,";
  }
}

// A well-formed (mostly) request of lmstfy's API.
std::string ApiRequest(uint8_t which, uint8_t a, uint8_t b, uint8_t c, uint8_t t,
                       size_t max_job_size, const std::string& made) {
  Req r;
  std::string q;
  std::string ns = kNamespaces[a % 8];
  std::string queue = kQueues[(a / 8) % 8];
  std::string base = "/api/" + ns + "/" + (which % 16 == 3 || which % 16 == 4 ? queue : "q");
  if (which % 16 != 3 && which % 16 != 4 && (a / 8) % 8 == 1) base = "/api/" + ns + "/r";
  std::string id = Format("%u", 1 + b % 16);
  if (b % 16 == 15) id = c & 1 ? "0" : c & 2 ? "12345678901234567890123" : "x1";
  AddToken(&r, &q, c, made);
  switch (which % 16) {
    case 0:
    case 1:
    case 2: {  // publish
      r.method = "PUT";
      r.target = base;
      if (c & 0x10) AddParam(&q, "delay", Number(b));
      if (c & 0x20) AddParam(&q, "ttl", Number(b >> 3));
      if (c & 0x40) AddParam(&q, "tries", Number(a));
      if (c & 0x80) AddParam(&q, "priority", b & 1 ? "255" : Number(a >> 3));
      for (int i = 0; i < 3; i++) {
        if (b & (0x20 << i)) {
          std::string h = kAttrs[(a + i * 3) % 8];
          if (h.ends_with(": ")) h += std::string(b & 1 ? 256 : 3, 'v');
          r.headers.push_back(h);
        }
      }
      r.body = PublishBody(a, b, max_job_size);
      r.has_body = true;
      break;
    }
    case 3:
    case 4:  // consume
      r.target = base;
      if (c & 0x10) AddParam(&q, "timeout", Number(b & 3));
      if (c & 0x20) AddParam(&q, "count", b & 4 ? Number(b >> 3) : "100");
      if (c & 0x40) AddParam(&q, "ttr", Number(b >> 5));
      if (c & 0x80) AddParam(&q, "freeze_tries", b & 8 ? "true" : "x");
      break;
    case 5:  // bulk
      r.method = "PUT";
      r.target = base + "/bulk";
      if (c & 0x10) AddParam(&q, "tries", Number(b >> 3));
      if (c & 0x20) AddParam(&q, "delay", Number(a));
      if (b & 0x80) r.headers.push_back(kAttrs[a % 8]);
      r.body = BulkBody(a, b);
      r.has_body = true;
      break;
    case 6:  // delete
      r.method = "DELETE";
      r.target = base + "/job/" + id;
      break;
    case 7:  // republish
      r.method = "PUT";
      r.target = base + "/job/" + id;
      if (c & 0x10) AddParam(&q, "delay", Number(b));
      r.body = PublishBody(a, b, max_job_size);
      r.has_body = true;
      break;
    case 8:  // peek job
      r.target = base + "/job/" + id;
      break;
    case 9:
      r.target = base + (c & 0x10 ? "/peek" : "/size");
      break;
    case 10:  // destroy
      r.method = "DELETE";
      r.target = base;
      break;
    case 11:
      r.target = base + (c & 0x10 ? "/deadletter" : "/deadletter/size");
      break;
    case 12:  // respawn
      r.method = "PUT";
      r.target = base + "/deadletter";
      if (c & 0x10) AddParam(&q, "limit", b & 0x80 ? "100000" : Number(b));
      if (c & 0x20) AddParam(&q, "ttl", b & 0x40 ? "-1" : Number(b >> 3));
      break;
    case 13:  // delete dead letters
      r.method = "DELETE";
      r.target = base + "/deadletter";
      if (c & 0x10) AddParam(&q, "limit", b & 0x80 ? "100000" : b & 0x40 ? "-3" : Number(b));
      break;
    case 14: {  // another method, HEAD, no route
      static const char* const kMethods[] = {"HEAD", "POST", "PATCH", "GET"};
      static const char* const kPaths[] = {"/api/ns/q",      "/api/ns/q/",    "/",
                                           "/api//q",        "/api/ns/q/job", "/metrics",
                                           "/api/ns/q/size", "/api"};
      r.method = kMethods[b % 4];
      r.target = kPaths[(b / 4) % 8];
      break;
    }
    default: {  // transport edge cases
      static const char* const kRaw[] = {
          "PUT /api/ns/q HTTP/1.1\r\nContent-Length: 9999999\r\n\r\n",
          "PUT /api/ns/q/bulk HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n",
          "GET /api/n%zz/q HTTP/1.1\r\n\r\n",
          "GET api/ns/q HTTP/1.1\r\n\r\n",
          "GET /api/ns/q HTTP/1.1\r\nX-Token tok\r\n\r\n",
          "GET /api/ns/q HTTP/2.0\r\n\r\n",
          "PUT /api/ns/q HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
          "PUT /api/ns/q HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
          "PUT /api/ns/q HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
          "PUT /api/ns/q HTTP/1.1\r\nX-Token: tok\r\nExpect: 100-continue\r\nContent-Length: "
          "3\r\n\r\n",
          "\r\nGET /api/ns/q/size HTTP/1.1\r\n\r\n",
          "GET /api/ns/q/size HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabc",
          "PUT /api/ns/q HTTP/1.1\r\nX-Token: tok\r\nTransfer-Encoding: chunked\r\n\r\n"
          "3;ext=1\r\nabc\r\n0\r\nTrailer: x\r\n\r\n",
          "GET /api/ns/q/size\0 HTTP/1.1\r\n\r\n",
          "GET /api/ns/q/size HTTP/1.1\r\nX: a\rb\r\n\r\n",
          "PUT /api/ns/q?ttl=1&delay=1 HTTP/1.1\r\nX-Token: tok\r\nContent-Length: 1\r\n\r\nz",
      };
      static const char kNul[] = "GET /api/ns/q/size\0 HTTP/1.1\r\n\r\n";
      std::string s = b % 16 == 13 ? std::string(kNul, sizeof kNul - 1) : kRaw[b % 16];
      if (a == 0) {  // a head over 8 KiB
        return "GET /api/ns/q/size HTTP/1.1\r\nX-Pad: " + std::string(8200, 'p') + "\r\n\r\n";
      }
      return s;
    }
  }
  return Build(r, t, q);
}

const char* const kAuth[] = {
    "Authorization: Basic YWRtaW46cHc=",   // admin:pw
    "Authorization: Basic b3BzOmE6Yg==",   // ops:a:b
    "Authorization: Basic YWRtaW46eA==",   // admin:x
    "Authorization: Basic !!",             // not base64
    "Authorization: Bearer YWRtaW46cHc=",  // not basic
    "",
};

// A request of the admin API.
std::string AdminRequest(uint8_t which, uint8_t a, uint8_t b, uint8_t c, uint8_t t,
                         const std::string& made) {
  Req r;
  std::string q;
  std::string ns = a & 1 ? "ns" : a & 2 ? "n2" : "-x";
  std::string tok = made.empty() ? "feedfacecafe" : made;
  if (b & 1) tok = tok.substr(0, tok.find('.'));  // its id
  if (b & 2) tok = "default:" + tok;
  if ((b & 0x0c) == 0x0c) tok = "pool:" + tok;
  if (const char* auth = kAuth[c % 6]; *auth) r.headers.push_back(auth);
  if ((c & 0x18) == 0x18) AddParam(&q, "pool", c & 0x20 ? "default" : "x");
  static const char* const kLimits[] = {
      "{\"read\":1,\"write\":2,\"interval\":1}",
      "{\"read\":0,\"write\":0,\"interval\":1}",
      "{\"read\":1,\"interval\":0}",
      "{\"read\":-1,\"write\":1,\"interval\":1}",
      "{\"read\":1.5}",
      "[1]",
      "{\"write\":1,\"interval\":99999999999999}",
      "",
  };
  switch (which % 14) {
    case 0:
      r.target = "/healthz";
      break;
    case 1:
      r.target = "/readyz";
      break;
    case 2:
      r.target = "/version";
      break;
    case 3:
      r.target = "/pools";
      if (b & 0x10) AddParam(&q, "kind", b & 0x20 ? "redis" : "x");
      break;
    case 4:
      r.target = "/info";
      break;
    case 5:
      r.method = b & 0x10 ? "HEAD" : "GET";
      r.target = "/metrics";
      break;
    case 6:
      r.target = b & 0x10 ? "/limits" : "/%6cimits";
      break;
    case 7:  // new token
      r.method = "POST";
      r.target = "/token/" + ns;
      if (b & 0x10) {
        r.body = b & 0x20 ? "description=from+body" : "x=1";
        r.has_body = true;
        r.headers.push_back("Content-Type: application/x-www-form-urlencoded");
      }
      if (b & 0x40) AddParam(&q, "description", b & 0x80 ? (a & 4 ? "d%FF%C3" : "d%20x") : "");
      if (a & 8) {  // a token of the administrator's choosing
        static const char* const kChosen[] = {"chosen-token.0123456789",
                                              "default:chosen-token.0123456789", "short",
                                              "x:chosen-token.0123456789"};
        AddParam(&q, "token", kChosen[(a >> 4) % 4]);
      }
      if (a & 0x40) AddParam(&q, "pool", "default");
      break;
    case 8:
      r.target = (b & 0x10 ? "/token/" : "/%74oken/") + ns;
      break;
    case 9:
      r.method = "DELETE";
      r.target = "/token/" + ns + "/" + tok;
      break;
    case 10:
    case 11: {  // limits
      static const char* const kMethods[] = {"GET", "PUT", "POST", "DELETE", "PATCH"};
      r.method = kMethods[b % 5];
      r.target = "/token/" + ns + "/" + tok + "/limit";
      if (r.method == "PUT" || r.method == "POST") {
        r.body = kLimits[(b / 8) % 8];
        r.has_body = true;
      }
      break;
    }
    case 12: {
      static const char* const kPaths[] = {"/",         "/token",    "/token/", "/token/ns/a/b/c",
                                           "/healthz/", "/api/ns/q", "/info?x", "/%zz"};
      r.target = kPaths[b % 8];
      r.method = b & 0x80 ? "POST" : "GET";
      break;
    }
    default:
      r.method = "HEAD";
      r.target = b & 1 ? "/healthz" : "/readyz";
      break;
  }
  return Build(r, t, q);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > kMaxInput) return -1;
  Input in(data, size);
  Header header(in.Byte());
  EngineOptions opt;
  opt.tick_budget = 4;
  // Sometimes a tight memory cap (a job-table page alone is about 8 KiB).
  opt.max_memory = header.tight_memory() ? 12000 : SIZE_MAX;
  // Deferred mode (the HTTP front ends' every store call answers late) for odd sizes.
  World w(header, opt, size % 2 == 1);
  bool draining = false;
  for (int op = 0; op < kMaxOps && !in.empty(); op++) {
    uint8_t code = in.Byte();
    int k = code % kClients;
    switch ((code / kClients) % 8) {
      case 0:  // raw bytes
        w.Send(k, in.Bytes(in.Length()));
        break;
      case 1:
      case 2: {  // a dictionary request, in up to 3 chunks
        uint8_t which = in.Byte(), a = in.Byte(), b = in.Byte(), c = in.Byte(), t = in.Byte();
        std::string req =
            w.is_admin(k) ? AdminRequest(which, a, b, c, t, w.last_token())
                          : ApiRequest(which, a, b, c, t, header.max_job_size(), w.last_token());
        size_t chunk = (t >> 6) == 0 ? 0 : req.size() / (t >> 6) + 1;
        w.Send(k, req, chunk);
        break;
      }
      case 3: {  // time passes
        uint8_t d = in.Byte();
        w.Advance(d == 255 ? 3600 * kSecond : static_cast<Nanos>(d % 40) * (kSecond / 10));
        break;
      }
      case 4:
        w.InputClosed(k);
        break;
      case 5:
        w.Drop(k);
        w.Pump();
        break;
      case 6: {
        uint8_t what = in.Byte();
        switch (what % 8) {
          case 0:
            draining = !draining;
            w.set_draining(draining);
            break;
          case 1:
            if (w.floods < kMaxFloods) {
              w.floods++;
              uint8_t which = in.Byte();
              w.Flood(which, stalkd::store::MemoryStore::kKickSlice + 1 + in.Byte() * 4u);
            }
            break;
          case 2:
            w.TextBury(1 + in.Byte() % 16);
            break;
          case 3:
            w.TimeOut(k);
            break;
          case 4:
            w.IdleRun(k);
            break;
          case 5:
            w.TextReserve(1 + in.Byte() % 16);
            break;
          case 7:
            w.toggle_recovering();
            break;
          default:
            w.Pump();
            break;
        }
        break;
      }
      default: {  // trickle
        size_t chunk = 1 + in.Byte() % 16;
        w.Send(k, in.Bytes(in.Length()), chunk);
        break;
      }
    }
    w.Pump();
  }
  return 0;
}
