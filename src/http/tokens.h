#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "http/throttle.h"

// The HTTP API's tokens (lmstfy's auth/token.go) and their rate limits, kept in memory and,
// when given a path, in a file that every change rewrites atomically.
//
// A token belongs to one namespace and reads "<id>.<secret>": the id is 12 hex digits
// (48 random bits) that name the token in lists and deletes, the secret 32 hex digits (128
// random bits), both from the kernel (getrandom). Only the SHA-256 of "<namespace>\n<token>" is
// kept, never the token: Create returns it once. Checking a token is O(1): its hash is
// looked up. Clients treat it as opaque, as lmstfy's; lmstfy's optional "pool:" prefix is
// the front end's to strip.
//
// The file (0600), version 1: a header line, one line a record, a trailer counting them.
//   stalkd-tokens 1
//   token <id> <created, unix seconds> <sha-256 of the token, 64 hex> <namespace> <description>
//   limit <namespace> <id> <read> <write> <interval seconds>
//   end <number of token and limit lines>
// Fields are separated by one space and namespaces and descriptions are escaped: every
// byte below '!', above '~', and '%' itself is written %XX (upper-case hex), so a field
// never holds a space or a newline and may be empty. A limit names a token of its own
// namespace. Opening a file that breaks any of this is an error naming the line.
//
// Writing: the whole file goes to "<path>.tmp", which is fsynced and renamed over the
// file, and then the directory is fsynced. A change that fails before the rename leaves
// the file and the store as they were (kFailed). A failed directory fsync after the rename
// does not undo the change (the file holds it; only the rename's durability is in doubt).
namespace stalkd::http {

struct TokenInfo {
  std::string id;
  std::string description;
  int64_t created_s = 0;  // unix seconds
};

class TokenStore {
 public:
  enum class Status : uint8_t {
    kOk,
    kNotFound,  // no token of the namespace is named so
    kInvalid,   // SetLimit: Throttler::Validate refuses the limit
    kExists,    // CreateChosen: the token (or its id) is taken
    kFailed,    // the file could not be written (*error says why); nothing changed
  };

  TokenStore() = default;
  TokenStore(const TokenStore&) = delete;
  TokenStore& operator=(const TokenStore&) = delete;

  // Loads the tokens and limits of `path`, or, if it does not exist, writes an empty one
  // (so an unwritable place shows now, not at the first token). "": memory only. On error
  // (unreadable, corrupt) sets *error and the store stays empty. Call once, first.
  bool Open(const std::string& path, std::string* error);

  // Makes a token of `ns` and sets *token to it.
  Status Create(std::string_view ns, std::string_view description, int64_t now_s,
                std::string* token, std::string* error);
  // Keeps `token`, chosen by an administrator (lmstfy's `token` parameter: how tokens move
  // over from lmstfy), as a token of `ns`, with a random id (12 hex digits, as Create's;
  // nothing derived from the token). The caller checks its form.
  Status CreateChosen(std::string_view ns, std::string_view description, int64_t now_s,
                      std::string_view token, std::string* error);
  // Deletes the token of `ns` that `token_or_id` names (the token or its id), and its limit.
  Status Delete(std::string_view ns, std::string_view token_or_id, std::string* error);
  // True if `token` (the whole token, not an id) is a token of `ns`; then *id, if given, is
  // its id, valid until the next change. One SHA-256 and one hash lookup.
  bool Valid(std::string_view ns, std::string_view token, std::string_view* id = nullptr) const;
  // The namespace of `token` when it has Create's form "<id>.<secret>": found by its id,
  // then checked as Valid checks; "" if it is no such token. *id as Valid's. Both views are
  // valid until the next change. (A chosen token of another form needs its namespace.)
  std::string_view NamespaceOf(std::string_view token, std::string_view* id = nullptr) const;
  // Whether a token of `ns` has the id `id` (it was not deleted). One hash lookup.
  bool HasId(std::string_view ns, std::string_view id) const;
  // The id of the token of `ns` that `token_or_id` names, or "" (valid until the next change).
  std::string_view Find(std::string_view ns, std::string_view token_or_id) const;
  // The tokens of `ns`, oldest first (then by id). Scans every token: an admin call.
  std::vector<TokenInfo> List(std::string_view ns) const;
  size_t size() const { return tables_.by_hash.size(); }

  // Sets or removes the rate limit of the token of `ns` that `token_or_id` names. Removing
  // a limit the token does not have is kOk.
  Status SetLimit(std::string_view ns, std::string_view token_or_id, const Limit& limit,
                  std::string* error);
  Status RemoveLimit(std::string_view ns, std::string_view token_or_id, std::string* error);
  // The limits, by token id: read them (Get, List) and count requests (Allow, Refund) here;
  // change them with SetLimit and RemoveLimit, which persist.
  Throttler& throttler() { return tables_.limits; }
  const Throttler& throttler() const { return tables_.limits; }

 private:
  using Hash = std::array<unsigned char, 32>;  // SHA-256
  struct HashHash {
    size_t operator()(const Hash& h) const {
      size_t v;
      std::memcpy(&v, h.data(), sizeof v);  // already uniformly random
      return v;
    }
  };
  // Digests are compared in constant time (ConstantTimeEqual), so a check's timing says
  // nothing of how close a guess came.
  struct HashEqual {
    bool operator()(const Hash& a, const Hash& b) const;
  };
  struct Token {
    std::string ns;
    std::string id;
    std::string description;
    int64_t created_s = 0;
  };
  // Everything a change may touch, so that a change is made on a copy and kept only once
  // the copy is written.
  struct Tables {
    std::unordered_map<Hash, Token, HashHash, HashEqual> by_hash;
    std::unordered_map<std::string, Hash> by_id;
    Throttler limits;
  };

  static Hash HashOf(std::string_view ns, std::string_view token);
  // A random id no token has; false (and *error) if the random source failed.
  bool NewId(std::string* id, std::string* error) const;
  // The token of `ns` that `token_or_id` names, in `t`, or nullptr.
  static const Token* Lookup(const Tables& t, std::string_view ns, std::string_view token_or_id);
  // Writes `next` to the file and, if that works (or there is no file), makes it current.
  Status Commit(Tables next, std::string* error);
  static std::string Serialize(const Tables& t);
  static bool Parse(std::string_view text, const std::string& path, Tables* t, std::string* error);

  std::string path_;
  Tables tables_;
};

}  // namespace stalkd::http
