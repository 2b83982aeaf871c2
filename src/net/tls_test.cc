#include "net/tls.h"

#include <malloc.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "net/tls_lib.h"

namespace stalkd::net {
namespace {

// The certificates of tests/lib/tls_certs.py, made once for all the tests here.
const std::string& CertDir() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/stalkd-tls-unit-XXXXXX";
    std::string d = mkdtemp(tmpl);
    std::string cmd = std::string("python3 ") + STALKD_SOURCE_DIR + "/tests/lib/tls_certs.py " + d +
                      " >/dev/null";
    if (system(cmd.c_str()) != 0) ADD_FAILURE() << "tls_certs.py failed";
    return d;
  }();
  return dir;
}

std::string Cert(const char* name) { return CertDir() + "/" + name; }

class TlsPair : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    if (!TlsAvailable(&error)) GTEST_SKIP() << error;
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds_), 0);
  }
  void TearDown() override {
    server_.reset();
    client_.reset();
    close(fds_[0]);
    close(fds_[1]);
  }
  // Makes both ends; false (with the error) if a context or stream cannot be made.
  void Start(const TlsConfig& server, const TlsConfig& client, const std::string& name) {
    std::string error;
    auto sctx = TlsContext::Create(TlsContext::Role::kServer, server, &error);
    ASSERT_TRUE(sctx) << error;
    auto cctx = TlsContext::Create(TlsContext::Role::kClient, client, &error);
    ASSERT_TRUE(cctx) << error;
    server_ = TlsStream::Create(*sctx, fds_[0], &error);
    ASSERT_TRUE(server_) << error;
    client_ = TlsStream::Create(*cctx, fds_[1], &error, name);
    ASSERT_TRUE(client_) << error;
    // The contexts go now: the streams must not need them.
  }
  // Steps both handshakes until neither can go on; returns the server's last result.
  TlsStream::Io Pump(TlsStream::Io* client_result) {
    TlsStream::Io s = TlsStream::Io::kWantRead, c = TlsStream::Io::kWantRead;
    for (int i = 0; i < 50; i++) {
      if (!client_->established()) c = client_->Handshake();
      if (!server_->established()) s = server_->Handshake();
      if (s != TlsStream::Io::kWantRead && c != TlsStream::Io::kWantRead) break;
      if (s == TlsStream::Io::kError || c == TlsStream::Io::kError) break;
    }
    *client_result = c;
    return s;
  }
  TlsConfig ServerConfig() {
    TlsConfig c;
    c.cert_file = Cert("server.crt");
    c.key_file = Cert("server.key");
    return c;
  }
  TlsConfig ClientConfig() {
    TlsConfig c;
    c.ca_file = Cert("ca.crt");
    c.verify_peer = true;
    return c;
  }

  int fds_[2] = {-1, -1};
  std::unique_ptr<TlsStream> server_, client_;
};

TEST_F(TlsPair, HandshakeThenBytesBothWays) {
  Start(ServerConfig(), ClientConfig(), "127.0.0.1");
  TlsStream::Io c;
  ASSERT_EQ(Pump(&c), TlsStream::Io::kOk) << server_->error();
  ASSERT_EQ(c, TlsStream::Io::kOk) << client_->error();
  EXPECT_EQ(server_->peer_subject(), "");  // no client CA: no client certificate asked
  EXPECT_EQ(client_->peer_subject(), "CN=localhost,O=stalkd tests");
  EXPECT_EQ(client_->Description().rfind("TLSv1.3 ", 0), 0u) << client_->Description();
  size_t n = 0;
  ASSERT_EQ(client_->Write("put 0 0 1 1\r\n", 13, &n), TlsStream::Io::kOk);
  EXPECT_EQ(n, 13u);
  char buf[64];
  ASSERT_EQ(server_->Read(buf, sizeof buf, &n), TlsStream::Io::kOk) << server_->error();
  EXPECT_EQ(std::string(buf, n), "put 0 0 1 1\r\n");
  EXPECT_EQ(server_->Read(buf, sizeof buf, &n), TlsStream::Io::kWantRead);
  client_->Shutdown();
  EXPECT_EQ(server_->Read(buf, sizeof buf, &n), TlsStream::Io::kClosed);
}

