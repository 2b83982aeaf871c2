// stalkd_loadgen — a single-threaded epoll load generator for beanstalkd-protocol servers.
//
// Usage: stalkd_loadgen --scenario NAME [--host 127.0.0.1] [--port 11300] [--pid SERVER_PID] ...
// Prints exactly one JSON object on stdout (or {"error": "..."} and exit status 2).
//
// The generator is deliberately one thread: it shares a 2-core machine with the server under
// test, so it should take at most one core. Every scenario is bounded in time (--timeout).
// When --pid is given, the server's CPU time (utime+stime from /proc/PID/stat) and VmRSS are
// sampled by the generator itself around the measured window, so warm-up and connection set-up
// are excluded from "server CPU per op".
//
// Scenarios (see bench/README.md for what each measures):
//   cycle      C connections each looping put -> reserve -> delete
//   pipeline   C connections each writing K commands before reading the K replies
//              (both: --tubes "a,b|c,d|...": tube sets; connection i takes set i mod S,
//              watches every tube of it (not default) and uses its tube (i / S) mod k)
//   fill       N puts (pipelined, sliding window), no consumer
//   drain      reserve-with-timeout 0 + delete until the ready queue is empty
//   prodcons   P producers and Q consumers on one tube; end-to-end latency via a body timestamp
//   tubes      for each level L: grow to L tubes each holding a ready and a delayed job, then cycle
//   conns      throughput of a few active connections without / with N idle connections
//   delayed    N delayed jobs falling due spread over W s; consumers with many reserves pipelined;
//              lateness per job against its deadline + latency of a stats probe; with
//              --consumed-every M, 1 job in M goes to tube "consumed", which the consumers
//              watch, and the rest to tube "bulk", which nobody consumes
//   mass       kick of N buried jobs, then close of a connection holding N reserved jobs,
//              while a probe connection measures the latency of stats
//   grow       N puts (pipelined, no deletes) into an ever larger server: put latency per
//              segment of N/--segments puts, while a probe connection sends stats every 1 ms
//   expire     N jobs put with a TTL (put-ext ... ttl=T) so that they all fall due within one
//              second; a probe connection's stats latency while the server expires them
//   purge      N jobs put, then "purge <tube> ready"; the probe's stats latency meanwhile
//              (both: --mode delete instead deletes the N jobs by id from one pipelining
//              connection, for servers without TTLs or purge, such as beanstalkd)
//
// HTTP (stalkd's lmstfy API, docs/HTTP.md; --port is then the --http port, --token a token of
// --ns, and --text-port the text port where a scenario also needs `stats`):
//   http-cycle C keep-alive connections each looping publish -> consume -> ack
//   longpoll   C consumers waiting in a long poll (--proto http: GET ?timeout=T; text:
//              reserve-with-timeout T); server CPU while all wait, then N publishes one at a
//              time, each timed until a waiting consumer has the job
//   idle       C connections that each made one request (http: a consume answered 404; text:
//              list-tube-used) and then stay open: RSS per connection, server CPU while idle
//
// --tls: every connection speaks TLS (bench/loadgen_tls.h; the handshake is done during the
// warm-up); --ca FILE checks the server's certificate against FILE and --host, without it the
// certificate is not checked. Not with the kernel receive stamps of the probe connections.

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "loadgen_tls.h"

namespace {

using u64 = std::uint64_t;
using sv = std::string_view;
constexpr u64 kNs = 1'000'000'000ULL;
constexpr u64 kMs = 1'000'000ULL;

u64 now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<u64>(ts.tv_sec) * kNs + static_cast<u64>(ts.tv_nsec);
}

// CLOCK_REALTIME - CLOCK_MONOTONIC, to put the kernel's receive stamps (realtime) on now_ns()'s
// clock. Sampled once: over one run the two clocks drift apart by microseconds at most.
std::int64_t realtime_offset_ns() {
  static const std::int64_t off = [] {
    timespec r{}, m{};
    clock_gettime(CLOCK_REALTIME, &r);
    clock_gettime(CLOCK_MONOTONIC, &m);
    return (static_cast<std::int64_t>(r.tv_sec) - m.tv_sec) * static_cast<std::int64_t>(kNs) +
           (r.tv_nsec - m.tv_nsec);
  }();
  return off;
}

u64 secs_to_ns(double s) { return static_cast<u64>(s * 1e9); }

// Server CPU per op; null (NaN) when fewer than 3 clock ticks were measured (too coarse).
double cpu_us_per(double cpu_s, u64 n) {
  if (!(cpu_s >= 0.03) || n == 0) return std::nan("");
  return cpu_s * 1e6 / static_cast<double>(n);
}

// ---------------------------------------------------------------------------------------------
// JSON output

std::string json_escape(sv s) {
  std::string o;
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      o += '\\';
      o += ch;
    } else if (c < 0x20 || c >= 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else {
      o += ch;
    }
  }
  return o;
}

class Json {
 public:
  Json() : s_("{"), first_{true} {}
  Json& open(sv k) {
    key(k);
    s_ += '{';
    first_.push_back(true);
    return *this;
  }
  Json& close() {
    s_ += '}';
    first_.pop_back();
    return *this;
  }
  Json& num(sv k, double v) {
    key(k);
    if (!std::isfinite(v)) {
      s_ += "null";
    } else {
      char b[64];
      std::snprintf(b, sizeof b, "%.9g", v);
      s_ += b;
    }
    return *this;
  }
  Json& integer(sv k, long long v) {
    key(k);
    s_ += std::to_string(v);
    return *this;
  }
  Json& str(sv k, sv v) {
    key(k);
    s_ += '"';
    s_ += json_escape(v);
    s_ += '"';
    return *this;
  }
  Json& boolean(sv k, bool v) {
    key(k);
    s_ += v ? "true" : "false";
    return *this;
  }
  // v must already be valid JSON (used for small arrays of objects).
  Json& raw(sv k, sv v) {
    key(k);
    s_ += v;
    return *this;
  }
  std::string finish() {
    while (!first_.empty()) close();
    return s_;
  }

 private:
  void key(sv k) {
    if (!first_.back()) s_ += ',';
    first_.back() = false;
    s_ += '"';
    s_ += json_escape(k);
    s_ += "\":";
  }
  std::string s_;
  std::vector<bool> first_;
};

[[noreturn]] void die(const std::string& msg) {
  Json j;
  j.str("error", msg);
  std::string out = j.finish();
  std::fprintf(stdout, "%s\n", out.c_str());
  std::fflush(stdout);
  std::fprintf(stderr, "stalkd_loadgen: %s\n", msg.c_str());
  std::_Exit(2);
}

std::string errno_str(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// ---------------------------------------------------------------------------------------------
// Log-linear latency histogram (64 sub-buckets per power of two: <= 1.6% relative error).

class Hist {
 public:
  Hist() : b_(kBuckets, 0) {}
  void add(u64 v) {
    ++b_[index(v)];
    ++n_;
    sum_ += static_cast<double>(v);
    mx_ = std::max(mx_, v);
    mn_ = std::min(mn_, v);
  }
  void reset() { *this = Hist(); }
  u64 count() const { return n_; }
  u64 max() const { return mx_; }
  u64 min() const { return n_ ? mn_ : 0; }
  double mean() const { return n_ ? sum_ / static_cast<double>(n_) : 0.0; }
  u64 percentile(double q) const {
    if (n_ == 0) return 0;
    auto target = static_cast<u64>(std::ceil(q * static_cast<double>(n_)));
    if (target == 0) target = 1;
    u64 cum = 0;
    for (std::size_t i = 0; i < b_.size(); ++i) {
      cum += b_[i];
      if (cum >= target) return std::min(upper(i), mx_);
    }
    return mx_;
  }

 private:
  static constexpr int kSub = 6;
  static constexpr std::size_t kBuckets = static_cast<std::size_t>(64 - kSub + 1) << kSub;
  static std::size_t index(u64 v) {
    if (v < (u64{1} << kSub)) return static_cast<std::size_t>(v);
    int e = static_cast<int>(std::bit_width(v)) - 1;
    return (static_cast<std::size_t>(e - kSub + 1) << kSub) +
           static_cast<std::size_t>((v >> (e - kSub)) - (u64{1} << kSub));
  }
  static u64 upper(std::size_t i) {
    if (i < (std::size_t{1} << kSub)) return i;
    std::size_t e = (i >> kSub) + kSub - 1;
    u64 m = (i & ((std::size_t{1} << kSub) - 1)) + (u64{1} << kSub);
    return ((m + 1) << (e - kSub)) - 1;
  }
  std::vector<u64> b_;
  u64 n_ = 0, mx_ = 0, mn_ = std::numeric_limits<u64>::max();
  double sum_ = 0;
};

void put_hist(Json& j, sv name, const Hist& h) {
  j.open(name);
  j.integer("n", static_cast<long long>(h.count()));
  j.num("p50_us", static_cast<double>(h.percentile(0.50)) / 1e3);
  j.num("p90_us", static_cast<double>(h.percentile(0.90)) / 1e3);
  j.num("p99_us", static_cast<double>(h.percentile(0.99)) / 1e3);
  j.num("p999_us", static_cast<double>(h.percentile(0.999)) / 1e3);
  j.num("max_us", static_cast<double>(h.max()) / 1e3);
  j.num("mean_us", h.mean() / 1e3);
  j.close();
}

// ---------------------------------------------------------------------------------------------
// /proc readers

double proc_cpu_s(int pid) {
  if (pid <= 0) return std::nan("");
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto p = s.rfind(')');
  if (p == std::string::npos) return std::nan("");
  std::istringstream in(s.substr(p + 2));
  std::string tok;
  double ut = 0, st = 0;
  for (int field = 3; in >> tok; ++field) {
    if (field == 14) ut = std::strtod(tok.c_str(), nullptr);
    if (field == 15) {
      st = std::strtod(tok.c_str(), nullptr);
      break;
    }
  }
  return (ut + st) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

long long rss_bytes(int pid) {
  if (pid <= 0) return -1;
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;
  }
  return -1;
}

double self_cpu_s() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto tv = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return tv(ru.ru_utime) + tv(ru.ru_stime);
}

// ---------------------------------------------------------------------------------------------
// Options

struct Opts {
  std::string host = "127.0.0.1";
  int port = 11300;
  int pid = 0;
  std::string scenario;
  int conns = -1;  // -1: scenario default
  double duration = 5;
  double warmup = 1;
  int size = 100;
  int depth = 100;
  u64 jobs = 0;  // 0: scenario default
  std::string tube;
  std::string tubes;  // cycle, pipeline: tube sets "a,b|c,d" (see tube_sets)
  std::string mode = "pdr";
  int producers = 4;
  int consumers = 4;
  double rate = 0;
  u64 window = 1000;
  std::string levels = "1,1000,10000";
  double level_budget = 120;  // max seconds of set-up per tubes level
  u64 idle = 10000;
  double delay = 0;    // delayed: 0 = ceil(--spread) + 3 s, so the puts end before the first deadline
  double spread = 0;   // delayed: seconds over which the puts (and so the deadlines) are spread
  u64 reserves = 256;  // delayed: reserve commands outstanding per consumer connection
  u64 consumed_every = 0;  // delayed: 0 = every job consumed; M = 1 in M, the rest in "bulk"
  double timeout = 120;
  int ttr = 120;
  double probe_ms = 1;
  double stall = 10;  // die when no reply arrives for this long while commands are pending
  u64 segments = 10;  // grow: latency is reported per segment of jobs / segments puts
  // HTTP
  std::string proto = "http";  // longpoll, idle: http or text
  std::string token;           // X-Token for /api requests
  std::string ns = "bench";    // lmstfy namespace
  std::string queue = "q";     // lmstfy queue (the tube is ns/queue)
  int text_port = 0;           // the server's text port, for stats (longpoll); 0: --port
  double idle_s = 3;           // longpoll, idle: seconds of the idle window
  double gap_ms = 2;           // longpoll: pause between one publish's end and the next
  int lp_timeout = 30;         // longpoll: the consumers' wait in seconds
  int also_pid = 0;            // a second process of the server (a TLS proxy): its CPU added to
                               // --pid's in the measured window of run_window's scenarios
  bool tls = false;            // every connection over TLS
  std::string ca;              // with tls: the CA file to check the server's certificate with
};

int conns_or(const Opts& o, int dflt) { return o.conns > 0 ? o.conns : dflt; }
u64 jobs_or(const Opts& o, u64 dflt) { return o.jobs > 0 ? o.jobs : dflt; }

Opts parse_opts(int argc, char** argv) {
  Opts o;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (k == "-h" || k == "--help") {
      std::fprintf(stderr,
                   "usage: stalkd_loadgen --scenario "
                   "cycle|pipeline|fill|drain|prodcons|tubes|conns|delayed|mass|grow|expire|purge|\n"
                   "  http-cycle|longpoll|idle\n"
                   "  [--host H] [--port P] [--pid SERVER_PID] [--conns C] [--duration S]\n"
                   "  [--warmup S] [--size BYTES] [--depth K] [--jobs N] [--tube NAME] [--tubes A,B|C,D]\n"
                   "  [--mode pdr|put (pipeline), ttl|delete (expire), purge|delete (purge)] [--producers P] [--consumers Q] [--rate JOBS_PER_S]\n"
                   "  [--window N] [--levels 1,1000,...] [--level-budget S] [--idle N]\n"
                   "  [--delay S] [--spread S] [--reserves K] [--consumed-every M] [--ttr S]\n"
                   "  [--probe-ms MS]\n"
                   "  [--timeout S] [--stall S]\n"
                   "  [--segments N]\n"
                   "  [--proto http|text] [--token T] [--ns NS] [--queue Q] [--text-port P]\n"
                   "  [--idle-s S] [--gap-ms MS] [--lp-timeout S]\n"
                   "  [--tls [--ca FILE]] [--also-pid PID]\n");
      std::exit(0);
    }
    if (k == "--tls") {
      o.tls = true;
      continue;
    }
    if (i + 1 >= argc) die("missing value for " + k);
    std::string v = argv[++i];
    auto d = [&] { return std::strtod(v.c_str(), nullptr); };
    auto n = [&] { return std::strtoull(v.c_str(), nullptr, 10); };
    if (k == "--host") o.host = v;
    else if (k == "--port") o.port = static_cast<int>(n());
    else if (k == "--pid") o.pid = static_cast<int>(n());
    else if (k == "--also-pid") o.also_pid = static_cast<int>(n());
    else if (k == "--scenario") o.scenario = v;
    else if (k == "--conns") o.conns = static_cast<int>(n());
    else if (k == "--duration") o.duration = d();
    else if (k == "--warmup") o.warmup = d();
    else if (k == "--size") o.size = static_cast<int>(n());
    else if (k == "--depth") o.depth = static_cast<int>(n());
    else if (k == "--jobs") o.jobs = n();
    else if (k == "--tube") o.tube = v;
    else if (k == "--tubes") o.tubes = v;
    else if (k == "--mode") o.mode = v;
    else if (k == "--producers") o.producers = static_cast<int>(n());
    else if (k == "--consumers") o.consumers = static_cast<int>(n());
    else if (k == "--rate") o.rate = d();
    else if (k == "--window") o.window = n();
    else if (k == "--levels") o.levels = v;
    else if (k == "--level-budget") o.level_budget = d();
    else if (k == "--idle") o.idle = n();
    else if (k == "--delay") o.delay = d();
    else if (k == "--spread") o.spread = d();
    else if (k == "--reserves") o.reserves = n();
    else if (k == "--consumed-every") o.consumed_every = n();
    else if (k == "--timeout") o.timeout = d();
    else if (k == "--ttr") o.ttr = static_cast<int>(n());
    else if (k == "--probe-ms") o.probe_ms = d();
    else if (k == "--stall") o.stall = d();
    else if (k == "--segments") o.segments = n();
    else if (k == "--proto") o.proto = v;
    else if (k == "--token") o.token = v;
    else if (k == "--ns") o.ns = v;
    else if (k == "--queue") o.queue = v;
    else if (k == "--text-port") o.text_port = static_cast<int>(n());
    else if (k == "--idle-s") o.idle_s = d();
    else if (k == "--gap-ms") o.gap_ms = d();
    else if (k == "--lp-timeout") o.lp_timeout = static_cast<int>(n());
    else if (k == "--ca") o.ca = v;
    else die("unknown option " + k);
  }
  if (o.size < 24) o.size = 24;  // room for a timestamp in prodcons / delayed bodies
  if (o.depth < 1) o.depth = 1;
  if (!o.ca.empty() && !o.tls) die("--ca needs --tls");
  return o;
}

