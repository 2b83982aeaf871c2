#include "net/access_list.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <cstring>

#include <gtest/gtest.h>

namespace stalkd::net {
namespace {

bool Allows(const AccessList& l, const char* ip) {
  sockaddr_storage ss{};
  if (inet_pton(AF_INET, ip, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr) == 1) {
    ss.ss_family = AF_INET;
    return l.Allows(reinterpret_cast<sockaddr*>(&ss), sizeof(sockaddr_in));
  }
  EXPECT_EQ(inet_pton(AF_INET6, ip, &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr), 1) << ip;
  ss.ss_family = AF_INET6;
  return l.Allows(reinterpret_cast<sockaddr*>(&ss), sizeof(sockaddr_in6));
}

TEST(AccessList, EmptyAllowsEveryone) {
  AccessList l;
  EXPECT_TRUE(Allows(l, "203.0.113.9"));
  EXPECT_TRUE(Allows(l, "2001:db8::1"));
}

TEST(AccessList, Ipv4Blocks) {
  AccessList l;
  std::string err;
  ASSERT_TRUE(l.Add("10.0.0.0/8", &err)) << err;
  ASSERT_TRUE(l.Add("192.168.1.7", &err)) << err;
  ASSERT_TRUE(l.Add("172.16.0.0/12", &err)) << err;
  EXPECT_TRUE(Allows(l, "10.255.1.2"));
  EXPECT_TRUE(Allows(l, "192.168.1.7"));
  EXPECT_FALSE(Allows(l, "192.168.1.8"));
  EXPECT_TRUE(Allows(l, "172.31.255.255"));
  EXPECT_FALSE(Allows(l, "172.32.0.0"));
  EXPECT_FALSE(Allows(l, "11.0.0.1"));
  EXPECT_FALSE(Allows(l, "2001:db8::1"));
  // an IPv4 client on an IPv6 socket
  EXPECT_TRUE(Allows(l, "::ffff:10.1.2.3"));
  EXPECT_FALSE(Allows(l, "::ffff:11.1.2.3"));
}

TEST(AccessList, Ipv6Blocks) {
  AccessList l;
  std::string err;
  ASSERT_TRUE(l.Add("::1", &err)) << err;
  ASSERT_TRUE(l.Add("fd00::/8", &err)) << err;
  ASSERT_TRUE(l.Add("2001:db8:abcd::/47", &err)) << err;
  EXPECT_TRUE(Allows(l, "::1"));
  EXPECT_FALSE(Allows(l, "::2"));
  EXPECT_TRUE(Allows(l, "fdab::9"));
  EXPECT_FALSE(Allows(l, "fe80::1"));
  EXPECT_TRUE(Allows(l, "2001:db8:abcd:1::5"));
  EXPECT_FALSE(Allows(l, "2001:db8:abce::5"));
  EXPECT_FALSE(Allows(l, "127.0.0.1"));
}

TEST(AccessList, ZeroPrefixMatchesAllOfAFamily) {
  AccessList l;
  std::string err;
  ASSERT_TRUE(l.Add("0.0.0.0/0", &err));
  EXPECT_TRUE(Allows(l, "8.8.8.8"));
  EXPECT_FALSE(Allows(l, "::1"));
}

TEST(AccessList, RejectsMalformedText) {
  AccessList l;
  std::string err;
  for (const char* bad : {"", "10.0.0.0/", "10.0.0.0/33", "::1/129", "10.0.0.0/8x", "host.example",
                          "10.0.0.256", "10.0.0.0/-1", "1.2.3.4/1234"}) {
    EXPECT_FALSE(l.Add(bad, &err)) << bad;
    EXPECT_FALSE(err.empty()) << bad;
  }
  EXPECT_TRUE(l.empty());
}

TEST(AccessList, UnixPeersAreNotFiltered) {
  AccessList l;
  std::string err;
  ASSERT_TRUE(l.Add("10.0.0.0/8", &err));
  sockaddr_un un{};
  un.sun_family = AF_UNIX;
  EXPECT_TRUE(l.Allows(reinterpret_cast<sockaddr*>(&un), sizeof un));
}

}  // namespace
}  // namespace stalkd::net
