#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "redis/link.h"

struct redisReader;  // hiredis/read.h

// RESP, Redis' protocol: commands out (encoded here), replies in (parsed by hiredis' reader).
namespace stalkd::redis {

// Appends `argv` to `out` as a RESP array of bulk strings (binary safe).
void AppendCommand(std::string& out, std::span<const std::string_view> argv);

// hiredis' redisReader building Replies directly (one copy of each string, out of the
// reader's buffer), with no limit on a reply's size but memory.
class ReplyReader {
 public:
  ReplyReader();
  ~ReplyReader();
  ReplyReader(const ReplyReader&) = delete;
  ReplyReader& operator=(const ReplyReader&) = delete;

  // The reader keeps what it has not parsed yet. Feed modest slices (a few KiB): hiredis
  // moves the unparsed rest to the front of its buffer whenever it has parsed 1 KiB.
  void Feed(const char* data, size_t n);
  // 1: *out is the next reply; 0: it needs more bytes; -1: a protocol error (error()).
  int Next(Reply* out);
  std::string error() const;
  // Forgets everything fed (for a new connection).
  void Clear();

 private:
  redisReader* r_;
};

// A reply for logs and error messages: "OK", "ERR unknown command", "[master, 123, []]".
std::string Describe(const Reply& r);

}  // namespace stalkd::redis