// ---------------------------------------------------------------------------------------------
// Connections and the event loop

enum class Cmd : std::uint8_t { Put, Reserve, Delete, Bury, Kick, Stats, Other };
constexpr std::size_t kCmds = 7;
constexpr std::array<const char*, kCmds> kCmdNames = {"put", "reserve", "delete", "bury",
                                                      "kick", "stats", "other"};

struct Pending {
  u64 t;
  Cmd cmd;
};

struct Conn;

class Handler {
 public:
  virtual ~Handler() = default;
  // line: the reply line without CRLF; body: the data block of RESERVED/FOUND/OK replies.
  // On an HTTP connection: line is the status line, body the response body.
  // Both views are valid only during the call.
  virtual void on_reply(Conn& c, Cmd cmd, u64 t_sent, u64 t_now, sv line, sv body) = 0;
};

struct Conn {
  int fd = -1;
  void* ssl = nullptr;  // with --tls: the connection's TLS session (loadgen_tls::Client)
  std::size_t slot = 0;
  Handler* h = nullptr;
  std::string out;
  std::size_t out_off = 0;
  std::string in;
  std::size_t in_off = 0;
  std::deque<Pending> pend;
  bool want_out = true;  // registered with EPOLLOUT (connect in progress)
  bool dirty = false;
  bool closed = false;
  bool http = false;  // replies are HTTP/1.1 responses (status line, headers, body)
  // scratch state for scenarios
  int role = 0;
  int phase = 0;
  u64 a = 0, b = 0, c = 0;
  std::vector<u64> ids;
  // With Loop::connect(h, true): when the kernel queued the bytes of the last recv (the
  // server's send, on loopback), on now_ns()'s clock; 0 if unknown. A reply spanning two
  // recvs gets the later one, so it never understates when the reply was sent.
  bool rx_stamps = false;
  u64 rx_ns = 0;
  u64 tx_ns = 0;  // with rx_stamps: when the last send() of this connection's output returned
};

class FnHandler : public Handler {
 public:
  using Fn = std::function<void(Conn&, Cmd, u64, u64, sv, sv)>;
  explicit FnHandler(Fn f) : f_(std::move(f)) {}
  void on_reply(Conn& c, Cmd cmd, u64 ts, u64 tn, sv line, sv body) override { f_(c, cmd, ts, tn, line, body); }

 private:
  Fn f_;
};

bool starts(sv s, sv p) { return s.substr(0, p.size()) == p; }

sv word(sv line, int idx) {
  std::size_t pos = 0;
  for (int i = 0; i < idx; ++i) {
    pos = line.find(' ', pos);
    if (pos == sv::npos) return {};
    ++pos;
  }
  std::size_t end = line.find(' ', pos);
  return line.substr(pos, end == sv::npos ? sv::npos : end - pos);
}

bool parse_u64(sv s, u64& v) {
  if (s.empty()) return false;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

bool has_body(sv line) { return starts(line, "RESERVED ") || starts(line, "FOUND ") || starts(line, "OK "); }

class Loop {
 public:
  explicit Loop(const Opts& o) : rbuf_(256 * 1024), stall_ns_(secs_to_ns(o.stall)) {
    ep_ = epoll_create1(EPOLL_CLOEXEC);
    if (ep_ < 0) die(errno_str("epoll_create1"));
    addr_.sin_family = AF_INET;
    addr_.sin_port = htons(static_cast<std::uint16_t>(o.port));
    if (inet_pton(AF_INET, o.host.c_str(), &addr_.sin_addr) != 1) die("bad --host (IPv4 only): " + o.host);
    if (o.tls) tls_ = std::make_unique<loadgen_tls::Client>(o.ca, o.host, die);
  }
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;
  ~Loop() {
    for (auto& c : conns_)
      if (!c->closed) {
        if (c->ssl) loadgen_tls::Client::detach(c->ssl);
        ::close(c->fd);
      }
    ::close(ep_);
  }

  // http: the connection speaks HTTP/1.1 (see parse_http); port: another port of the same
  // host than --port (0: --port).
  Conn& connect(Handler* h, bool rx_stamps = false, bool http = false, int port = 0) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) die(errno_str("socket"));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (rx_stamps && setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) < 0)
      die(errno_str("SO_TIMESTAMPNS"));
    sockaddr_in to = addr_;
    if (port > 0) to.sin_port = htons(static_cast<std::uint16_t>(port));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) < 0 && errno != EINPROGRESS)
      die(errno_str("connect"));
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->slot = conns_.size();
    c->h = h;
    c->rx_stamps = rx_stamps;
    c->http = http;
    if (tls_) {
      if (rx_stamps) die("--tls does not work with this scenario's receive stamps");
      c->ssl = tls_->attach(fd);
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT;
    ev.data.u64 = c->slot;
    if (epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev) < 0) die(errno_str("epoll_ctl add"));
    conns_.push_back(std::move(c));
    ++open_;
    return *conns_.back();
  }

  void send(Conn& c, Cmd cmd, sv text, u64 t = 0) {
    c.out.append(text);
    c.pend.push_back({t ? t : now_ns(), cmd});
    if (pending_++ == 0) last_reply_ = now_ns();
    if (!c.dirty) {
      c.dirty = true;
      dirty_.push_back(&c);
    }
  }

  void close(Conn& c) {
    if (c.closed) return;
    epoll_ctl(ep_, EPOLL_CTL_DEL, c.fd, nullptr);
    if (c.ssl) loadgen_tls::Client::detach(c.ssl);
    c.ssl = nullptr;
    ::close(c.fd);
    c.closed = true;
    c.fd = -1;
    pending_ -= c.pend.size();
    c.pend.clear();
    std::string().swap(c.out);
    std::string().swap(c.in);
    --open_;
  }

  std::size_t open_count() const { return open_; }

  // With --tls: the protocol and cipher of the first open connection ("" without TLS).
  std::string tls_session() const {
    for (const auto& c : conns_)
      if (!c->closed && c->ssl) return loadgen_tls::Client::describe(c->ssl);
    return "";
  }

  // Runs the loop until done() is true (returns true) or the deadline passes (returns false).
  // tick(now) is called every iteration (at least every millisecond) when given.
  bool run_until(const std::function<bool()>& done, u64 deadline,
                 const std::function<void(u64)>& tick = nullptr) {
    std::array<epoll_event, 512> evs{};
    for (;;) {
      if (done()) return true;
      u64 t = now_ns();
      if (t >= deadline) return false;
      if (pending_ > 0 && t - last_reply_ > stall_ns_) stalled(t);
      if (tick) tick(t);
      flush_dirty();
      int timeout_ms = tick ? 1 : static_cast<int>(std::min<u64>(50, (deadline - t) / kMs + 1));
      int n = epoll_wait(ep_, evs.data(), static_cast<int>(evs.size()), timeout_ms);
      if (n < 0) {
        if (errno == EINTR) continue;
        die(errno_str("epoll_wait"));
      }
      for (int i = 0; i < n; ++i) {
        Conn& c = *conns_[evs[static_cast<std::size_t>(i)].data.u64];
        if (c.closed) continue;
        std::uint32_t e = evs[static_cast<std::size_t>(i)].events;
        if (e & (EPOLLIN | EPOLLERR | EPOLLHUP)) readable(c);
        if (!c.closed && (e & EPOLLOUT)) flush(c);
      }
      flush_dirty();
    }
  }

  // Runs for a fixed time (the loop keeps serving replies).
  void run_for(double seconds, const std::function<void(u64)>& tick = nullptr) {
    u64 end = now_ns() + secs_to_ns(seconds);
    run_until([&] { return now_ns() >= end; }, end + kNs, tick);
  }

 private:
  [[noreturn]] void stalled(u64 t) {
    std::size_t waiting = 0;
    std::string oldest;
    u64 oldest_t = t;
    for (auto& c : conns_) {
      if (c->closed || c->pend.empty()) continue;
      ++waiting;
      if (c->pend.front().t < oldest_t) {
        oldest_t = c->pend.front().t;
        oldest = kCmdNames[static_cast<std::size_t>(c->pend.front().cmd)];
      }
    }
    die("server stalled: no reply for " + std::to_string((t - last_reply_) / kMs) + " ms with " +
        std::to_string(pending_) + " commands pending on " + std::to_string(waiting) +
        " connections (oldest: " + oldest + ", " + std::to_string((t - oldest_t) / kMs) + " ms)");
  }

  void flush_dirty() {
    for (std::size_t i = 0; i < dirty_.size(); ++i) {
      Conn* c = dirty_[i];
      c->dirty = false;
      if (!c->closed) flush(*c);
    }
    dirty_.clear();
  }

  void set_out(Conn& c, bool want) {
    if (c.want_out == want) return;
    c.want_out = want;
    epoll_event ev{};
    ev.events = EPOLLIN | (want ? EPOLLOUT : 0u);
    ev.data.u64 = c.slot;
    if (epoll_ctl(ep_, EPOLL_CTL_MOD, c.fd, &ev) < 0) die(errno_str("epoll_ctl mod"));
  }

  void flush(Conn& c) {
    if (c.ssl) {
      flush_tls(c);
      return;
    }
    while (c.out_off < c.out.size()) {
      ssize_t w = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
      if (w > 0) {
        c.out_off += static_cast<std::size_t>(w);
        continue;
      }
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        set_out(c, true);
        return;
      }
      die(errno_str("send to server"));
    }
    if (c.rx_stamps) c.tx_ns = now_ns();
    c.out.clear();
    c.out_off = 0;
    set_out(c, false);
  }

  // flush() over TLS. A write the session cannot make until it has read (the handshake) is
  // made again by readable_tls() once it has.
  void flush_tls(Conn& c) {
    loadgen_tls::Io io = loadgen_tls::Io::Ok;
    while (c.out_off < c.out.size()) {
      std::size_t w = loadgen_tls::Client::write(c.ssl, c.out.data() + c.out_off, c.out.size() - c.out_off, io);
      if (io != loadgen_tls::Io::Ok) break;
      c.out_off += w;
    }
    if (io == loadgen_tls::Io::Eof) die("server closed a TLS connection");
    if (c.out_off < c.out.size()) {
      set_out(c, io == loadgen_tls::Io::WantWrite);
      return;
    }
    c.out.clear();
    c.out_off = 0;
    set_out(c, false);
  }

  // readable() over TLS: reads until the session has nothing more (records already in its
  // buffer make no epoll event), then writes what waited for the handshake.
  void readable_tls(Conn& c) {
    for (;;) {
      loadgen_tls::Io io = loadgen_tls::Io::Ok;
      std::size_t r = loadgen_tls::Client::read(c.ssl, rbuf_.data(), rbuf_.size(), io);
      if (io == loadgen_tls::Io::Ok) {
        c.in.append(rbuf_.data(), r);
        parse(c);
        if (c.closed) return;
        continue;
      }
      if (io == loadgen_tls::Io::Eof)
        die("server closed a connection (" + std::to_string(c.pend.size()) + " replies pending)");
      if (io == loadgen_tls::Io::WantWrite) set_out(c, true);
      break;
    }
    if (c.out_off < c.out.size()) flush_tls(c);
  }

  void readable(Conn& c) {
    if (c.ssl) {
      readable_tls(c);
      return;
    }
    for (;;) {
      ssize_t r = c.rx_stamps ? recv_stamped(c) : ::recv(c.fd, rbuf_.data(), rbuf_.size(), 0);
      if (r > 0) {
        c.in.append(rbuf_.data(), static_cast<std::size_t>(r));
        parse(c);
        if (c.closed || static_cast<std::size_t>(r) < rbuf_.size()) return;
        continue;
      }
      if (r == 0) die("server closed a connection (" + std::to_string(c.pend.size()) + " replies pending)");
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      die(errno_str("recv from server"));
    }
  }

  ssize_t recv_stamped(Conn& c) {
    iovec iov{rbuf_.data(), rbuf_.size()};
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(timespec))];
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
    ssize_t r = ::recvmsg(c.fd, &m, 0);
    if (r <= 0) return r;
    c.rx_ns = 0;
    for (cmsghdr* h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h)) {
      if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_TIMESTAMPNS) continue;
      timespec ts{};
      std::memcpy(&ts, CMSG_DATA(h), sizeof ts);
      std::int64_t real =
          static_cast<std::int64_t>(ts.tv_sec) * static_cast<std::int64_t>(kNs) + ts.tv_nsec;
      if (real > realtime_offset_ns()) c.rx_ns = static_cast<u64>(real - realtime_offset_ns());
    }
    return r;
  }

  // One beanstalkd reply at the start of avail: false if it is not complete yet.
  static bool frame_text(sv avail, sv& line, sv& body, std::size_t& total) {
    std::size_t eol = avail.find("\r\n");
    if (eol == sv::npos) {
      if (avail.size() > 4096) die("reply line too long");
      return false;
    }
    line = avail.substr(0, eol);
    body = {};
    total = eol + 2;
    if (has_body(line)) {
      sv last = line.substr(line.rfind(' ') + 1);
      u64 n = 0;
      if (!parse_u64(last, n)) die("bad reply: " + std::string(line));
      if (avail.size() < eol + 2 + n + 2) return false;
      body = avail.substr(eol + 2, n);
      total = eol + 2 + n + 2;
    }
    return true;
  }

  // One HTTP/1.1 response at the start of avail, parsed as little as a client can: the
  // status line, Content-Length (no chunked bodies: stalkd sends none), the body. false if
  // it is not complete yet. 1xx responses are framed like any other (the caller skips them).
  static bool frame_http(sv avail, sv& line, sv& body, std::size_t& total) {
    std::size_t eoh = avail.find("\r\n\r\n");
    if (eoh == sv::npos) {
      if (avail.size() > 16384) die("response head too long");
      return false;
    }
    sv head = avail.substr(0, eoh);
    std::size_t eol = head.find("\r\n");
    line = head.substr(0, eol);
    if (line.size() < 12 || !starts(line, "HTTP/1.")) die("bad response: " + std::string(line.substr(0, 200)));
    u64 len = 0;
    for (std::size_t pos = eol; pos != sv::npos && pos < head.size();) {
      pos += 2;
      std::size_t end = head.find("\r\n", pos);
      sv h = head.substr(pos, end == sv::npos ? sv::npos : end - pos);
      constexpr sv kLen = "content-length:";
      if (h.size() > kLen.size() && (h[0] == 'C' || h[0] == 'c')) {
        bool match = true;
        for (std::size_t i = 0; i < kLen.size() && match; ++i)
          match = (h[i] | 0x20) == kLen[i];
        if (match) {
          sv v = h.substr(kLen.size());
          while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
          while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
          if (!parse_u64(v, len)) die("bad Content-Length: " + std::string(h));
        }
      }
      pos = end;
    }
    if (avail.size() < eoh + 4 + len) return false;
    body = avail.substr(eoh + 4, len);
    total = eoh + 4 + len;
    return true;
  }

  void parse(Conn& c) {
    while (!c.closed) {
      sv avail(c.in.data() + c.in_off, c.in.size() - c.in_off);
      sv line, body;
      std::size_t total = 0;
      if (!(c.http ? frame_http(avail, line, body, total) : frame_text(avail, line, body, total))) break;
      if (c.http && line[9] == '1') {  // 100 Continue: not the response to the request
        c.in_off += total;
        continue;
      }
      if (c.pend.empty()) die("unexpected reply: " + std::string(line));
      Pending p = c.pend.front();
      c.pend.pop_front();
      --pending_;
      last_reply_ = now_ns();
      c.in_off += total;
      c.h->on_reply(c, p.cmd, p.t, now_ns(), line, body);
    }
    if (c.closed) return;
    if (c.in_off == c.in.size()) {
      c.in.clear();
      c.in_off = 0;
    } else if (c.in_off > 65536) {
      c.in.erase(0, c.in_off);
      c.in_off = 0;
    }
  }

  int ep_ = -1;
  std::unique_ptr<loadgen_tls::Client> tls_;  // with --tls
  sockaddr_in addr_{};
  std::vector<std::unique_ptr<Conn>> conns_;
  std::vector<Conn*> dirty_;
  std::size_t open_ = 0;
  std::vector<char> rbuf_;
  u64 stall_ns_;
  u64 pending_ = 0;
  u64 last_reply_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Helpers shared by scenarios

