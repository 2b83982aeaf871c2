#include "net/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include <climits>

#include "net/tls_lib.h"

namespace stalkd::net {

struct TlsContextImpl {
  SSL_CTX* ctx = nullptr;
};

namespace {

const tls_lib::Api& Api() { return tls_lib::Get(); }

// An X509 name as RFC 2253 ("CN=client,O=Example"), UTF-8 kept as it is.
std::string NameText(X509_NAME* name) {
  const tls_lib::Api& api = Api();
  BIO* bio = api.BIO_new(api.BIO_s_mem());
  if (bio == nullptr) return "";
  std::string out;
  if (api.X509_NAME_print_ex(bio, name, 0, XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB) >= 0) {
    char* data = nullptr;
    long n = api.BIO_ctrl(bio, BIO_CTRL_INFO, 0, &data);  // BIO_get_mem_data
    if (n > 0 && data != nullptr) out.assign(data, static_cast<size_t>(n));
  }
  api.BIO_free(bio);
  return out;
}

bool FailWith(std::string* error, const std::string& what) {
  std::string why = tls_lib::TakeErrors(Api());
  *error = why.empty() ? what : what + ": " + why;
  return false;
}

// The settings both roles share (net/tls.h, "Policy").
bool ApplyPolicy(SSL_CTX* ctx, std::string* error) {
  const tls_lib::Api& api = Api();
  if (api.SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_2_VERSION, nullptr) != 1) {
    return FailWith(error, "cannot require TLS 1.2 or later");
  }
  if (api.SSL_CTX_get_security_level(ctx) < 2) api.SSL_CTX_set_security_level(ctx, 2);
  api.SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                                   SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_IGNORE_UNEXPECTED_EOF);
  // Writes go out a record at a time from a buffer that moves (the connection's output
  // string), and an idle connection's read and write buffers are given back.
  api.SSL_CTX_ctrl(ctx, SSL_CTRL_MODE,
                   SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                       SSL_MODE_RELEASE_BUFFERS,
                   nullptr);
  return true;
}

bool LoadCertificate(SSL_CTX* ctx, const TlsConfig& c, std::string* error) {
  const tls_lib::Api& api = Api();
  if (api.SSL_CTX_use_certificate_chain_file(ctx, c.cert_file.c_str()) != 1) {
    return FailWith(error, "certificate " + c.cert_file);
  }
  if (api.SSL_CTX_use_PrivateKey_file(ctx, c.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return FailWith(error, "key " + c.key_file);
  }
  if (api.SSL_CTX_check_private_key(ctx) != 1) {
    return FailWith(error, "key " + c.key_file + " does not match certificate " + c.cert_file);
  }
  return true;
}

bool Configure(SSL_CTX* ctx, TlsContext::Role role, const TlsConfig& c, std::string* error) {
  const tls_lib::Api& api = Api();
  if (!ApplyPolicy(ctx, error)) return false;
  bool server = role == TlsContext::Role::kServer;
  if (server && (c.cert_file.empty() || c.key_file.empty())) {
    *error = "a TLS server needs a certificate and its key";
    return false;
  }
  if (c.cert_file.empty() != c.key_file.empty()) {
    *error = "a certificate needs its key, and a key its certificate";
    return false;
  }
  if (!c.cert_file.empty() && !LoadCertificate(ctx, c, error)) return false;
  if (server) {
    // TLS 1.2 resumption by session id keeps sessions in the server: at most this many
    // (OpenSSL's default is 20,480), TLS 1.3's tickets keep nothing.
    api.SSL_CTX_ctrl(ctx, SSL_CTRL_SET_SESS_CACHE_SIZE, 1024, nullptr);
    // Read ahead: one read() takes what the socket holds (up to the record buffer) instead of
    // a record's header and then its body in two. What it takes beyond one record waits in
    // the stream, which the server's connection drains (TlsStream::pending).
    api.SSL_CTX_ctrl(ctx, SSL_CTRL_SET_READ_AHEAD, 1, nullptr);
    static const unsigned char kSessionContext[] = "stalkd";
    api.SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof kSessionContext - 1);
    if (c.ca_file.empty()) {
      if (c.verify_peer) {
        *error = "requiring client certificates needs the CA that issues them";
        return false;
      }
      return true;
    }
    if (api.SSL_CTX_load_verify_locations(ctx, c.ca_file.c_str(), nullptr) != 1) {
      return FailWith(error, "client CA " + c.ca_file);
    }
    STACK_OF(X509_NAME)* names = api.SSL_load_client_CA_file(c.ca_file.c_str());
    if (names == nullptr) return FailWith(error, "client CA " + c.ca_file);
    api.SSL_CTX_set_client_CA_list(ctx, names);
    api.SSL_CTX_set_verify(
        ctx, SSL_VERIFY_PEER | (c.verify_peer ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0), nullptr);
    return true;
  }
  if (!c.ca_file.empty()) {
    if (api.SSL_CTX_load_verify_locations(ctx, c.ca_file.c_str(), nullptr) != 1) {
      return FailWith(error, "CA " + c.ca_file);
    }
  } else if (api.SSL_CTX_set_default_verify_paths(ctx) != 1) {
    return FailWith(error, "the system's CA certificates");
  }
  api.SSL_CTX_set_verify(ctx, c.verify_peer ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
  return true;
}

}  // namespace

