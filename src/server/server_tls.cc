// The server's TLS: starting it on accepted connections, the handshakes' timeout, the
// certificate's reload on SIGHUP, and what is logged and counted (docs/SECURITY.md, "TLS").
#include <algorithm>
#include <cstdio>

#include "net/listener.h"
#include "net/tls.h"
#include "server/options_tls.h"
#include "server/server.h"

namespace stalkd::server {

bool Server::StartTls(Connection* c) {
  std::string error;
  std::unique_ptr<net::TlsStream> s = net::TlsStream::Create(*tls_, c->fd(), &error);
  if (!s) {
    fprintf(stderr, "stalkd: cannot start TLS for a client: %s\n", error.c_str());
    return false;
  }
  Nanos now = clock_.Now();
  c->StartTls(std::move(s), now);
  WatchTls(c);
  return true;
}

void Server::WatchTls(Connection* c) {
  if (c->on_handshaking) return;
  if (handshaking_.empty()) next_handshake_check_ = clock_.Now() + kSecond;
  c->on_handshaking = true;
  handshaking_.push_back(c);
}

void Server::MarkTlsReadable(Connection* c) {
  if (c->on_tls_readable) return;
  c->on_tls_readable = true;
  tls_readable_.push_back(c);
}

void Server::ReadTlsPending() {
  std::vector<Connection*> read;
  read.swap(tls_readable_);
  for (Connection* c : read) c->on_tls_readable = false;
  for (Connection* c : read) c->ReadTlsPending();
}

// A handshake, or a partial record once established: each holds OpenSSL's buffers (some
// 17 KB), so a client that stops midway must not hold them for ever.
void Server::CheckHandshakes(Nanos now) {
  if (now < next_handshake_check_) return;
  next_handshake_check_ = now + kSecond;
  Nanos limit = options_.tls_handshake_timeout_s * kSecond;
  std::erase_if(handshaking_, [&](Connection* c) {
    Nanos since = c->tls_waiting_since();
    if (c->dead() || since == 0) {
      c->on_handshaking = false;
      return true;
    }
    if (now - since < limit) return false;
    bool handshake = c->handshaking();
    if (options_.verbosity > 0) {
      fprintf(stderr, "stalkd: closing TLS client %s: %s within %lld s\n", PeerName(c).c_str(),
              handshake ? "no handshake" : "a TLS record left unfinished",
              static_cast<long long>(options_.tls_handshake_timeout_s));
    }
    (handshake ? tls_stats_.timeouts : tls_stats_.record_timeouts)++;
    c->on_handshaking = false;
    c->Kill();
    return true;
  });
}

void Server::OnTlsHandshake(Connection* c, const char* error) {
  if (error != nullptr) {
    tls_stats_.failures++;
    if (options_.verbosity > 0) {
      fprintf(stderr, "stalkd: TLS handshake with %s failed: %s\n", PeerName(c).c_str(), error);
    }
    return;
  }
  tls_stats_.handshakes++;
  std::string_view who = c->tls_identity();
  const command::Identity* id =
      tls_identities_ && !who.empty() ? tls_identities_->Find(who) : nullptr;
  if (id != nullptr) {
    tls_stats_.identified++;
    c->front_end().ProvenBy(*id);
  }
  if (options_.verbosity > 0) {
    std::string as;
    if (id != nullptr) as = id->scoped() ? ", namespace " + id->ns : std::string(", admin");
    fprintf(stderr, "stalkd: TLS client %s: %s, %s%.*s%s\n", PeerName(c).c_str(),
            c->TlsDescription().c_str(), who.empty() ? "no client certificate" : "certificate ",
            static_cast<int>(who.size()), who.data(), as.c_str());
  }
}

void Server::ReloadTlsIdentities() {
  if (options_.tls_identities.empty()) return;
  std::string error;
  std::shared_ptr<const TlsIdentities> ids = TlsIdentities::Load(options_.tls_identities, &error);
  if (!ids) {
    tls_stats_.reload_failures++;
    fprintf(stderr, "stalkd: SIGHUP: kept the TLS identities in use: %s\n", error.c_str());
    return;
  }
  tls_identities_ = std::move(ids);  // connections keep who they are
  fprintf(stderr, "stalkd: SIGHUP: TLS identities reloaded: %zu subjects\n",
          tls_identities_->size());
}

void Server::OnTlsError(Connection* c, const std::string& error) {
  if (options_.verbosity > 0) {
    fprintf(stderr, "stalkd: TLS client %s: %s\n", PeerName(c).c_str(), error.c_str());
  }
}

bool Server::ReloadTls() {
  if (!tls_) return false;
  ReloadTlsIdentities();
  std::string error;
  std::shared_ptr<net::TlsContext> ctx =
      net::TlsContext::Create(net::TlsContext::Role::kServer, TlsConfigFor(options_), &error);
  if (!ctx) {
    tls_stats_.reload_failures++;
    fprintf(stderr, "stalkd: SIGHUP: kept the TLS certificate in use (%s): %s\n",
            tls_->subject().c_str(), error.c_str());
    return false;
  }
  tls_ = std::move(ctx);  // connections keep what their handshake used
  tls_stats_.reloads++;
  fprintf(stderr, "stalkd: SIGHUP: TLS certificate reloaded: %s\n", tls_->subject().c_str());
  return true;
}

Server::TlsStats Server::tls_stats() const {
  TlsStats s = tls_stats_;
  s.handshaking = static_cast<size_t>(
      std::count_if(handshaking_.begin(), handshaking_.end(),
                    [](const Connection* c) { return !c->dead() && c->handshaking(); }));
  return s;
}

std::string Server::PeerName(const Connection* c) { return net::DescribePeer(c->fd()); }

}  // namespace stalkd::server
