// The TLS flags (docs/SECURITY.md, "TLS"): parsed here, next to the checks that tie them to
// the tls:// listeners.
#include "server/options_tls.h"

#include <cerrno>
#include <cinttypes>
#include <cstdlib>

namespace stalkd::server {

bool Options::tls() const {
  if (http_tls || admin_tls) return true;
  for (const Listen& l : listens) {
    if (l.tls) return true;
  }
  return false;
}

bool Options::any_require_auth() const {
  if (require_auth) return true;
  for (const Listen& l : listens) {
    if (l.require_auth) return true;
  }
  return false;
}

bool ParseTlsOption(const std::string& name, const std::string& value, Options* o) {
  std::string* file = nullptr;
  if (name == "--tls-cert") file = &o->tls_cert;
  if (name == "--tls-key") file = &o->tls_key;
  if (name == "--tls-client-ca") file = &o->tls_client_ca;
  if (name == "--tls-identities") file = &o->tls_identities;
  if (file != nullptr) {
    if (value.empty()) {
      fprintf(stderr, "stalkd: %s wants a file\n", name.c_str());
      return false;
    }
    *file = value;
    return true;
  }
  if (name == "--tls-handshake-timeout") {
    char* end = nullptr;
    errno = 0;
    long long secs = strtoll(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || errno != 0 || secs <= 0 || secs > 3600) {
      fprintf(stderr, "stalkd: --tls-handshake-timeout wants 1 to 3600 seconds, not %s\n",
              value.c_str());
      return false;
    }
    o->tls_handshake_timeout_s = secs;
    return true;
  }
  fprintf(stderr, "stalkd: unknown flag: %s\n", name.c_str());
  return false;
}

bool CheckTlsOptions(const Options& o) {
  bool files = !o.tls_cert.empty() || !o.tls_key.empty() || !o.tls_client_ca.empty() ||
               o.tls_verify_client || !o.tls_identities.empty();
  if (!o.tls()) {
    if (!files) return true;
    fprintf(stderr,
            "stalkd: --tls-* flags want a tls:// listener (--listen tls://ADDR:PORT, --http "
            "tls://ADDR:PORT or --admin-http tls://ADDR:PORT)\n");
    return false;
  }
  if (o.tls_cert.empty() || o.tls_key.empty()) {
    fprintf(stderr, "stalkd: a tls:// listener wants --tls-cert and --tls-key\n");
    return false;
  }
  if (o.tls_verify_client && o.tls_client_ca.empty()) {
    fprintf(stderr, "stalkd: --tls-verify-client wants --tls-client-ca\n");
    return false;
  }
  if (!o.tls_identities.empty() && o.tls_client_ca.empty()) {
    fprintf(stderr, "stalkd: --tls-identities wants --tls-client-ca\n");
    return false;
  }
  return true;
}

net::TlsConfig TlsConfigFor(const Options& o) {
  net::TlsConfig c;
  c.cert_file = o.tls_cert;
  c.key_file = o.tls_key;
  c.ca_file = o.tls_client_ca;
  c.verify_peer = o.tls_verify_client;
  return c;
}

}  // namespace stalkd::server
