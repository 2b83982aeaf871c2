#include "server/server.h"

#include <errno.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "base/check.h"
#include "protocol/conversation.h"
#include "server/http_host.h"
#include "server/startup_report.h"
#include "server/version.h"

namespace stalkd::server {

namespace {

// Conversation steps (commands, kick slices) one connection may take per loop iteration
// before the others get their turn.
constexpr size_t kStepsPerRun = 128;
// The shortest wait for a deadline nobody waits for (a delayed job of a tube no session
// waits on, a TTL): what lateness the loop trades for fewer wake-ups while a steady stream
// of them falls due (EngineOptions::batch_wait). The others are waited for exactly.
constexpr Nanos kBatchWait = 250'000;
// Connections accepted per wake-up of a listening socket.
constexpr int kAcceptsPerWake = 64;
// How long accepting pauses when the process is out of file descriptors.
constexpr Nanos kAcceptBackoff = 100'000'000;
// After job memory falls to half of its high-water mark, and by at least this much, freed
// memory is handed back to the OS (glibc keeps it otherwise)...
constexpr size_t kTrimMinDrop = size_t{1} << 20;
// ...once the server is quiet: no client command for kTrimQuiet, and no timer due within
// kTrimIdle. malloc_trim walks the whole heap (15 ms at a few hundred MB), which must not
// delay the clients of a busy server.
constexpr Nanos kTrimQuiet = 100'000'000;
constexpr Nanos kTrimIdle = 20'000'000;

std::string RandomHexId() {
  unsigned char b[8] = {};
  if (getrandom(b, sizeof b, 0) != static_cast<ssize_t>(sizeof b)) {
    uint64_t x = static_cast<uint64_t>(getpid()) * 0x9E3779B97F4A7C15ULL;
    for (unsigned char& c : b) {
      c = static_cast<unsigned char>(x >> 56);
      x *= 0x100000001B3ULL;
    }
  }
  char hex[17];
  for (int i = 0; i < 8; i++) snprintf(hex + 2 * i, 3, "%02x", b[i]);
  return std::string(hex, 16);
}

store::MemoryStoreOptions MemoryStoreOptionsFor(const Options& o) {
  store::MemoryStoreOptions m;
  m.engine.max_memory = MaxMemory(o);
  m.engine.batch_wait = kBatchWait;
  m.max_job_size = o.max_job_size;
  return m;
}

}  // namespace

class Server::ListenHandler final : public net::EventLoop::Handler {
 public:
  ListenHandler(Server& s, int fd, ConnectionFactory make, bool tls)
      : server_(s), fd_(fd), make_(make), tls_(tls) {}
  ~ListenHandler() override {
    server_.loop().Remove(fd_);
    close(fd_);
  }
  void OnEvents(uint32_t) override { server_.Accept(fd_, make_, tls_); }
  int fd() const { return fd_; }

 private:
  Server& server_;
  int fd_;
  ConnectionFactory make_;
  bool tls_;
};

class Server::SignalHandler final : public net::EventLoop::Handler {
 public:
  SignalHandler(Server& s, int fd) : server_(s), fd_(fd) {}
  ~SignalHandler() override {
    server_.loop().Remove(fd_);
    close(fd_);
  }
  void OnEvents(uint32_t) override {
    signalfd_siginfo si;
    while (read(fd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
      if (si.ssi_signo == SIGUSR1) {
        server_.store().SetDraining(true);
        server_.draining_ = true;
      } else if (si.ssi_signo == SIGHUP) {
        server_.ReloadTls();
      } else {
        server_.Stop();
      }
    }
  }

 private:
  Server& server_;
  int fd_;
};

class Server::SyncHandler final : public net::EventLoop::Handler {
 public:
  explicit SyncHandler(Server& s) : server_(s) {}
  void OnEvents(uint32_t) override { server_.OnStoreSynced(); }

