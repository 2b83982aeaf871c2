// Bad TLS input: bytes from the fuzzer are what a client sends to a server-side TLS stream
// (net/tls.h) over a socketpair, the input closed after them; the stream steps its handshake,
// then reads and answers what it decrypts, until it waits, ends or fails. No input may
// crash it, make it spin, or leave it established without a finished handshake. The seeds
// (fuzz/corpus/tls_fuzz) are real ClientHellos of TLS 1.3 and 1.2.
#define FUZZ_NAME "tls_fuzz"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "fuzz_support.h"
#include "net/tls.h"

namespace {

// A self-signed certificate and key made for this fuzzer only (EC P-256, 100 years).
constexpr char kCert[] = R"(-----BEGIN CERTIFICATE-----
MIIBdTCCARugAwIBAgIUM4VP5CTjbCpQvgrjNB9StOVqc7kwCgYIKoZIzj0EAwIw
DzENMAsGA1UEAwwEZnV6ejAgFw0yNjEyMDcwMjA4MDhaGA8yMTI2MTExMzAyMDgw
OFowDzENMAsGA1UEAwwEZnV6ejBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABD7l
I2iYU58bEh59frLC+yiRmOsvBOnBJJL8x/PNyqje90nOIbOj+X1pcYCQowPomUId
77XXDscdLtpqfKcSkaWjUzBRMB0GA1UdDgQWBBR98mAn+o3DNpm/YZF21BkcVSe3
KzAfBgNVHSMEGDAWgBR98mAn+o3DNpm/YZF21BkcVSe3KzAPBgNVHRMBAf8EBTAD
AQH/MAoGCCqGSM49BAMCA0gAMEUCIQDn6U9+qkb3g0Snoe4nLbC4zjiRwDvZtT+S
b7iAJpGXHAIgXR81nUNxy5lctvsuMXJhZoi+QLhh2TIr2H9S5LFvFow=
-----END CERTIFICATE-----
)";
constexpr char kKey[] = R"(-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgcIJNEOy9mU0oovlT
ddzAPKXV8UfMuhHBz8Ib6p8D5MqhRANCAAQ+5SNomFOfGxIefX6ywvsokZjrLwTp
wSSS/Mfzzcqo3vdJziGzo/l9aXGAkKMD6JlCHe+11w7HHS7aanynEpGl
-----END PRIVATE KEY-----
)";

std::shared_ptr<stalkd::net::TlsContext> MakeContext() {
  char dir[] = "/tmp/stalkd-tls-fuzz-XXXXXX";
  FUZZ_CHECK(mkdtemp(dir) != nullptr, "mkdtemp");
  std::string cert = std::string(dir) + "/cert.pem", key = std::string(dir) + "/key.pem";
  for (auto [path, text] : {std::pair{cert, kCert}, std::pair{key, kKey}}) {
    FILE* f = fopen(path.c_str(), "w");
    FUZZ_CHECK(f != nullptr, "cannot write %s", path.c_str());
    fputs(text, f);
    fclose(f);
  }
  stalkd::net::TlsConfig config;
  config.cert_file = cert;
  config.key_file = key;
  config.ca_file = cert;  // asks for a client certificate, so that path is fuzzed too
  std::string error;
  auto ctx =
      stalkd::net::TlsContext::Create(stalkd::net::TlsContext::Role::kServer, config, &error);
  FUZZ_CHECK(ctx != nullptr, "%s", error.c_str());
  unlink(cert.c_str());
  unlink(key.c_str());
  rmdir(dir);
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::shared_ptr<stalkd::net::TlsContext> ctx = MakeContext();
  if (size > 64 * 1024) return 0;  // within a socketpair's buffer: written in one go
  int fds[2];
  FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) == 0, "socketpair");
  int buf = 256 * 1024;
  setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  size_t off = 0;
  while (off < size) {
    ssize_t n = write(fds[1], data + off, size - off);
    FUZZ_CHECK(n > 0, "write to the socketpair");
    off += static_cast<size_t>(n);
  }
  shutdown(fds[1], SHUT_WR);
  std::string error;
  auto s = stalkd::net::TlsStream::Create(*ctx, fds[0], &error);
  FUZZ_CHECK(s != nullptr, "%s", error.c_str());
  using Io = stalkd::net::TlsStream::Io;
  // Every step consumes input or ends: far fewer steps than input bytes.
  Io io = Io::kOk;
  int steps = 0;
  for (; steps < 1000; steps++) {
    io = s->Handshake();
    if (io != Io::kWantWrite) break;
  }
  FUZZ_CHECK(steps < 1000, "the handshake spins");
  if (io == Io::kOk) {
    FUZZ_CHECK(s->established(), "a finished handshake is established");
    char in[4096];
    for (steps = 0; steps < 1000; steps++) {
      size_t n = 0;
      io = s->Read(in, sizeof in, &n);
      if (io != Io::kOk) break;
      FUZZ_CHECK(n > 0 && n <= sizeof in, "read %zu bytes", n);
      size_t w = 0;
      s->Write(in, n, &w);  // echoed: the write path on whatever state the stream is in
    }
    FUZZ_CHECK(steps < 1000, "reading spins");
  } else {
    FUZZ_CHECK(!s->established(), "established after a failed handshake");
    if (io == Io::kError) FUZZ_CHECK(!s->error().empty(), "a failure says why");
  }
  s->Shutdown();
  s.reset();
  close(fds[0]);
  close(fds[1]);
  return 0;
}
