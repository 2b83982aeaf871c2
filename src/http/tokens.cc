#include "http/tokens.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <utility>

#include "base/check.h"
#include "base/constant_time.h"
#include "base/random.h"
#include "base/sha256.h"

namespace stalkd::http {

namespace {

constexpr std::string_view kHeader = "stalkd-tokens 1";
constexpr size_t kIdBytes = 6;
constexpr size_t kSecretBytes = 16;
constexpr size_t kMaxFileSize = 64 << 20;  // far beyond any real token file
constexpr char kHexDigits[] = "0123456789abcdef";
constexpr char kUpperHexDigits[] = "0123456789ABCDEF";  // escapes

std::string Hex(const unsigned char* p, size_t n) {
  std::string s;
  s.reserve(2 * n);
  for (size_t i = 0; i < n; i++) {
    s.push_back(kHexDigits[p[i] >> 4]);
    s.push_back(kHexDigits[p[i] & 15]);
  }
  return s;
}

// 0..15 for a hex digit whose letters are of `ten`'s case ('a' or 'A'), else -1.
int Nibble(char c, char ten) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= ten && c < ten + 6) return c - ten + 10;
  return -1;
}

// Exactly n bytes in lower-case hex, into out.
bool FromHex(std::string_view hex, unsigned char* out, size_t n) {
  if (hex.size() != 2 * n) return false;
  for (size_t i = 0; i < n; i++) {
    int hi = Nibble(hex[2 * i], 'a'), lo = Nibble(hex[2 * i + 1], 'a');
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<unsigned char>(hi << 4 | lo);
  }
  return true;
}

bool IsId(std::string_view s) {
  unsigned char bytes[kIdBytes];
  return FromHex(s, bytes, kIdBytes);
}

void AppendEscaped(std::string* out, std::string_view s) {
  for (char c : s) {
    auto b = static_cast<unsigned char>(c);
    if (b <= ' ' || b > '~' || b == '%') {
      out->push_back('%');
      out->push_back(kUpperHexDigits[b >> 4]);
      out->push_back(kUpperHexDigits[b & 15]);
    } else {
      out->push_back(c);
    }
  }
}

bool Unescape(std::string_view s, std::string* out) {
  out->clear();
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] != '%') {
      out->push_back(s[i]);
      continue;
    }
    if (i + 2 >= s.size()) return false;
    int hi = Nibble(s[i + 1], 'A'), lo = Nibble(s[i + 2], 'A');
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi << 4 | lo));
    i += 2;
  }
  return true;
}

bool ParseInt(std::string_view s, int64_t* v) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && end == s.data() + s.size();
}

std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> f;
  for (;;) {
    size_t sp = line.find(' ');
    f.push_back(line.substr(0, sp));
    if (sp == std::string_view::npos) return f;
    line.remove_prefix(sp + 1);
  }
}

bool SysError(std::string* error, const std::string& what, int err) {
  *error = what + ": " + std::strerror(err);
  return false;
}

// 0, or the errno that stopped it; EFBIG for a file over kMaxFileSize.
int ReadFile(const std::string& path, std::string* out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  out->clear();
  char buf[1 << 16];
  int err = 0;
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) err = errno;
    if (n <= 0) break;
    out->append(buf, static_cast<size_t>(n));
    if (out->size() > kMaxFileSize) {
      err = EFBIG;
      break;
    }
  }
  ::close(fd);
  return err;
}

// Replaces the file at `path` by `data`, atomically and durably (tokens.h, "Writing").
// False (and *error) if it failed before the rename: then the old file is intact.
bool ReplaceFile(const std::string& path, std::string_view data, std::string* error) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return SysError(error, "cannot create " + tmp, errno);
  int err = 0;
  const char* what = "cannot write ";
  for (size_t done = 0; done < data.size() && err == 0;) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno != EINTR) err = errno;
    if (n > 0) done += static_cast<size_t>(n);
  }
  if (err == 0 && ::fsync(fd) != 0) {
    err = errno;
    what = "cannot sync ";
  }
  if (::close(fd) != 0 && err == 0) {
    err = errno;
    what = "cannot close ";
  }
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    what = "cannot rename over ";
  }
  if (err != 0) {
    ::unlink(tmp.c_str());
    return SysError(error, what + tmp, err);
  }
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);  // a failure here does not undo the rename (tokens.h)
    ::close(dfd);
  }
  return true;
}

}  // namespace

