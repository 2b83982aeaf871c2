// Credentials: USER:PASSWORD@ in --store URLs, and the AUTH that opens every connection of the
// links (docs/SCALE-OUT.md, "Credentials"). A password is never part of a message.
#include "redis/link_auth.h"

#include "redis/link_conn.h"

namespace stalkd::redis {

namespace {

// What every message about refused credentials says (IsAccessRefused looks for it).
constexpr std::string_view kAuthRefused = "AUTH refused: ";

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool PercentDecode(std::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); i++) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    int hi = i + 2 < in.size() ? HexDigit(in[i + 1]) : -1;
    int lo = hi >= 0 ? HexDigit(in[i + 2]) : -1;
    if (lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return true;
}

// Where USER:PASSWORD is in `url`: from the end of "scheme://" to the last '@' of the
// authority (which ends at the first '/' after that '@'). false if there is none.
bool FindUserinfo(std::string_view url, size_t* begin, size_t* at) {
  size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return false;
  *begin = scheme + 3;
  size_t slash = url.find('/', *begin);
  size_t last = url.substr(0, slash).rfind('@');
  if (last == std::string_view::npos || last < *begin) return false;
  *at = last;
  return true;
}

}  // namespace

bool TakeCredentials(std::string_view url, std::string* bare, Credentials* auth,
                     std::string* error) {
  size_t begin = 0, at = 0;
  *auth = Credentials();
  if (!FindUserinfo(url, &begin, &at)) {
    *bare = std::string(url);
    return true;
  }
  *bare = std::string(url.substr(0, begin)) + std::string(url.substr(at + 1));
  std::string_view info = url.substr(begin, at - begin);
  size_t colon = info.find(':');
  std::string_view user = info.substr(0, colon);
  std::string_view password =
      colon == std::string_view::npos ? std::string_view() : info.substr(colon + 1);
  if (!PercentDecode(user, &auth->user) || !PercentDecode(password, &auth->password)) {
    *error = "--store: '" + *bare + "': a bad %XX escape in its credentials";
    return false;
  }
  return true;
}

std::string RedactStoreUrl(std::string_view url) {
  size_t begin = 0, at = 0;
  if (!FindUserinfo(url, &begin, &at)) return std::string(url);
  std::string_view info = url.substr(begin, at - begin);
  size_t colon = info.find(':');
  if (colon == std::string_view::npos) return std::string(url);
  return std::string(url.substr(0, begin + colon + 1)) + "***" + std::string(url.substr(at));
}

bool IsAccessRefused(std::string_view why) {
  return why.find(kAuthRefused) != std::string::npos || why.find("NOPERM") != std::string::npos ||
         IsTlsRefused(why);
}

void Conn::AppendAuth() {
  if (auth_.password.empty()) return;
  if (auth_.user.empty()) {
    Append({"AUTH", auth_.password});
  } else {
    Append({"AUTH", auth_.user, auth_.password});
  }
  auth_pending_ = true;
}

bool Conn::Authenticated(const Reply& r) {
  std::string who = auth_.user.empty() ? "" : " (user " + auth_.user + ")";
  if (auth_pending_) {
    auth_pending_ = false;
    if (!r.error()) return false;  // +OK: AUTH's, not the owner's
    Fail(name_ + ": " + std::string(kAuthRefused) + r.str + who);
    return false;
  }
  if (r.ErrorIs("NOAUTH")) {
    // No password given (or none taken: a server that asks for one after the fact).
    Fail(name_ + ": " + std::string(kAuthRefused) + r.str +
         (auth_.password.empty() ? " (no password given)" : who));
    return false;
  }
  return true;
}

}  // namespace stalkd::redis