 private:
  Server& server_;
};

Server::Server(const Options& options, const Clock& clock)
    : options_(options), clock_(clock), started_(clock.Now()) {
  if (options_.store_url.empty()) {
    memory_ = new store::MemoryStore(clock, MemoryStoreOptionsFor(options), this);
    store_.reset(memory_);
  } else {
    redis::StoreOptions ro;
    std::string error;
    STALKD_CHECK(redis::ParseStoreUrl(options_.store_url, &ro.url, &error));  // by ParseOptions
    ro.url.auth = {options_.store_user, options_.store_password};
    ro.url.sentinel_auth = {options_.store_sentinel_user, options_.store_sentinel_password};
    ro.url.tls_context = options_.store_tls;
    ro.url.tls_name = options_.store_tls_name;
    ro.prefix = options_.store_prefix;
    ro.wait_replicas = options_.store_wait;
    ro.lease = options_.store_lease_ms * 1'000'000;
    ro.retry = options_.store_retry_ms * 1'000'000;
    ro.max_job_size = static_cast<uint32_t>(options_.max_job_size);
    redis_ = new redis::RedisStore(loop_, clock, std::move(ro), this);
    store_.reset(redis_);
  }
  for (const std::string& cidr : options_.allow) {
    std::string error;
    STALKD_CHECK(access_.Add(cidr, &error));  // validated by ParseOptions
  }
  instance_id_ = RandomHexId();
  // OpenSSL's share of memory: an eighth of --max-memory, at least 64 MiB.
  tls_memory_limit_ = std::max<uint64_t>(MaxMemory(options_) / 8, uint64_t{64} << 20);
  if (!options_.http_port.empty() || !options_.admin_port.empty() || options_.any_require_auth() ||
      !options_.tls_identities.empty()) {
    http_ = std::make_unique<HttpHost>(*this, options_);
    text_auth_ = {http_.get(), options_.require_auth};
    text_auth_required_ = {http_.get(), true};
    // Command, queue and run-time latencies are measured only for /metrics.
    if (!options_.admin_port.empty()) store_->SetObserver(http_.get());
  }
  utsname u;
  if (uname(&u) == 0) {
    hostname_ = u.nodename;
    os_ = u.version;
    platform_ = u.machine;
  }
}

Server::~Server() {
  // Connections first: their conversations close engine sessions.
  while (Connection* c = connections_.front()) {
    connections_.Remove(c);
    if (http_) http_->Closed(c);
    delete c;
  }
  if (cold_) memory_->set_cold(nullptr);  // nothing is read back from here on
  if (binlog_) {
    if (sync_handler_) loop_.Remove(binlog_->sync_fd());
    binlog_->Close();
    // The disk tier's index, so that the next start need not read the jobs on disk.
    if (cold_) binlog_->WriteCheckpoint(cold_->index(), cold_->ready_index());
    memory_->engine().set_log(nullptr);
  }
  if (redis_) {
    redis_->Stop();  // this front end's reservations go back at once, not after its lease
    // The HTTP host's dashboard holds a session of the store (its sampler's): it goes
    // before the store does.
    if (http_) {
      store_->SetObserver(nullptr);
      http_.reset();
    }
    store_.reset();  // before the loop its sockets are on
  }
}

void Server::OpenStore() {
  if (redis_) redis_->Start();
}

bool Server::OpenBinlog(std::string* error, int* exit_code) {
  storage::BinlogOptions so;
  so.dir = options_.binlog_dir;
  so.segment_size = BinlogSegmentSize(options_);
  so.fsync_ms = options_.fsync_ms;
  so.fsync_never = options_.fsync_never;
  so.skip_damaged = options_.binlog_skip_damaged;
  so.verbosity = options_.verbosity;
  so.background_sync = true;
  so.disk_tier = options_.hot_memory != 0;
  // While the jobs come back, the admin listener (if any) answers its health probes, and a
  // SIGTERM or SIGINT (read by the loop) stops the recovery.
  so.progress = [this] {
    ServeWhileRecovering();
    return !stopping_;
  };
  // The disk tier exists before recovery: a checkpoint of its index restores jobs into it.
  if (options_.hot_memory != 0) {
    so.restore_cold = [this](const auto& e) { cold_->AddRestored(e); };
    // A replay after a crash restores the jobs that can be on disk straight to it.
    so.restore_cold_ready = [this](const auto& e) { cold_->AddRestoredReady(e); };
  }
  auto binlog = std::make_unique<storage::Binlog>(so, clock_);
  if (!binlog->Lock(error)) {
    *exit_code = 10;
    return false;
  }
  if (options_.hot_memory != 0) {  // the disk tier (docs/DISK-TIER.md)
    storage::ColdStoreOptions co;
    co.budget = options_.hot_memory;
    cold_ = std::make_unique<storage::ColdStore>(memory_->engine(), *binlog, co);
  }
  recovering_ = true;
  RecoveryReport report;
  bool recovered = binlog->Recover(&memory_->engine(), error);
  recovering_ = false;
  if (!recovered) {
    *exit_code = binlog->stopped() ? 0 : 1;
    cold_.reset();
    return false;
  }
  report.Print(so.dir, binlog->restored(), binlog->skipped());
  binlog_ = std::move(binlog);
  memory_->engine().set_log(binlog_.get());
  if (cold_) memory_->set_cold(cold_.get());
  // Recovery's temporary index of every record is gone: give its memory back to the OS.
  malloc_trim(0);
  if (binlog_->sync_fd() >= 0) {
    sync_handler_ = std::make_unique<SyncHandler>(*this);
    if (!loop_.Add(binlog_->sync_fd(), EPOLLIN, sync_handler_.get())) {
      *error = std::string("cannot watch the binlog's sync thread: ") + strerror(errno);
      *exit_code = 1;
      return false;
    }
  }
  return true;
}

Connection* MakeTextConnection(Server& server, int fd) {
  return new ConnectionOf<protocol::Conversation>(server, fd, server.store(), server.text_auth());
}

Connection* MakeAuthTextConnection(Server& server, int fd) {
  return new ConnectionOf<protocol::Conversation>(server, fd, server.store(),
                                                  server.text_auth_required());
}

bool Server::AddListener(int fd, ConnectionFactory make, bool tls) {
  auto h = std::make_unique<ListenHandler>(*this, fd, make, tls);
  if (!loop_.Add(fd, EPOLLIN, h.get())) return false;
  listeners_.push_back(std::move(h));
  return true;
}

bool Server::HandleSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGUSR1);
  // SIGHUP reloads the TLS certificate; without TLS it keeps its default action, as in
  // beanstalkd.
  if (tls_) sigaddset(&set, SIGHUP);
  if (sigprocmask(SIG_BLOCK, &set, nullptr) != 0) return false;
  int fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0) return false;
  signals_ = std::make_unique<SignalHandler>(*this, fd);
  return loop_.Add(fd, EPOLLIN, signals_.get());
}

