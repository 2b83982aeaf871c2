// Parsing the --store URL (store_url.h): the scheme says which of Link's or ClusterLink's
// shapes the Redis store takes, the hosts are checked to be numeric IPv4 (or localhost) so that
// connecting never waits on DNS, and every malformed URL gets its message.
#include "redis/store_url.h"

#include <arpa/inet.h>

#include <algorithm>
#include <utility>

#include "redis/link_auth.h"

namespace stalkd::redis {

namespace {

// Each shape in plain TCP and in TLS ("rediss": Redis' own name for its TLS URLs).
struct Scheme {
  std::string_view prefix;
  StoreUrl::Kind kind;
  bool tls;
};
constexpr Scheme kSchemes[] = {
    {"redis://", StoreUrl::Kind::kRedis, false},
    {"rediss://", StoreUrl::Kind::kRedis, true},
    {"redis-sentinel://", StoreUrl::Kind::kSentinel, false},
    {"rediss-sentinel://", StoreUrl::Kind::kSentinel, true},
    {"redis-cluster://", StoreUrl::Kind::kCluster, false},
    {"rediss-cluster://", StoreUrl::Kind::kCluster, true},
};
constexpr int kRedisPort = 6379;
constexpr int kSentinelPort = 26379;

bool ParseEndpoint(std::string_view s, int default_port, Endpoint* out, std::string* error) {
  if (s.starts_with("[")) {
    *error = "--store: '" + std::string(s) + "': IPv6 addresses are not supported";
    return false;
  }
  std::string_view host = s;
  out->port = default_port;
  if (size_t colon = s.rfind(':'); colon != std::string_view::npos) {
    host = s.substr(0, colon);
    std::string_view port = s.substr(colon + 1);
    if (!ParseNumber(port, 65535, &out->port) || out->port == 0) {
      *error = "--store: '" + std::string(port) + "' is not a port (1 to 65535)";
      return false;
    }
  }
  if (host == "localhost") {
    out->host = "127.0.0.1";
    return true;
  }
  out->host = std::string(host);
  in_addr addr;
  if (host.empty() || inet_pton(AF_INET, out->host.c_str(), &addr) != 1) {
    *error = "--store: host '" + out->host +
             "' is not a numeric IPv4 address (only localhost is resolved)";
    return false;
  }
  return true;
}

}  // namespace

bool ParseStoreUrl(std::string_view given, StoreUrl* out, std::string* error) {
  StoreUrl u;
  std::string bare;  // without credentials: what the messages show
  if (!TakeCredentials(given, &bare, &u.auth, error)) return false;
  std::string_view url = bare;
  std::string_view rest;
  const Scheme* scheme = nullptr;
  for (const Scheme& sc : kSchemes) {
    if (url.starts_with(sc.prefix)) scheme = &sc;
  }
  if (scheme == nullptr) {
    *error = "--store: '" + std::string(url) +
             "' is none of redis[s]://HOST:PORT[/DB], "
             "redis[s]-sentinel://HOST:PORT[,HOST:PORT...]/MASTER and "
             "redis[s]-cluster://HOST:PORT[,HOST:PORT...] (rediss: TLS)";
    return false;
  }
  u.kind = scheme->kind;
  u.tls = scheme->tls;
  rest = url.substr(scheme->prefix.size());
  if (rest.find_first_of("?#") != std::string_view::npos) {
    *error = "--store: '" + std::string(url) + "': options (?...) are not supported";
    return false;
  }
  std::string_view hosts = rest.substr(0, rest.find('/'));
  std::string_view path =
      hosts.size() < rest.size() ? rest.substr(hosts.size() + 1) : std::string_view();
  if (hosts.empty()) {
    *error = "--store: '" + std::string(url) + "' names no host";
    return false;
  }
  if (u.kind == StoreUrl::Kind::kRedis) {
    if (hosts.find(',') != std::string_view::npos) {
      *error = "--store: '" + std::string(url) +
               "': a redis:// URL names one server (several are for redis-sentinel://)";
      return false;
    }
    Endpoint ep;
    if (!ParseEndpoint(hosts, kRedisPort, &ep, error)) return false;
    u.endpoints.push_back(ep);
    if (!path.empty() && !ParseNumber(path, 1 << 30, &u.db)) {
      *error = "--store: '" + std::string(path) + "' is not a database number";
      return false;
    }
  } else {
    bool cluster = u.kind == StoreUrl::Kind::kCluster;
    while (!hosts.empty()) {
      std::string_view one = hosts.substr(0, hosts.find(','));
      Endpoint ep;
      if (!ParseEndpoint(one, cluster ? kRedisPort : kSentinelPort, &ep, error)) return false;
      u.endpoints.push_back(ep);
      hosts.remove_prefix(std::min(hosts.size(), one.size() + 1));
    }
    if (cluster) {
      if (!path.empty() && path != "0") {
        *error = "--store: '" + std::string(url) +
                 "': a Redis Cluster has database 0 only (redis-cluster://HOST:PORT[,...])";
        return false;
      }
      *out = std::move(u);
      return true;
    }
    if (path.empty() || path.find_first_of(" \t\r\n/") != std::string_view::npos) {
      *error = "--store: '" + std::string(url) +
               "' names no master (redis-sentinel://HOST:PORT[,HOST:PORT...]/MASTER)";
      return false;
    }
    u.master_name = std::string(path);
  }
  *out = std::move(u);
  return true;
}

}  // namespace stalkd::redis
