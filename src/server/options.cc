#include "server/options.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "net/access_list.h"
#include "redis/link.h"
#include "server/options_tls.h"
#include "server/version.h"

// Where the Debian package installs README.md and docs/*.md (gzip -9n), as stalkd(8) says.
#define STALKD_DOC_DIR "/usr/share/doc/stalkd"

namespace stalkd::server {

void PrintUsage(FILE* out) {
  fprintf(out,
          "Use: stalkd [OPTIONS]\n"
          "\n"
          "Options:\n"
          " -b DIR   write-ahead log directory\n"
          " -f MS    fsync at most once every MS milliseconds (default is 50ms);\n"
          "          use -f0 for \"always fsync\"\n"
          " -F       never fsync\n"
          " -l ADDR  listen on address (default is 0.0.0.0)\n"
          " -p PORT  listen on port (default is 11300)\n"
          " -u USER  become user and group\n"
          " -z BYTES set the maximum job size in bytes (default is 65535);\n"
          "          max allowed is %zu bytes\n"
          " -s BYTES set the size of each write-ahead log file (default is 10485760);\n"
          "          will be rounded up to a multiple of 4096 bytes\n"
          " --max-memory BYTES  cap the memory held by jobs (suffixes K, M, G);\n"
          "          default is half of physical memory; a put beyond it gets OUT_OF_MEMORY\n"
          " --hot-memory BYTES  with -b: keep the memory held by jobs under BYTES (suffixes\n"
          "          K, M, G) by leaving delayed jobs due later than a few seconds, then\n"
          "          the newest buried jobs, then the ends of ready queues, in the binlog\n"
          "          only; default: off (every job in memory)\n"
          " --allow CIDR[,CIDR]  accept clients only from these addresses (repeatable);\n"
          "          e.g. 127.0.0.1,10.0.0.0/8,::1; default: everyone\n"
          " --unix-mode OCTAL  permissions of the unix socket file (with -l unix:PATH)\n"
          " --stalled-client-timeout SECONDS  disconnect a client that has not read its\n"
          "          replies for this long while its output buffer is full (default 60)\n"
          " --http ADDR:PORT  serve lmstfy's HTTP API there; default: off\n"
          "          (" STALKD_DOC_DIR
          "/HTTP.md.gz)\n"
          " --admin-http ADDR:PORT  serve the admin API, the web dashboard, /metrics,\n"
          "          /healthz and /readyz there; default: off\n"
          " --admin-accounts FILE  require HTTP basic auth on --admin-http, for the\n"
          "          user:password lines of FILE\n"
          " --metrics-max-tubes N  tubes with their own series in /metrics (default 1000);\n"
          "          the rest are summed as tube=\"_other\"\n"
          " --http-request-timeout SECONDS  close an HTTP client whose request has not\n"
          "          fully arrived this long after it began (default 30)\n"
          " --listen [tls://]ADDR:PORT  one more beanstalkd-protocol listener (repeatable);\n"
          "          with tls:// its clients speak TLS, e.g. --listen tls://0.0.0.0:11301\n"
          " --listen-auth [tls://]ADDR:PORT  as --listen, a listener that requires auth as\n"
          "          --require-auth does, the other listeners unchanged\n"
          " --http and --admin-http take tls://ADDR:PORT too (HTTPS)\n"
          " --tls-cert FILE  the certificate chain (PEM, the server's first) of every tls://\n"
          "          listener\n"
          " --tls-key FILE  its private key (PEM, unencrypted); both files are read before\n"
          "          -u drops privileges, and again on SIGHUP\n"
          " --tls-client-ca FILE  ask TLS clients for a certificate issued by the CAs of\n"
          "          FILE (mutual TLS)\n"
          " --tls-verify-client  require that certificate; without it a client may connect\n"
          "          without one\n"
          " --tls-identities FILE  lines SUBJECT namespace NS or SUBJECT admin: a verified\n"
          "          client certificate of SUBJECT starts authenticated on the beanstalkd\n"
          "          listeners, as after auth; read again on SIGHUP\n"
          " --tls-handshake-timeout SECONDS  close a TLS client whose handshake has not\n"
          "          finished this long after it connected, or that left a TLS record\n"
          "          unfinished this long (default 10)\n"
          " --require-auth  on every beanstalkd-protocol listener, answer UNAUTHORIZED to every\n"
          "          command but auth and quit until the client has sent auth TOKEN\n"
          " --store URL  keep jobs in Redis (" STALKD_DOC_DIR
          "/SCALE-OUT.md.gz):\n"
          "          redis://[USER:PASSWORD@]HOST:PORT[/DB]\n"
          "          or redis-sentinel://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]/MASTER\n"
          "          or redis-cluster://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...];\n"
          "          default: in memory. USER:PASSWORD@ (or :PASSWORD@) are the Redis\n"
          "          servers' (AUTH); a command line shows in ps: prefer USER@ with\n"
          "          --store-password-file or STALKD_STORE_PASSWORD\n"
          " --store-password-file FILE  the Redis servers' password: FILE's one line\n"
          " --store-sentinel-user USER  the sentinels' ACL user (redis-sentinel://)\n"
          " --store-sentinel-password-file FILE  the sentinels' own password (or\n"
          "          STALKD_STORE_SENTINEL_PASSWORD); default: none\n"
          " --store-tls-ca FILE  with rediss://, rediss-sentinel:// or rediss-cluster://\n"
          "          (TLS to every Redis server and sentinel): the CA certificates (PEM)\n"
          "          their certificates must be signed by; default: the system's\n"
          " --store-tls-cert FILE  --store-tls-key FILE  the client certificate and its\n"
          "          key (PEM) shown to Redis (tls-auth-clients yes); default: none\n"
          " --store-tls-name NAME  the name every Redis server's certificate must carry;\n"
          "          default: the address connected to (an IP address)\n"
          " --store-prefix STR  prefix of every Redis key and channel (default stalkd)\n"
          " --store-wait N  replicas a change must reach before its reply (WAIT N;\n"
          "          default 1; 0 for a Redis without replicas)\n"
          " --store-lease MS  this front end's lease: if it dies, its reservations come\n"
          "          back after about this long (default 5000)\n"
          " --store-retry MS  how long a command waits for a lost Redis master before\n"
          "          INTERNAL_ERROR (default 5000)\n"
          " --binlog-skip-damaged  start even if the binlog has damaged records (they are\n"
          "          skipped and counted); by default start-up stops and names them\n"
          " -v, --version  show version information\n"
          " -V       increase verbosity\n"
          " -h, --help  show this help\n"
          "\n"
          "The manual: stalkd(8); the documentation: " STALKD_DOC_DIR "\n",
          kMaxJobSizeLimit);
}

void PrintVersion() { printf("stalkd %s\n", kVersion); }

namespace {

// beanstalkd parses sizes with strtoumax semantics: "-5" wraps to a huge value.
bool ParseSize(const char* s, uint64_t* out) {
  errno = 0;
  char* end = nullptr;
  uintmax_t v = strtoumax(s, &end, 10);
  if (end == s || *end != '\0' || errno != 0) {
    fprintf(stderr, "stalkd: invalid size: %s\n", s);
    return false;
  }
  *out = v;
  return true;
}

// A byte count with an optional K, M or G suffix (powers of 1024).
bool ParseBytes(const char* s, uint64_t* out) {
  errno = 0;
  char* end = nullptr;
  if (*s < '0' || *s > '9') return false;
  uintmax_t v = strtoumax(s, &end, 10);
  if (end == s || errno != 0) return false;
  uint64_t mult = 1;
  if (*end == 'K' || *end == 'k') mult = uint64_t{1} << 10;
  if (*end == 'M' || *end == 'm') mult = uint64_t{1} << 20;
  if (*end == 'G' || *end == 'g') mult = uint64_t{1} << 30;
  if (mult != 1) end++;
  if (*end != '\0' || v > UINT64_MAX / mult) return false;
  *out = v * mult;
  return true;
}

// "ADDR:PORT" or "[V6ADDR]:PORT", as --http and --admin-http take it.
bool ParseHostPort(const std::string& flag, const std::string& v, std::string* addr,
                   std::string* port) {
  size_t colon = v.rfind(':');
  if (colon == std::string::npos || colon + 1 == v.size()) {
    fprintf(stderr, "stalkd: %s wants ADDR:PORT, not %s\n", flag.c_str(), v.c_str());
    return false;
  }
  std::string a = v.substr(0, colon), p = v.substr(colon + 1);
  if (a.size() >= 2 && a.front() == '[' && a.back() == ']') a = a.substr(1, a.size() - 2);
  char* end = nullptr;
  long n = strtol(p.c_str(), &end, 10);
  if (*end != '\0' || n < 0 || n > 65535 || a.empty()) {
    fprintf(stderr, "stalkd: %s wants ADDR:PORT, not %s\n", flag.c_str(), v.c_str());
    return false;
  }
  *addr = a;
  *port = p;
  return true;
}

// "tls://ADDR:PORT": *tls set and the prefix gone; anything else as it is.
std::string StripTls(const std::string& v, bool* tls) {
  *tls = v.starts_with("tls://");
  return *tls ? v.substr(6) : v;
}

// Long options: "--name value" or "--name=value". Returns false after printing a message.
bool ParseLongOption(int argc, char** argv, int* i, Options* o) {
  std::string arg = argv[*i];
  std::string name = arg, value;
  bool has_value = false;
  if (size_t eq = arg.find('='); eq != std::string::npos) {
    name = arg.substr(0, eq);
    value = arg.substr(eq + 1);
    has_value = true;
  }
  if (name == "--binlog-skip-damaged" && !has_value) {
    o->binlog_skip_damaged = true;
    return true;
  }
  if (name == "--require-auth" && !has_value) {
    o->require_auth = true;
    return true;
  }
  auto take_value = [&]() {
    if (has_value) return true;
    if (*i + 1 >= argc) {
      fprintf(stderr, "stalkd: flag requires an argument: %s\n", name.c_str());
      return false;
    }
    value = argv[++*i];
    return true;
  };
  if (name == "--max-memory" || name == "--hot-memory") {
    uint64_t* bytes = name == "--max-memory" ? &o->max_memory : &o->hot_memory;
    if (!take_value()) return false;
    if (!ParseBytes(value.c_str(), bytes) || *bytes == 0) {
      fprintf(stderr, "stalkd: invalid size: %s\n", value.c_str());
      return false;
    }
    return true;
  }
  if (name == "--allow") {
    if (!take_value()) return false;
    size_t start = 0;
    while (start <= value.size()) {
      size_t comma = value.find(',', start);
      if (comma == std::string::npos) comma = value.size();
      std::string cidr = value.substr(start, comma - start);
      if (cidr.empty()) {
        fprintf(stderr, "stalkd: empty address in --allow %s\n", value.c_str());
        return false;
      }
      std::string error;
      net::AccessList check;
      if (!check.Add(cidr, &error)) {
        fprintf(stderr, "stalkd: --allow: %s\n", error.c_str());
        return false;
      }
      o->allow.push_back(cidr);
      start = comma + 1;
    }
    return true;
  }
  if (name == "--http") {
    return take_value() &&
           ParseHostPort(name, StripTls(value, &o->http_tls), &o->http_address, &o->http_port);
  }
  if (name == "--admin-http") {
    return take_value() &&
           ParseHostPort(name, StripTls(value, &o->admin_tls), &o->admin_address, &o->admin_port);
  }
  if (name == "--listen" || name == "--listen-auth") {
    Options::Listen l;
    l.require_auth = name == "--listen-auth";
    return take_value() && ParseHostPort(name, StripTls(value, &l.tls), &l.address, &l.port) &&
           (o->listens.push_back(l), true);
  }
  if (name == "--tls-verify-client" && !has_value) {
    o->tls_verify_client = true;
    return true;
  }
  if (name.starts_with("--tls-") && name != "--tls-verify-client") {
    return take_value() && ParseTlsOption(name, value, o);
  }
  if (name == "--admin-accounts") {
    if (!take_value()) return false;
    o->admin_accounts = value;
    return true;
  }
  if (name == "--metrics-max-tubes") {
    if (!take_value()) return false;
    char* end = nullptr;
    errno = 0;
    unsigned long long n = strtoull(value.c_str(), &end, 10);
    if (value.empty() || value[0] == '-' || *end != '\0' || errno != 0) {
      fprintf(stderr, "stalkd: invalid count: %s\n", value.c_str());
      return false;
    }
    o->metrics_max_tubes = n;
    return true;
  }
  if (name == "--http-request-timeout") {
    if (!take_value()) return false;
    char* end = nullptr;
    long long secs = strtoll(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || secs <= 0 || secs > 86400 * 365) {
      fprintf(stderr, "stalkd: invalid seconds: %s\n", value.c_str());
      return false;
    }
    o->http_request_timeout_s = secs;
    return true;
  }
  if (name == "--store") {
    if (!take_value()) return false;
    redis::StoreUrl url;
    std::string error;
    if (!redis::ParseStoreUrl(value, &url, &error)) {
      fprintf(stderr, "stalkd: %s\n", error.c_str());
      return false;
    }
    o->store_url = value;
    return true;
  }
  if (name == "--store-password-file" || name == "--store-sentinel-password-file" ||
      name == "--store-sentinel-user") {
    if (!take_value()) return false;
    if (value.empty()) {
      fprintf(stderr, "stalkd: %s wants a value\n", name.c_str());
      return false;
    }
    if (name == "--store-password-file") o->store_password_file = value;
    if (name == "--store-sentinel-password-file") o->store_sentinel_password_file = value;
    if (name == "--store-sentinel-user") o->store_sentinel_user = value;
    return true;
  }
  if (name == "--store-tls-ca" || name == "--store-tls-cert" || name == "--store-tls-key" ||
      name == "--store-tls-name") {
    if (!take_value()) return false;
    if (value.empty()) {
      fprintf(stderr, "stalkd: %s wants a value\n", name.c_str());
      return false;
    }
    if (name == "--store-tls-ca") o->store_tls_ca = value;
    if (name == "--store-tls-cert") o->store_tls_cert = value;
    if (name == "--store-tls-key") o->store_tls_key = value;
    if (name == "--store-tls-name") o->store_tls_name = value;
    return true;
  }
  if (name == "--store-prefix") {
    if (!take_value()) return false;
    if (value.empty() || value.size() > 100 ||
        value.find_first_of("{} \t\r\n") != std::string::npos) {
      fprintf(stderr, "stalkd: --store-prefix wants 1 to 100 bytes without braces or spaces\n");
      return false;
    }
    o->store_prefix = value;
    return true;
  }
  if (name == "--store-wait" || name == "--store-lease" || name == "--store-retry") {
    if (!take_value()) return false;
    char* end = nullptr;
    errno = 0;
    long long n = strtoll(value.c_str(), &end, 10);
    long long lo = name == "--store-wait" ? 0 : 100, hi = name == "--store-wait" ? 16 : 3600000;
    if (value.empty() || *end != '\0' || errno != 0 || n < lo || n > hi) {
      fprintf(stderr, "stalkd: %s wants a number from %lld to %lld, not %s\n", name.c_str(), lo, hi,
              value.c_str());
      return false;
    }
    if (name == "--store-wait") o->store_wait = static_cast<int>(n);
    if (name == "--store-lease") o->store_lease_ms = n;
    if (name == "--store-retry") o->store_retry_ms = n;
    return true;
  }
  if (name == "--unix-mode") {
    if (!take_value()) return false;
    char* end = nullptr;
    long mode = strtol(value.c_str(), &end, 8);
    if (value.empty() || *end != '\0' || mode < 0 || mode > 07777) {
      fprintf(stderr, "stalkd: invalid mode: %s\n", value.c_str());
      return false;
    }
    o->unix_mode = static_cast<int>(mode);
    return true;
  }
  if (name == "--stalled-client-timeout") {
    if (!take_value()) return false;
    char* end = nullptr;
    errno = 0;
    uintmax_t secs =
        value.empty() || value[0] < '0' || value[0] > '9' ? 0 : strtoumax(value.c_str(), &end, 10);
    if (secs == 0 || errno != 0 || *end != '\0' || secs > 86400 * 365) {
      fprintf(stderr, "stalkd: invalid number of seconds: %s\n", value.c_str());
      return false;
    }
    o->stalled_client_timeout_s = static_cast<int64_t>(secs);
    return true;
  }
  fprintf(stderr, "stalkd: unknown flag: %s\n", arg.c_str());
  return false;
}

}  // namespace

namespace {

// A password file: one line (a final newline is not part of it).
bool ReadPasswordFile(const std::string& flag, const std::string& path, std::string* out) {
  FILE* f = fopen(path.c_str(), "re");
  if (f == nullptr) {
    fprintf(stderr, "stalkd: %s %s: %s\n", flag.c_str(), path.c_str(), strerror(errno));
    return false;
  }
  out->clear();
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0 && out->size() < 65536) out->append(buf, n);
  fclose(f);
  if (out->ends_with("\n")) out->pop_back();
  if (out->ends_with("\r")) out->pop_back();
  if (out->empty() || out->find_first_of("\r\n") != std::string::npos) {
    fprintf(stderr, "stalkd: %s %s: wants one line, the password\n", flag.c_str(), path.c_str());
    return false;
  }
  return true;
}

// The credentials of the Redis store: the password from the URL, --store-password-file or
// STALKD_STORE_PASSWORD (the first that has one; the URL and the file both: an error), the
// sentinels' from --store-sentinel-password-file or STALKD_STORE_SENTINEL_PASSWORD.
bool ResolveStoreCredentials(Options* o) {
  bool sentinel_flags = !o->store_sentinel_password_file.empty() || !o->store_sentinel_user.empty();
  if (o->store_url.empty()) {
    if (o->store_password_file.empty() && !sentinel_flags) return true;
    fprintf(stderr, "stalkd: --store-password-file and --store-sentinel-* want --store\n");
    return false;
  }
  redis::StoreUrl url;
  std::string error;
  if (!redis::ParseStoreUrl(o->store_url, &url, &error)) return false;  // checked by --store
  o->store_user = url.auth.user;
  o->store_password = url.auth.password;
  if (!o->store_password_file.empty()) {
    if (!o->store_password.empty()) {
      fprintf(stderr, "stalkd: a password in --store and --store-password-file: give one\n");
      return false;
    }
    if (!ReadPasswordFile("--store-password-file", o->store_password_file, &o->store_password)) {
      return false;
    }
  } else if (const char* env = getenv("STALKD_STORE_PASSWORD");
             o->store_password.empty() && env != nullptr) {
    o->store_password = env;
  }
  if (!o->store_user.empty() && o->store_password.empty()) {
    fprintf(stderr,
            "stalkd: --store names user %s but no password (USER:PASSWORD@ in the URL, "
            "--store-password-file or STALKD_STORE_PASSWORD)\n",
            o->store_user.c_str());
    return false;
  }
  const char* sentinel_env = getenv("STALKD_STORE_SENTINEL_PASSWORD");
  if (url.kind != redis::StoreUrl::Kind::kSentinel) {
    if (!sentinel_flags) return true;
    fprintf(stderr, "stalkd: --store-sentinel-* want a redis-sentinel:// --store\n");
    return false;
  }
  if (!o->store_sentinel_password_file.empty()) {
    if (!ReadPasswordFile("--store-sentinel-password-file", o->store_sentinel_password_file,
                          &o->store_sentinel_password)) {
      return false;
    }
  } else if (sentinel_env != nullptr) {
    o->store_sentinel_password = sentinel_env;
  }
  if (!o->store_sentinel_user.empty() && o->store_sentinel_password.empty()) {
    fprintf(stderr,
            "stalkd: --store-sentinel-user wants a password (--store-sentinel-password-file or "
            "STALKD_STORE_SENTINEL_PASSWORD)\n");
    return false;
  }
  return true;
}

// TLS to Redis (docs/SCALE-OUT.md, "TLS"): the --store-tls-* files go with a rediss... URL,
// a certificate with its key.
bool ResolveStoreTls(Options* o) {
  bool flags = !o->store_tls_ca.empty() || !o->store_tls_cert.empty() ||
               !o->store_tls_key.empty() || !o->store_tls_name.empty();
  redis::StoreUrl url;
  std::string error;
  if (!o->store_url.empty() && !redis::ParseStoreUrl(o->store_url, &url, &error)) return false;
  if (o->store_url.empty() || !url.tls) {
    if (!flags) return true;
    fprintf(stderr,
            "stalkd: --store-tls-* want a TLS --store (rediss://, rediss-sentinel:// or "
            "rediss-cluster://)\n");
    return false;
  }
  if (o->store_tls_cert.empty() != o->store_tls_key.empty()) {
    fprintf(stderr, "stalkd: --store-tls-cert and --store-tls-key go together\n");
    return false;
  }
  // Read now, before -u drops root (the key may be root's alone); a bad file is a bad flag.
  net::TlsConfig config;
  config.ca_file = o->store_tls_ca;
  config.cert_file = o->store_tls_cert;
  config.key_file = o->store_tls_key;
  config.verify_peer = true;
  o->store_tls = net::TlsContext::Create(net::TlsContext::Role::kClient, config, &error);
  if (o->store_tls == nullptr) {
    fprintf(stderr, "stalkd: --store-tls-*: %s\n", error.c_str());
    return false;
  }
  return true;
}

}  // namespace