std::string make_put(int pri, u64 delay, int ttr, std::size_t size, char fill = 'x') {
  std::string s = "put " + std::to_string(pri) + " " + std::to_string(delay) + " " + std::to_string(ttr) + " " +
                  std::to_string(size) + "\r\n";
  s.append(size, fill);
  s += "\r\n";
  return s;
}

void send_id(Loop& L, Conn& c, Cmd cmd, sv verb, u64 id, sv suffix = {}) {
  char buf[128];
  std::size_t n = verb.size();
  std::memcpy(buf, verb.data(), n);
  buf[n++] = ' ';
  auto r = std::to_chars(buf + n, buf + sizeof buf, id);
  n = static_cast<std::size_t>(r.ptr - buf);
  if (!suffix.empty()) std::memcpy(buf + n, suffix.data(), suffix.size());  // data() may be null
  n += suffix.size();
  buf[n++] = '\r';
  buf[n++] = '\n';
  L.send(c, cmd, sv(buf, n));
}

// --tubes "a,b|c,d|...": sets of tubes ('|' and ',' are not in beanstalk names). Connection i
// (in the order connected) takes set i mod S: it watches every tube of the set, ignores
// default, and uses the set's tube (i / S) mod k, so that with sets of one tube the
// connections spread evenly over the tubes, and with sets of k a reserve covers k tubes.
using TubeSets = std::vector<std::vector<std::string>>;

TubeSets tube_sets(const std::string& spec) {
  TubeSets out;
  std::stringstream ss(spec);
  std::string set, tube;
  while (std::getline(ss, set, '|')) {
    std::stringstream ts(set);
    out.emplace_back();
    while (std::getline(ts, tube, ',')) if (!tube.empty()) out.back().push_back(tube);
    if (out.back().empty()) die("--tubes: an empty set in " + spec);
  }
  return out;
}

// Sends connection i's use / watch / ignore commands (Cmd::Other; replies USING, WATCHING).
void join_tube_set(Loop& L, Conn& c, const TubeSets& sets, std::size_t i) {
  const auto& set = sets[i % sets.size()];
  L.send(c, Cmd::Other, "use " + set[(i / sets.size()) % set.size()] + "\r\n");
  for (const auto& t : set) L.send(c, Cmd::Other, "watch " + t + "\r\n");
  L.send(c, Cmd::Other, "ignore default\r\n");
}

// Fixed-width decimal timestamp written into a body.
void write_stamp(char* dst, u64 v) {
  for (int i = 19; i >= 0; --i) {
    dst[i] = static_cast<char>('0' + v % 10);
    v /= 10;
  }
}

u64 read_stamp(sv body) {
  u64 v = 0;
  if (body.size() < 20 || !parse_u64(body.substr(0, 20), v)) return 0;
  return v;
}

struct Errors {
  u64 n = 0;
  std::string first;
  void add(sv line) {
    if (n++ == 0) first = std::string(line.substr(0, 200));
  }
  void put(Json& j) const {
    j.integer("errors", static_cast<long long>(n));
    if (n) j.str("first_error", first);
  }
};

struct Meter {
  double wall = 0, srv_cpu = 0, self_cpu = 0;
};

// Runs warmup seconds, then calls measuring(true), runs duration seconds and calls
// measuring(false). Server and own CPU are sampled around the measured window only.
Meter run_window(Loop& L, const Opts& o, double warmup, double duration, const std::function<void(bool)>& measuring,
                 const std::function<void(u64)>& tick = nullptr) {
  u64 t = now_ns();
  u64 wend = t + secs_to_ns(warmup);
  if (!L.run_until([&] { return now_ns() >= wend; }, wend + secs_to_ns(o.timeout), tick)) die("timeout in warm-up");
  measuring(true);
  auto srv_cpu = [&] { return proc_cpu_s(o.pid) + (o.also_pid > 0 ? proc_cpu_s(o.also_pid) : 0.0); };
  double c0 = srv_cpu(), s0 = self_cpu_s();
  u64 t0 = now_ns();
  u64 mend = t0 + secs_to_ns(duration);
  L.run_until([&] { return now_ns() >= mend; }, mend + secs_to_ns(o.timeout), tick);
  u64 t1 = now_ns();
  double c1 = srv_cpu(), s1 = self_cpu_s();
  measuring(false);
  return {static_cast<double>(t1 - t0) / 1e9, c1 - c0, s1 - s0};
}

void put_meter(Json& j, const Meter& m, u64 ops) {
  j.num("wall_s", m.wall);
  j.integer("ops", static_cast<long long>(ops));
  j.num("ops_per_s", static_cast<double>(ops) / m.wall);
  j.num("server_cpu_s", m.srv_cpu);
  j.num("server_cpu_util", m.srv_cpu / m.wall);
  j.num("server_cpu_us_per_op", cpu_us_per(m.srv_cpu, ops));
  j.num("loadgen_cpu_util", m.self_cpu / m.wall);
}

// A stats probe: one connection sending "stats" every probe_ms (closed loop) and recording
// each sample; windows are evaluated afterwards.
class Probe : public Handler {
 public:
  struct Sample {
    u64 sent, recv;
    long long field;
    u64 tx, rx;  // the request's send() and the reply's kernel receive stamp (0: unknown)
  };
  Probe(Loop& L, double interval_ms) : L_(L), interval_(static_cast<u64>(interval_ms * 1e6)) {}
  void start(int port = 0) { c_ = &L_.connect(this, true, false, port); }
  void tick(u64 t) {
    if (c_ && !inflight_ && t >= next_) {
      L_.send(*c_, Cmd::Stats, command, t);
      inflight_ = true;
    }
  }
  void on_reply(Conn& c, Cmd, u64 ts, u64 tn, sv line, sv body) override {
    inflight_ = false;
    next_ = tn + interval_;
    long long fv = -1;
    if (!starts(line, "OK ")) errors.add(line);
    if (!field.empty()) {
      std::string key = "\n" + field + ": ";
      auto p = body.find(key);
      if (p != sv::npos) fv = std::atoll(std::string(body.substr(p + key.size(), 24)).c_str());
    }
    samples.push_back({ts, tn, fv, c.tx_ns, c.rx_ns});
    last_body.assign(body);
  }
  // Histogram of probe latencies whose [sent, recv] overlaps [a, b]. kernel: from the
  // request's send() returning to the reply reaching this socket (the kernel's stamp), so
  // without this thread's own delays in sending the request or reading the reply.
  Hist window(u64 a, u64 b, bool kernel = false) const {
    Hist h;
    for (const auto& s : samples) {
      if (s.recv < a || s.sent > b) continue;
      if (!kernel) h.add(s.recv - s.sent);
      else if (s.tx && s.rx) h.add(s.rx > s.tx ? s.rx - s.tx : 0);
    }
    return h;
  }
  std::string command = "stats\r\n";  // stats-ext: with stalkd's own keys (total-expired-jobs)
  std::string field;  // a stats field to extract from each reply (e.g. current-jobs-reserved)
  std::vector<Sample> samples;
  std::string last_body;  // the latest reply's body
  Errors errors;

 private:
  Loop& L_;
  u64 interval_;
  Conn* c_ = nullptr;
  bool inflight_ = false;
  u64 next_ = 0;
};

// put -> reserve -> delete loop on every connection.
class Cycle : public Handler {
 public:
  Cycle(Loop& L, const Opts& o, std::string tube)
      : L_(L), put_(make_put(1024, 0, o.ttr, static_cast<std::size_t>(o.size))), tube_(std::move(tube)) {}
  void start(Conn& c) {
    if (!sets.empty()) {
      join_tube_set(L_, c, sets, started_++);
    } else if (!tube_.empty()) {
      L_.send(c, Cmd::Other, "use " + tube_ + "\r\n");
      L_.send(c, Cmd::Other, "watch " + tube_ + "\r\n");
      L_.send(c, Cmd::Other, "ignore default\r\n");
    }
    L_.send(c, Cmd::Put, put_);
  }
  void on_reply(Conn& c, Cmd cmd, u64 ts, u64 tn, sv line, sv) override {
    if (measuring && cmd != Cmd::Other) {
      lat[static_cast<std::size_t>(cmd)].add(tn - ts);
      ++ops;
    }
    switch (cmd) {
      case Cmd::Put:
        if (!starts(line, "INSERTED ")) {
          err.add(line);
          L_.send(c, Cmd::Put, put_);
          return;
        }
        L_.send(c, Cmd::Reserve, "reserve\r\n");
        return;
      case Cmd::Reserve: {
        u64 id = 0;
        if (!starts(line, "RESERVED ") || !parse_u64(word(line, 1), id)) {
          err.add(line);
          L_.send(c, Cmd::Reserve, "reserve\r\n");
          return;
        }
        send_id(L_, c, Cmd::Delete, "delete", id);
        return;
      }
      case Cmd::Delete:
        if (line != "DELETED") err.add(line);
        if (measuring) ++cycles;
        L_.send(c, Cmd::Put, put_);
        return;
      default:
        if (!starts(line, "USING ") && !starts(line, "WATCHING ")) err.add(line);
        return;
    }
  }
  void reset() {
    for (auto& h : lat) h.reset();
    ops = cycles = 0;
  }
  void put_latency(Json& j) const {
    j.open("latency_us");
    for (std::size_t i = 0; i < 3; ++i) put_hist(j, kCmdNames[i], lat[i]);
    j.close();
  }
  bool measuring = false;
  std::array<Hist, kCmds> lat;
  u64 ops = 0, cycles = 0;
  Errors err;
  TubeSets sets;  // --tubes: taken over tube_ when not empty

 private:
  Loop& L_;
  std::string put_;
  std::string tube_;
  std::size_t started_ = 0;
};

// Sliding-window producer of `total` puts over several connections.
class PutWindow : public Handler {
 public:
  using Maker = std::function<sv()>;
  PutWindow(Loop& L, u64 total, int depth, Maker make) : L_(L), total_(total), depth_(depth), make_(std::move(make)) {}
  void start(Conn& c) {
    for (int i = 0; i < depth_ && sent_ < total_; ++i) next(c);
  }
  void on_reply(Conn& c, Cmd cmd, u64 ts, u64 tn, sv line, sv) override {
    if (cmd != Cmd::Put) {
      if (!starts(line, "USING ")) err.add(line);
      return;
    }
    if (starts(line, "INSERTED ")) ++ok;
    else {
      ++failed;
      err.add(line);
    }
    if (observe) observe(tn - ts);
    next(c);
  }
  bool done() const { return ok + failed >= total_; }
  u64 ok = 0, failed = 0;
  Errors err;
  std::function<void(u64)> observe;  // optional: called with each put's latency (ns), in reply order

 private:
  void next(Conn& c) {
    if (sent_ >= total_) return;
    ++sent_;
    L_.send(c, Cmd::Put, make_());
  }
  Loop& L_;
  u64 total_;
  u64 sent_ = 0;
  int depth_;
  Maker make_;
};

// ---------------------------------------------------------------------------------------------
// Scenarios

void scen_cycle(const Opts& o) {
  Loop L(o);
  Cycle h(L, o, o.tube);
  if (!o.tubes.empty()) h.sets = tube_sets(o.tubes);
  int C = conns_or(o, 50);
  for (int i = 0; i < C; ++i) h.start(L.connect(&h));
  Meter m = run_window(L, o, o.warmup, o.duration, [&](bool on) {
    if (on) h.reset();
    h.measuring = on;
  });
  Json j;
  j.str("scenario", "cycle").integer("conns", C).integer("size", o.size);
  if (!o.tubes.empty()) j.str("tubes", o.tubes);
  if (o.tls) j.str("tls", L.tls_session());
  put_meter(j, m, h.ops);
  j.num("cycles_per_s", static_cast<double>(h.cycles) / m.wall);
  h.err.put(j);
  h.put_latency(j);
  std::printf("%s\n", j.finish().c_str());
}