bool TokenStore::Open(const std::string& path, std::string* error) {
  STALKD_CHECK(path_.empty() && tables_.by_hash.empty());
  if (path.empty()) return true;
  std::string text;
  int err = ReadFile(path, &text);
  Tables t;
  if (err == ENOENT) {
    if (!ReplaceFile(path, Serialize(t), error)) return false;
  } else if (err != 0) {
    return SysError(error, "cannot read " + path, err);
  } else if (!Parse(text, path, &t, error)) {
    return false;
  }
  tables_ = std::move(t);
  path_ = path;
  return true;
}

bool TokenStore::NewId(std::string* id, std::string* error) const {
  unsigned char bytes[kIdBytes];
  do {
    if (!RandomBytes(bytes, sizeof bytes)) {
      *error = std::string("getrandom failed: ") + std::strerror(errno);
      return false;
    }
    *id = Hex(bytes, sizeof bytes);
  } while (tables_.by_id.contains(*id));
  return true;
}

TokenStore::Status TokenStore::Create(std::string_view ns, std::string_view description,
                                      int64_t now_s, std::string* token, std::string* error) {
  unsigned char secret[kSecretBytes];
  std::string id;
  if (!NewId(&id, error)) return Status::kFailed;
  if (!RandomBytes(secret, sizeof secret)) {
    *error = std::string("getrandom failed: ") + std::strerror(errno);
    return Status::kFailed;
  }
  std::string t = id + "." + Hex(secret, sizeof secret);
  Hash h = HashOf(ns, t);
  Tables next = tables_;
  bool fresh =
      next.by_hash.emplace(h, Token{std::string(ns), id, std::string(description), now_s}).second;
  STALKD_CHECK(fresh);
  next.by_id.emplace(id, h);
  Status s = Commit(std::move(next), error);
  if (s == Status::kOk) *token = std::move(t);
  return s;
}

TokenStore::Status TokenStore::CreateChosen(std::string_view ns, std::string_view description,
                                            int64_t now_s, std::string_view token,
                                            std::string* error) {
  Hash h = HashOf(ns, token);
  if (tables_.by_hash.contains(h)) return Status::kExists;
  // A random id, as Create's: one derived from the token would let whoever can list ids
  // test guesses of a weak chosen token offline. (Files written when ids were derived load
  // as they are: a file stores each id.)
  std::string id;
  if (!NewId(&id, error)) return Status::kFailed;
  Tables next = tables_;
  next.by_hash.emplace(h, Token{std::string(ns), id, std::string(description), now_s});
  next.by_id.emplace(id, h);
  return Commit(std::move(next), error);
}

TokenStore::Status TokenStore::Delete(std::string_view ns, std::string_view token_or_id,
                                      std::string* error) {
  const Token* t = Lookup(tables_, ns, token_or_id);
  if (!t) return Status::kNotFound;
  Tables next = tables_;
  auto id = next.by_id.find(t->id);
  next.limits.Remove(ns, t->id);
  next.by_hash.erase(id->second);
  next.by_id.erase(id);
  return Commit(std::move(next), error);
}

bool TokenStore::Valid(std::string_view ns, std::string_view token, std::string_view* id) const {
  auto it = tables_.by_hash.find(HashOf(ns, token));
  if (it == tables_.by_hash.end() || it->second.ns != ns) return false;
  if (id) *id = it->second.id;
  return true;
}

