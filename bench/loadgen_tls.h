// TLS for the load generator's connections (bench/loadgen.cc --tls): OpenSSL, linked into the
// bench binary only (the server loads libssl itself). A client side only, non-blocking: the
// loop calls read/write when epoll says so and the handshake is driven by those calls.
#pragma once

#include <cstddef>
#include <string>

namespace loadgen_tls {

// What a read or write did, besides the bytes it moved.
enum class Io { Ok, WantRead, WantWrite, Eof };

class Client {
 public:
  // Reports a fatal error and ends the process (the load generator's die()).
  using Fail = void (*)(const std::string& msg);

  // ca: a PEM file of trusted CAs, the server's certificate checked against it and against
  // host (an IP address or a name); empty: no verification (benchmarks on loopback). fail:
  // called on every TLS error of this client's sessions (one client per process).
  Client(const std::string& ca, const std::string& host, Fail fail);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // A TLS session over the connected (or connecting) non-blocking socket fd.
  void* attach(int fd);
  static void detach(void* ssl);

  // Bytes moved (> 0), or 0 with io telling why not. A TLS error goes to fail.
  static std::size_t write(void* ssl, const char* p, std::size_t n, Io& io);
  static std::size_t read(void* ssl, char* p, std::size_t n, Io& io);

  // The negotiated protocol and cipher of a session, for the report ("TLSv1.3 TLS_AES_...").
  static std::string describe(void* ssl);

 private:
  void* ctx_ = nullptr;
  std::string host_;
  bool verify_ = false;
};

}  // namespace loadgen_tls