// Each connection writes K commands, then reads the K replies. Mode "pdr": a batch of K puts,
// then K reserves, then K deletes of the reserved ids; mode "put": batches of K puts only (the
// jobs accumulate in the server).
void scen_pipeline(const Opts& o) {
  Loop L(o);
  int C = conns_or(o, 4);
  int K = o.depth;
  bool put_only = o.mode == "put";
  if (!put_only && o.mode != "pdr") die("--mode must be pdr or put");
  std::string put = make_put(1024, 0, o.ttr, static_cast<std::size_t>(o.size));
  bool measuring = false;
  u64 ops = 0;
  Hist batch;
  Errors err;
  auto send_batch = [&](Conn& c) {
    c.a = 0;
    c.b = now_ns();
    if (c.phase == 0) {
      for (int i = 0; i < K; ++i) L.send(c, Cmd::Put, put, c.b);
      c.c = static_cast<u64>(K);
    } else if (c.phase == 1) {
      for (int i = 0; i < K; ++i) L.send(c, Cmd::Reserve, "reserve\r\n", c.b);
      c.c = static_cast<u64>(K);
    } else {
      for (u64 id : c.ids) send_id(L, c, Cmd::Delete, "delete", id);
      c.c = c.ids.size();
      c.ids.clear();
    }
  };
  std::function<void(Conn&)> next_batch = [&](Conn& c) {
    c.phase = put_only ? 0 : (c.phase + 1) % 3;
    send_batch(c);
    if (c.c == 0) next_batch(c);
  };
  TubeSets sets = tube_sets(o.tubes);
  FnHandler h([&](Conn& c, Cmd cmd, u64, u64 tn, sv line, sv) {
    if (cmd == Cmd::Other) {  // --tubes set-up, ahead of the first batch
      if (!starts(line, "USING ") && !starts(line, "WATCHING ")) err.add(line);
      return;
    }
    if (measuring) ++ops;
    if (cmd == Cmd::Put && !starts(line, "INSERTED ")) err.add(line);
    if (cmd == Cmd::Delete && line != "DELETED") err.add(line);
    if (cmd == Cmd::Reserve) {
      u64 id = 0;
      if (starts(line, "RESERVED ") && parse_u64(word(line, 1), id)) c.ids.push_back(id);
      else err.add(line);
    }
    if (++c.a == c.c) {
      if (measuring) batch.add(tn - c.b);
      next_batch(c);
    }
  });
  for (int i = 0; i < C; ++i) {
    Conn& c = L.connect(&h);
    if (!sets.empty()) join_tube_set(L, c, sets, static_cast<std::size_t>(i));
    c.phase = 0;
    send_batch(c);
  }
  Meter m = run_window(L, o, o.warmup, o.duration, [&](bool on) {
    if (on) {
      ops = 0;
      batch.reset();
    }
    measuring = on;
  });
  Json j;
  j.str("scenario", "pipeline").str("mode", o.mode).integer("conns", C).integer("depth", K).integer("size", o.size);
  if (!o.tubes.empty()) j.str("tubes", o.tubes);
  if (o.tls) j.str("tls", L.tls_session());
  put_meter(j, m, ops);
  err.put(j);
  put_hist(j, "batch_latency_us", batch);
  std::printf("%s\n", j.finish().c_str());
}

void scen_fill(const Opts& o) {
  Loop L(o);
  int C = conns_or(o, 4);
  u64 N = jobs_or(o, 1'000'000);
  std::string put = make_put(1024, 0, o.ttr, static_cast<std::size_t>(o.size));
  PutWindow pw(L, N, o.depth, [&]() -> sv { return put; });
  long long rss0 = rss_bytes(o.pid);
  double c0 = proc_cpu_s(o.pid);
  u64 t0 = now_ns();
  for (int i = 0; i < C; ++i) {
    Conn& c = L.connect(&pw);
    if (!o.tube.empty()) L.send(c, Cmd::Other, "use " + o.tube + "\r\n");
    pw.start(c);
  }
  if (!L.run_until([&] { return pw.done(); }, t0 + secs_to_ns(o.timeout))) die("timeout in fill");
  double wall = static_cast<double>(now_ns() - t0) / 1e9;
  double c1 = proc_cpu_s(o.pid);
  long long rss1 = rss_bytes(o.pid);
  Json j;
  j.str("scenario", "fill").integer("jobs", static_cast<long long>(N)).integer("size", o.size).integer("conns", C);
  j.integer("inserted", static_cast<long long>(pw.ok));
  j.num("wall_s", wall).num("puts_per_s", static_cast<double>(pw.ok) / wall);
  j.num("server_cpu_us_per_op", cpu_us_per(c1 - c0, pw.ok));
  j.integer("rss_before", rss0).integer("rss_after", rss1);
  if (rss0 >= 0 && pw.ok) j.num("rss_bytes_per_job", static_cast<double>(rss1 - rss0) / static_cast<double>(pw.ok));
  pw.err.put(j);
  std::printf("%s\n", j.finish().c_str());
}

// reserve-with-timeout 0 + delete (sliding window) until every connection saw TIMED_OUT.
void scen_drain(const Opts& o) {
  Loop L(o);
  int C = conns_or(o, 4);
  int K = o.depth;
  u64 deleted = 0, live = 0;
  Errors err;
  FnHandler h([&](Conn& c, Cmd cmd, u64, u64, sv line, sv) {
    if (cmd == Cmd::Reserve) {
      u64 id = 0;
      if (starts(line, "RESERVED ") && parse_u64(word(line, 1), id)) {
        send_id(L, c, Cmd::Delete, "delete", id);
      } else {
        if (line != "TIMED_OUT") err.add(line);
        c.phase = 1;  // empty: stop issuing reserves
      }
    } else if (cmd == Cmd::Delete) {
      if (line == "DELETED") ++deleted;
      else err.add(line);
      if (c.phase == 0) L.send(c, Cmd::Reserve, "reserve-with-timeout 0\r\n");
    } else if (!starts(line, "WATCHING ")) {
      err.add(line);
    }
    if (c.phase == 1 && c.pend.empty() && c.b == 0) {
      c.b = 1;
      --live;
    }
  });
  long long rss0 = rss_bytes(o.pid);
  double c0 = proc_cpu_s(o.pid);
  u64 t0 = now_ns();
  for (int i = 0; i < C; ++i) {
    Conn& c = L.connect(&h);
    ++live;
    if (!o.tube.empty()) {
      L.send(c, Cmd::Other, "watch " + o.tube + "\r\n");
      L.send(c, Cmd::Other, "ignore default\r\n");
    }
    for (int k = 0; k < K; ++k) L.send(c, Cmd::Reserve, "reserve-with-timeout 0\r\n");
  }
  if (!L.run_until([&] { return live == 0; }, t0 + secs_to_ns(o.timeout))) die("timeout in drain");
  double wall = static_cast<double>(now_ns() - t0) / 1e9;
  double c1 = proc_cpu_s(o.pid);
  Json j;
  j.str("scenario", "drain").integer("conns", C).integer("depth", K);
  j.integer("deleted", static_cast<long long>(deleted)).num("wall_s", wall);
  j.num("jobs_per_s", static_cast<double>(deleted) / wall);
  j.num("server_cpu_us_per_job", cpu_us_per(c1 - c0, deleted));
  j.integer("rss_before", rss0).integer("rss_after", rss_bytes(o.pid));
  err.put(j);
  std::printf("%s\n", j.finish().c_str());
}

// P producers, Q consumers on tube "pc" (or --tube). Body starts with the send time (ns).
// --rate 0: producers run closed-loop, paused while (puts acknowledged - jobs consumed) >=
// --window; --rate R: open loop at R jobs/s total (puts beyond the window are skipped and counted).
void scen_prodcons(const Opts& o) {
  Loop L(o);
  std::string tube = o.tube.empty() ? "pc" : o.tube;
  std::string put = make_put(1024, 0, o.ttr, static_cast<std::size_t>(o.size));
  std::size_t stamp_off = put.find("\r\n") + 2;
  bool measuring = false;
  u64 acked = 0, consumed = 0, sent = 0, skipped = 0, consumed_win = 0;
  Hist e2e, put_lat;
  Errors err;
  std::vector<Conn*> producers, parked;
  auto send_put = [&](Conn& c, u64 t) {
    write_stamp(put.data() + stamp_off, t);
    L.send(c, Cmd::Put, put, t);
    ++sent;
  };
  auto backlog = [&] { return sent > consumed ? sent - consumed : u64{0}; };
  FnHandler prod([&](Conn& c, Cmd cmd, u64 ts, u64 tn, sv line, sv) {
    if (cmd != Cmd::Put) return;
    if (!starts(line, "INSERTED ")) err.add(line);
    ++acked;
    if (measuring) put_lat.add(tn - ts);
    if (o.rate > 0) return;
    if (backlog() < o.window) send_put(c, tn);
    else parked.push_back(&c);
  });
  FnHandler cons([&](Conn& c, Cmd cmd, u64, u64 tn, sv line, sv body) {
    if (cmd == Cmd::Reserve) {
      u64 id = 0;
      if (!starts(line, "RESERVED ") || !parse_u64(word(line, 1), id)) {
        err.add(line);
        L.send(c, Cmd::Reserve, "reserve\r\n");
        return;
      }
      u64 st = read_stamp(body);
      if (measuring && st && tn >= st) {
        e2e.add(tn - st);
        ++consumed_win;
      }
      send_id(L, c, Cmd::Delete, "delete", id);
    } else if (cmd == Cmd::Delete) {
      if (line != "DELETED") err.add(line);
      ++consumed;
      L.send(c, Cmd::Reserve, "reserve\r\n");
      if (!parked.empty() && backlog() < o.window) {
        Conn* p = parked.back();
        parked.pop_back();
        send_put(*p, tn);
      }
    }
  });
  for (int i = 0; i < o.consumers; ++i) {
    Conn& c = L.connect(&cons);
    L.send(c, Cmd::Other, "watch " + tube + "\r\n");
    L.send(c, Cmd::Other, "ignore default\r\n");
    L.send(c, Cmd::Reserve, "reserve\r\n");
  }
  u64 t_start = now_ns();
  for (int i = 0; i < o.producers; ++i) {
    Conn& c = L.connect(&prod);
    L.send(c, Cmd::Other, "use " + tube + "\r\n");
    producers.push_back(&c);
    if (o.rate <= 0) send_put(c, t_start);
  }
  std::size_t rr = 0;
  auto tick = [&](u64 t) {
    if (o.rate <= 0) return;
    auto target = static_cast<u64>(o.rate * static_cast<double>(t - t_start) / 1e9);
    while (sent + skipped < target) {
      if (backlog() >= o.window) {
        ++skipped;
        continue;
      }
      send_put(*producers[rr++ % producers.size()], t);
    }
  };
  Meter m = run_window(
      L, o, o.warmup, o.duration,
      [&](bool on) {
        if (on) {
          e2e.reset();
          put_lat.reset();
          consumed_win = 0;
          skipped = 0;
        }
        measuring = on;
      },
      tick);
  Json j;
  j.str("scenario", "prodcons").integer("producers", o.producers).integer("consumers", o.consumers);
  j.num("rate", o.rate).integer("window", static_cast<long long>(o.window)).integer("size", o.size);
  put_meter(j, m, consumed_win);
  j.num("jobs_per_s", static_cast<double>(consumed_win) / m.wall);
  j.integer("skipped_puts", static_cast<long long>(skipped));
  j.integer("total_sent", static_cast<long long>(sent)).integer("total_acked", static_cast<long long>(acked));
  j.integer("total_consumed", static_cast<long long>(consumed));
  err.put(j);
  put_hist(j, "e2e_latency_us", e2e);
  put_hist(j, "put_latency_us", put_lat);
  std::printf("%s\n", j.finish().c_str());
}

// For each level L (ascending): create tubes until there are L tubes t0..t{L-1}, each holding
// one ready and one delayed (1 h) job, then run the cycle on a separate tube.
void scen_tubes(const Opts& o) {
  std::vector<u64> levels;
  {
    std::stringstream ss(o.levels);
    std::string item;
    while (std::getline(ss, item, ',')) levels.push_back(std::strtoull(item.c_str(), nullptr, 10));
  }
  Loop L(o);
  int C = 4;  // set-up connections
  int K = std::max(o.depth, 3);
  std::string put_ready = make_put(1024, 0, o.ttr, 16), put_delayed = make_put(1024, 3600, o.ttr, 16);
  u64 have = 0;
  Errors err;
  Json j;
  j.str("scenario", "tubes").integer("conns", conns_or(o, 50)).integer("size", o.size);
  j.open("levels");
  double base_ops = 0;
  for (u64 level : levels) {
    // set-up: connection i creates tubes have+i, have+i+C, ...
    u64 target = level;
    u64 created = have;
    int live = 0;
    bool over_budget = false;
    u64 t_budget = now_ns() + secs_to_ns(o.level_budget);
    FnHandler setup([&](Conn& c, Cmd cmd, u64, u64, sv line, sv) {
      if (cmd == Cmd::Put && !starts(line, "INSERTED ")) err.add(line);
      if (cmd == Cmd::Other && !starts(line, "USING ")) err.add(line);
      // refill this connection's window with (use tN, put ready, put delayed) triples
      while (!over_budget && c.a < target && c.pend.size() + 3 <= static_cast<std::size_t>(K)) {
        L.send(c, Cmd::Other, "use t" + std::to_string(c.a) + "\r\n");
        L.send(c, Cmd::Put, put_ready);
        L.send(c, Cmd::Put, put_delayed);
        c.a += static_cast<u64>(C);
        ++created;
      }
      if (c.pend.empty() && c.phase == 0) {
        c.phase = 1;
        --live;
      }
    });
    u64 t0 = now_ns();
    std::vector<Conn*> sc;
    for (int i = 0; i < C; ++i) {
      Conn& c = L.connect(&setup);
      c.a = have + static_cast<u64>(i);
      ++live;
      sc.push_back(&c);
      // prime the window (the handler refills it on every reply)
      L.send(c, Cmd::Other, "list-tube-used\r\n");
    }
    bool ok = L.run_until([&] { return live == 0; }, t0 + secs_to_ns(o.level_budget + o.timeout), [&](u64 t) {
      if (t >= t_budget) over_budget = true;
    });
    double setup_s = static_cast<double>(now_ns() - t0) / 1e9;
    for (Conn* c : sc) L.close(*c);
    if (!ok || over_budget) {
      j.open(std::to_string(level));
      j.boolean("reached", false).integer("tubes_created", static_cast<long long>(created)).num("setup_s", setup_s);
      j.close();
      break;
    }
    have = level;
    Cycle h(L, o, o.tube.empty() ? "bench" : o.tube);
    std::vector<Conn*> cc;
    for (int i = 0; i < conns_or(o, 50); ++i) {
      cc.push_back(&L.connect(&h));
      h.start(*cc.back());
    }
    Meter m = run_window(L, o, o.warmup, o.duration, [&](bool on) {
      if (on) h.reset();
      h.measuring = on;
    });
    for (Conn* c : cc) L.close(*c);
    double ops = static_cast<double>(h.ops) / m.wall;
    if (base_ops == 0) base_ops = ops;
    j.open(std::to_string(level));
    j.boolean("reached", true).num("setup_s", setup_s).num("setup_tubes_per_s", static_cast<double>(level) / setup_s);
    j.integer("rss", rss_bytes(o.pid));
    put_meter(j, m, h.ops);
    j.num("ratio_to_first_level", ops / base_ops);
    h.err.put(j);
    h.put_latency(j);
    j.close();
    // give the server a moment to process the closes before the next level
    L.run_for(0.05);
  }
  j.close();
  err.put(j);
  std::printf("%s\n", j.finish().c_str());
}

