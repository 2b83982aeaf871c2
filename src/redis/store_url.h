#pragma once

#include <charconv>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "net/tls.h"

// Where the Redis store's Redis is: the --store URL (redis://, redis-sentinel://,
// redis-cluster://, and their TLS forms rediss://...) parsed into endpoints. Parsed once, at
// start-up (server/options.cc); the result goes to Link (link.h: one master, or a master found
// through Sentinel) or ClusterLink (cluster.h). Parsing is in store_url.cc; link.h includes this
// header, so its users see it.
namespace stalkd::redis {

struct Endpoint {
  std::string host;
  int port = 0;
};

// Who a connection is to Redis (Redis 6 ACL users; `default` when user is empty). With a
// password, AUTH [user] password is the first command of every connection (link_auth.cc).
struct Credentials {
  std::string user;
  std::string password;
};

// --store: redis://[USER:PASSWORD@]HOST:PORT[/DB],
// redis-sentinel://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]/MASTERNAME or
// redis-cluster://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...][/0] (cluster/ClusterLink; a cluster
// has db 0 only). Each with "rediss" for TLS: rediss://, rediss-sentinel://, rediss-cluster://.
struct StoreUrl {
  enum class Kind : uint8_t { kRedis, kSentinel, kCluster };
  Kind kind = Kind::kRedis;
  // rediss...: every connection is TLS, the sentinels' as well as the data nodes' (a
  // Sentinel-managed set whose sentinels speak TLS has masters that do: one scheme for both).
  bool tls = false;
  // kRedis: exactly one; kSentinel: the sentinels; kCluster: the seed nodes
  std::vector<Endpoint> endpoints;
  int db = 0;               // kRedis only (Sentinel-managed masters use db 0)
  std::string master_name;  // kSentinel
  // The data nodes' (master, cluster nodes): the URL's USER:PASSWORD@ (percent-decoded).
  Credentials auth;
  // kSentinel: the sentinels' own (not in the URL: --store-sentinel-password-file...).
  Credentials sentinel_auth;
  // tls: what every connection's TLS uses (not in the URL: --store-tls-ca, -cert, -key,
  // made at start), and the name every server's certificate must carry (--store-tls-name;
  // empty: the address connected to).
  std::shared_ptr<const net::TlsContext> tls_context;
  std::string tls_name;
};
// false with *error set ("--store: ...") for anything malformed. A port left out is 6379
// (26379 for a sentinel). Hosts are numeric IPv4 addresses or "localhost" (127.0.0.1): no name
// is resolved, so that connecting never blocks the loop on DNS; nor IPv6, nor ?options.
// Credentials are USER:PASSWORD@, :PASSWORD@ (the default user) or USER@ (the password given
// elsewhere), %XX-decoded; an error never repeats the password.
bool ParseStoreUrl(std::string_view url, StoreUrl* out, std::string* error);
// The URL with its password replaced by "***", for logs.
std::string RedactStoreUrl(std::string_view url);
// Whether a link's why_not_ready() (or a Conn's failure) is Redis refusing our credentials
// (AUTH answered WRONGPASS or another error, or a command answered NOAUTH) or what they may
// do (NOPERM: an ACL user lacking a command, a key or the channel), or a TLS connection
// refused (a certificate not verified, a client certificate wanted...): not transient.
bool IsAccessRefused(std::string_view why);

// A decimal number from 0 to `max`, nothing else (no sign, no spaces): the URL's ports and db,
// and the ports in Sentinel's answers (link_sentinel.cc).
inline bool ParseNumber(std::string_view s, int max, int* out) {
  if (s.empty() || s.size() > 10) return false;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0 || v > max) return false;
  *out = static_cast<int>(v);
  return true;
}

}  // namespace stalkd::redis
