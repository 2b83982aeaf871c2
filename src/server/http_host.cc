#include "server/http_host.h"

#include <sys/stat.h>

#include "http/front_end.h"
#include "http/metrics.h"
#include "server/connection.h"
#include "server/server.h"
#include "server/version.h"

namespace stalkd::server {

// The TLS listeners' figures (docs/SECURITY.md, "TLS"), at the end of a scrape.
void AppendTlsMetrics(const Server& server, std::string* out);

namespace {

// Tubes whose stats a scrape gathers per step, and lines it writes per step: a scrape of
// 100,000 tubes is spread over many loop iterations instead of stalling the others.
constexpr size_t kScrapeTubesPerStep = 250;
constexpr size_t kScrapeLinesPerStep = 5000;

http::ApiOptions ApiOptionsFor(const Options& o) {
  http::ApiOptions a;
  a.max_job_size = o.max_job_size;
  return a;
}

template <class Service>
Connection* MakeHttpConnection(Server& server, int fd, Service& service) {
  auto* c = new ConnectionOf<http::HttpFrontEnd>(server, fd, service, server.store());
  server.http()->Opened(c);
  return c;
}

}  // namespace

HttpHost::HttpHost(Server& server, const Options& options)
    : server_(server),
      options_(options),
      api_(server.clock(), *this, this, ApiOptionsFor(options)),
      admin_(server.clock(), tokens_, *this),
      metrics_(options.metrics_max_tubes),
      dashboard_(server.clock(), server.store(), *this),
      bodies_(std::max<uint64_t>(MaxMemory(options) / 4, api_.bulk_body_limit())) {
  admin_.set_observer(this);
  admin_.set_dashboard(&dashboard_);
  api_.set_body_budget(&bodies_);
  admin_.set_body_budget(&bodies_);
  admin_.set_max_job_size(options.max_job_size);
}

HttpHost::~HttpHost() = default;

bool HttpHost::Open(std::string* error) {
  std::string path;
  if (!options_.binlog_dir.empty()) path = options_.binlog_dir + "/tokens";
  if (!tokens_.Open(path, error)) return false;
  if (!options_.admin_accounts.empty() && !admin_.LoadAccounts(options_.admin_accounts, error)) {
    return false;
  }
  return true;
}

bool HttpHost::Valid(std::string_view ns, std::string_view token, std::string* id) const {
  std::string_view found;
  if (!tokens_.Valid(ns, token, &found)) return false;
  id->assign(found);
  return true;
}

bool HttpHost::Allow(std::string_view ns, std::string_view id, bool produce, Nanos now) {
  return tokens_.throttler().Allow(ns, id, produce ? http::Kind::kProduce : http::Kind::kConsume,
                                   now);
}

void HttpHost::Refund(std::string_view ns, std::string_view id, bool produce, Nanos counted_at,
                      Nanos now) {
  tokens_.throttler().Refund(ns, id, produce ? http::Kind::kProduce : http::Kind::kConsume,
                             counted_at, now);
}

bool HttpHost::Authenticate(std::string_view ns, std::string_view credential,
                            command::Identity* who) const {
  using Kind = command::Identity::Kind;
  std::string_view id;
  if (size_t colon = credential.find(':'); colon != std::string_view::npos) {
    if (ns.empty() && admin_.IsAccount(credential)) {
      *who = {Kind::kAdmin, {}, std::string(credential.substr(0, colon))};
      return true;
    }
    // lmstfy's pool prefix, as the API takes it: stalkd has one pool, "default".
    if (colon != 0 && credential.substr(0, colon) != "default") return false;
    credential = credential.substr(colon + 1);
  }
  if (ns.empty()) {
    ns = tokens_.NamespaceOf(credential, &id);
    if (ns.empty()) return false;
  } else if (!tokens_.Valid(ns, credential, &id)) {
    return false;
  }
  *who = {Kind::kNamespace, std::string(ns), std::string(id)};
  return true;
}

bool HttpHost::StillValid(const command::Identity& who) const {
  return !who.scoped() || who.certificate || tokens_.HasId(who.ns, who.name);
}

bool HttpHost::AllowPut(const command::Identity& who) {
  return !who.scoped() || who.certificate ||
         tokens_.throttler().Allow(who.ns, who.name, http::Kind::kProduce, server_.clock().Now());
}

void HttpHost::OnRequest(std::string_view route, int status, Nanos latency) {
  metrics_.ObserveHttp(route, status, latency);
}

http::Co<> HttpHost::ScrapeMetrics(command::Session& s, http::Response* resp) {
  co_await http::Scrape(s, metrics_, server_.BinlogMetricsNow(), resp, kScrapeTubesPerStep,
                        kScrapeLinesPerStep);
  // The request bodies being received (http::BodyBudget), at the scrape's end.
  std::string& out = resp->body;
  out +=
      "# HELP stalkd_http_request_body_bytes Bytes the HTTP request bodies being received hold or "
      "may grow to.\n";
  out += "# TYPE stalkd_http_request_body_bytes gauge\n";
  out += "stalkd_http_request_body_bytes " + std::to_string(bodies_.used()) + "\n";
  out +=
      "# HELP stalkd_http_request_body_limit_bytes The most the HTTP request bodies being received "
      "may hold.\n";
  out += "# TYPE stalkd_http_request_body_limit_bytes gauge\n";
  out += "stalkd_http_request_body_limit_bytes " + std::to_string(bodies_.limit()) + "\n";
  out +=
      "# HELP stalkd_http_request_bodies_refused_total Requests refused 503 because the bodies "
      "being received held the limit.\n";
  out += "# TYPE stalkd_http_request_bodies_refused_total counter\n";
  out += "stalkd_http_request_bodies_refused_total " + std::to_string(bodies_.refused()) + "\n";
  out +=
      "# HELP stalkd_http_lingering_closes_total Connections half-closed after a refusal that left "
      "a request body unread, its rest read and discarded (bounded) before the close.\n";
  out += "# TYPE stalkd_http_lingering_closes_total counter\n";
  out += "stalkd_http_lingering_closes_total " + std::to_string(bodies_.lingered()) + "\n";
  out += "# HELP stalkd_http_lingering_discarded_bytes_total Bytes read and discarded so.\n";
  out += "# TYPE stalkd_http_lingering_discarded_bytes_total counter\n";
  out +=
      "stalkd_http_lingering_discarded_bytes_total " + std::to_string(bodies_.discarded()) + "\n";
  if (server_.tls()) AppendTlsMetrics(server_, &out);
}

void AppendTlsMetrics(const Server& server, std::string* out) {
  Server::TlsStats st = server.tls_stats();
  struct {
    const char* name;
    const char* type;
    const char* help;
    uint64_t value;
  } rows[] = {
      {"stalkd_tls_handshakes_total", "counter", "TLS handshakes finished.", st.handshakes},
      {"stalkd_tls_handshake_failures_total", "counter",
       "TLS handshakes failed (bad input, refused certificates, clients gone).", st.failures},
      {"stalkd_tls_handshake_timeouts_total", "counter",
       "TLS clients closed by --tls-handshake-timeout.", st.timeouts},
      {"stalkd_tls_record_timeouts_total", "counter",
       "TLS clients closed: a partial record left unfinished for --tls-handshake-timeout.",
       st.record_timeouts},
      {"stalkd_tls_refused_total", "counter", "TLS clients refused: TLS memory at its limit.",
       st.refused},
      {"stalkd_tls_handshakes_in_progress", "gauge", "TLS handshakes under way.", st.handshaking},
      {"stalkd_tls_memory_bytes", "gauge", "Bytes OpenSSL holds (TLS connections, handshakes).",
       net::TlsMemoryBytes()},
      {"stalkd_tls_memory_limit_bytes", "gauge",
       "The most OpenSSL may hold before TLS clients are refused.", server.tls_memory_limit()},
      {"stalkd_tls_reloads_total", "counter", "Certificate reloads (SIGHUP) that took.",
       st.reloads},
      {"stalkd_tls_reload_failures_total", "counter",
       "Reloads (SIGHUP) of the certificate or --tls-identities that kept the one in use.",
       st.reload_failures},
      {"stalkd_tls_identified_total", "counter",
       "TLS clients whose certificate stood for an identity (--tls-identities).", st.identified},
  };
  for (const auto& r : rows) {
    *out += std::string("# HELP ") + r.name + " " + r.help + "\n# TYPE " + r.name + " " + r.type +
            "\n" + r.name + " " + std::to_string(r.value) + "\n";
  }
}

http::BinlogMetrics HttpHost::BinlogNow() const { return server_.BinlogMetricsNow(); }

Nanos HttpHost::Now() const { return server_.clock().Now(); }

std::string_view HttpHost::version() const { return kVersion; }

bool HttpHost::ready() const {
  return !server_.draining() && !server_.recovering() && server_.StoreNotReady().empty();
}

std::string HttpHost::why_not_ready() const {
  if (server_.draining()) return "draining";
  return server_.StoreNotReady();
}

bool HttpHost::recovering() const { return server_.recovering(); }

Nanos HttpHost::CheckRequestTimeouts(Nanos now) {
  if (!server_.recovering()) dashboard_.Tick(now);
  Nanos limit = options_.http_request_timeout_s * kSecond;
  if (now < next_check_) return next_check_;
  next_check_ = now + kSecond;
  for (Connection* c : connections_) {
    auto& f = static_cast<http::HttpFrontEnd&>(c->front_end());
    Nanos started = f.request_started();
    if (started != 0 && now - started >= limit && !c->dead()) {
      f.TimeOut();
      server_.MarkDirty(c);
    }
    if (c->lingering && now >= f.linger_until()) c->Kill();
  }
  return next_check_;
}

Connection* MakeApiConnection(Server& server, int fd) {
  return MakeHttpConnection(server, fd, server.http()->api());
}

Connection* MakeAdminConnection(Server& server, int fd) {
  return MakeHttpConnection(server, fd, server.http()->admin());
}

}  // namespace stalkd::server
