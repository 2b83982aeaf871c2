#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "base/string_map.h"

// Rate limits per token, as lmstfy's throttler (throttler/throttler.go and
// server/handlers/throttler.go of bitleak/lmstfy) applies them:
//
// - A limit belongs to a (namespace, token id) and has `read` (consume requests), `write`
//   (produce requests) and `interval` (seconds). A read or write of 0 or less is no limit
//   for that kind; an interval must be > 0 and read and write may not both be 0
//   (Validate). A token without a limit is unlimited.
// - Each kind counts in a fixed window: the first request after the previous window ended
//   opens a window of `interval` seconds (lmstfy: INCR, and EXPIRE when it returned 1); in
//   it, the first `read` (`write`) requests are allowed and the rest refused until it ends.
// - A request that was allowed but failed (lmstfy: a consume not answered 200, a produce not
//   answered 201) gives its count back (Refund; lmstfy's RemedyLimiter), so a consume that
//   finds no job does not use the quota. Unlike lmstfy, only to the window it was counted
//   in, and only while that window is open: lmstfy's DECR gives it to whatever window is
//   open when the request ends, so long polls started in earlier windows and ending together
//   would each free a place in the current one and let the token take a burst.
// - Changing a limit keeps the open windows and their counts; the new numbers apply at once.
//
// Everything here is in memory and O(1) per call (two hash lookups); memory is bounded by
// the number of limits. TokenStore (http/tokens.h) persists the limits with the tokens and
// drops a token's limit when the token is deleted; change limits through it.
namespace stalkd::http {

struct Limit {
  int64_t read = 0;        // consumes per interval; <= 0: unlimited
  int64_t write = 0;       // produces per interval; <= 0: unlimited
  int64_t interval_s = 0;  // > 0
};

// Which of a limit's numbers a request counts against.
enum class Kind : uint8_t { kConsume, kProduce };

struct LimitInfo {
  std::string ns;
  std::string token_id;
  Limit limit;
};

class Throttler {
 public:
  // nullptr if `limit` can be set, else why not (lmstfy's words, for a 400).
  static const char* Validate(const Limit& limit);

  // Sets or replaces the limit of (ns, token_id); false (and nothing changes) if Validate
  // refuses it.
  bool Set(std::string_view ns, std::string_view token_id, const Limit& limit);
  // The limit of (ns, token_id), or nullptr; valid until the next Set or Remove.
  const Limit* Get(std::string_view ns, std::string_view token_id) const;
  // False if there was none.
  bool Remove(std::string_view ns, std::string_view token_id);
  // Every limit, by namespace and then token id.
  std::vector<LimitInfo> List() const;
  size_t size() const { return size_; }

  // Counts a request of `kind` by (ns, token_id) at `now` and says whether it may go ahead.
  // `now` must not go backwards between calls.
  bool Allow(std::string_view ns, std::string_view token_id, Kind kind, Nanos now);
  // Gives back the count of a request that Allow counted at `counted_at` and that failed,
  // if the window it was counted in is still open at `now`.
  void Refund(std::string_view ns, std::string_view token_id, Kind kind, Nanos counted_at,
              Nanos now);

 private:
  struct Window {
    Nanos start = 0;
    int64_t count = 0;  // 0: no window is open
  };
  struct Entry {
    Limit limit;
    Window windows[2];  // by Kind
  };

  const Entry* Find(std::string_view ns, std::string_view token_id) const;
  Entry* Find(std::string_view ns, std::string_view token_id);
  // The open window of e for kind at now, or nullptr if it has ended or none is open.
  static Window* OpenWindow(Entry* e, Kind kind, Nanos now);

  StringMap<StringMap<Entry>> limits_;  // namespace -> token id -> entry
  size_t size_ = 0;
};

}  // namespace stalkd::http