// Throughput of a few active cycling connections, without and then with N idle connections.
void scen_conns(const Opts& o) {
  Loop L(o);
  int C = conns_or(o, 10);
  auto active = [&](Json& j, sv name) {
    Cycle h(L, o, o.tube);
    std::vector<Conn*> cc;
    for (int i = 0; i < C; ++i) {
      cc.push_back(&L.connect(&h));
      h.start(*cc.back());
    }
    Meter m = run_window(L, o, o.warmup, o.duration, [&](bool on) {
      if (on) h.reset();
      h.measuring = on;
    });
    for (Conn* c : cc) L.close(*c);
    j.open(name);
    put_meter(j, m, h.ops);
    h.err.put(j);
    h.put_latency(j);
    j.close();
    L.run_for(0.05);
    return static_cast<double>(h.ops) / m.wall;
  };
  Json j;
  j.str("scenario", "conns").integer("active_conns", C).integer("idle_conns", static_cast<long long>(o.idle));
  double without = active(j, "without_idle");
  long long rss0 = rss_bytes(o.pid);
  u64 opened = 0, ready = 0;
  int inflight = 0;
  Errors err;
  FnHandler idle([&](Conn&, Cmd, u64, u64, sv line, sv) {
    if (!starts(line, "USING ")) err.add(line);
    --inflight;
    ++ready;
  });
  u64 t0 = now_ns();
  bool ok = L.run_until([&] { return ready >= o.idle; }, t0 + secs_to_ns(o.timeout), [&](u64) {
    while (inflight < 256 && opened < o.idle) {
      Conn& c = L.connect(&idle);
      L.send(c, Cmd::Other, "list-tube-used\r\n");
      ++opened;
      ++inflight;
    }
  });
  if (!ok) die("timeout opening idle connections (" + std::to_string(ready) + " ready)");
  double open_s = static_cast<double>(now_ns() - t0) / 1e9;
  L.run_for(0.2);
  long long rss1 = rss_bytes(o.pid);
  double with = active(j, "with_idle");
  j.num("idle_open_s", open_s).integer("rss_before_idle", rss0).integer("rss_with_idle", rss1);
  if (rss0 >= 0) j.num("bytes_per_idle_conn", static_cast<double>(rss1 - rss0) / static_cast<double>(o.idle));
  j.num("ops_per_s_without_idle", without).num("ops_per_s_with_idle", with).num("with_over_without", with / without);
  err.put(j);
  std::printf("%s\n", j.finish().c_str());
}

// N jobs put at a steady rate over --spread W seconds, all with the same delay D (whole
// seconds), so their deadlines (send time + D, carried in the body) spread over W. The puts go
// through C connections with at most --depth outstanding each; when the server cannot take them
// at N/W per second they lag, and the actual spread of the deadlines is reported. Q consumer
// connections each keep --reserves `reserve` commands outstanding (pipelined), so a job is
// handed to a waiting reserve as soon as it is promoted; each RESERVED reply is answered with a
// pipelined `delete <id>` and, while fewer than N reserves have been sent, a new `reserve`.
// Lateness = time the RESERVED reply is parsed - deadline. A probe connection sends stats every
// --probe-ms throughout. The true deadline lies between send time + D and put-reply time + D,
// so lateness against the stamp is an upper bound; lateness_vs_put_reply_us is the lower bound.
void scen_delayed(const Opts& o) {
  Loop L(o);
  u64 N = jobs_or(o, 1'000'000);
  double W = o.spread > 0 ? o.spread : 10.0;
  auto delay_s = static_cast<u64>(o.delay > 0 ? std::max(1.0, std::round(o.delay)) : std::ceil(W) + 3);
  u64 delay_ns = delay_s * kNs;
  int C = conns_or(o, 4);
  int Q = std::max(1, o.consumers);
  u64 K = std::max<u64>(1, o.reserves);
  u64 put_window = static_cast<u64>(C) * static_cast<u64>(o.depth);
  double rate = static_cast<double>(N) / W;
  // --consumed-every M: job i goes to tube "consumed" if i % M == 0, else to "bulk"
  const u64 M = o.consumed_every;
  const u64 n_consumed = M ? (N + M - 1) / M : N;
  Probe probe(L, o.probe_ms);
  probe.field = "current-jobs-delayed";
  probe.start();
  Errors err;
  Hist late, late_lo, put_lat, late_rx, late_rx_lo;
  std::vector<Hist> late_by_s;  // lateness by second of the deadline window
  std::vector<u64> acked_at;  // put-reply time by job id (ids of a fresh server are 1..N)
  acked_at.reserve(N + 1);
  std::vector<u64> acked_rx;  // the same, stamped by the kernel when the reply arrived
  acked_rx.reserve(N + 1);
  realtime_offset_ns();
  u64 expected = 0;  // jobs inserted (stamped + filler) that a reserve must take
  u64 reserved = 0, stamped = 0, fillers = 0, early = 0, deleted = 0, del_answered = 0;
  u64 res_sent = 0, t_first_res = 0, t_last = 0;
  const u64 res_cap = n_consumed;  // one reserve per consumed job: each is eventually answered
  u64 first_dl = 0, last_dl = 0;
  // consumers
  FnHandler cons([&](Conn& c, Cmd cmd, u64, u64 tn, sv line, sv body) {
    if (cmd == Cmd::Reserve) {
      u64 id = 0;
      if (!starts(line, "RESERVED ") || !parse_u64(word(line, 1), id)) {
        err.add(line);
        L.send(c, Cmd::Reserve, "reserve\r\n");  // this reserve took no job: send it again
        return;
      }
      ++reserved;
      t_last = tn;
      u64 dl = read_stamp(body);
      if (dl == 0) {
        ++fillers;
      } else {
        ++stamped;
        if (!t_first_res) t_first_res = tn;
        if (tn < dl) ++early;
        else late.add(tn - dl);
        if (first_dl && dl >= first_dl && tn >= dl) {
          auto sec = static_cast<std::size_t>((dl - first_dl) / kNs);
          if (sec < 3600) {
            if (sec >= late_by_s.size()) late_by_s.resize(sec + 1);
            late_by_s[sec].add(tn - dl);
          }
        }
        if (id < acked_at.size() && acked_at[id]) {
          u64 dl_hi = acked_at[id] + delay_ns;
          late_lo.add(tn > dl_hi ? tn - dl_hi : 0);
        }
        if (u64 rx = c.rx_ns) {  // when the server sent it, so without this thread's own delays
          late_rx.add(rx > dl ? rx - dl : 0);
          if (id < acked_rx.size() && acked_rx[id]) {
            u64 dl_hi = acked_rx[id] + delay_ns;
            late_rx_lo.add(rx > dl_hi ? rx - dl_hi : 0);
          }
        }
      }
      send_id(L, c, Cmd::Delete, "delete", id);
      if (res_sent < res_cap) {
        L.send(c, Cmd::Reserve, "reserve\r\n");
        ++res_sent;
      }
    } else if (cmd == Cmd::Delete) {
      ++del_answered;
      if (line == "DELETED") ++deleted;
      else err.add(line);
    }
  });
  for (int i = 0; i < Q; ++i) {
    Conn& c = L.connect(&cons, true);
    if (M) {
      L.send(c, Cmd::Other, "watch consumed\r\n");
      L.send(c, Cmd::Other, "ignore default\r\n");
    }
    for (u64 k = 0; k < K && res_sent < res_cap; ++k, ++res_sent) L.send(c, Cmd::Reserve, "reserve\r\n");
  }
  // producers: open loop at `rate`, at most put_window outstanding
  std::string put = make_put(1024, delay_s, o.ttr, static_cast<std::size_t>(o.size));
  std::size_t off = put.find("\r\n") + 2;
  std::vector<Conn*> prod;
  Conn* cprod = nullptr;  // with M: the producer of the consumed tube
  u64 sent = 0, ok = 0, failed = 0, failed_consumed = 0, outstanding = 0, t0 = 0, lag_max = 0;
  std::size_t rr = 0;
  auto pump = [&](u64 t) {
    if (!t0 || sent >= N) return;
    u64 target = std::min<u64>(N, static_cast<u64>(rate * static_cast<double>(t - t0) / 1e9) + 1);
    while (sent < target && outstanding < put_window) {
      u64 ts = now_ns();
      u64 due = t0 + static_cast<u64>(static_cast<double>(sent) / rate * 1e9);
      if (ts > due) lag_max = std::max(lag_max, ts - due);
      u64 dl = ts + delay_ns;
      if (!first_dl) first_dl = dl;
      last_dl = dl;
      write_stamp(put.data() + off, dl);
      Conn* to = M && sent % M == 0 ? cprod : prod[rr++ % prod.size()];
      L.send(*to, Cmd::Put, put, ts);
      ++sent;
      ++outstanding;
    }
  };
  FnHandler ph([&](Conn& c, Cmd cmd, u64 ts, u64 tn, sv line, sv) {
    if (cmd != Cmd::Put) return;
    --outstanding;
    u64 id = 0;
    bool consumed = !M || &c == cprod;
    if (starts(line, "INSERTED ") && parse_u64(word(line, 1), id)) {
      ++ok;
      if (consumed) ++expected;
      put_lat.add(tn - ts);
      if (id <= 4 * N + 1024) {
        if (id >= acked_at.size()) acked_at.resize(id + 1, 0);
        acked_at[id] = tn;
        if (id >= acked_rx.size()) acked_rx.resize(id + 1, 0);
        acked_rx[id] = c.rx_ns;
      }
    } else {
      ++failed;
      if (consumed) ++failed_consumed;
      err.add(line);
    }
    pump(tn);
  });
  for (int i = 0; i < C; ++i) {
    prod.push_back(&L.connect(&ph, true));
    if (M) L.send(*prod.back(), Cmd::Other, "use bulk\r\n");
  }
  if (M) {
    cprod = &L.connect(&ph, true);
    L.send(*cprod, Cmd::Other, "use consumed\r\n");
  }
  // CPU of both sides from the first deadline to the end
  double srv_cpu0 = std::nan(""), self_cpu0 = std::nan("");
  auto tick = [&](u64 t) {
    probe.tick(t);
    pump(t);
    if (first_dl && t >= first_dl && std::isnan(self_cpu0)) {
      srv_cpu0 = proc_cpu_s(o.pid);
      self_cpu0 = self_cpu_s();
    }
  };
  L.run_for(0.2, tick);  // connections up, reserves waiting, probe running
  t0 = now_ns();
  if (!L.run_until([&] { return ok + failed >= N; }, t0 + secs_to_ns(W + o.timeout), tick))
    die("timeout putting delayed jobs (" + std::to_string(ok) + " inserted)");
  u64 t_put_done = now_ns();
  // a put that failed leaves a reserve without a job: put a ready filler job (stamp 0) for it
  if (failed_consumed) {
    std::string filler = make_put(1024, 0, o.ttr, static_cast<std::size_t>(o.size));
    write_stamp(filler.data() + filler.find("\r\n") + 2, 0);
    u64 want = failed_consumed, got = 0;
    FnHandler fh([&](Conn&, Cmd cmd, u64, u64, sv line, sv) {
      if (cmd != Cmd::Put) return;
      ++got;
      if (starts(line, "INSERTED ")) ++expected;
      else err.add(line);
    });
    Conn& fc = L.connect(&fh);
    if (M) L.send(fc, Cmd::Other, "use consumed\r\n");
    for (u64 i = 0; i < want; ++i) L.send(fc, Cmd::Put, filler);
    if (!L.run_until([&] { return got >= want; }, now_ns() + secs_to_ns(o.timeout), tick))
      die("timeout putting filler jobs");
  }
  // every inserted job must be reserved (exactly N reserves are sent in all) and deleted
  if (!L.run_until([&] { return reserved >= expected && del_answered >= reserved; },
                   std::max(last_dl, now_ns()) + secs_to_ns(o.timeout), tick))
    die("timeout waiting for delayed jobs (" + std::to_string(reserved) + " of " + std::to_string(expected) +
        " reserved, " + std::to_string(del_answered) + " deletes answered)");
  u64 t_end = now_ns();
  double srv_cpu1 = proc_cpu_s(o.pid), self_cpu1 = self_cpu_s();
  L.run_for(0.1, tick);
  // promotion: the first probe reply after the first deadline that saw no delayed job left
  u64 t_promoted = 0;
  for (const auto& s : probe.samples)
    if (s.sent >= first_dl && s.field == 0) {
      t_promoted = s.recv;
      break;
    }
  double prom_s = static_cast<double>(t_end - std::min(t_end, first_dl)) / 1e9;
  Json j;
  j.str("scenario", "delayed").integer("jobs", static_cast<long long>(N)).integer("delay_s", static_cast<long long>(delay_s));
  j.num("spread_s", W).num("put_rate", rate).integer("put_conns", C).integer("put_depth", o.depth);
  j.integer("consumers", Q).integer("reserves_per_consumer", static_cast<long long>(K));
  j.integer("consumed_every", static_cast<long long>(M));
  j.num("put_s", static_cast<double>(t_put_done - t0) / 1e9);
  j.num("puts_per_s", static_cast<double>(ok + failed) / (static_cast<double>(t_put_done - t0) / 1e9));
  j.num("put_lag_max_ms", static_cast<double>(lag_max) / 1e6);
  j.num("deadline_spread_ms", static_cast<double>(last_dl - first_dl) / 1e6);
  j.num("put_overlaps_deadlines_ms",
        t_put_done > first_dl ? static_cast<double>(t_put_done - first_dl) / 1e6 : 0.0);
  j.integer("inserted", static_cast<long long>(ok)).integer("consumed", static_cast<long long>(stamped));
  j.integer("fillers", static_cast<long long>(fillers)).integer("deleted", static_cast<long long>(deleted));
  j.integer("early", static_cast<long long>(early));
  j.num("min_lateness_ms", static_cast<double>(late.min()) / 1e6);
  j.num("first_reserve_after_first_deadline_ms",
        t_first_res ? (static_cast<double>(t_first_res) - static_cast<double>(first_dl)) / 1e6 : std::nan(""));
  j.num("drain_after_last_deadline_ms", t_last > last_dl ? static_cast<double>(t_last - last_dl) / 1e6 : 0.0);
  j.num("promotion_done_after_last_deadline_ms",
        t_promoted ? (static_cast<double>(t_promoted) - static_cast<double>(last_dl)) / 1e6 : std::nan(""));
  j.num("jobs_per_s_after_due", static_cast<double>(stamped) / prom_s);
  j.num("promotion_s", prom_s);
  j.num("server_cpu_s_promotion", srv_cpu1 - srv_cpu0);
  j.num("server_cpu_util_promotion", (srv_cpu1 - srv_cpu0) / prom_s);
  j.num("loadgen_cpu_util_promotion", (self_cpu1 - self_cpu0) / prom_s);
  put_hist(j, "lateness_us", late);
  put_hist(j, "lateness_vs_put_reply_us", late_lo);
  put_hist(j, "lateness_rx_us", late_rx);
  put_hist(j, "lateness_rx_vs_put_reply_us", late_rx_lo);
  j.open("lateness_by_second");  // "S": jobs whose deadline lies in second S of the window
  for (std::size_t i = 0; i < late_by_s.size(); ++i) {
    const Hist& h = late_by_s[i];
    j.open(std::to_string(i));
    j.integer("n", static_cast<long long>(h.count()));
    j.num("p50_ms", static_cast<double>(h.percentile(0.50)) / 1e6);
    j.num("p99_ms", static_cast<double>(h.percentile(0.99)) / 1e6);
    j.num("max_ms", static_cast<double>(h.max()) / 1e6);
    j.close();
  }
  j.close();
  put_hist(j, "put_latency_us", put_lat);
  put_hist(j, "probe_put_phase_us", probe.window(t0, std::min(t_put_done, first_dl)));
  u64 base_end = first_dl > 50 * kMs ? first_dl - 50 * kMs : first_dl;
  put_hist(j, "probe_before_us", probe.window(t_put_done, std::max(t_put_done, base_end)));
  put_hist(j, "probe_during_us", probe.window(first_dl, t_end));
  put_hist(j, "probe_during_kernel_us", probe.window(first_dl, t_end, true));
  err.put(j);
  probe.errors.put(j.open("probe"));
  j.close();
  std::printf("%s\n", j.finish().c_str());
}