int64_t BinlogSegmentSize(const Options& opts) {
  constexpr int64_t kPage = 4096;
  int64_t size = std::clamp<int64_t>(opts.binlog_size, kPage, INT64_MAX / kPage * kPage);
  return (size + kPage - 1) / kPage * kPage;
}

uint64_t MaxMemory(const Options& o) {
  if (o.max_memory != 0) return o.max_memory;
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return uint64_t{1} << 30;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size) / 2;
}

ParseOutcome ParseOptions(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; i++) {
    const char* arg = argv[i];
    if (strcmp(arg, "--version") == 0) {
      PrintVersion();
      return ParseOutcome::kExitOk;
    }
    if (strcmp(arg, "--help") == 0) {
      PrintUsage(stdout);
      return ParseOutcome::kExitOk;
    }
    if (arg[0] == '-' && arg[1] == '-') {
      if (!ParseLongOption(argc, argv, &i, o)) {
        PrintUsage(stderr);
        return ParseOutcome::kExitUsage;
      }
      continue;
    }
    if (arg[0] != '-') {
      fprintf(stderr, "stalkd: unknown argument: %s\n", arg);
      PrintUsage(stderr);
      return ParseOutcome::kExitUsage;
    }
    bool consumed = false;  // a flag took the rest of this word as its value
    for (const char* f = arg + 1; *f && !consumed; f++) {
      // A flag's value is the rest of this word, or else the next word.
      auto value = [&]() -> const char* {
        const char* v = nullptr;
        if (f[1]) {
          v = f + 1;
        } else if (i + 1 < argc) {
          v = argv[++i];
        }
        if (!v) {
          fprintf(stderr, "stalkd: flag requires an argument: -%c\n", *f);
          PrintUsage(stderr);
          return nullptr;
        }
        consumed = true;
        return v;
      };
      uint64_t n = 0;
      const char* v = nullptr;
      switch (*f) {
        case 'p':
          if (!(v = value())) return ParseOutcome::kExitUsage;
          o->port = v;
          break;
        case 'l':
          if (!(v = value())) return ParseOutcome::kExitUsage;
          o->address = v;
          break;
        case 'u':
          if (!(v = value())) return ParseOutcome::kExitUsage;
          o->user = v;
          break;
        case 'b':
          if (!(v = value())) return ParseOutcome::kExitUsage;
          o->binlog_dir = v;
          break;
        case 'z':
          if (!(v = value())) return ParseOutcome::kExitUsage;
          if (!ParseSize(v, &n)) {
            PrintUsage(stderr);
            return ParseOutcome::kExitUsage;
          }
          if (n > kMaxJobSizeLimit) {
            n = kMaxJobSizeLimit;
            fprintf(stderr, "stalkd: maximum job size was set to %zu\n", kMaxJobSizeLimit);
          }
          o->max_job_size = n;
          break;
        case 's':
          if (!(v = value())) return ParseOutcome::kExitUsage;
          if (!ParseSize(v, &n)) {
            PrintUsage(stderr);
            return ParseOutcome::kExitUsage;
          }
          o->binlog_size = static_cast<int64_t>(std::min<uint64_t>(n, INT64_MAX));
          break;
        case 'f':
          if (!(v = value())) return ParseOutcome::kExitUsage;
          if (!ParseSize(v, &n)) {
            PrintUsage(stderr);
            return ParseOutcome::kExitUsage;
          }
          o->fsync_ms = static_cast<int64_t>(n);
          o->fsync_never = false;
          break;
        case 'F':
          o->fsync_never = true;
          break;
        case 'c':
        case 'n':
          fprintf(stderr, "stalkd: -%c flag was removed. binlog is always compacted.\n", *f);
          break;
        case 'V':
          o->verbosity++;
          break;
        case 'v':
          PrintVersion();
          return ParseOutcome::kExitOk;
        case 'h':
          PrintUsage(stdout);
          return ParseOutcome::kExitOk;
        default:
          fprintf(stderr, "stalkd: unknown flag: %s\n", arg);
          PrintUsage(stderr);
          return ParseOutcome::kExitUsage;
      }
    }
  }
  if (!CheckTlsOptions(*o)) {
    PrintUsage(stderr);
    return ParseOutcome::kExitUsage;
  }
  if (!ResolveStoreCredentials(o)) return ParseOutcome::kExitUsage;
  if (!ResolveStoreTls(o)) return ParseOutcome::kExitUsage;
  if (o->hot_memory != 0 && o->binlog_dir.empty()) {
    // The disk tier keeps jobs in the binlog's records: without one there is no disk.
    fprintf(stderr, "stalkd: --hot-memory needs -b DIR (jobs beyond it live in the binlog)\n");
    return ParseOutcome::kExitUsage;
  }
  return ParseOutcome::kRun;
}

}  // namespace stalkd::server
