#include "net/access_list.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

namespace stalkd::net {

bool AccessList::Add(std::string_view cidr, std::string* error) {
  std::string text(cidr);
  std::string addr = text;
  int prefix = -1;
  if (size_t slash = text.find('/'); slash != std::string::npos) {
    addr = text.substr(0, slash);
    std::string bits = text.substr(slash + 1);
    if (bits.empty() || bits.size() > 3 ||
        bits.find_first_not_of("0123456789") != std::string::npos) {
      *error = "bad prefix length in " + text;
      return false;
    }
    prefix = std::stoi(bits);
  }
  Block b{};
  if (inet_pton(AF_INET, addr.c_str(), b.addr) == 1) {
    b.family = AF_INET;
    if (prefix < 0) prefix = 32;
    if (prefix > 32) {
      *error = "prefix length over 32 in " + text;
      return false;
    }
  } else if (inet_pton(AF_INET6, addr.c_str(), b.addr) == 1) {
    b.family = AF_INET6;
    if (prefix < 0) prefix = 128;
    if (prefix > 128) {
      *error = "prefix length over 128 in " + text;
      return false;
    }
  } else {
    *error = "not an IPv4 or IPv6 address: " + addr;
    return false;
  }
  b.prefix = prefix;
  blocks_.push_back(b);
  return true;
}

bool AccessList::Matches(const Block& b, const uint8_t* addr) {
  int full = b.prefix / 8, rest = b.prefix % 8;
  if (std::memcmp(b.addr, addr, static_cast<size_t>(full)) != 0) return false;
  if (rest == 0) return true;
  uint8_t mask = static_cast<uint8_t>(0xFF << (8 - rest));
  return (b.addr[full] & mask) == (addr[full] & mask);
}

bool AccessList::Allows(const sockaddr* sa, socklen_t len) const {
  if (blocks_.empty() || sa->sa_family == AF_UNIX) return true;
  int family = sa->sa_family;
  uint8_t addr[16] = {};
  if (family == AF_INET && len >= static_cast<socklen_t>(sizeof(sockaddr_in))) {
    std::memcpy(addr, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, 4);
  } else if (family == AF_INET6 && len >= static_cast<socklen_t>(sizeof(sockaddr_in6))) {
    const auto* a6 = &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(a6)) {
      family = AF_INET;
      std::memcpy(addr, a6->s6_addr + 12, 4);
    } else {
      std::memcpy(addr, a6->s6_addr, 16);
    }
  } else {
    return false;
  }
  for (const Block& b : blocks_) {
    if (b.family == family && Matches(b, addr)) return true;
  }
  return false;
}

}  // namespace stalkd::net
