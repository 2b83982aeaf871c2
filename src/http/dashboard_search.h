#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "command/store.h"
#include "http/co.h"
#include "http/response.h"

// The dashboard's search of job bodies (GET /dashboard/api/tubes/:tube/search): a substring
// looked for in a tube's job bodies, read by list-jobs and peek (nothing is reserved or
// changed), in bounded slices, each answer going on from a cursor the last one gave.
namespace stalkd::http::dash {

inline constexpr size_t kMaxSearchText = 256;       // bytes of the text searched for
inline constexpr uint32_t kDefaultSearchHits = 20;  // matches an answer holds, by default
inline constexpr uint32_t kMaxSearchHits = 100;
// What one step (one turn of the connection in the event loop) does at the most.
inline constexpr uint32_t kSearchSliceJobs = 100;             // jobs peeked
inline constexpr size_t kSearchSliceBytes = size_t{1} << 20;  // body bytes scanned
// What one answer does at the most before it gives a cursor to go on from (a job begun is
// scanned to its end).
inline constexpr uint64_t kSearchMaxJobs = 1000;
inline constexpr uint64_t kSearchMaxBytes = uint64_t{16} << 20;
inline constexpr uint32_t kSearchMaxListCalls = 64;  // list-jobs calls (65536 ids each)
inline constexpr uint32_t kSearchListIds = 100;      // ids a list-jobs call asks for
inline constexpr size_t kSnippetContext = 48;        // bytes shown either side of a match

// Where `needle` first occurs in body[begin - (needle.size() - 1), end) (from 0 if that is
// negative): so scanning a body in pieces [0, a), [a, b), ... finds a match that spans
// two pieces, in the piece where it ends. With `fold` ASCII letters match either case
// (`needle` is then lower case). npos if nowhere. It compares a few bytes per byte of the
// piece, whatever the needle; *comparisons (if given) counts them.
size_t FindInBody(std::string_view body, size_t begin, size_t end, std::string_view needle,
                  bool fold, uint64_t* comparisons = nullptr);

// Where an answer stops and the next one goes on: a state of list-jobs and an id.
struct SearchCursor {
  command::StateFilter state = command::StateFilter::kReady;
  uint64_t from = 1;
};
// "<state>:<id>", e.g. "delayed:42" (id at least 1).
std::string CursorText(const SearchCursor& c);
std::optional<SearchCursor> ParseCursor(std::string_view text);

struct BodyQuery {
  std::string tube;
  std::string text;  // lower case when fold
  bool fold = true;  // ASCII case-insensitive
  command::StateFilter state =
      command::StateFilter::kAll;  // kAll: ready, delayed, reserved, buried
  SearchCursor at;                 // where to start
  uint32_t limit = kDefaultSearchHits;
};

// Searches, answering {"tube","state","scanned","scanned_bytes","matches":[...],"cursor"}
// into *resp (cursor null once every job was looked at).
Co<> SearchBodies(command::Session& s, BodyQuery q, Response* resp);

}  // namespace stalkd::http::dash
