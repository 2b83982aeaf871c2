#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/intrusive_list.h"
#include "command/identity.h"
#include "command/store.h"
#include "http/metrics.h"
#include "net/access_list.h"
#include "net/event_loop.h"
#include "net/tls.h"
#include "redis/store.h"
#include "server/connection.h"
#include "server/heap_prefault.h"
#include "server/options.h"
#include "server/tls_identities.h"
#include "storage/binlog.h"
#include "storage/cold_store.h"
#include "store/memory_store.h"

namespace stalkd::server {

class Server;
class HttpHost;
// Makes a connection on an accepted socket: the protocol a listener speaks.
using ConnectionFactory = Connection* (*)(Server& server, int fd);
// The beanstalkd text protocol.
Connection* MakeTextConnection(Server& server, int fd);
// The same on a --listen-auth listener: nothing but `auth` and `quit` before `auth`.
Connection* MakeAuthTextConnection(Server& server, int fd);

// Owns the store, the event loop, the listening sockets and the connections, and fixes the
// order of work in one loop iteration (see RunOnce). Connections reach the store only
// through the command interface; the server itself knows the embedded store only to attach
// the binlog to it and to trim its memory.
class Server final : public command::Host {
 public:
  Server(const Options& options, const Clock& clock);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // With -b: locks the binlog directory and restores its jobs. Call before AddListener/Run.
  // false: start-up must stop with *exit_code (10 when another server holds the lock, as
  // beanstalkd; 0 when a signal stopped the recovery) after printing *error.
  bool OpenBinlog(std::string* error, int* exit_code);
  // With --store redis...: starts connecting to Redis, without waiting (docs/SCALE-OUT.md,
  // "Start-up and outages"): connections are served at once, their commands waiting for the
  // store. Run() ends with exit_code() 1 if Redis turns out unusable before it ever served.
  void OpenStore();

  // Takes ownership of a listening socket and starts accepting on it; its connections are
  // made by `make` (the protocol they speak).
  // With `tls`, each connection speaks TLS (SetTls's context) before its protocol.
  bool AddListener(int fd, ConnectionFactory make = &MakeTextConnection, bool tls = false);
  // The TLS context of the tls:// listeners (made from the --tls-* files); call before Run.
  void SetTls(std::shared_ptr<net::TlsContext> ctx) { tls_ = std::move(ctx); }
  // --tls-identities, as read before -u dropped privileges; call before Run.
  void SetTlsIdentities(std::shared_ptr<const TlsIdentities> ids) {
    tls_identities_ = std::move(ids);
  }
  // SIGHUP: reads the --tls-* files again; new handshakes use them, connections stay. A file
  // that cannot be used keeps the context in use; either way a line on stderr says so.
  bool ReloadTls();
  // SIGHUP's --tls-identities: a file that cannot be read keeps the ones in use.
  void ReloadTlsIdentities();
  // What the TLS listeners did (/metrics).
  struct TlsStats {
    uint64_t handshakes = 0;       // finished
    uint64_t failures = 0;         // failed (bad input, refused certificates, clients gone)
    uint64_t timeouts = 0;         // closed by --tls-handshake-timeout
    uint64_t record_timeouts = 0;  // closed by it: a partial record left unfinished
    uint64_t refused = 0;          // not accepted: TLS memory at its limit
    uint64_t reloads = 0, reload_failures = 0;
    uint64_t identified = 0;  // clients whose certificate stood for an identity
    size_t handshaking = 0;   // under way now
  };
  bool tls() const { return tls_ != nullptr; }
  TlsStats tls_stats() const;
  // The most OpenSSL may hold (a share of --max-memory): at it, TLS clients are refused.
  uint64_t tls_memory_limit() const { return tls_memory_limit_; }
  // Loops until Stop() or a terminating signal (when signals are enabled).
  void Run();
  // One iteration: poll I/O (waiting at most until the store's next deadline), run the
  // front ends that have input, tick the store, write replies, close finished
  // connections.
  void RunOnce();
  // Recovery's progress hook: now and then, one iteration that polls without waiting and
  // does no timer work, so the admin listener answers /healthz and /readyz ("recovering").
  void ServeWhileRecovering();
  bool recovering() const { return recovering_; }
  // Why the store cannot serve now (the Redis store: not connected, no master, replicas
  // behind...), for /readyz; empty when it can.
  std::string StoreNotReady() const { return redis_ ? redis_->why_not_ready() : std::string(); }
  void Stop() { stopping_ = true; }
  // What the process should exit with once Run() returns.
  int exit_code() const { return exit_code_; }
  // Routes SIGTERM/SIGINT (stop) and SIGUSR1 (drain mode) through the loop.
  bool HandleSignals();

  command::Store& store() { return *store_; }
  // The HTTP front ends' state (with --http or --admin-http), else null.
  HttpHost* http() { return http_.get(); }
  // How the text listener treats `auth` (its token store: the HTTP side's).
  command::AuthPolicy& text_auth() { return text_auth_; }
  command::AuthPolicy& text_auth_required() { return text_auth_required_; }
  bool draining() const { return draining_; }
  // The binlog's figures for /metrics (zeros without -b).
  http::BinlogMetrics BinlogMetricsNow() const;
  command::HostStats CurrentStats() const override;

