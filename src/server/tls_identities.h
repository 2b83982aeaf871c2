#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "command/identity.h"

// --tls-identities FILE (docs/SECURITY.md, "Client certificates as identities"): the verified
// client certificate subjects that stand for a namespace or an admin on the beanstalkd
// listeners, without `auth`.
namespace stalkd::server {

class TlsIdentities {
 public:
  // Reads FILE: one "SUBJECT namespace NS" or "SUBJECT admin" a line, SUBJECT as
  // Connection::tls_identity() writes it (RFC 2253, "CN=worker,O=Example"); blank lines and
  // lines starting with '#' are skipped. Null with *error (the file, the line and why).
  static std::shared_ptr<const TlsIdentities> Load(const std::string& path, std::string* error);

  // The identity of a certificate's subject; null: none (the connection stays anonymous).
  const command::Identity* Find(std::string_view subject) const;
  size_t size() const { return by_subject_.size(); }

 private:
  std::map<std::string, command::Identity, std::less<>> by_subject_;
};

}  // namespace stalkd::server