std::string_view TokenStore::NamespaceOf(std::string_view token, std::string_view* id) const {
  size_t dot = token.find('.');
  if (dot == std::string_view::npos) return {};
  auto by_id = tables_.by_id.find(std::string(token.substr(0, dot)));
  if (by_id == tables_.by_id.end()) return {};
  const std::string& ns = tables_.by_hash.at(by_id->second).ns;
  if (!Valid(ns, token, id)) return {};
  return ns;
}

bool TokenStore::HasId(std::string_view ns, std::string_view id) const {
  auto it = tables_.by_id.find(std::string(id));
  return it != tables_.by_id.end() && tables_.by_hash.at(it->second).ns == ns;
}

std::string_view TokenStore::Find(std::string_view ns, std::string_view token_or_id) const {
  const Token* t = Lookup(tables_, ns, token_or_id);
  return t ? std::string_view(t->id) : std::string_view();
}

std::vector<TokenInfo> TokenStore::List(std::string_view ns) const {
  std::vector<TokenInfo> out;
  for (const auto& [hash, t] : tables_.by_hash) {
    if (t.ns == ns) out.push_back(TokenInfo{t.id, t.description, t.created_s});
  }
  std::sort(out.begin(), out.end(), [](const TokenInfo& a, const TokenInfo& b) {
    return a.created_s != b.created_s ? a.created_s < b.created_s : a.id < b.id;
  });
  return out;
}

TokenStore::Status TokenStore::SetLimit(std::string_view ns, std::string_view token_or_id,
                                        const Limit& limit, std::string* error) {
  if (const char* why = Throttler::Validate(limit)) {
    *error = why;
    return Status::kInvalid;
  }
  const Token* t = Lookup(tables_, ns, token_or_id);
  if (!t) return Status::kNotFound;
  Tables next = tables_;
  next.limits.Set(ns, t->id, limit);
  return Commit(std::move(next), error);
}

TokenStore::Status TokenStore::RemoveLimit(std::string_view ns, std::string_view token_or_id,
                                           std::string* error) {
  const Token* t = Lookup(tables_, ns, token_or_id);
  if (!t) return Status::kNotFound;
  if (!tables_.limits.Get(ns, t->id)) return Status::kOk;
  Tables next = tables_;
  next.limits.Remove(ns, t->id);
  return Commit(std::move(next), error);
}

bool TokenStore::HashEqual::operator()(const Hash& a, const Hash& b) const {
  return ConstantTimeEqual(a.data(), b.data(), a.size());
}

TokenStore::Hash TokenStore::HashOf(std::string_view ns, std::string_view token) {
  // The namespace is hashed with the token (a newline cannot be in a namespace), so the
  // same token in two namespaces is two tokens, as in lmstfy.
  std::string text;
  text.reserve(ns.size() + 1 + token.size());
  text.append(ns).push_back('\n');
  text.append(token);
  return Sha256(text);
}

const TokenStore::Token* TokenStore::Lookup(const Tables& t, std::string_view ns,
                                            std::string_view token_or_id) {
  const Token* found = nullptr;
  auto id = t.by_id.find(std::string(token_or_id));
  if (id != t.by_id.end()) found = &t.by_hash.at(id->second);
  if (!found || found->ns != ns) {
    auto it = t.by_hash.find(HashOf(ns, token_or_id));
    found = it != t.by_hash.end() ? &it->second : nullptr;
  }
  return found && found->ns == ns ? found : nullptr;
}

TokenStore::Status TokenStore::Commit(Tables next, std::string* error) {
  if (!path_.empty() && !ReplaceFile(path_, Serialize(next), error)) return Status::kFailed;
  tables_ = std::move(next);
  return Status::kOk;
}