  // Called by connections.
  void MarkRunnable(Connection* c);
  void MarkDirty(Connection* c);
  void MarkClosed(Connection* c);
  // c's unread output has filled its buffer: watch it for --stalled-client-timeout.
  void MarkBlocked(Connection* c);
  // c's TLS stream holds decrypted input no poll announces: read it next iteration.
  void MarkTlsReadable(Connection* c);
  // c's TLS stream holds a partial record (Connection::tls_waiting_since): bound its wait.
  void WatchTls(Connection* c);
  // c's TLS handshake finished (error null) or failed (error says why).
  void OnTlsHandshake(Connection* c, const char* error);
  // c's TLS stream failed after its handshake (the connection closes).
  void OnTlsError(Connection* c, const std::string& error);
  net::EventLoop& loop() { return loop_; }
  const Clock& clock() const { return clock_; }

 private:
  class ListenHandler;
  class SignalHandler;
  class SyncHandler;

  void Accept(int fd, ConnectionFactory make, bool tls);
  // Starts TLS on a connection just made; false if it cannot be.
  bool StartTls(Connection* c);
  // Closes the TLS clients whose handshake, or a partial record they began, has lasted
  // --tls-handshake-timeout.
  void CheckHandshakes(Nanos now);
  // Reads what the connections on tls_readable_ left in their TLS streams.
  void ReadTlsPending();
  // "1.2.3.4:5678" of a connection's peer, for log lines.
  static std::string PeerName(const Connection* c);
  // RunOnce's work with the given poll timeout.
  void RunIteration(Nanos poll_timeout);
  // Destroys the connections marked closed: after the poll (those whose peer went away,
  // before the commands run) and at the end of an iteration.
  void Reap();
  // How long the next poll may wait: 0 if there is work, -1 for ever.
  Nanos PollTimeout();
  // Sends the replies of the connections marked dirty that may go out now (their records
  // are written, or under -f 0 synced); the others stay for the iteration's group commit.
  void SendReady();
  void CheckBlocked();
  // Notes whether freed job memory should go back to the OS; TrimWhenIdle does it once the
  // server is quiet, and returns the poll timeout to use (shortened to wake up for it).
  void NoteMemory();
  Nanos TrimWhenIdle(Nanos poll_timeout);
  // The binlog's background sync has finished: release the replies it made durable.
  void OnStoreSynced();
  void ReleaseHeld();
  // c's pending replies depend only on binlog records that are written (-f 0: synced).
  bool MayReply(Connection* c) const;
  // The binlog failed: replies that were waiting for it are not durable.
  void HandleStoreFailure();

  Options options_;
  const Clock& clock_;
  Nanos started_;
  std::unique_ptr<command::Store> store_;     // where jobs live; connections reach it only here
  store::MemoryStore* memory_ = nullptr;      // store_ when it is the embedded store
  redis::RedisStore* redis_ = nullptr;        // store_ when it is the Redis store
  std::unique_ptr<storage::Binlog> binlog_;   // with -b; written once per RunOnce
  std::unique_ptr<storage::ColdStore> cold_;  // with --hot-memory: the disk tier
  Nanos binlog_deadline_ = kForever;          // when the binlog next needs a Flush (fsync)
  bool binlog_failure_handled_ = false;
  std::unique_ptr<SyncHandler> sync_handler_;
  net::EventLoop loop_;
  std::vector<std::unique_ptr<ListenHandler>> listeners_;
  std::unique_ptr<SignalHandler> signals_;
  bool stopping_ = false;
  int exit_code_ = 0;
  Nanos accept_paused_until_ = 0;
  net::AccessList access_;   // --allow
  size_t memory_peak_ = 0;   // engine memory high-water mark since the last trim
  HeapPrefaulter prefault_;  // faults in the heap's growth off the loop thread
  bool trim_due_ = false;
  Nanos last_command_ = 0;  // when connections last had input to run
  uint64_t refused_clients_ = 0;

  std::vector<Connection*> runnable_;
  std::vector<Connection*> dirty_;
  std::vector<Connection*> closed_;
  std::vector<Connection*> blocked_;  // output full, not read by the peer
  std::vector<Connection*> held_;     // replies waiting for a binlog sync (-f 0)
  IntrusiveList<Connection, ConnectionTag> connections_;  // all open connections, owned

  std::vector<Connection*> handshaking_;                 // TLS handshakes, partial records held
  std::vector<Connection*> tls_readable_;                // decrypted input waiting in the stream
  std::shared_ptr<net::TlsContext> tls_;                 // the tls:// listeners'; null without any
  std::shared_ptr<const TlsIdentities> tls_identities_;  // --tls-identities; null without
  TlsStats tls_stats_;
  uint64_t tls_memory_limit_ = 0;
  Nanos next_handshake_check_ = 0;

  std::unique_ptr<HttpHost> http_;
  command::AuthPolicy text_auth_;           // --require-auth; the authenticator: http_
  command::AuthPolicy text_auth_required_;  // --listen-auth's
  bool draining_ = false;                   // SIGUSR1
  bool recovering_ = false;                 // the binlog is being replayed
  Nanos next_recovery_serve_ = 0;

  std::string instance_id_;
  std::string hostname_, os_, platform_;
};

template <class FrontEnd>
Connection* MakeConnection(Server& server, int fd) {
  return new ConnectionOf<FrontEnd>(server, fd, server.store());
}

}  // namespace stalkd::server
