#pragma once

#include <cstdint>
#include <string>
#include <string_view>

// Who a connection is, and what proves it (docs/SECURITY.md, "Tokens on the beanstalkd
// port"). The text protocol's `auth` fills an Identity from a token of the HTTP API; it is
// kept in this one place so that another proof (a TLS client certificate's subject) can fill
// the same struct.
namespace stalkd::command {

struct Identity {
  enum class Kind : uint8_t {
    kNamespace,  // a token of `ns`: tubes "ns/..." only, jobs of those tubes only
    kAdmin,      // an admin account: everything, as an anonymous connection
  };
  Kind kind = Kind::kNamespace;
  std::string ns;    // kNamespace
  std::string name;  // kNamespace: the token's id (limits, revocation); kAdmin: the user
  // Proved by a TLS client certificate (--tls-identities; `name`: its subject), not a
  // token: nothing to revoke, no token's rate limit.
  bool certificate = false;
  bool scoped() const { return kind == Kind::kNamespace; }
  // Whether `tube` is this identity's: "ns/" and at least one byte more (lmstfy's queue q
  // of namespace ns is the tube "ns/q"); every tube for an admin.
  bool Owns(std::string_view tube) const {
    return !scoped() || (tube.size() > ns.size() + 1 && tube.substr(0, ns.size()) == ns &&
                         tube[ns.size()] == '/');
  }
};

// Checks credentials for a front end (the server's token store behind it).
class Authenticator {
 public:
  // `auth`'s credential: a token ("<id>.<secret>", its namespace found from its id), a
  // token of namespace `ns` (when `ns` is not empty: tokens of any form), or an admin
  // account "user:password". False: nothing matches, *who untouched.
  virtual bool Authenticate(std::string_view ns, std::string_view credential,
                            Identity* who) const = 0;
  // Whether what proved `who` still holds (its token was not deleted since).
  virtual bool StillValid(const Identity& who) const = 0;
  // Counts a put by `who` now against its token's rate limit; false: over it.
  virtual bool AllowPut(const Identity& who) = 0;

 protected:
  ~Authenticator() = default;
};

// How a listener's connections treat `auth`: null (or no authenticator) as beanstalkd does
// (UNKNOWN_COMMAND); with `require`, nothing but `auth` and `quit` before it.
struct AuthPolicy {
  Authenticator* authenticator = nullptr;
  bool require = false;
};

}  // namespace stalkd::command
