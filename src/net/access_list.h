#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace stalkd::net {

// The client addresses allowed to connect (--allow): CIDR blocks, IPv4 or IPv6. An empty
// list allows everyone, as beanstalkd does. Peers on a unix-domain socket are not filtered
// here (the socket file's permissions govern them). An IPv4 client reaching an IPv6 socket
// (::ffff:a.b.c.d) is matched against the IPv4 blocks.
class AccessList {
 public:
  // Adds "10.0.0.0/8", "192.168.1.7" (= /32), "::1" (= /128) or "fd00::/8". Returns false
  // with *error set if the text is not an address with an optional prefix length.
  bool Add(std::string_view cidr, std::string* error);
  bool empty() const { return blocks_.empty(); }
  bool Allows(const sockaddr* addr, socklen_t len) const;

 private:
  struct Block {
    int family;
    uint8_t addr[16];
    int prefix;
  };
  static bool Matches(const Block& b, const uint8_t* addr);
  std::vector<Block> blocks_;
};

}  // namespace stalkd::net
