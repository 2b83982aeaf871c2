#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace stalkd::net {
class TlsStream;
}

// One connection to a beanstalkd-protocol server: bytes out, whole replies in.
namespace stalkd::cli {

// A reply: its first line without CRLF, and for RESERVED, FOUND and OK its data chunk.
struct Reply {
  std::string line;
  std::string body;

  // The first word ("INSERTED", "NOT_FOUND", ...).
  std::string_view Word() const;
  bool Is(std::string_view word) const { return Word() == word; }
  // The i-th word (0 is the first) as a number; 0 when it is missing or not a number.
  uint64_t Number(size_t i) const;
};

// Where a server listens: "HOST:PORT", "[IPv6]:PORT", "HOST" (port 11300) or "unix:PATH".
struct Address {
  std::string host, port, path;  // path is set for a unix socket, host and port otherwise
};
// Throws Failure(kExitUsage) for an address that cannot be one.
Address ParseAddress(std::string_view text);

// TLS to the server (stalk --tls): the server's certificate is checked against `ca` (empty:
// the system's CAs) and must name the address's host; cert and key are stalk's own, for a
// server that asks for one (mutual TLS).
struct TlsOptions {
  bool on = false;
  std::string ca, cert, key;
};

class Conn {
 public:
  // Connects (and with tls.on, does the TLS handshake); throws Failure(kExitConnection) when
  // it cannot.
  explicit Conn(const std::string& address, const TlsOptions& tls = {});
  ~Conn();
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  // Queues bytes to send; nothing is written until Flush or Read.
  void Send(std::string_view bytes) { out_.append(bytes); }
  // Queues a command line, adding its CRLF.
  void SendLine(std::string_view line);
  // Writes every queued byte. Replies that arrive meanwhile are buffered, so any number
  // of commands may be pipelined without both sides blocking on full socket buffers.
  void Flush();
  // Flushes, then reads one whole reply. Throws Failure(kExitConnection) if the server
  // closes the connection or the socket fails.
  Reply Read();
  // SendLine + Read.
  Reply Call(std::string_view line);
  // True once a reply (or part of one) is waiting, within `ms` milliseconds.
  bool WaitReadable(int ms);

  const std::string& address() const { return address_; }

 private:
  void Fill();  // reads what the socket has into in_; throws on EOF or error
  [[noreturn]] void Broken(const char* what, int err);
  // TLS: the handshake, and Fill's and Flush's reads and writes through the stream.
  void StartTls(const TlsOptions& tls, const std::string& host);
  // Reads what the stream has; with `wait`, waits until it has some application data.
  void TlsFill(bool wait);
  size_t TlsSend(const char* data, size_t len);
  // Waits until the socket has `events`; throws if the wait fails.
  void Await(short events);
  std::string ReadLine();

  std::string address_;
  int fd_ = -1;
  std::string out_;
  std::string in_;
  size_t in_pos_ = 0;
  std::unique_ptr<net::TlsStream> tls_;
};

}  // namespace stalkd::cli