void Server::Accept(int lfd, ConnectionFactory make, bool tls) {
  for (int i = 0; i < kAcceptsPerWake; i++) {
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof peer;
    int fd =
        accept4(lfd, reinterpret_cast<sockaddr*>(&peer), &peer_len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: stop polling the listener for a moment instead of spinning.
        if (options_.verbosity > 0) perror("stalkd: accept");
        accept_paused_until_ = clock_.Now() + kAcceptBackoff;
        for (auto& l : listeners_) loop_.Modify(l->fd(), 0, l.get());
      }
      return;
    }
    if (!access_.Allows(reinterpret_cast<sockaddr*>(&peer), peer_len)) {
      // Not on the --allow list: closed before it can send anything.
      if (options_.verbosity > 0 || refused_clients_ == 0) {
        fprintf(stderr, "stalkd: refused a client not on the --allow list\n");
      }
      refused_clients_++;
      close(fd);
      continue;
    }
    if (tls && net::TlsMemoryBytes() >= tls_memory_limit_) {
      // What OpenSSL holds (handshakes under way, TLS connections' buffers) is at its share
      // of --max-memory: refused before it can make it hold more.
      if (options_.verbosity > 0 || tls_stats_.refused == 0) {
        fprintf(stderr, "stalkd: refused a TLS client: TLS memory at its limit of %llu bytes\n",
                static_cast<unsigned long long>(tls_memory_limit_));
      }
      tls_stats_.refused++;
      close(fd);
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // fails harmlessly on unix
    Connection* c = make(*this, fd);
    // Into the loop before TLS starts: a connection TLS lists is never deleted here.
    if (!loop_.Add(fd, 0, c) || (tls && !StartTls(c))) {
      if (http_) http_->Closed(c);
      delete c;
      continue;
    }
    connections_.PushBack(c);
    c->UpdateInterest();
  }
}