// 1) N buried jobs, then "kick N" from another connection while a probe sends stats every
//    --probe-ms. 2) One connection reserves the N kicked jobs and closes; the probe watches
//    current-jobs-reserved until 0 (release time) and records its own latency meanwhile.
void scen_mass(const Opts& o) {
  Loop L(o);
  u64 N = jobs_or(o, 100'000);
  int C = conns_or(o, 4);
  std::string put = make_put(1024, 0, o.ttr, static_cast<std::size_t>(o.size));
  u64 sent = 0, buried = 0;
  Errors err;
  // per connection: puts fill the window; each INSERTED triggers a reserve-with-timeout 0, each
  // RESERVED a bury of that id.
  FnHandler bury([&](Conn& c, Cmd cmd, u64, u64, sv line, sv) {
    if (cmd == Cmd::Put) {
      if (!starts(line, "INSERTED ")) err.add(line);
      L.send(c, Cmd::Reserve, "reserve-with-timeout 0\r\n");
    } else if (cmd == Cmd::Reserve) {
      u64 id = 0;
      if (starts(line, "RESERVED ") && parse_u64(word(line, 1), id)) send_id(L, c, Cmd::Bury, "bury", id, " 1024");
      else {
        err.add(line);
        L.send(c, Cmd::Reserve, "reserve-with-timeout 0\r\n");
      }
    } else if (cmd == Cmd::Bury) {
      if (line == "BURIED") ++buried;
      else err.add(line);
      if (sent < N) {
        ++sent;
        L.send(c, Cmd::Put, put);
      }
    }
  });
  u64 t0 = now_ns();
  for (int i = 0; i < C; ++i) {
    Conn& c = L.connect(&bury);
    for (int k = 0; k < std::max(1, o.depth / 3) && sent < N; ++k, ++sent) L.send(c, Cmd::Put, put);
  }
  if (!L.run_until([&] { return buried + err.n >= N; }, t0 + secs_to_ns(o.timeout))) die("timeout burying jobs");
  double setup_s = static_cast<double>(now_ns() - t0) / 1e9;

  Probe probe(L, o.probe_ms);
  probe.field = "current-jobs-reserved";
  probe.start();
  auto tick = [&](u64 t) { probe.tick(t); };
  L.run_for(0.3, tick);
  u64 kick_sent = 0, kick_done = 0, kicked = 0;
  FnHandler kicker([&](Conn&, Cmd, u64, u64 tn, sv line, sv) {
    kick_done = tn;
    if (!starts(line, "KICKED ") || !parse_u64(word(line, 1), kicked)) err.add(line);
  });
  Conn& kc = L.connect(&kicker);
  L.run_for(0.05, tick);  // let the connection settle
  kick_sent = now_ns();
  L.send(kc, Cmd::Kick, "kick " + std::to_string(N) + "\r\n", kick_sent);
  if (!L.run_until([&] { return kick_done != 0; }, kick_sent + secs_to_ns(o.timeout), tick)) die("timeout in kick");
  L.run_for(0.3, tick);

  // hold N reserved jobs on one connection
  u64 held = 0;
  bool empty = false;
  FnHandler holder([&](Conn& c, Cmd, u64, u64, sv line, sv) {
    if (starts(line, "RESERVED ")) {
      ++held;
      if (held + c.pend.size() < N && !empty) L.send(c, Cmd::Reserve, "reserve-with-timeout 0\r\n");
    } else {
      empty = true;
    }
  });
  Conn& hc = L.connect(&holder);
  for (int k = 0; k < o.depth && static_cast<u64>(k) < N; ++k) L.send(hc, Cmd::Reserve, "reserve-with-timeout 0\r\n");
  u64 th = now_ns();
  if (!L.run_until([&] { return hc.pend.empty(); }, th + secs_to_ns(o.timeout), tick)) die("timeout reserving");
  double hold_s = static_cast<double>(now_ns() - th) / 1e9;
  L.run_for(0.3, tick);
  u64 t_close = now_ns();
  L.close(hc);
  u64 t_released = 0;
  bool released = L.run_until(
      [&] {
        for (auto it = probe.samples.rbegin(); it != probe.samples.rend() && it->sent > t_close; ++it)
          if (it->field == 0) {
            t_released = it->recv;
            return true;
          }
        return false;
      },
      t_close + secs_to_ns(o.timeout), tick);
  // the earliest sample (sent after the close) that saw 0 reserved
  for (const auto& s : probe.samples)
    if (s.sent > t_close && s.field == 0) {
      t_released = s.recv;
      break;
    }
  L.run_for(0.3, tick);

  Json j;
  j.str("scenario", "mass").integer("jobs", static_cast<long long>(N)).num("setup_s", setup_s);
  j.integer("buried", static_cast<long long>(buried));
  j.open("kick");
  j.integer("kicked", static_cast<long long>(kicked)).num("kick_ms", static_cast<double>(kick_done - kick_sent) / 1e6);
  put_hist(j, "probe_before_us", probe.window(kick_sent - 300 * kMs, kick_sent - 50 * kMs));
  put_hist(j, "probe_during_us", probe.window(kick_sent, kick_done + 50 * kMs));
  put_hist(j, "probe_during_kernel_us", probe.window(kick_sent, kick_done + 50 * kMs, true));
  j.close();
  j.open("close");
  j.integer("held", static_cast<long long>(held)).num("reserve_s", hold_s);
  j.boolean("released", released);
  j.num("release_ms", released ? static_cast<double>(t_released - t_close) / 1e6 : std::nan(""));
  put_hist(j, "probe_before_us", probe.window(t_close - 300 * kMs, t_close - 10 * kMs));
  put_hist(j, "probe_during_us", probe.window(t_close, (released ? t_released : now_ns()) + 50 * kMs));
  put_hist(j, "probe_during_kernel_us",
           probe.window(t_close, (released ? t_released : now_ns()) + 50 * kMs, true));
  j.close();
  err.put(j);
  probe.errors.put(j.open("probe"));
  j.close();
  std::printf("%s\n", j.finish().c_str());
}

// N puts of --size bytes through C connections with a sliding window (as fill), no deletes, so
// the server grows to N jobs. Each put's latency goes into the histogram of its segment (the
// i-th block of N / --segments replies: per million for N = 10,000,000) and into an overall
// one. A probe connection sends stats every --probe-ms for the whole fill; each sample keeps
// current-jobs-ready, so a slow probe reply shows at which job count the server stalled.
// On --timeout the run stops and reports what it has, with "timed_out": true.
void scen_grow(const Opts& o) {
  Loop L(o);
  int C = conns_or(o, 4);
  u64 N = jobs_or(o, 10'000'000);
  u64 seg = (N + std::clamp<u64>(o.segments, 1, N) - 1) / std::clamp<u64>(o.segments, 1, N);
  u64 S = (N + seg - 1) / seg;
  struct Seg {
    Hist lat;
    u64 t_end = 0;
    long long rss = -1;
    double cpu = std::nan("");
  };
  std::vector<Seg> segs(static_cast<std::size_t>(S));
  Hist all;
  u64 replies = 0;
  // the kSlow slowest puts as (latency, replies so far: the job count, reply time), a min-heap
  constexpr std::size_t kSlow = 10;
  std::vector<std::tuple<u64, u64, u64>> slow;
  std::string put = make_put(1024, 0, o.ttr, static_cast<std::size_t>(o.size));
  long long rss0 = rss_bytes(o.pid);
  Probe probe(L, o.probe_ms);
  probe.field = "current-jobs-ready";
  probe.start();
  auto tick = [&](u64 t) { probe.tick(t); };
  L.run_for(0.1, tick);  // the probe connection is up and has a few samples before the fill
  PutWindow pw(L, N, o.depth, [&]() -> sv { return put; });
  pw.observe = [&](u64 lat) {
    Seg& s = segs[static_cast<std::size_t>(replies / seg)];
    s.lat.add(lat);
    all.add(lat);
    if (slow.size() < kSlow || lat > std::get<0>(slow.front())) {
      slow.emplace_back(lat, replies, now_ns());
      std::push_heap(slow.begin(), slow.end(), std::greater<>());
      if (slow.size() > kSlow) {
        std::pop_heap(slow.begin(), slow.end(), std::greater<>());
        slow.pop_back();
      }
    }
    if (++replies % seg == 0 || replies == N) {
      s.t_end = now_ns();
      s.rss = rss_bytes(o.pid);
      s.cpu = proc_cpu_s(o.pid);
    }
  };
  double c0 = proc_cpu_s(o.pid);
  u64 t0 = now_ns();
  for (int i = 0; i < C; ++i) pw.start(L.connect(&pw));
  bool completed = L.run_until([&] { return pw.done(); }, t0 + secs_to_ns(o.timeout), tick);
  u64 t1 = now_ns();
  double c1 = proc_cpu_s(o.pid);
  long long rss1 = rss_bytes(o.pid);
  L.run_for(0.05, tick);  // the probe's last request, if it is still in flight
  double wall = static_cast<double>(t1 - t0) / 1e9;

  Json j;
  j.str("scenario", "grow").integer("jobs", static_cast<long long>(N)).integer("size", o.size);
  j.integer("conns", C).integer("depth", o.depth).integer("segment_jobs", static_cast<long long>(seg));
  j.boolean("timed_out", !completed);
  j.integer("inserted", static_cast<long long>(pw.ok)).integer("replies", static_cast<long long>(replies));
  j.num("wall_s", wall).num("puts_per_s", static_cast<double>(replies) / wall);
  j.num("server_cpu_us_per_op", cpu_us_per(c1 - c0, replies));
  j.integer("rss_before", rss0).integer("rss_after", rss1);
  if (rss0 >= 0 && pw.ok) j.num("rss_bytes_per_job", static_cast<double>(rss1 - rss0) / static_cast<double>(pw.ok));
  put_hist(j, "put_latency_us", all);
  j.open("segments");
  u64 t_prev = t0;
  double cpu_prev = c0;
  for (u64 i = 0; i < S; ++i) {
    const Seg& s = segs[static_cast<std::size_t>(i)];
    if (s.lat.count() == 0) break;
    j.open(std::to_string(i));
    j.integer("from", static_cast<long long>(i * seg)).integer("to", static_cast<long long>(std::min(N, (i + 1) * seg)));
    if (s.t_end) {
      double w = static_cast<double>(s.t_end - t_prev) / 1e9;
      j.num("wall_s", w).num("puts_per_s", static_cast<double>(s.lat.count()) / w);
      j.num("server_cpu_us_per_op", cpu_us_per(s.cpu - cpu_prev, s.lat.count()));
      j.integer("rss_at_end", s.rss);
      put_hist(j, "probe_us", probe.window(t_prev, s.t_end));
      put_hist(j, "probe_kernel_us", probe.window(t_prev, s.t_end, true));
      t_prev = s.t_end;
      cpu_prev = s.cpu;
    }
    put_hist(j, "latency_us", s.lat);
    j.close();
  }
  j.close();
  put_hist(j, "probe_us", probe.window(t0, t1));
  put_hist(j, "probe_kernel_us", probe.window(t0, t1, true));
  // every probe reply that took >= 20 ms during the fill (at most 200): when it was sent (s
  // after the start), how long it took, and current-jobs-ready in the reply
  std::string stalls = "[";
  u64 slow100 = 0, listed = 0;
  for (const auto& s : probe.samples) {
    if (s.recv < t0 || s.sent > t1) continue;
    u64 lat = s.recv - s.sent;
    if (lat >= 100 * kMs) ++slow100;
    if (lat < 20 * kMs || listed >= 200) continue;
    char b[160];
    std::snprintf(b, sizeof b, "%s{\"at_s\":%.3f,\"ms\":%.3f,\"jobs_ready\":%lld}", listed ? "," : "",
                  (static_cast<double>(s.sent) - static_cast<double>(t0)) / 1e9, static_cast<double>(lat) / 1e6,
                  s.field);
    stalls += b;
    ++listed;
  }
  stalls += "]";
  j.integer("probe_replies_over_100ms", static_cast<long long>(slow100));
  j.raw("probe_stalls", stalls);
  // the slowest puts and probe replies, slowest first, with the job count at the time (and
  // the reply's CLOCK_MONOTONIC time, to find it in a trace)
  std::sort(slow.begin(), slow.end(), std::greater<>());
  std::string sp = "[";
  for (const auto& [lat, at, t] : slow) {
    char b[128];
    std::snprintf(b, sizeof b, "%s{\"ms\":%.3f,\"at_job\":%llu,\"mono_s\":%.6f}", sp.size() > 1 ? "," : "",
                  static_cast<double>(lat) / 1e6, static_cast<unsigned long long>(at), static_cast<double>(t) / 1e9);
    sp += b;
  }
  j.raw("slowest_puts", sp + "]");
  std::vector<const Probe::Sample*> ps;
  for (const auto& s : probe.samples)
    if (s.recv >= t0 && s.sent <= t1) ps.push_back(&s);
  std::size_t np = std::min(kSlow, ps.size());
  std::partial_sort(ps.begin(), ps.begin() + static_cast<std::ptrdiff_t>(np), ps.end(),
                    [](const Probe::Sample* a, const Probe::Sample* b) { return a->recv - a->sent > b->recv - b->sent; });
  std::string sq = "[";
  for (std::size_t i = 0; i < np; ++i) {
    const Probe::Sample& s = *ps[i];
    double k = s.tx && s.rx && s.rx > s.tx ? static_cast<double>(s.rx - s.tx) / 1e6 : -1;
    char b[192];
    std::snprintf(b, sizeof b, "%s{\"ms\":%.3f,\"kernel_ms\":%.3f,\"jobs_ready\":%lld,\"mono_s\":%.6f}", i ? "," : "",
                  static_cast<double>(s.recv - s.sent) / 1e6, k, s.field, static_cast<double>(s.recv) / 1e9);
    sq += b;
  }
  j.raw("slowest_probes", sq + "]");
  pw.err.put(j);
  probe.errors.put(j.open("probe"));
  j.close();
  std::printf("%s\n", j.finish().c_str());
}

// N jobs leave the server at once while a probe connection sends stats every --probe-ms.
//   expire (--mode ttl): the jobs are put with "put-ext ... ttl=T", T chosen per put as the
//     whole seconds from its send to t0 + --delay (t0: the fill's start), so every deadline
//     falls within [t0 + delay, t0 + delay + 1 s) however long the fill takes (it must end
//     before t0 + delay; puts later than that get ttl=1 and are counted as overran).
//   purge (--mode purge): plain puts, then "purge <tube> ready" from another connection.
//   --mode delete (either): plain puts, then one connection deletes the N ids, --depth deletes
//     in flight, once the fill is done: the closest a server without TTLs or purge comes.
// The fill goes through C connections with a window of --depth each. The event starts at the
// first deadline (ttl), the purge's send or the first delete's, and ends with the first probe
// reply that shows current-jobs-ready 0.
void scen_lifecycle(const Opts& o) {
  const bool expire = o.scenario == "expire";
  const std::string mode = o.mode == "pdr" ? (expire ? "ttl" : "purge") : o.mode;
  const bool ttl_mode = mode == "ttl", del_mode = mode == "delete";
  if (!del_mode && mode != (expire ? "ttl" : "purge"))
    die("--mode for " + o.scenario + " must be " + (expire ? "ttl" : "purge") + " or delete");
  Loop L(o);
  u64 N = jobs_or(o, 1'000'000);
  int C = conns_or(o, 4);
  std::string tube = o.tube.empty() ? "default" : o.tube;
  double delay = o.delay > 0 ? o.delay : 5;
  Errors err;
  Probe probe(L, o.probe_ms);
  probe.field = "current-jobs-ready";
  if (ttl_mode) probe.command = "stats-ext\r\n";  // total-expired-jobs is stalkd's own
  probe.start();
  u64 ev_start = 0;  // the event's start; 0 until it is known
  double srv_cpu0 = std::nan(""), self_cpu0 = std::nan("");
  bool cpu_sampled = false;
  auto tick = [&](u64 t) {
    probe.tick(t);
    if (ev_start && t >= ev_start && !cpu_sampled) {
      cpu_sampled = true;
      srv_cpu0 = proc_cpu_s(o.pid);
      self_cpu0 = self_cpu_s();
    }
  };
  L.run_for(0.1, tick);

  // fill
  std::vector<u64> ids;
  if (del_mode) ids.reserve(static_cast<std::size_t>(N));
  u64 sent = 0, answered = 0, inserted = 0, overran = 0;
  u64 first_due = std::numeric_limits<u64>::max(), last_due = 0;  // send + ttl
  Hist put_lat;
  std::string body(static_cast<std::size_t>(o.size), 'x');
  body += "\r\n";
  std::string line;
  u64 t0 = now_ns();
  u64 target = t0 + secs_to_ns(delay);
  auto send_put = [&](Conn& c) {
    u64 t = now_ns();
    line = ttl_mode ? "put-ext 1024 0 " : "put 1024 0 ";
    line += std::to_string(o.ttr) + " " + std::to_string(o.size);
    if (ttl_mode) {
      u64 ttl = target > t ? (target - t + kNs - 1) / kNs : 0;
      if (ttl == 0) {  // ttl=0 would mean no TTL
        ttl = 1;
        ++overran;
      }
      first_due = std::min(first_due, t + ttl * kNs);
      last_due = std::max(last_due, t + ttl * kNs);
      line += " ttl=" + std::to_string(ttl);
    }
    line += "\r\n";
    line += body;
    L.send(c, Cmd::Put, line, t);
    ++sent;
  };
  FnHandler filler([&](Conn& c, Cmd cmd, u64 ts, u64 tn, sv reply, sv) {
    if (cmd != Cmd::Put) {
      if (!starts(reply, "USING ")) err.add(reply);
      return;
    }
    ++answered;
    put_lat.add(tn - ts);
    u64 id = 0;
    if (starts(reply, "INSERTED ") && parse_u64(word(reply, 1), id)) {
      ++inserted;
      if (del_mode) ids.push_back(id);
    } else {
      err.add(reply);
    }
    if (sent < N) send_put(c);
  });
  std::vector<Conn*> fillers;
  for (int i = 0; i < C; ++i) {
    Conn& c = L.connect(&filler);
    fillers.push_back(&c);
    if (tube != "default") L.send(c, Cmd::Other, "use " + tube + "\r\n");
    for (int k = 0; k < o.depth && sent < N; ++k) send_put(c);
  }
  if (!L.run_until([&] { return answered >= N; }, t0 + secs_to_ns(o.timeout), tick)) die("timeout in fill");
  u64 t_fill = now_ns();
  for (Conn* c : fillers) L.close(*c);
  // the server's deadlines lie within [first_due, last_due + the slowest put's latency]
  u64 last_due_hi = last_due + put_lat.max();

  // the event
  u64 t_quiet = t_fill;  // the probe's quiet window runs from here to 50 ms before the event
  u64 purged = 0, deleted = 0, t_cmd_done = 0;
  FnHandler purger([&](Conn&, Cmd, u64, u64 tn, sv reply, sv) {
    t_cmd_done = tn;
    if (!starts(reply, "PURGED ") || !parse_u64(word(reply, 1), purged)) err.add(reply);
  });
  std::size_t next_id = 0;
  FnHandler deleter([&](Conn& c, Cmd, u64, u64 tn, sv reply, sv) {
    if (reply == "DELETED") ++deleted;
    else err.add(reply);
    if (next_id < ids.size()) send_id(L, c, Cmd::Delete, "delete", ids[next_id++]);
    else if (c.pend.empty()) t_cmd_done = tn;
  });
  if (ttl_mode) {
    if (inserted == 0) die("no job inserted (" + err.first + ")");
    ev_start = first_due;
    t_quiet = std::min(t_fill + 50 * kMs, first_due);
  } else {
    L.run_for(0.3, tick);
    t_quiet = t_fill + 50 * kMs;
    Conn& ec = L.connect(del_mode ? &deleter : &purger);
    L.run_for(0.05, tick);  // let the connection settle
    ev_start = now_ns();
    tick(ev_start);
    if (del_mode) {
      for (int k = 0; k < o.depth && next_id < ids.size(); ++k) send_id(L, ec, Cmd::Delete, "delete", ids[next_id++]);
      if (ids.empty()) t_cmd_done = ev_start;
    } else {
      L.send(ec, Cmd::Other, "purge " + tube + " ready\r\n", ev_start);
    }
  }
  u64 t_gone = 0;
  auto gone = [&] {  // the latest probe reply, sent after the start, saw no ready job
    return !probe.samples.empty() && probe.samples.back().sent > ev_start && probe.samples.back().field == 0;
  };
  bool completed = L.run_until(gone, std::max(ev_start, last_due_hi) + secs_to_ns(o.timeout), tick);
  u64 t_end = now_ns();
  double srv_cpu1 = proc_cpu_s(o.pid), self_cpu1 = self_cpu_s();
  for (const auto& s : probe.samples)  // the earliest sample sent after the start that saw 0
    if (s.sent > ev_start && s.field == 0) {
      t_gone = s.recv;
      break;
    }
  if (!ttl_mode && !L.run_until([&] { return t_cmd_done != 0; }, t_end + secs_to_ns(o.timeout), tick))
    err.add(del_mode ? "timeout waiting for the deletes' replies" : "timeout waiting for PURGED");
  L.run_for(0.1, tick);  // a few more probe replies after the event, and the latest stats
  auto stat = [&](sv key) -> long long {
    std::string k = "\n" + std::string(key) + ": ";
    auto p = probe.last_body.find(k);
    return p == std::string::npos ? -1 : std::atoll(probe.last_body.c_str() + p + k.size());
  };
  long long expired = stat("total-expired-jobs");
  if (ttl_mode && completed && expired >= 0 && static_cast<u64>(expired) != inserted)
    err.add("total-expired-jobs " + std::to_string(expired) + ", expected " + std::to_string(inserted));
  if (del_mode && deleted != inserted)
    err.add("deleted " + std::to_string(deleted) + " of " + std::to_string(inserted));
  if (!del_mode && !ttl_mode && purged != inserted)
    err.add("purged " + std::to_string(purged) + " of " + std::to_string(inserted));

  u64 t_done = completed ? t_gone : t_end;
  double gone_s = static_cast<double>(t_done - ev_start) / 1e9;
  Json j;
  j.str("scenario", o.scenario).str("mode", mode).integer("jobs", static_cast<long long>(N));
  j.integer("size", o.size).integer("conns", C).integer("depth", o.depth);
  j.integer("inserted", static_cast<long long>(inserted));
  j.num("fill_s", static_cast<double>(t_fill - t0) / 1e9);
  j.num("puts_per_s", static_cast<double>(answered) / (static_cast<double>(t_fill - t0) / 1e9));
  put_hist(j, "put_latency_us", put_lat);
  if (ttl_mode) {
    j.num("delay_s", delay).integer("overran", static_cast<long long>(overran));
    j.num("deadline_spread_ms", static_cast<double>(last_due_hi - first_due) / 1e6);
    j.num("fill_overlaps_deadlines_ms", t_fill > first_due ? static_cast<double>(t_fill - first_due) / 1e6 : 0.0);
    j.num("gone_after_last_deadline_ms",
          t_done > last_due_hi ? static_cast<double>(t_done - last_due_hi) / 1e6 : 0.0);
    j.integer("expired", expired);
  } else if (del_mode) {
    j.integer("deleted", static_cast<long long>(deleted));
    j.num("deletes_ms", t_cmd_done ? static_cast<double>(t_cmd_done - ev_start) / 1e6 : std::nan(""));
  } else {
    j.integer("purged", static_cast<long long>(purged));
    j.num("purge_ms", t_cmd_done ? static_cast<double>(t_cmd_done - ev_start) / 1e6 : std::nan(""));
  }
  j.boolean("completed", completed);
  // CLOCK_MONOTONIC seconds, to line the event up with server-side traces (perf -k CLOCK_MONOTONIC)
  j.num("event_start_mono_s", static_cast<double>(ev_start) / 1e9);
  j.num("event_end_mono_s", static_cast<double>(t_done) / 1e9);
  j.num("gone_ms", completed ? gone_s * 1e3 : std::nan(""));
  j.num("jobs_per_s", completed ? static_cast<double>(inserted) / gone_s : std::nan(""));
  j.num("server_cpu_s", srv_cpu1 - srv_cpu0);
  j.num("server_cpu_util", (srv_cpu1 - srv_cpu0) / static_cast<double>(t_end - ev_start) * 1e9);
  j.num("loadgen_cpu_util", (self_cpu1 - self_cpu0) / static_cast<double>(t_end - ev_start) * 1e9);
  put_hist(j, "probe_before_us", probe.window(t_quiet, std::max(t_quiet, ev_start - 50 * kMs)));
  put_hist(j, "probe_during_us", probe.window(ev_start, t_done + 50 * kMs));
  put_hist(j, "probe_during_kernel_us", probe.window(ev_start, t_done + 50 * kMs, true));
  err.put(j);
  probe.errors.put(j.open("probe"));
  j.close();
  std::printf("%s\n", j.finish().c_str());
}

// ---------------------------------------------------------------------------------------------
// HTTP: stalkd's lmstfy API (docs/HTTP.md)

// Requests on one namespace and queue, with the headers every lmstfy client sends (Host, and
// the token as X-Token); the tube is ns/queue.
class HttpApi {
 public:
  explicit HttpApi(const Opts& o) : path_("/api/" + o.ns + "/" + o.queue) {
    if (o.token.empty()) die("--token is needed for the HTTP scenarios (create one on --admin-http)");
    hdr_ = "Host: " + o.host + ":" + std::to_string(o.port) + "\r\nX-Token: " + o.token + "\r\n";
  }
  std::string publish(std::size_t size, sv query = {}) const {
    std::string s = "PUT " + path_ + std::string(query) + " HTTP/1.1\r\n" + hdr_ +
                    "Content-Length: " + std::to_string(size) + "\r\n\r\n";
    s.append(size, 'x');
    return s;
  }
  std::string consume(sv query) const { return "GET " + path_ + std::string(query) + " HTTP/1.1\r\n" + hdr_ + "\r\n"; }
  // DELETE .../job/<id> (ack), queued on c.
  void ack(Loop& L, Conn& c, sv id) {
    scratch_.assign("DELETE ").append(path_).append("/job/").append(id).append(" HTTP/1.1\r\n").append(hdr_).append("\r\n");
    L.send(c, Cmd::Delete, scratch_);
  }

 private:
  std::string path_, hdr_, scratch_;
};

// The status code of an HTTP status line ("HTTP/1.1 201 Created"); frame_http checked its length.
int http_status(sv line) {
  auto d = [&](std::size_t i) { return line[i] >= '0' && line[i] <= '9' ? line[i] - '0' : 0; };
  return d(9) * 100 + d(10) * 10 + d(11);
}

// The job id of a publish or consume answer: {"job_id":"42",...}; empty if there is none.
sv json_job_id(sv body) {
  constexpr sv kKey = "\"job_id\":\"";
  std::size_t p = body.find(kKey);
  if (p == sv::npos) return {};
  p += kKey.size();
  std::size_t e = body.find('"', p);
  return e == sv::npos ? sv{} : body.substr(p, e - p);
}

std::string http_err(sv line, sv body) {
  return std::string(line) + " " + std::string(body.substr(0, 120));
}

// publish -> consume -> ack loop on every connection (HTTP/1.1 keep-alive, one request in
// flight per connection). The consume has no timeout: every connection publishes before it
// consumes, so a job is always ready when its consume is served (a 404 is counted anyway).
class HttpCycle : public Handler {
 public:
  HttpCycle(Loop& L, const Opts& o)
      : L_(L), api_(o), publish_(api_.publish(static_cast<std::size_t>(o.size))),
        consume_(api_.consume("?ttr=" + std::to_string(o.ttr))) {}
  void start(Conn& c) { L_.send(c, Cmd::Put, publish_); }
  void on_reply(Conn& c, Cmd cmd, u64 ts, u64 tn, sv line, sv body) override {
    int st = http_status(line);
    if (measuring) {
      lat[static_cast<std::size_t>(cmd)].add(tn - ts);
      ++ops;
    }
    switch (cmd) {
      case Cmd::Put:
        if (st != 201) {
          err.add(http_err(line, body));
          L_.send(c, Cmd::Put, publish_);
          return;
        }
        L_.send(c, Cmd::Reserve, consume_);
        return;
      case Cmd::Reserve: {
        sv id = json_job_id(body);
        if (st != 200 || id.empty()) {
          if (st == 404) ++no_job;
          else err.add(http_err(line, body));
          L_.send(c, Cmd::Reserve, consume_);
          return;
        }
        api_.ack(L_, c, id);
        return;
      }
      default:
        if (st != 204) err.add(http_err(line, body));
        if (measuring) ++cycles;
        L_.send(c, Cmd::Put, publish_);
        return;
    }
  }
  void reset() {
    for (auto& h : lat) h.reset();
    ops = cycles = no_job = 0;
  }
  void put_latency(Json& j) const {
    j.open("latency_us");
    put_hist(j, "publish", lat[static_cast<std::size_t>(Cmd::Put)]);
    put_hist(j, "consume", lat[static_cast<std::size_t>(Cmd::Reserve)]);
    put_hist(j, "ack", lat[static_cast<std::size_t>(Cmd::Delete)]);
    j.close();
  }
  bool measuring = false;
  std::array<Hist, kCmds> lat;
  u64 ops = 0, cycles = 0, no_job = 0;
  Errors err;

 private:
  Loop& L_;
  HttpApi api_;
  std::string publish_, consume_;
};

void scen_http_cycle(const Opts& o) {
  Loop L(o);
  HttpCycle h(L, o);
  int C = conns_or(o, 50);
  for (int i = 0; i < C; ++i) h.start(L.connect(&h, false, true));
  Meter m = run_window(L, o, o.warmup, o.duration, [&](bool on) {
    if (on) h.reset();
    h.measuring = on;
  });
  Json j;
  j.str("scenario", "http-cycle").integer("conns", C).integer("size", o.size);
  put_meter(j, m, h.ops);  // ops: requests
  j.num("cycles_per_s", static_cast<double>(h.cycles) / m.wall);
  j.integer("no_job", static_cast<long long>(h.no_job));
  h.err.put(j);
  h.put_latency(j);
  std::printf("%s\n", j.finish().c_str());
}

// Context switches of all of a process's threads (voluntary: it slept; involuntary: it was
// preempted), from /proc/PID/task/*/status; -1 if unknown.
long long ctx_switches(int pid) {
  if (pid <= 0) return -1;
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (!d) return -1;
  long long n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(dir + "/" + e->d_name + "/status");
    std::string line;
    while (std::getline(f, line)) {
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0 || line.rfind("nonvoluntary_ctxt_switches:", 0) == 0)
        n += std::atoll(line.c_str() + line.find(':') + 1);
    }
  }
  closedir(d);
  return n;
}

