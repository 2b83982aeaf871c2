// The HTTP front end (the lmstfy API, the admin API, /metrics and the dashboard's JSON API)
// over a store whose every answer is late (store::DeferredStore over the in-memory store)
// answers byte for byte what it answers over the in-memory store itself.
#include <cstring>
#include <memory>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "http/admin.h"
#include "http/api.h"
#include "http/dashboard.h"
#include "http/front_end.h"
#include "http/metrics.h"
#include "http/tokens.h"
#include "store/deferred_store.h"
#include "store/memory_store.h"

namespace stalkd::http {
namespace {

class Hosts final : public Access, public AdminHost, public DashboardHost {
 public:
  // Access: token "tok" in every namespace, no limits.
  bool Valid(std::string_view, std::string_view token, std::string* id) const override {
    *id = "t";
    return token == "tok";
  }
  bool Allow(std::string_view, std::string_view, bool, Nanos) override { return true; }
  void Refund(std::string_view, std::string_view, bool, Nanos, Nanos) override {}
  // AdminHost, DashboardHost.
  std::string_view version() const override { return "test"; }
  bool ready() const override { return true; }
  bool recovering() const override { return false; }
  Co<> ScrapeMetrics(command::Session& s, Response* resp) override {
    return Scrape(s, metrics_, {}, resp, 2, 10);  // small slices: several steps
  }
  BinlogMetrics BinlogNow() const override { return {}; }
  const Histogram& BinlogSyncs() const override { return syncs_; }

 private:
  Metrics metrics_;
  Histogram syncs_;
};

struct Conn final : command::Client {
  Conn(Service& service, command::Store& store) : fe(service, store, *this) {}
  void OnResult(const command::Result& r) override { fe.OnResult(r); }
  HttpFrontEnd fe;
};

// The API and the admin API (with the dashboard) on the in-memory store, used directly or
// through a DeferredStore.
class HttpWorld {
 public:
  explicit HttpWorld(bool deferred)
      : memory_(clock_, store::MemoryStoreOptions{}, nullptr),
        api_(clock_, hosts_, nullptr, ApiOptions{}),
        admin_(clock_, tokens_, hosts_) {
    if (deferred) deferred_ = std::make_unique<store::DeferredStore>(memory_);
    dashboard_ = std::make_unique<Dashboard>(clock_, store(), hosts_);
    admin_.set_dashboard(dashboard_.get());
  }
  ~HttpWorld() {
    conns_.clear();
    dashboard_.reset();
    memory_.engine().CheckInvariants();
  }
  command::Store& store() { return deferred_ ? *deferred_ : static_cast<command::Store&>(memory_); }

  // Client i (0, 1: the API; 2: the admin API) sends `in`; everything is run until nothing
  // moves; returns what every client got, without the request ids.
  std::string Do(size_t i, std::string_view in) {
    Conn& c = conn(i);
    if (!in.empty()) {
      char* p = c.fe.PrepareInput(in.size());
      std::memcpy(p, in.data(), in.size());
      c.fe.CommitInput(in.size());
    }
    Settle();
    std::string out;
    for (size_t k = 0; k < conns_.size(); k++) {
      if (!conns_[k] || conns_[k]->fe.output().empty()) continue;
      out += "[" + std::to_string(k) + "] " + conns_[k]->fe.output();
      conns_[k]->fe.output().clear();
    }
    static const std::regex kRequestId("X-Request-ID: [0-9a-f]+\r\n");
    return std::regex_replace(out, kRequestId, "");
  }
  void Advance(Nanos d) { clock_.Advance(d); }
  void set_failing(bool on) { deferred_->set_failing(on); }
  void Close(size_t i) {
    conn(i).fe.OnInputClosed();
    Settle();
  }

 private:
  Conn& conn(size_t i) {
    while (conns_.size() <= i) {
      Service& s = conns_.size() == 2 ? static_cast<Service&>(admin_) : api_;
      conns_.push_back(std::make_unique<Conn>(s, store()));
    }
    return *conns_[i];
  }
  void Settle() {
    for (int round = 0;; round++) {
      ASSERT_LT(round, 100000);
      for (auto& c : conns_) {
        if (c->fe.runnable()) c->fe.Run(128);  // as the server: only what can go on
      }
      store().Tick();
      dashboard_->Tick(clock_.Now());
      memory_.engine().CheckInvariants();
      bool progress = store().Busy() || dashboard_->next_tick() <= clock_.Now();
      for (auto& c : conns_) progress = progress || c->fe.runnable();
      if (!progress) break;
    }
  }

