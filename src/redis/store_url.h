#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

// Where the Redis store's Redis is: the --store URL (redis://, redis-sentinel://,
// redis-cluster://) parsed into endpoints. Parsed once, at start-up (server/options.cc); the
// result goes to Link (link.h: one master, or a master found through Sentinel) or ClusterLink
// (cluster.h). Parsing is in store_url.cc; link.h includes this header, so its users see it.
namespace stalkd::redis {

struct Endpoint {
  std::string host;
  int port = 0;
};

// --store: redis://HOST:PORT[/DB], redis-sentinel://HOST:PORT[,HOST:PORT...]/MASTERNAME or
// redis-cluster://HOST:PORT[,HOST:PORT...][/0] (cluster/ClusterLink; a cluster has db 0 only).
struct StoreUrl {
  enum class Kind : uint8_t { kRedis, kSentinel, kCluster };
  Kind kind = Kind::kRedis;
  // kRedis: exactly one; kSentinel: the sentinels; kCluster: the seed nodes
  std::vector<Endpoint> endpoints;
  int db = 0;               // kRedis only (Sentinel-managed masters use db 0)
  std::string master_name;  // kSentinel
};
// false with *error set ("--store: ...") for anything malformed. A port left out is 6379
// (26379 for a sentinel). Hosts are numeric IPv4 addresses or "localhost" (127.0.0.1): no name
// is resolved, so that connecting never blocks the loop on DNS; nor IPv6, TLS, AUTH (a URL
// with user:password@ is refused), nor ?options.
bool ParseStoreUrl(std::string_view url, StoreUrl* out, std::string* error);

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