bool TlsAvailable(std::string* error) { return tls_lib::Load(error) != nullptr; }

uint64_t TlsMemoryBytes() { return tls_lib::CountedBytes(); }

std::shared_ptr<TlsContext> TlsContext::Create(Role role, const TlsConfig& config,
                                               std::string* error) {
  const tls_lib::Api* api = tls_lib::Load(error);
  if (api == nullptr) return nullptr;
  api->ERR_clear_error();
  SSL_CTX* ctx =
      api->SSL_CTX_new(role == Role::kServer ? api->TLS_server_method() : api->TLS_client_method());
  if (ctx == nullptr) {
    FailWith(error, "cannot make a TLS context");
    return nullptr;
  }
  if (!Configure(ctx, role, config, error)) {
    api->SSL_CTX_free(ctx);
    return nullptr;
  }
  std::shared_ptr<TlsContext> out(new TlsContext(role, new TlsContextImpl{ctx}));
  if (X509* cert = api->SSL_CTX_get0_certificate(ctx)) {
    out->subject_ = NameText(api->X509_get_subject_name(cert));
  }
  return out;
}

TlsContext::~TlsContext() {
  // Streams made from it hold their own reference to the SSL_CTX (SSL_new takes one).
  Api().SSL_CTX_free(impl_->ctx);
  delete impl_;
}

std::unique_ptr<TlsStream> TlsStream::Create(const TlsContext& ctx, int fd, std::string* error,
                                             const std::string& server_name) {
  const tls_lib::Api& api = Api();
  api.ERR_clear_error();
  std::unique_ptr<TlsStream> s(new TlsStream());
  SSL* ssl = api.SSL_new(ctx.impl_->ctx);
  if (ssl == nullptr) {
    FailWith(error, "cannot start a TLS connection");
    return nullptr;
  }
  s->ssl_ = ssl;
  if (api.SSL_set_fd(ssl, fd) != 1) {
    FailWith(error, "cannot start a TLS connection");
    return nullptr;
  }
  if (ctx.role() == TlsContext::Role::kServer) {
    api.SSL_set_accept_state(ssl);
    return s;
  }
  api.SSL_set_connect_state(ssl);
  if (!server_name.empty()) {
    unsigned char ip[16];
    bool is_ip = inet_pton(AF_INET, server_name.c_str(), ip) == 1 ||
                 inet_pton(AF_INET6, server_name.c_str(), ip) == 1;
    X509_VERIFY_PARAM* param = api.SSL_get0_param(ssl);
    int ok = is_ip ? api.X509_VERIFY_PARAM_set1_ip_asc(param, server_name.c_str())
                   : api.X509_VERIFY_PARAM_set1_host(param, server_name.c_str(), 0);
    // SNI carries host names only (RFC 6066).
    if (ok == 1 && !is_ip) {
      ok = static_cast<int>(api.SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME,
                                         TLSEXT_NAMETYPE_host_name,
                                         const_cast<char*>(server_name.c_str())));
    }
    if (ok != 1) {
      FailWith(error, "invalid server name " + server_name);
      return nullptr;
    }
  }
  return s;
}