// CPU time of all of a process's threads in seconds, to the nanosecond (the scheduler's
// sum_exec_runtime, /proc/PID/task/*/schedstat), where proc_cpu_s counts 10 ms ticks: for
// the small amounts an idle server spends. NaN if unknown.
double proc_cpu_precise_s(int pid) {
  if (pid <= 0) return std::nan("");
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (!d) return std::nan("");
  double ns = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(dir + "/" + e->d_name + "/schedstat");
    unsigned long long run = 0;
    if (f >> run) ns += static_cast<double>(run);
  }
  closedir(d);
  return ns / 1e9;
}

struct IdleWindow {
  double wall = 0, srv_cpu = 0, self_cpu = 0;
  long long ctx = -1;
  void put(Json& j, sv name) const {
    j.open(name);
    // server CPU from the scheduler's nanosecond count, not from ticks
    j.num("wall_s", wall).num("server_cpu_s", srv_cpu).num("server_cpu_util", srv_cpu / wall);
    j.num("loadgen_cpu_util", self_cpu / wall);
    j.num("server_ctx_switches_per_s", ctx < 0 ? std::nan("") : static_cast<double>(ctx) / wall);
    j.close();
  }
};

// Lets the loop sit (no tick: the load generator sleeps in epoll_wait) for `seconds` and
// measures the server meanwhile.
IdleWindow idle_window(Loop& L, const Opts& o, double seconds) {
  double c0 = proc_cpu_precise_s(o.pid), s0 = self_cpu_s();
  long long x0 = ctx_switches(o.pid);
  u64 t0 = now_ns();
  L.run_for(seconds);
  IdleWindow w;
  w.wall = static_cast<double>(now_ns() - t0) / 1e9;
  w.srv_cpu = proc_cpu_precise_s(o.pid) - c0;
  w.self_cpu = self_cpu_s() - s0;
  long long x1 = ctx_switches(o.pid);
  if (x0 >= 0 && x1 >= 0) w.ctx = x1 - x0;
  return w;
}