TEST_F(TlsPair, MutualTlsGivesTheClientSubject) {
  TlsConfig s = ServerConfig();
  s.ca_file = Cert("ca.crt");
  s.verify_peer = true;
  TlsConfig c = ClientConfig();
  c.cert_file = Cert("client.crt");
  c.key_file = Cert("client.key");
  Start(s, c, "localhost");
  TlsStream::Io cr;
  ASSERT_EQ(Pump(&cr), TlsStream::Io::kOk) << server_->error();
  EXPECT_EQ(server_->peer_subject(), "CN=client-1,O=stalkd tests");
}

TEST_F(TlsPair, RequiredClientCertificateMissing) {
  TlsConfig s = ServerConfig();
  s.ca_file = Cert("ca.crt");
  s.verify_peer = true;
  Start(s, ClientConfig(), "localhost");
  TlsStream::Io cr;
  EXPECT_EQ(Pump(&cr), TlsStream::Io::kError);
  EXPECT_NE(server_->error().find("certificate"), std::string::npos) << server_->error();
}

TEST_F(TlsPair, ClientCertificateOfAnotherCaRefused) {
  TlsConfig s = ServerConfig();
  s.ca_file = Cert("ca.crt");  // asked for, not required: but one presented must verify
  TlsConfig c = ClientConfig();
  c.cert_file = Cert("stranger.crt");
  c.key_file = Cert("stranger.key");
  Start(s, c, "localhost");
  TlsStream::Io cr;
  EXPECT_EQ(Pump(&cr), TlsStream::Io::kError);
  EXPECT_NE(server_->error().find("unable to get local issuer"), std::string::npos)
      << server_->error();
}

TEST_F(TlsPair, ServerNameMismatchRefusedByTheClient) {
  Start(ServerConfig(), ClientConfig(), "example.com");
  TlsStream::Io cr;
  Pump(&cr);
  EXPECT_EQ(cr, TlsStream::Io::kError);
  EXPECT_NE(client_->error().find("hostname mismatch"), std::string::npos) << client_->error();
}

TEST(TlsContext, BadFilesNamed) {
  std::string error;
  if (!TlsAvailable(&error)) GTEST_SKIP() << error;
  TlsConfig c;
  c.cert_file = "/nonexistent/cert.pem";
  c.key_file = Cert("server.key");
  EXPECT_FALSE(TlsContext::Create(TlsContext::Role::kServer, c, &error));
  EXPECT_NE(error.find("/nonexistent/cert.pem"), std::string::npos) << error;
  c.cert_file = Cert("server.crt");
  c.key_file = Cert("client.key");
  EXPECT_FALSE(TlsContext::Create(TlsContext::Role::kServer, c, &error));
  EXPECT_NE(error.find("mismatch"), std::string::npos) << error;
  c.key_file = Cert("server.key");
  c.verify_peer = true;  // without a client CA
  EXPECT_FALSE(TlsContext::Create(TlsContext::Role::kServer, c, &error));
  c.verify_peer = false;
  auto ok = TlsContext::Create(TlsContext::Role::kServer, c, &error);
  ASSERT_TRUE(ok) << error;
  EXPECT_EQ(ok->subject(), "CN=localhost,O=stalkd tests");
  EXPECT_GT(TlsMemoryBytes(), 0u);
}

// OpenSSL reallocs to 0 bytes to free: the count must drop by what the block held.
TEST(TlsMemory, ReallocToZeroFreesAndCounts) {
  uint64_t before = tls_lib::CountedBytes();
  void* p = tls_lib::CountedMalloc(1000, __FILE__, __LINE__);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(tls_lib::CountedBytes(), before + malloc_usable_size(p));
  p = tls_lib::CountedRealloc(p, 5000, __FILE__, __LINE__);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(tls_lib::CountedBytes(), before + malloc_usable_size(p));
  EXPECT_EQ(tls_lib::CountedRealloc(p, 0, __FILE__, __LINE__), nullptr);
  EXPECT_EQ(tls_lib::CountedBytes(), before);
}

}  // namespace
}  // namespace stalkd::net
