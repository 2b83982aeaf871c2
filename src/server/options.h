#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "net/tls.h"

namespace stalkd::server {

// beanstalkd's command-line flags, with its defaults.
struct Options {
  std::string address = "0.0.0.0";   // -l; "unix:/path" for a unix socket
  std::string port = "11300";        // -p
  std::string user;                  // -u
  std::string binlog_dir;            // -b
  int64_t fsync_ms = 50;             // -f
  bool fsync_never = false;          // -F
  size_t max_job_size = 65535;       // -z
  int64_t binlog_size = 10485760;    // -s as given (stats shows it, as beanstalkd does)
  int verbosity = 0;                 // -V (repeatable)
  bool binlog_skip_damaged = false;  // --binlog-skip-damaged
  // --max-memory: cap on the bytes held by jobs and their index; 0 means the default,
  // half of the machine's physical memory.
  uint64_t max_memory = 0;
  // --hot-memory: with -b, keep the memory held by jobs under this by moving long-delayed
  // jobs to the binlog only (docs/DISK-TIER.md); 0: off, every job in memory.
  uint64_t hot_memory = 0;
  // --allow CIDR[,CIDR...] (repeatable): client addresses allowed to connect; empty: all.
  std::vector<std::string> allow;
  // --unix-mode OCTAL: permissions of the unix socket file (-l unix:...); -1: the umask's.
  int unix_mode = -1;
  // --stalled-client-timeout SECONDS: a client whose unread replies have filled its output
  // buffer and that reads nothing for this long is disconnected.
  int64_t stalled_client_timeout_s = 60;

  // The HTTP front ends (docs/HTTP.md), each off unless given as ADDR:PORT.
  std::string http_address, http_port;    // --http: lmstfy's API
  std::string admin_address, admin_port;  // --admin-http: admin API, /metrics, health
  std::string admin_accounts;             // --admin-accounts FILE: basic auth users
  // --metrics-max-tubes N: tubes that get their own series in /metrics; the rest are
  // summed under tube="_other".
  uint64_t metrics_max_tubes = 1000;
  // --http-request-timeout SECONDS: an HTTP request that has begun to arrive must be
  // complete within this long, or it is answered 408 and the connection closed.
  int64_t http_request_timeout_s = 30;
  // --require-auth: the text protocol answers nothing but `auth` and `quit` until a
  // connection has sent `auth` with a token of the HTTP API (docs/SECURITY.md).
  bool require_auth = false;

  // The Redis store (docs/SCALE-OUT.md): --store URL; empty: the embedded store.
  std::string store_url;
  std::string store_prefix = "stalkd";  // --store-prefix
  int store_wait = 1;                   // --store-wait N: replicas a change must reach
  int64_t store_lease_ms = 5000;        // --store-lease MS
  int64_t store_retry_ms = 5000;        // --store-retry MS
  // Credentials (docs/SCALE-OUT.md, "Credentials"): the files named, and what ParseOptions
  // made of them, the URL and the environment (STALKD_STORE_PASSWORD,
  // STALKD_STORE_SENTINEL_PASSWORD). store_url keeps what was given; never log it as such
  // (redis::RedactStoreUrl).
  std::string store_password_file;           // --store-password-file FILE
  std::string store_sentinel_password_file;  // --store-sentinel-password-file FILE
  std::string store_user, store_password;    // the data nodes'
  std::string store_sentinel_user;           // --store-sentinel-user USER
  std::string store_sentinel_password;

  // TLS (docs/SECURITY.md): a listener written tls://ADDR:PORT (--listen, --http,
  // --admin-http) serves TLS with this certificate; checked by ParseOptions.
  std::string tls_cert, tls_key;             // --tls-cert FILE, --tls-key FILE
  std::string tls_client_ca;                 // --tls-client-ca FILE: ask for client certificates
  bool tls_verify_client = false;            // --tls-verify-client: require one
  std::string tls_identities;                // --tls-identities FILE: subjects as identities
  int64_t tls_handshake_timeout_s = 10;      // --tls-handshake-timeout SECONDS
  bool http_tls = false, admin_tls = false;  // --http tls://..., --admin-http tls://...
  // --listen [tls://]ADDR:PORT (repeatable): more beanstalkd-protocol listeners.
  // --listen-auth [tls://]ADDR:PORT (repeatable): one whose clients must `auth` first, as
  // --require-auth asks of every beanstalkd listener.
  struct Listen {
    std::string address, port;
    bool tls = false;
    bool require_auth = false;
  };
  std::vector<Listen> listens;
  // Whether any listener serves TLS.
  bool tls() const;
  // Whether some beanstalkd listener requires `auth` (--require-auth or --listen-auth).
  bool any_require_auth() const;
  // TLS to Redis (a rediss... --store): --store-tls-ca, --store-tls-cert, --store-tls-key FILE,
  // --store-tls-name NAME
  std::string store_tls_ca, store_tls_cert, store_tls_key, store_tls_name;
  std::shared_ptr<const net::TlsContext> store_tls;  // made from them by ParseOptions
};

// The size of each binlog file: -s rounded up to a multiple of 4096, at least 4096.
int64_t BinlogSegmentSize(const Options& opts);

// Prints "stalkd <version>" on stdout, as beanstalkd's -v prints "beanstalkd 1.13".
void PrintVersion();

// --max-memory, or its default when not given: half of physical memory (or 1 GiB if it
// cannot be read). The jobs' cap, and what the HTTP bodies' and OpenSSL's shares are of.
uint64_t MaxMemory(const Options& o);

inline constexpr size_t kMaxJobSizeLimit = 1073741824;

enum class ParseOutcome { kRun, kExitOk, kExitUsage };

// Parses argv as beanstalkd does ("-p 11300", "-p11300", "-VV"), plus stalkd's long options
// ("--max-memory 512M" or "--max-memory=512M"). Messages, and the usage after a bad flag, go
// to stderr; the version and the help asked for (-h, --help) to stdout. kExitOk: -v,
// --version, -h or --help given; kExitUsage: a bad flag (exit code 5).
ParseOutcome ParseOptions(int argc, char** argv, Options* opts);

// The usage (-h), on `out`.
void PrintUsage(FILE* out);

}  // namespace stalkd::server
