// See loadgen_tls.h.
#include "loadgen_tls.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace loadgen_tls {
namespace {

Client::Fail g_fail = nullptr;

// what, with OpenSSL's queued errors, to fail.
[[noreturn]] void die_tls(const std::string& what) {
  std::string msg = what;
  char buf[256];
  while (unsigned long e = ERR_get_error()) {
    ERR_error_string_n(e, buf, sizeof buf);
    msg += ": ";
    msg += buf;
  }
  if (g_fail) g_fail(msg);
  std::fprintf(stderr, "stalkd_loadgen: %s\n", msg.c_str());
  std::exit(2);
}

SSL* as_ssl(void* p) { return static_cast<SSL*>(p); }

// One SSL_read/SSL_write result as Io; dies on anything but a retry or a clean close.
Io result(SSL* s, int r, const char* op) {
  switch (SSL_get_error(s, r)) {
    case SSL_ERROR_WANT_READ:
      return Io::WantRead;
    case SSL_ERROR_WANT_WRITE:
      return Io::WantWrite;
    case SSL_ERROR_ZERO_RETURN:
      return Io::Eof;
    case SSL_ERROR_SYSCALL:
      if (ERR_peek_error() != 0) die_tls(std::string("TLS ") + op + " failed");
      if (errno != 0) die_tls(std::string("TLS ") + op + ": " + std::strerror(errno));
      return Io::Eof;  // the peer closed without close_notify
    default:
      die_tls(std::string("TLS ") + op + " failed");
  }
}

}  // namespace

Client::Client(const std::string& ca, const std::string& host, Fail fail)
    : host_(host), verify_(!ca.empty()) {
  g_fail = fail;
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (!ctx) die_tls("SSL_CTX_new");
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  if (verify_) {
    if (SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr) != 1)
      die_tls("cannot load --ca " + ca);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  }
  // A write may be retried with the buffer moved or grown (the loop appends to its output).
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  ctx_ = ctx;
}

Client::~Client() { SSL_CTX_free(static_cast<SSL_CTX*>(ctx_)); }

void* Client::attach(int fd) {
  SSL* s = SSL_new(static_cast<SSL_CTX*>(ctx_));
  if (!s || SSL_set_fd(s, fd) != 1) die_tls("SSL_new");
  in6_addr ip{};
  bool is_ip =
      inet_pton(AF_INET, host_.c_str(), &ip) == 1 || inet_pton(AF_INET6, host_.c_str(), &ip) == 1;
  if (!is_ip) SSL_set_tlsext_host_name(s, host_.c_str());
  if (verify_) {
    X509_VERIFY_PARAM* vp = SSL_get0_param(s);
    int ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(vp, host_.c_str())
                   : X509_VERIFY_PARAM_set1_host(vp, host_.c_str(), 0);
    if (ok != 1) die_tls("cannot check the certificate against " + host_);
  }
  SSL_set_connect_state(s);
  return s;
}

void Client::detach(void* ssl) { SSL_free(as_ssl(ssl)); }

std::size_t Client::write(void* ssl, const char* p, std::size_t n, Io& io) {
  std::size_t done = 0;
  errno = 0;
  int r = SSL_write_ex(as_ssl(ssl), p, n, &done);
  io = r == 1 ? Io::Ok : result(as_ssl(ssl), r, "write");
  return r == 1 ? done : 0;
}

std::size_t Client::read(void* ssl, char* p, std::size_t n, Io& io) {
  std::size_t got = 0;
  errno = 0;
  int r = SSL_read_ex(as_ssl(ssl), p, n, &got);
  io = r == 1 ? Io::Ok : result(as_ssl(ssl), r, "read");
  return r == 1 ? got : 0;
}

std::string Client::describe(void* ssl) {
  return std::string(SSL_get_version(as_ssl(ssl))) + " " + SSL_get_cipher_name(as_ssl(ssl));
}

}  // namespace loadgen_tls
