#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

// TLS over a non-blocking socket, server side and client side (docs/SECURITY.md, "TLS"), on
// the system's OpenSSL 3. libssl is loaded (dlopen) the first time a context is made, so a
// process that never makes one never pays for loading it (docs/PERFORMANCE.md, "Start-up").
//
// Policy, the same for both sides: TLS 1.2 and 1.3 only; OpenSSL's default cipher suites at
// security level 2 at least (RSA and DH keys of 2048 bits or more, no SHA-1 signatures, no
// RC4, 3DES or CBC-with-SHA1-only suites below 112 bits of security); no renegotiation, no
// compression; the server's cipher preference.
namespace stalkd::net {

struct TlsConfig {
  // Server: the certificate chain (PEM, leaf first) and its key; required. Client: a client
  // certificate and key for mutual TLS; optional (both or neither).
  std::string cert_file, key_file;
  // Server: the CA bundle client certificates are checked against (mutual TLS); without it
  // no client certificate is asked for. Client: the CA bundle the server's certificate is
  // checked against; empty: the system's (OpenSSL's default paths).
  std::string ca_file;
  // Server: a client must present a certificate that ca_file verifies (without this, one is
  // asked for and checked if presented, and the connection goes on without one). Client:
  // check the server's certificate and name (the default; off only for tests and tools).
  bool verify_peer = false;
};

// Whether libssl could be loaded; false with *error saying why.
bool TlsAvailable(std::string* error);

// Bytes OpenSSL holds in this process (every allocation made through it since libssl was
// loaded), for the memory figures; 0 until a context exists.
uint64_t TlsMemoryBytes();

struct TlsContextImpl;

// The certificates and settings new connections use; immutable once made. A stream keeps
// what it needs, so a context may be dropped (say for a reloaded one) while its streams live.
class TlsContext {
 public:
  enum class Role { kServer, kClient };
  // Reads the files; null with *error naming the file and OpenSSL's reason.
  static std::shared_ptr<TlsContext> Create(Role role, const TlsConfig& config, std::string* error);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  Role role() const { return role_; }
  // The server certificate's subject (server role), for the start-up report and logs.
  const std::string& subject() const { return subject_; }

 private:
  friend class TlsStream;
  TlsContext(Role role, TlsContextImpl* impl) : role_(role), impl_(impl) {}
  Role role_;
  TlsContextImpl* impl_;
  std::string subject_;
};

// One TLS connection over a connected non-blocking socket (which the caller owns and
// closes). Every call returns at once: kWantRead / kWantWrite say what the socket must
// become before the same call can go on (wait for EPOLLIN / EPOLLOUT, then call again).
class TlsStream {
 public:
  enum class Io { kOk, kWantRead, kWantWrite, kClosed, kError };

  // server_name (client role): the name the server's certificate must carry (a DNS name or
  // an IP address), also sent as SNI when it is a name; empty: not checked.
  static std::unique_ptr<TlsStream> Create(const TlsContext& ctx, int fd, std::string* error,
                                           const std::string& server_name = "");
  ~TlsStream();
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  // One step of the handshake: kOk once it is done (then established()), kWantRead or
  // kWantWrite meanwhile, kError (error() says why) or kClosed (the peer left) when it failed.
  Io Handshake();
  bool established() const { return established_; }

  // Reads up to len bytes into buf: kOk with *n > 0; kClosed at the peer's end of stream
  // (close_notify, or a plain EOF, which is taken as one).
  Io Read(char* buf, size_t len, size_t* n);
  // Writes some of buf (a TLS record at least, when the socket takes it): kOk with *n > 0.
  // After kWantRead/kWantWrite, call again with the same bytes at the front of buf (more may
  // follow, and buf may have moved).
  Io Write(const char* buf, size_t len, size_t* n);
  // Whether bytes read from the socket wait inside (decrypted or not), which a poll of the
  // socket does not announce: Read again before waiting for EPOLLIN.
  bool pending() const;
  // Sends close_notify if the socket takes it now (never waits).
  void Shutdown();

  // Why the last call failed (OpenSSL's reason, or the certificate check's).
  const std::string& error() const { return error_; }
  // After the handshake: the peer certificate's subject (RFC 2253, "CN=client,O=Example"),
  // empty without one; a server only has one when it was verified against its client CA.
  const std::string& peer_subject() const { return peer_subject_; }
  // The protocol and cipher agreed ("TLSv1.3 TLS_AES_256_GCM_SHA384").
  std::string Description() const;

 private:
  TlsStream() = default;
  Io Fail(int ret, const char* what);

  void* ssl_ = nullptr;  // SSL*
  bool established_ = false;
  std::string error_;
  std::string peer_subject_;
};

}  // namespace stalkd::net