// C consumers wait (--proto http: GET ?timeout=T&ttr=30; text: reserve-with-timeout T on the
// default tube); a stats probe on --text-port paces the opening (at most 256 connections
// ahead of the server's current-waiting) and shows when all C wait. Then: the server's CPU
// over --idle-s while nothing happens; then N publishes (PUT / put of --size bytes) from
// another connection, one at a time: each is timed from its send until a consumer has parsed
// the job (and, with the kernel's receive stamp, until the job reached the consumer's
// socket). The consumer acks it (DELETE / delete) and waits again,
// pipelined; the next publish goes --gap-ms after the job was delivered, the publish answered
// and the ack answered, so every publish meets C waiting consumers and a quiet server.
void scen_longpoll(const Opts& opts) {
  Opts o = opts;
  o.stall = std::max(o.stall, o.lp_timeout + 10.0);  // the waits are pending on purpose
  const bool http = o.proto == "http";
  if (!http && o.proto != "text") die("--proto must be http or text");
  Loop L(o);
  const u64 N = static_cast<u64>(conns_or(o, 10000));
  const u64 J = jobs_or(o, 1000);
  std::unique_ptr<HttpApi> api;
  if (http) api = std::make_unique<HttpApi>(o);
  const std::string T = std::to_string(o.lp_timeout);
  const std::string poll = http ? api->consume("?timeout=" + T + "&ttr=30") : "reserve-with-timeout " + T + "\r\n";
  const std::string pub_req =
      http ? api->publish(static_cast<std::size_t>(o.size)) : make_put(1024, 0, 30, static_cast<std::size_t>(o.size));
  Probe probe(L, 1);
  probe.field = "current-waiting";
  probe.start(o.text_port);
  Errors err;
  u64 timeouts = 0;
  Hist wake, wake_k, pub_lat, ack_lat;
  bool inflight = false, delivered = false, pub_done = false, acked = false;
  u64 t_pub = 0;
  Conn* pub = nullptr;  // the publisher's connection
  std::vector<u64> deliveries_per_conn;
  FnHandler consumer([&](Conn& c, Cmd cmd, u64 ts, u64 tn, sv line, sv body) {
    if (cmd == Cmd::Delete) {
      if (http ? http_status(line) != 204 : line != "DELETED") err.add(http ? http_err(line, body) : std::string(line));
      ack_lat.add(tn - ts);
      acked = true;
      return;
    }
    std::string id;
    if (http) {
      int st = http_status(line);
      if (st == 200) id = std::string(json_job_id(body));
      else if (st == 404) ++timeouts;
      else err.add(http_err(line, body));
    } else if (starts(line, "RESERVED ")) {
      id = std::string(word(line, 1));
    } else if (line == "TIMED_OUT") {
      ++timeouts;
    } else {
      err.add(line);
    }
    if (id.empty()) {  // the wait ended without a job: wait again
      L.send(c, Cmd::Reserve, poll);
      return;
    }
    if (!inflight || delivered) {
      err.add("a job arrived that was not published now: " + id);
    } else {
      delivered = true;
      wake.add(tn - t_pub);
      // The kernel's stamp of the job's arrival at the consumer's socket, against the send
      // of the publish (t_pub is taken just before its send()): without this thread's delays
      // in reading and parsing the job. (Not against send() returning: on loopback the
      // sender's send() also does the receiving side's TCP work and returns 40-50 us later,
      // often after the server has already handed the job over.)
      if (c.rx_ns) wake_k.add(c.rx_ns > t_pub ? c.rx_ns - t_pub : 0);
      ++deliveries_per_conn[c.slot];
    }
    if (http) {
      api->ack(L, c, id);
    } else {
      L.send(c, Cmd::Delete, "delete " + id + "\r\n");
    }
    L.send(c, Cmd::Reserve, poll);
  });
  FnHandler publisher([&](Conn&, Cmd, u64 ts, u64 tn, sv line, sv body) {
    if (http ? http_status(line) != 201 : !starts(line, "INSERTED ")) err.add(http ? http_err(line, body) : std::string(line));
    pub_lat.add(tn - ts);
    pub_done = true;
  });

  // 1. open the consumers
  L.run_for(0.05, [&](u64 t) { probe.tick(t); });
  long long rss0 = rss_bytes(o.pid);
  u64 opened = 0, t_last_open = 0;
  auto waiting = [&]() -> long long { return probe.samples.empty() ? -1 : probe.samples.back().field; };
  u64 t0 = now_ns();
  bool ok = L.run_until(
      [&] {
        return opened == N && !probe.samples.empty() && probe.samples.back().sent > t_last_open &&
               waiting() >= static_cast<long long>(N);
      },
      t0 + secs_to_ns(o.timeout), [&](u64 t) {
        probe.tick(t);
        long long w = std::max<long long>(0, waiting());
        while (opened < N && opened < static_cast<u64>(w) + 256) {
          Conn& c = L.connect(&consumer, true, http);
          L.send(c, Cmd::Reserve, poll);
          ++opened;
          t_last_open = now_ns();
        }
      });
  if (!ok) die("timeout opening " + std::to_string(N) + " waiting consumers (" + std::to_string(waiting()) + " waiting)");
  double setup_s = static_cast<double>(now_ns() - t0) / 1e9;
  deliveries_per_conn.assign(L.open_count() + 8, 0);
  pub = &L.connect(&publisher, false, http);
  L.run_for(0.3);  // the publisher's connection is accepted; the opening's work is over
  long long rss1 = rss_bytes(o.pid);

  // 2. all wait: what does the server spend?
  IdleWindow idle = idle_window(L, o, o.idle_s);

  // 3. publishes, one at a time
  u64 done = 0, next_at = 0;
  const u64 gap = static_cast<u64>(o.gap_ms * 1e6);
  double c0 = proc_cpu_precise_s(o.pid), s0 = self_cpu_s();
  u64 tp0 = now_ns();
  ok = L.run_until([&] { return done >= J; }, tp0 + secs_to_ns(o.timeout), [&](u64 t) {
    if (inflight && delivered && pub_done && acked) {
      inflight = false;
      ++done;
      next_at = t + gap;
    }
    if (!inflight && done < J && t >= next_at) {
      inflight = true;
      delivered = pub_done = acked = false;
      t_pub = now_ns();
      L.send(*pub, Cmd::Put, pub_req, t_pub);
    }
  });
  u64 tp1 = now_ns();
  double c1 = proc_cpu_precise_s(o.pid), s1 = self_cpu_s();
  if (!ok) err.add("timeout: " + std::to_string(done) + " of " + std::to_string(J) + " publishes done");
  // the waiting count after the publishes (each consumer that got a job waits again)
  u64 t_end = now_ns();
  L.run_until([&] { return !probe.samples.empty() && probe.samples.back().sent > t_end; }, t_end + 5 * kNs,
              [&](u64 t) { probe.tick(t); });
  u64 distinct = 0;
  for (u64 d : deliveries_per_conn) distinct += d > 0;

  double wall = static_cast<double>(tp1 - tp0) / 1e9;
  Json j;
  j.str("scenario", "longpoll").str("proto", o.proto).integer("consumers", static_cast<long long>(N));
  j.integer("publishes", static_cast<long long>(J)).integer("size", o.size).integer("lp_timeout_s", o.lp_timeout);
  j.num("setup_s", setup_s);
  j.integer("rss_before", rss0).integer("rss_waiting", rss1);
  if (rss0 >= 0) j.num("bytes_per_waiting_consumer", static_cast<double>(rss1 - rss0) / static_cast<double>(N));
  idle.put(j, "idle");
  j.integer("done", static_cast<long long>(done)).num("publish_wall_s", wall);
  j.num("server_cpu_us_per_publish", done ? (c1 - c0) * 1e6 / static_cast<double>(done) : std::nan(""));
  j.num("server_cpu_util_publishing", (c1 - c0) / wall).num("loadgen_cpu_util_publishing", (s1 - s0) / wall);
  j.integer("consumers_served", static_cast<long long>(distinct));
  j.integer("waiting_at_end", waiting());
  j.integer("timeouts", static_cast<long long>(timeouts));
  put_hist(j, "wake_us", wake);
  put_hist(j, "wake_kernel_us", wake_k);
  put_hist(j, "publish_us", pub_lat);
  put_hist(j, "ack_us", ack_lat);
  err.put(j);
  probe.errors.put(j.open("probe"));
  j.close();
  std::printf("%s\n", j.finish().c_str());
}

// C connections, each making one request (--proto http: a consume of the empty queue, answered
// 404; text: list-tube-used) and then staying open, idle; at most 256 requests in flight while
// they open. RSS of the server before and after (bytes per idle connection), then its CPU
// while they all sit for --idle-s.
void scen_idle(const Opts& o) {
  const bool http = o.proto == "http";
  if (!http && o.proto != "text") die("--proto must be http or text");
  Loop L(o);
  const u64 N = static_cast<u64>(conns_or(o, 10000));
  std::unique_ptr<HttpApi> api;
  if (http) api = std::make_unique<HttpApi>(o);
  const std::string req = http ? api->consume("?ttr=30") : "list-tube-used\r\n";
  u64 opened = 0, ready = 0;
  Errors err;
  FnHandler h([&](Conn&, Cmd, u64, u64, sv line, sv body) {
    if (http ? http_status(line) != 404 : !starts(line, "USING ")) err.add(http ? http_err(line, body) : std::string(line));
    ++ready;
  });
  L.run_for(0.1);
  long long rss0 = rss_bytes(o.pid);
  u64 t0 = now_ns();
  bool ok = L.run_until([&] { return ready >= N; }, t0 + secs_to_ns(o.timeout), [&](u64) {
    while (opened < N && opened < ready + 256) {
      Conn& c = L.connect(&h, false, http);
      L.send(c, Cmd::Other, req);
      ++opened;
    }
  });
  if (!ok) die("timeout opening idle connections (" + std::to_string(ready) + " ready)");
  double open_s = static_cast<double>(now_ns() - t0) / 1e9;
  L.run_for(0.3);
  long long rss1 = rss_bytes(o.pid);
  IdleWindow idle = idle_window(L, o, o.idle_s);
  Json j;
  j.str("scenario", "idle").str("proto", o.proto).integer("conns", static_cast<long long>(N));
  j.num("open_s", open_s).integer("rss_before", rss0).integer("rss_idle", rss1);
  if (rss0 >= 0) j.num("bytes_per_conn", static_cast<double>(rss1 - rss0) / static_cast<double>(N));
  idle.put(j, "idle");
  err.put(j);
  std::printf("%s\n", j.finish().c_str());
}

void raise_nofile() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  rlim_t want = 1 << 17;
  if (rl.rlim_max < want) {
    rlimit r2{want, want};
    if (setrlimit(RLIMIT_NOFILE, &r2) == 0) return;  // needs CAP_SYS_RESOURCE
  }
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  Opts o = parse_opts(argc, argv);
  raise_nofile();
  const std::string& s = o.scenario;
  if (s == "cycle") scen_cycle(o);
  else if (s == "pipeline") scen_pipeline(o);
  else if (s == "fill") scen_fill(o);
  else if (s == "drain") scen_drain(o);
  else if (s == "prodcons") scen_prodcons(o);
  else if (s == "tubes") scen_tubes(o);
  else if (s == "conns") scen_conns(o);
  else if (s == "delayed") scen_delayed(o);
  else if (s == "mass") scen_mass(o);
  else if (s == "grow") scen_grow(o);
  else if (s == "expire" || s == "purge") scen_lifecycle(o);
  else if (s == "http-cycle") scen_http_cycle(o);
  else if (s == "longpoll") scen_longpoll(o);
  else if (s == "idle") scen_idle(o);
  else die("unknown --scenario '" + s + "' (try --help)");
  std::fflush(stdout);
  return 0;
}