  FakeClock clock_;
  store::MemoryStore memory_;
  std::unique_ptr<store::DeferredStore> deferred_;
  Hosts hosts_;
  TokenStore tokens_;
  ApiService api_;
  AdminService admin_;
  std::unique_ptr<Dashboard> dashboard_;
  std::vector<std::unique_ptr<Conn>> conns_;
};

std::string Req(std::string_view method, std::string_view target, std::string_view body = "",
                std::string_view headers = "") {
  std::string r = std::string(method) + " " + std::string(target) + " HTTP/1.1\r\nHost: t\r\n";
  r += headers;
  if (!body.empty() || method == "PUT" || method == "POST") {
    r += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  return r + "\r\n" + std::string(body);
}
std::string Api(std::string_view method, std::string_view path, std::string_view body = "",
                std::string_view headers = "") {
  std::string target = "/api/ns/" + std::string(path);
  target += target.find('?') == std::string::npos ? "?token=tok" : "&token=tok";
  return Req(method, target, body, headers);
}
std::string Dash(std::string_view method, std::string_view path) {
  return Req(method, "/dashboard/api/" + std::string(path), "",
             method == "GET" ? "" : "X-Requested-With: t\r\n");
}

struct Step {
  size_t client;
  std::string bytes;
  Nanos advance = 0;
  bool close = false;
};

std::vector<std::string> Play(bool deferred, const std::vector<Step>& script) {
  HttpWorld w(deferred);
  std::vector<std::string> out;
  for (const Step& s : script) {
    w.Advance(s.advance);
    if (s.close) {
      w.Close(s.client);
      out.push_back(w.Do(s.client, ""));
    } else {
      out.push_back(w.Do(s.client, s.bytes));
    }
  }
  return out;
}

TEST(DeferredStoreHttp, EveryRouteAnswersAsOverTheMemoryStore) {
  std::vector<Step> script = {
      // lmstfy's API.
      {0, Api("PUT", "q?tries=2&ttl=100&priority=3", "one", "Job-Attr-Color: red\r\n")},  // 1
      {0, Api("PUT", "q/bulk?delay=1", R"([{"a":1},{"b":2}])")},                          // 2, 3
      {0, Api("GET", "q/size") + Api("GET", "q/peek") + Api("GET", "q/job/1") +
              Api("GET", "q/job/99")},
      {1, Api("GET", "q?ttr=1&freeze_tries=true")},   // reserves 1
      {1, Api("GET", "q?count=3&ttr=30&timeout=0")},  // nothing ready
      {1, Api("GET", "q,r?timeout=3&count=2")},       // waits
      {0, Api("PUT", "r", "two")},                    // 4: the wait gets it
      {0, Api("DELETE", "r/job/4") + Api("DELETE", "q/job/1") + Api("GET", "q/job/1")},
      {0, "", 2 * kSecond},                // 2, 3 become ready
      {1, Api("GET", "q?count=5&ttr=1")},  // 2, 3
      {1, Api("GET", "q?timeout=1")},      // waits, times out
      {1, "", 2 * kSecond},
      // 2 and 3 used their one try: dead letters after their TTR.
      {0, Api("GET", "q/deadletter") + Api("GET", "q/deadletter/size")},
      {0, Api("PUT", "q/deadletter?limit=1&ttl=50") + Api("GET", "q/deadletter")},
      {0, Api("DELETE", "q/deadletter?limit=5") + Api("GET", "q/deadletter/size")},
      {0, Api("PUT", "q/job/2?delay=0", "again") + Api("PUT", "q?tries=0", "x") +
              Api("GET", "q/size")},
      {1, Api("GET", "empty?timeout=30")},  // waits; its client goes away
      {1, "", 0, true},
      {0, Api("PUT", "q?delay=100", "late")},  // 6
      // The dashboard's JSON API and the admin API.
      {2, Dash("GET", "server") + Dash("GET", "tubes") + Dash("GET", "tubes?sort=ready&q=N")},
      {2, Dash("GET", "tubes/ns%2Fq") + Dash("GET", "tubes/ns%2Fq/jobs?state=delayed") +
              Dash("GET", "tubes/nope")},
      {2, Dash("GET", "jobs/6") + Dash("GET", "jobs/6/body") + Dash("GET", "jobs/77")},
      {2, Dash("POST", "tubes/ns%2Fq/pause?seconds=0") + Dash("POST", "jobs/6/move?to=other") +
              Dash("POST", "tubes/other/move?state=delayed&to=ns%2Fq")},  // 7, then 8
      {2, Dash("POST", "jobs/8/kick") + Dash("POST", "tubes/ns%2Fq/kick?count=5") +
              Dash("POST", "tubes/ns%2Fq/respawn?count=3") + Dash("DELETE", "jobs/8") +
              Dash("DELETE", "jobs/5")},
      {2, Dash("GET", "namespaces") + Dash("GET", "namespaces?q=Q&order=desc&limit=1") +
              Dash("GET", "tubes?prefix=ns%2F") + Dash("POST", "tubes/ns%2Fq/delete-dead?count=2")},
      {2, Dash("POST", "tubes/ns%2Fq/purge?state=all") + Dash("GET", "tubes/ns%2Fq")},
      {2, Req("GET", "/info") + Req("GET", "/metrics") + Req("GET", "/healthz") +
              Req("GET", "/version")},
      {2, Req("POST", "/dashboard/api/tubes/found/put?pri=5", "a Needle here",
              "X-Requested-With: t\r\n") +
              Dash("GET", "tubes/found/search?q=needle")},
      {0, Api("DELETE", "q") + Api("GET", "q/size")},
  };
  std::vector<std::string> direct = Play(false, script);
  std::vector<std::string> deferred = Play(true, script);
  ASSERT_EQ(direct.size(), deferred.size());
  for (size_t i = 0; i < direct.size(); i++) {
    EXPECT_EQ(direct[i], deferred[i]) << "step " << i;
  }
  // The script did what it says.
  auto has = [&](size_t step, std::string_view what) {
    EXPECT_NE(direct[step].find(what), std::string::npos) << "step " << step << ":\n"
                                                          << direct[step];
  };
  has(0, "201 Created");
  has(3, "\"job_id\":\"1\"");
  has(6, "[1] HTTP/1.1 200 OK");  // the waiting consume got job 4
  has(9, "\"job_id\":\"3\"");
  has(11, "[1] HTTP/1.1 404");
  has(12, "\"deadletter_size\":2");
  has(13, "\"count\":1");
  has(17, "[1] HTTP/1.1 404");  // the consume whose client went away
  has(19, "\"total_tubes\"");
  has(22, "\"new_id\":7");
  has(23, "{\"kicked\":true}");
  has(23, "{\"deleted\":true}");
  has(24, "\"kind\":\"namespace\",\"namespace\":\"ns\"");
  has(24, "{\"deleted\":");
  has(26, "# TYPE");
  has(27, "201 Created");
  has(27, "\"scanned\":1,");
  has(27, "\"snippet\":\"YSBOZWVkbGUgaGVyZQ==\"");  // "a Needle here"
}

TEST(DeferredStoreHttp, AStoreThatCannotTellAnswers500) {
  HttpWorld w(true);
  w.set_failing(true);
  constexpr std::string_view kError =
      "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json; charset=utf-8\r\n"
      "Content-Length: 26\r\n";
  std::string out = w.Do(0, Api("PUT", "q", "one") + Api("GET", "q/size"));
  EXPECT_EQ(out, "[0] " + std::string(kError) + "\r\n{\"error\":\"internal error\"}" +
                     std::string(kError) + "\r\n{\"error\":\"internal error\"}");
  out = w.Do(2, Dash("GET", "server") + Req("GET", "/metrics"));
  EXPECT_EQ(out, "[2] " + std::string(kError) +
                     "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
                     "\r\n{\"error\":\"internal error\"}" +
                     std::string(kError) + "\r\n{\"error\":\"internal error\"}");
  w.set_failing(false);
  // The publish was made: only its answer was lost.
  EXPECT_NE(w.Do(0, Api("GET", "q/size")).find("\"size\":1"), std::string::npos);
}

// lmstfy shows a job's TTL as Redis's TTL of its key: the time left rounded to the nearest
// second (its client's republish test publishes with ttl=10 and expects 10 at once).
TEST(DeferredStoreHttp, JobTtlIsRoundedToTheNearestSecond) {
  for (bool deferred : {false, true}) {
    HttpWorld w(deferred);
    auto ttl_of = [&](std::string_view request) {
      std::string out = w.Do(0, request);
      size_t at = out.find("\"ttl\":");
      EXPECT_NE(at, std::string::npos) << out;
      return at == std::string::npos ? -1 : std::stoi(out.substr(at + 6));
    };
    w.Do(0, Api("PUT", "q?ttl=10", "a"));  // job 1
    EXPECT_EQ(ttl_of(Api("GET", "q/job/1")), 10);
    w.Advance(kSecond / 2 - kSecond / 1000);  // 9.501 s left
    EXPECT_EQ(ttl_of(Api("GET", "q?ttr=30")), 10);
    w.Advance(kSecond / 500);  // 9.499 s left
    EXPECT_EQ(ttl_of(Api("GET", "q/job/1")), 9);
    w.Advance(9 * kSecond);  // 0.499 s left: 0, as for a job without a TTL
    EXPECT_EQ(ttl_of(Api("GET", "q/job/1")), 0);
    w.Do(0, Api("PUT", "q?ttl=0", "b"));  // job 2: no TTL
    EXPECT_EQ(ttl_of(Api("GET", "q/job/2")), 0);
  }
}

}  // namespace
}  // namespace stalkd::http
