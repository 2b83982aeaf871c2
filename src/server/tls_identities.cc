// --tls-identities: the file's lines, read at start and on SIGHUP (Server::ReloadTls).
#include "server/tls_identities.h"

#include <cerrno>
#include <cstring>
#include <fstream>

namespace stalkd::server {

namespace {

constexpr size_t kMaxLines = 100000;  // an operator's file; bounded all the same
constexpr size_t kMaxNamespace = 200;

std::string_view Trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// The last word of *s, taken off it (the rest trimmed).
std::string_view PopWord(std::string_view* s) {
  size_t sp = s->find_last_of(" \t");
  std::string_view w = sp == std::string_view::npos ? *s : s->substr(sp + 1);
  *s = sp == std::string_view::npos ? std::string_view() : Trim(s->substr(0, sp));
  return w;
}

bool ValidNamespace(std::string_view ns) {
  if (ns.empty() || ns.size() > kMaxNamespace || ns[0] == '-') return false;
  for (char c : ns) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::shared_ptr<const TlsIdentities> TlsIdentities::Load(const std::string& path,
                                                         std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = path + ": " + strerror(errno);
    return nullptr;
  }
  auto ids = std::make_shared<TlsIdentities>();
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    n++;
    auto fail = [&](const std::string& why) {
      *error = path + ":" + std::to_string(n) + ": " + why;
      return nullptr;
    };
    if (n > kMaxLines) return fail("more than 100000 lines");
    std::string_view rest = Trim(line);
    if (rest.empty() || rest[0] == '#') continue;
    command::Identity who;
    std::string_view last = PopWord(&rest);
    if (last == "admin") {
      who.kind = command::Identity::Kind::kAdmin;
    } else {
      std::string_view kind = PopWord(&rest);
      if (kind != "namespace") {
        return fail("want \"SUBJECT namespace NS\" or \"SUBJECT admin\"");
      }
      if (!ValidNamespace(last)) {
        return fail("a namespace is 1 to 200 of A-Z a-z 0-9 - _, not beginning with -");
      }
      who.ns = std::string(last);
    }
    if (rest.empty()) return fail("no certificate subject before \"" + std::string(last) + "\"");
    who.name = std::string(rest);
    who.certificate = true;
    if (!ids->by_subject_.emplace(std::string(rest), std::move(who)).second) {
      return fail("the subject \"" + std::string(rest) + "\" is given twice");
    }
  }
  if (in.bad()) {
    *error = path + ": " + strerror(errno);
    return nullptr;
  }
  return ids;
}

const command::Identity* TlsIdentities::Find(std::string_view subject) const {
  auto it = by_subject_.find(subject);
  return it == by_subject_.end() ? nullptr : &it->second;
}

}  // namespace stalkd::server
