// TLS on the Redis client's connections (rediss://, rediss-sentinel://, rediss-cluster://;
// docs/SCALE-OUT.md, "Redis over TLS"): a Conn (link_conn.h) whose TCP connect is done hands
// its socket to a client TLS stream (net/tls.h), steps the handshake on the loop's events,
// and only then writes what it holds (AUTH, ROLE...). Reads and writes go through the stream
// from then on. Failures that are TLS' own (the server's certificate not verified or not
// naming it, an alert from the server: a client certificate it wants, a peer that does not
// speak TLS) are refusals, as a refused AUTH is: they stop a front end that has not started.
#include <string>
#include <utility>

#include "redis/link_auth.h"
#include "redis/link_conn.h"

namespace stalkd::redis {

namespace {

// What every message about a refused TLS connection says (IsAccessRefused looks for it).
constexpr std::string_view kTlsRefused = "TLS refused: ";

}  // namespace

// A stream's read or write result as a Conn's (kError: the caller words it).
Conn::Io Conn::FromTls(net::TlsStream::Io io) {
  switch (io) {
    case net::TlsStream::Io::kOk:
      return Io::kOk;
    case net::TlsStream::Io::kWantWrite:
      tls_wants_write_ = true;
      return Io::kAgain;
    case net::TlsStream::Io::kWantRead:
      return Io::kAgain;  // the socket is always polled for reading
    case net::TlsStream::Io::kClosed:
      return Io::kClosed;
    case net::TlsStream::Io::kError:
      break;
  }
  return Io::kError;
}

bool IsTlsRefused(std::string_view why) { return why.find(kTlsRefused) != std::string::npos; }

bool Conn::TlsEstablished() {
  if (tls_context_ == nullptr) return true;
  if (tls_ == nullptr) {
    std::string error;
    // The certificate names the address connected to (an IP address: hosts are numeric),
    // or the name configured for every server.
    tls_ = net::TlsStream::Create(*tls_context_, fd_, &error,
                                  tls_name_.empty() ? peer_.host : tls_name_);
    if (tls_ == nullptr) {
      Fail(name_ + ": TLS: " + error);
      return false;
    }
  }
  switch (tls_->Handshake()) {
    case net::TlsStream::Io::kOk:
      return true;
    case net::TlsStream::Io::kWantWrite:
      tls_wants_write_ = true;
      [[fallthrough]];
    case net::TlsStream::Io::kWantRead:
      UpdateInterest();
      return false;
    case net::TlsStream::Io::kClosed:
      // The server left in the middle (a plain Redis closes on what it cannot parse, but
      // a restart does the same): tried again like any lost connection.
      Fail(name_ + ": TLS handshake: connection closed by the server");
      return false;
    case net::TlsStream::Io::kError:
      break;
  }
  Fail(name_ + ": " + std::string(kTlsRefused) + tls_->error());
  return false;
}

Conn::Io Conn::TlsSend(const char* data, size_t len, size_t* n, std::string* why) {
  Io io = FromTls(tls_->Write(data, len, n));
  if (io == Io::kError) *why = "TLS: " + tls_->error();
  return io;
}

Conn::Io Conn::TlsRead(char* buf, size_t len, size_t* n, std::string* why) {
  Io io = FromTls(tls_->Read(buf, len, n));
  if (io != Io::kError) return io;
  // With TLS 1.3 a client's handshake ends before the server has checked its certificate:
  // the server's verdict (an alert: "certificate required", "unknown ca"...) is read here.
  const std::string& error = tls_->error();
  bool alert = error.find(" alert ") != std::string::npos;
  *why = (alert ? std::string(kTlsRefused) : std::string("TLS: ")) + error;
  return Io::kError;
}

void Conn::CloseTls() {
  if (tls_ == nullptr) return;
  tls_->Shutdown();
  tls_.reset();
  tls_wants_write_ = false;
  tls_pending_ = false;
}

}  // namespace stalkd::redis