TlsStream::~TlsStream() {
  if (ssl_ != nullptr) Api().SSL_free(static_cast<SSL*>(ssl_));
}

TlsStream::Io TlsStream::Fail(int ret, const char* what) {
  const tls_lib::Api& api = Api();
  SSL* ssl = static_cast<SSL*>(ssl_);
  int saved_errno = errno;
  switch (api.SSL_get_error(ssl, ret)) {
    case SSL_ERROR_WANT_READ:
      return Io::kWantRead;
    case SSL_ERROR_WANT_WRITE:
      return Io::kWantWrite;
    case SSL_ERROR_ZERO_RETURN:
      return Io::kClosed;
    case SSL_ERROR_SYSCALL: {
      std::string why = tls_lib::TakeErrors(api);
      if (why.empty() && (ret == 0 || saved_errno == 0 || saved_errno == ECONNRESET)) {
        return Io::kClosed;  // the peer went away without a word
      }
      error_ = std::string(what) + ": " + (why.empty() ? strerror(saved_errno) : why);
      return Io::kError;
    }
    default: {
      error_ = std::string(what) + ": " + tls_lib::TakeErrors(api);
      long verify = api.SSL_get_verify_result(ssl);
      if (verify != X509_V_OK) {
        error_ += std::string(" (") + api.X509_verify_cert_error_string(verify) + ")";
      }
      return Io::kError;
    }
  }
}

TlsStream::Io TlsStream::Handshake() {
  if (established_) return Io::kOk;
  const tls_lib::Api& api = Api();
  SSL* ssl = static_cast<SSL*>(ssl_);
  api.ERR_clear_error();
  int r = api.SSL_do_handshake(ssl);
  if (r != 1) return Fail(r, "handshake");
  established_ = true;
  if (X509* peer = api.SSL_get1_peer_certificate(ssl)) {
    if (api.SSL_get_verify_result(ssl) == X509_V_OK) {
      peer_subject_ = NameText(api.X509_get_subject_name(peer));
    }
    api.X509_free(peer);
  }
  return Io::kOk;
}

TlsStream::Io TlsStream::Read(char* buf, size_t len, size_t* n) {
  *n = 0;
  const tls_lib::Api& api = Api();
  api.ERR_clear_error();
  int r =
      api.SSL_read(static_cast<SSL*>(ssl_), buf, static_cast<int>(std::min<size_t>(len, INT_MAX)));
  if (r <= 0) return Fail(r, "read");
  *n = static_cast<size_t>(r);
  return Io::kOk;
}

TlsStream::Io TlsStream::Write(const char* buf, size_t len, size_t* n) {
  *n = 0;
  if (len == 0) return Io::kOk;
  const tls_lib::Api& api = Api();
  api.ERR_clear_error();
  int r =
      api.SSL_write(static_cast<SSL*>(ssl_), buf, static_cast<int>(std::min<size_t>(len, INT_MAX)));
  if (r <= 0) return Fail(r, "write");
  *n = static_cast<size_t>(r);
  return Io::kOk;
}

bool TlsStream::pending() const {
  return Api().SSL_has_pending(static_cast<const SSL*>(ssl_)) == 1;
}

void TlsStream::Shutdown() {
  if (!established_) return;
  const tls_lib::Api& api = Api();
  api.SSL_shutdown(static_cast<SSL*>(ssl_));
  api.ERR_clear_error();
}

std::string TlsStream::Description() const {
  const tls_lib::Api& api = Api();
  const SSL* ssl = static_cast<const SSL*>(ssl_);
  std::string out = api.SSL_get_version(ssl);
  if (const SSL_CIPHER* c = api.SSL_get_current_cipher(ssl)) {
    out += " ";
    out += api.SSL_CIPHER_get_name(c);
  }
  return out;
}

}  // namespace stalkd::net
