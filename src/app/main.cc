// stalkd: a beanstalkd-compatible work queue server.
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "net/listener.h"
#include "server/http_host.h"
#include "server/options.h"
#include "server/options_tls.h"
#include "server/server.h"
#include "server/startup_report.h"

namespace {

// Exit codes follow beanstalkd's.
constexpr int kExitUsage = 5;
constexpr int kExitListen = 111;
constexpr int kExitUser = 33;

bool BecomeUser(const std::string& name) {
  errno = 0;
  passwd* pw = getpwnam(name.c_str());
  if (!pw) {
    fprintf(stderr, "stalkd: getpwnam(\"%s\"): %s\n", name.c_str(),
            errno ? strerror(errno) : "no such user");
    return false;
  }
  if (setgid(pw->pw_gid) != 0 || initgroups(pw->pw_name, pw->pw_gid) != 0 ||
      setuid(pw->pw_uid) != 0) {
    fprintf(stderr, "stalkd: cannot become user %s: %s\n", name.c_str(), strerror(errno));
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  using stalkd::server::ParseOutcome;
  stalkd::server::Options opts;
  switch (stalkd::server::ParseOptions(argc, argv, &opts)) {
    case ParseOutcome::kExitOk:
      return 0;
    case ParseOutcome::kExitUsage:
      return kExitUsage;
    case ParseOutcome::kRun:
      break;
  }
  if (!opts.store_url.empty() && !opts.binlog_dir.empty()) {
    fprintf(stderr,
            "stalkd: -b cannot be used with --store %s: Redis keeps the jobs (its AOF and "
            "replicas are the log; docs/SCALE-OUT.md)\n",
            opts.store_url.c_str());
    return 1;
  }
  signal(SIGPIPE, SIG_IGN);
  setvbuf(stdout, nullptr, _IOLBF, 0);
  // SIGTERM, SIGINT (stop) and SIGUSR1 (drain) are blocked from the start, before anything
  // listens and before any thread exists, so one sent as soon as a client can connect
  // waits for the loop's signalfd (Server::HandleSignals) instead of ending the process
  // with its default action in the middle of start-up. A stop that comes during the
  // binlog's recovery ends it (exit 0); one that comes during another step of start-up is
  // taken by the loop's first iteration, which stops the server as it stops a running one.
  sigset_t handled;
  sigemptyset(&handled);
  sigaddset(&handled, SIGTERM);
  sigaddset(&handled, SIGINT);
  sigaddset(&handled, SIGUSR1);
  if (opts.tls()) sigaddset(&handled, SIGHUP);  // reloads the certificate (Server::ReloadTls)
  sigprocmask(SIG_BLOCK, &handled, nullptr);

  std::string warning, error;
  int fd = stalkd::net::InheritedListener(&warning);
  if (!warning.empty()) fprintf(stderr, "stalkd: %s\n", warning.c_str());
  if (fd < 0) fd = stalkd::net::Listen(opts.address, opts.port, &error, opts.unix_mode);
  if (fd < 0) {
    fprintf(stderr, "stalkd: cannot listen on %s port %s: %s\n", opts.address.c_str(),
            opts.port.c_str(), error.c_str());
    return kExitListen;
  }
  // The HTTP listeners (docs/HTTP.md) are bound now, so a taken port stops start-up before
  // recovery.
  int api_fd = -1, admin_fd = -1;
  struct {
    const std::string& address;
    const std::string& port;
    int* fd;
    const char* flag;
  } https[] = {
      {opts.http_address, opts.http_port, &api_fd, "--http"},
      {opts.admin_address, opts.admin_port, &admin_fd, "--admin-http"},
  };
  for (const auto& h : https) {
    if (h.port.empty()) continue;
    *h.fd = stalkd::net::Listen(h.address, h.port, &error, -1);
    if (*h.fd < 0) {
      fprintf(stderr, "stalkd: %s: cannot listen on %s port %s: %s\n", h.flag, h.address.c_str(),
              h.port.c_str(), error.c_str());
      return kExitListen;
    }
  }
  // More beanstalkd-protocol listeners (--listen), plain or TLS.
  std::vector<int> extra_fds;
  for (const auto& l : opts.listens) {
    int lfd = stalkd::net::Listen(l.address, l.port, &error, -1);
    if (lfd < 0) {
      fprintf(stderr, "stalkd: --listen: cannot listen on %s port %s: %s\n", l.address.c_str(),
              l.port.c_str(), error.c_str());
      return kExitListen;
    }
    extra_fds.push_back(lfd);
  }
  // The TLS certificate and key are read before -u drops privileges (a SIGHUP reads them
  // again as the user).
  std::shared_ptr<stalkd::net::TlsContext> tls;
  if (opts.tls()) {
    tls = stalkd::net::TlsContext::Create(stalkd::net::TlsContext::Role::kServer,
                                          stalkd::server::TlsConfigFor(opts), &error);
    if (!tls) {
      fprintf(stderr, "stalkd: TLS: %s\n", error.c_str());
      return 1;
    }
  }
  std::shared_ptr<const stalkd::server::TlsIdentities> tls_identities;
  if (!opts.tls_identities.empty()) {
    tls_identities = stalkd::server::TlsIdentities::Load(opts.tls_identities, &error);
    if (!tls_identities) {
      fprintf(stderr, "stalkd: --tls-identities: %s\n", error.c_str());
      return 1;
    }
  }
  if (!opts.user.empty() && !BecomeUser(opts.user)) return kExitUser;

  stalkd::SystemClock clock;
  stalkd::server::Server server(opts, clock);
  server.SetTls(tls);
  server.SetTlsIdentities(tls_identities);
  auto add = [&](int lfd, stalkd::server::ConnectionFactory make, bool with_tls = false) {
    if (server.AddListener(lfd, make, with_tls)) return true;
    fprintf(stderr, "stalkd: cannot set up the event loop: %s\n", strerror(errno));
    return false;
  };
  if (!server.HandleSignals()) {
    fprintf(stderr, "stalkd: cannot set up the event loop: %s\n", strerror(errno));
    return 1;
  }
  // The admin listener serves from the start: while the binlog is replayed it answers
  // /healthz, and /readyz with 503 "recovering". The others open once every job is back.
  if (admin_fd >= 0 && !add(admin_fd, &stalkd::server::MakeAdminConnection, opts.admin_tls)) {
    return 1;
  }
  server.OpenStore();
  if (!opts.binlog_dir.empty()) {
    int code = 1;
    if (!server.OpenBinlog(&error, &code)) {
      fprintf(stderr, "stalkd: %s\n", error.c_str());
      return code;  // 0: stopped by a signal, with the directory as it was
    }
  }
  if (stalkd::server::HttpHost* http = server.http(); http && !http->Open(&error)) {
    fprintf(stderr, "stalkd: %s\n", error.c_str());
    return 1;
  }
  if (!add(fd, &stalkd::server::MakeTextConnection)) return 1;
  for (size_t i = 0; i < extra_fds.size(); i++) {
    const auto& l = opts.listens[i];
    auto make = l.require_auth ? &stalkd::server::MakeAuthTextConnection
                               : &stalkd::server::MakeTextConnection;
    if (!add(extra_fds[i], make, l.tls)) return 1;
  }
  if (api_fd >= 0 && !add(api_fd, &stalkd::server::MakeApiConnection, opts.http_tls)) return 1;
  std::vector<stalkd::server::Listening> listening = {
      {"beanstalkd protocol", fd},
      {opts.http_tls ? "lmstfy HTTP API over TLS" : "lmstfy HTTP API", api_fd},
      {opts.admin_tls ? "admin HTTPS (dashboard, /metrics, /healthz, /readyz)"
                      : "admin HTTP (dashboard, /metrics, /healthz, /readyz)",
       admin_fd}};
  for (size_t i = 0; i < extra_fds.size(); i++) {
    std::string what = opts.listens[i].tls ? "beanstalkd protocol over TLS" : "beanstalkd protocol";
    if (opts.listens[i].require_auth) what += ", auth required";
    listening.push_back({what, extra_fds[i]});
  }
  stalkd::server::PrintStarted(opts, listening);
  server.Run();
  return server.exit_code();
}