std::string TokenStore::Serialize(const Tables& t) {
  std::vector<const Token*> tokens;
  tokens.reserve(t.by_hash.size());
  for (const auto& [hash, token] : t.by_hash) tokens.push_back(&token);
  std::sort(tokens.begin(), tokens.end(),
            [](const Token* a, const Token* b) { return a->id < b->id; });
  std::string s(kHeader);
  s.push_back('\n');
  for (const Token* token : tokens) {
    const Hash& h = t.by_id.at(token->id);
    s += "token " + token->id + " " + std::to_string(token->created_s) + " " +
         Hex(h.data(), h.size()) + " ";
    AppendEscaped(&s, token->ns);
    s.push_back(' ');
    AppendEscaped(&s, token->description);
    s.push_back('\n');
  }
  std::vector<LimitInfo> limits = t.limits.List();
  for (const LimitInfo& l : limits) {
    s += "limit ";
    AppendEscaped(&s, l.ns);
    s += " " + l.token_id + " " + std::to_string(l.limit.read) + " " +
         std::to_string(l.limit.write) + " " + std::to_string(l.limit.interval_s) + "\n";
  }
  s += "end " + std::to_string(tokens.size() + limits.size()) + "\n";
  return s;
}

bool TokenStore::Parse(std::string_view text, const std::string& path, Tables* t,
                       std::string* error) {
  size_t line_no = 0, records = 0;
  bool ended = false;
  auto fail = [&](const std::string& what) {
    *error = path + ":" + std::to_string(line_no) + ": " + what;
    return false;
  };
  if (text.empty()) return fail("empty file, not a stalkd token file");
  std::string ns, description;
  while (!text.empty()) {
    line_no++;
    size_t nl = text.find('\n');
    if (nl == std::string_view::npos) return fail("the last line has no newline: truncated");
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    if (ended) return fail("a line after the end line");
    if (line_no == 1) {
      if (line == kHeader) continue;
      return fail(line.starts_with("stalkd-tokens ") ? "unsupported version: " + std::string(line)
                                                     : "not a stalkd token file");
    }
    std::vector<std::string_view> f = Fields(line);
    if (f[0] == "token") {
      Hash h;
      int64_t created;
      if (f.size() != 6) return fail("a token line has 6 fields");
      if (!IsId(f[1])) return fail("bad token id");
      if (!ParseInt(f[2], &created)) return fail("bad creation time");
      if (!FromHex(f[3], h.data(), h.size())) return fail("bad token hash");
      if (!Unescape(f[4], &ns) || !Unescape(f[5], &description)) return fail("bad escape");
      std::string id(f[1]);
      if (t->by_id.contains(id)) return fail("token id " + id + " again");
      if (!t->by_hash.emplace(h, Token{ns, id, description, created}).second) {
        return fail("token hash again");
      }
      t->by_id.emplace(id, h);
    } else if (f[0] == "limit") {
      Limit l;
      if (f.size() != 6) return fail("a limit line has 6 fields");
      if (!Unescape(f[1], &ns)) return fail("bad escape");
      if (!ParseInt(f[3], &l.read) || !ParseInt(f[4], &l.write) || !ParseInt(f[5], &l.interval_s)) {
        return fail("bad number");
      }
      auto id = t->by_id.find(std::string(f[2]));
      if (id == t->by_id.end() || t->by_hash.at(id->second).ns != ns) {
        return fail("a limit for no token of its namespace");
      }
      if (t->limits.Get(ns, f[2])) return fail("a second limit for token " + id->first);
      if (!t->limits.Set(ns, f[2], l)) return fail(Throttler::Validate(l));
    } else if (f[0] == "end") {
      int64_t n;
      if (f.size() != 2 || !ParseInt(f[1], &n)) return fail("bad end line");
      if (n < 0 || static_cast<size_t>(n) != records) {
        return fail("the end line counts " + std::string(f[1]) + " records, not " +
                    std::to_string(records));
      }
      ended = true;
      continue;
    } else {
      return fail("unknown record: " + std::string(f[0]));
    }
    records++;
  }
  if (!ended) return fail("no end line: truncated");
  return true;
}

}  // namespace stalkd::http
