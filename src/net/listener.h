#pragma once

#include <string>

namespace stalkd::net {

// Opens a non-blocking listening socket. `address` is an IPv4/IPv6 address or host name, or
// "unix:/path" for a unix-domain socket (an existing socket file there is replaced).
// Returns the fd, or -1 with *error set. unix_mode >= 0 sets the unix socket file's
// permissions (before it accepts connections); -1 leaves them to the umask.
int Listen(const std::string& address, const std::string& port, std::string* error,
           int unix_mode = -1);

// The socket passed by systemd socket activation (LISTEN_PID/LISTEN_FDS), or -1 if none.
// Sets *warning if more than one was passed (all but the first are ignored, as beanstalkd).
int InheritedListener(std::string* warning);

// Describes a listening fd for logs ("127.0.0.1:11300", "unix:/run/x.sock").
std::string DescribeListener(int fd);
// Describes a connected socket's peer the same way ("10.0.0.7:53122").
std::string DescribePeer(int fd);

}  // namespace stalkd::net