void Server::MarkRunnable(Connection* c) {
  if (c->on_runnable) return;
  c->on_runnable = true;
  runnable_.push_back(c);
}

void Server::MarkDirty(Connection* c) {
  if (c->on_dirty) return;
  c->on_dirty = true;
  dirty_.push_back(c);
}

void Server::MarkBlocked(Connection* c) {
  if (c->on_blocked) return;
  c->on_blocked = true;
  blocked_.push_back(c);
}

// Disconnects clients whose replies have filled their output buffer and that have read
// nothing for --stalled-client-timeout: they hold at most that buffer until then.
void Server::CheckBlocked() {
  Nanos now = clock_.Now();
  Nanos limit = options_.stalled_client_timeout_s * kSecond;
  std::erase_if(blocked_, [&](Connection* c) {
    if (c->dead() || c->blocked_since() == 0) {
      c->on_blocked = false;
      return true;
    }
    if (now - c->blocked_since() < limit) return false;
    fprintf(stderr,
            "stalkd: closing a client that has read none of its %zu bytes of replies for %lld s\n",
            c->front_end().output().size(),
            static_cast<long long>(options_.stalled_client_timeout_s));
    c->on_blocked = false;
    c->Kill();
    return true;
  });
}

void Server::NoteMemory() {
  if (!memory_) return;
  size_t used = memory_->engine().memory_used();
  prefault_.Note(used);
  memory_peak_ = std::max(memory_peak_, used);
  trim_due_ = used <= memory_peak_ / 2 && memory_peak_ - used >= kTrimMinDrop;
}

Nanos Server::TrimWhenIdle(Nanos poll_timeout) {
  if (!trim_due_) return poll_timeout;
  Nanos quiet = clock_.Now() - last_command_;
  if (quiet < kTrimQuiet) {  // wake up once it has been quiet long enough
    return poll_timeout < 0 ? kTrimQuiet - quiet : std::min(poll_timeout, kTrimQuiet - quiet);
  }
  if (poll_timeout >= 0 && poll_timeout < kTrimIdle) return poll_timeout;
  malloc_trim(0);
  memory_peak_ = memory_->engine().memory_used();
  trim_due_ = false;
  return PollTimeout();  // time has passed
}

void Server::OnStoreSynced() {
  uint64_t syncs = binlog_->syncs();
  binlog_->OnSyncDone();  // this iteration's Flush starts the next sync
  if (binlog_->failed()) return HandleStoreFailure();
  if (http_ && binlog_->syncs() != syncs) {
    http_->metrics().ObserveBinlogSync(binlog_->last_sync_duration());
  }
  ReleaseHeld();
}

bool Server::MayReply(Connection* c) const {
  return store_->Covers(c->front_end().session().need_mark());
}

void Server::ReleaseHeld() {
  std::erase_if(held_, [&](Connection* c) {
    if (!MayReply(c)) return false;
    c->on_held = false;
    if (!c->dead() && !c->Flush()) c->Kill();
    return true;
  });
}

void Server::HandleStoreFailure() {
  if (binlog_failure_handled_) return;
  // The records of the replies not yet sent are not durable, so those replies must not
  // claim they are: the clients that are owed one lose their connection instead (an
  // unknown outcome, which is the truth). From now on puts answer OUT_OF_MEMORY.
  binlog_failure_handled_ = true;
  size_t closed = 0;
  for (auto* list : {&dirty_, &held_}) {
    for (Connection* c : *list) {
      if (c->dead()) continue;
      c->Kill();
      closed++;
    }
  }
  fprintf(stderr,
          "stalkd: the binlog failed: closed %zu connections whose replies are not "
          "durable; puts are refused until restart\n",
          closed);
}

void Server::MarkClosed(Connection* c) {
  if (c->on_closed) return;
  c->on_closed = true;
  closed_.push_back(c);
}

Nanos Server::PollTimeout() {
  if (!runnable_.empty() || !dirty_.empty() || !closed_.empty() || !tls_readable_.empty() ||
      store_->Busy()) {
    return 0;
  }
  Nanos now = clock_.Now();
  Nanos next = store_->Tick();
  // What the timers completed (a waiting reserve handed a job that just fell due) goes out
  // now, not after the commands of the next iteration.
  if (!dirty_.empty()) SendReady();
  if (!dirty_.empty()) return 0;
  if (accept_paused_until_ > 0) next = std::min(next, accept_paused_until_);
  next = std::min(next, binlog_deadline_);
  if (!blocked_.empty()) next = std::min(next, now + kSecond);  // CheckBlocked's period
  if (!handshaking_.empty()) next = std::min(next, next_handshake_check_);
  if (http_) next = std::min(next, http_->next_check());
  if (next == kForever) return -1;
  return std::max<Nanos>(0, next - now);
}

void Server::ServeWhileRecovering() {
  // At most every 10 ms: the probes need answers, recovery needs the CPU.
  Nanos now = clock_.Now();
  if (now < next_recovery_serve_) return;
  next_recovery_serve_ = now + 10'000'000;
  RunIteration(0);
}

void Server::SendReady() {
  std::erase_if(dirty_, [&](Connection* c) {
    if (c->dead() || !MayReply(c)) return false;
    c->on_dirty = false;
    if (!c->Flush()) c->Kill();
    return true;
  });
}

void Server::RunOnce() { RunIteration(TrimWhenIdle(PollTimeout())); }

void Server::RunIteration(Nanos poll_timeout) {
  int polled = loop_.Poll(poll_timeout);

  if (accept_paused_until_ > 0 && clock_.Now() >= accept_paused_until_) {
    accept_paused_until_ = 0;
    for (auto& l : listeners_) loop_.Modify(l->fd(), EPOLLIN, l.get());
  }
  if (!closed_.empty()) Reap();
  if (!tls_readable_.empty()) ReadTlsPending();

  std::vector<Connection*> run;
  run.swap(runnable_);
  if (!run.empty()) last_command_ = clock_.Now();
  for (Connection* c : run) c->on_runnable = false;
  for (Connection* c : run) {
    if (c->dead()) continue;
    if (c->on_held) {  // it read ahead; it is marked runnable again on release
      c->UpdateInterest();
      continue;
    }
    bool more = c->front_end().Run(kStepsPerRun);
    if (more) MarkRunnable(c);
    // Replies go out as soon as they are ready unless a binlog record they depend on is
    // not yet written (or, under -f 0, synced): then they wait for the group commit below.
    if (!MayReply(c)) {
      MarkDirty(c);
    } else if (!c->Flush()) {
      c->Kill();
    }
  }

  // While the binlog is replayed the engine is not whole: its timers wait.
  if (!recovering_) store_->Tick();

  // Group commit: the records of this iteration (and of connections closed at the end of
  // the last one) are written together. Under -f 0 the replies that depend on them wait
  // until they are synced, which the store does on its own thread while the loop goes on
  // with the next batch (and its records wait in memory until that sync has finished).
  if (binlog_) {
    binlog_deadline_ = binlog_->Flush(polled == 0 && runnable_.empty() && !store_->Busy());
    if (binlog_->failed()) HandleStoreFailure();
  }

  std::vector<Connection*> flush;
  flush.swap(dirty_);
  for (Connection* c : flush) c->on_dirty = false;
  for (Connection* c : flush) {
    if (c->dead()) continue;
    if (!MayReply(c)) {  // under -f 0, until the sync it needs has finished
      if (!c->on_held) {
        c->on_held = true;
        held_.push_back(c);
        c->UpdateInterest();
      }
      continue;
    }
    if (!c->Flush()) c->Kill();
  }

  if (!blocked_.empty()) CheckBlocked();
  if (!handshaking_.empty()) CheckHandshakes(clock_.Now());

  if (http_) http_->CheckRequestTimeouts(clock_.Now());

  Reap();
  NoteMemory();
}

void Server::Reap() {
  std::vector<Connection*> gone;
  gone.swap(closed_);
  for (Connection* c : gone) {
    if (http_) http_->Closed(c);
    if (c->on_runnable) std::erase(runnable_, c);
    if (c->on_dirty) std::erase(dirty_, c);
    if (c->on_blocked) std::erase(blocked_, c);
    if (c->on_held) std::erase(held_, c);
    if (c->on_handshaking) std::erase(handshaking_, c);
    if (c->on_tls_readable) std::erase(tls_readable_, c);
    connections_.Remove(c);
    delete c;
  }
}

void Server::Run() {
  while (!stopping_) {
    RunOnce();
    if (redis_ && !redis_->fatal().empty()) {
      fprintf(stderr, "stalkd: %s\n", redis_->fatal().c_str());
      exit_code_ = 1;
      break;
    }
  }
  if (binlog_ && !held_.empty()) {
    binlog_->Close();  // every written record is durable afterwards, unless it failed
    if (binlog_->failed()) {
      HandleStoreFailure();
    } else {
      ReleaseHeld();
    }
  }
}

http::BinlogMetrics Server::BinlogMetricsNow() const {
  http::BinlogMetrics m;
  if (!binlog_) return m;
  storage::Binlog::Stats st = binlog_->stats();
  m.segments = st.segments;
  m.live_bytes = st.live_bytes;
  m.dead_bytes = st.placed_bytes - st.live_bytes;
  m.dropped_updates = st.dropped_updates;
  m.failed = st.failed;
  return m;
}

command::HostStats Server::CurrentStats() const {
  command::HostStats h;
  h.pid = static_cast<long>(getpid());
  h.version = kVersion;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  h.utime_us = static_cast<int64_t>(ru.ru_utime.tv_sec) * 1000000 + ru.ru_utime.tv_usec;
  h.stime_us = static_cast<int64_t>(ru.ru_stime.tv_sec) * 1000000 + ru.ru_stime.tv_usec;
  h.uptime_s = static_cast<uint64_t>((clock_.Now() - started_) / kSecond);
  h.binlog_max_size = options_.binlog_size;
  if (binlog_) {
    storage::Binlog::Stats st = binlog_->stats();
    h.binlog_oldest_index = static_cast<int>(st.oldest_index);
    h.binlog_current_index = static_cast<int>(st.current_index);
    h.binlog_records_migrated = st.records_migrated;
    h.binlog_records_written = st.records_written;
  }
  h.id = instance_id_;
  h.hostname = hostname_;
  h.os = os_;
  h.platform = platform_;
  return h;
}

}  // namespace stalkd::server
