// Fuzzes ParseCommand and IsValidTubeName with arbitrary lines: no crash, no read outside
// the line, and the results agree with the documented rules. pause-tube's tube is any run
// of name characters: whether it is a valid name is the store's to say (after it counts
// the command, as beanstalkd does).
//
// Verbs: an extension verb (docs/EXTENSIONS.md) matches only as a whole word (followed by a
// space or the end of the line); any other line gets beanstalkd's verb, checked against an
// independent copy of beanstalkd's prefix table (so "reserve-extra" stays beanstalkd's
// `reserve` with BAD_FORMAT and "put-extX" an unknown command).
//
// Extension arguments are parsed by the conversation (extensions.cc), so an extension line
// (the input up to its first CRLF) is also sent to a Conversation over a fresh MemoryStore
// (for inputs of odd length through a store::DeferredStore, which answers every call late:
// the replies must be the same) and its reply checked against a reference grammar written from
// docs/EXTENSIONS.md; for put-ext and put-many the rest of the input, cut or padded to the
// announced size, is the body or block, and the INSERTED / INSERTED-MANY replies are checked too.
#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/check.h"
#include "base/clock.h"
#include "command/store.h"
#include "command/values.h"
#include "protocol/command.h"
#include "protocol/conversation.h"
#include "store/deferred_store.h"
#include "store/memory_store.h"

using stalkd::command::IsTubeNameChar;
using stalkd::protocol::Command;
using stalkd::protocol::IsExtension;
using stalkd::protocol::IsValidTubeName;
using stalkd::protocol::ParseCommand;
using stalkd::protocol::ParseStatus;
using stalkd::protocol::StartsExtensionLine;
using stalkd::protocol::Verb;

namespace {

bool Inside(std::string_view part, std::string_view whole) {
  return part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size();
}

// Re-parses a canonical spelling of cmd and checks it yields the same fields.
void CheckRoundTrip(const Command& cmd) {
  char buf[2048];  // a pause-tube's tube may be as long as the line
  int n = -1;
  switch (cmd.verb) {
    case Verb::kPut:
      if (cmd.trailing_garbage) return;
      n = snprintf(buf, sizeof buf, "put %u %u %u %u", cmd.pri, cmd.delay, cmd.ttr, cmd.bytes);
      break;
    case Verb::kRelease:
      n = snprintf(buf, sizeof buf, "release %" PRIu64 " %u %u", cmd.id, cmd.pri, cmd.delay);
      break;
    case Verb::kBury:
      n = snprintf(buf, sizeof buf, "bury %" PRIu64 " %u", cmd.id, cmd.pri);
      break;
    case Verb::kDelete:
      n = snprintf(buf, sizeof buf, "delete %" PRIu64, cmd.id);
      break;
    case Verb::kPeek:
      n = snprintf(buf, sizeof buf, "peek %" PRIu64, cmd.id);
      break;
    case Verb::kKick:
      n = snprintf(buf, sizeof buf, "kick %u", cmd.count);
      break;
    case Verb::kReserveWithTimeout:
      n = snprintf(buf, sizeof buf, "reserve-with-timeout %u", cmd.timeout);
      break;
    case Verb::kPauseTube:
      n = snprintf(buf, sizeof buf, "pause-tube %.*s %u", static_cast<int>(cmd.tube.size()),
                   cmd.tube.data(), cmd.delay);
      break;
    case Verb::kWatch:
      n = snprintf(buf, sizeof buf, "watch %.*s", static_cast<int>(cmd.tube.size()),
                   cmd.tube.data());
      break;
    default:
      return;
  }
  STALKD_CHECK(n > 0 && static_cast<size_t>(n) < sizeof buf);
  Command again;
  STALKD_CHECK(ParseCommand(std::string_view(buf, static_cast<size_t>(n)), &again) ==
               ParseStatus::kOk);
  STALKD_CHECK(again.verb == cmd.verb);
  STALKD_CHECK(again.id == cmd.id && again.pri == cmd.pri && again.delay == cmd.delay);
  STALKD_CHECK(again.ttr == cmd.ttr && again.bytes == cmd.bytes && again.count == cmd.count);
  STALKD_CHECK(again.timeout == cmd.timeout && again.tube == cmd.tube);
}

struct VerbWord {
  std::string_view word;
  Verb verb;
};

// beanstalkd 1.13's which_cmd(): the first prefix that matches wins. A copy independent of
// parser.cc's, so that the extensions' matching cannot change what beanstalkd answers.
constexpr VerbWord kBeanstalkdPrefixes[] = {
    {"put ", Verb::kPut},
    {"peek ", Verb::kPeek},
    {"peek-ready", Verb::kPeekReady},
    {"peek-delayed", Verb::kPeekDelayed},
    {"peek-buried", Verb::kPeekBuried},
    {"reserve-with-timeout ", Verb::kReserveWithTimeout},
    {"reserve-job ", Verb::kReserveJob},
    {"reserve", Verb::kReserve},
    {"delete ", Verb::kDelete},
    {"release ", Verb::kRelease},
    {"bury ", Verb::kBury},
    {"kick ", Verb::kKick},
    {"kick-job ", Verb::kKickJob},
    {"touch ", Verb::kTouch},
    {"stats-job ", Verb::kStatsJob},
    {"stats-tube ", Verb::kStatsTube},
    {"stats", Verb::kStats},
    {"use ", Verb::kUse},
    {"watch ", Verb::kWatch},
    {"ignore ", Verb::kIgnore},
    {"list-tubes-watched", Verb::kListTubesWatched},
    {"list-tube-used", Verb::kListTubeUsed},
    {"list-tubes", Verb::kListTubes},
    {"quit", Verb::kQuit},
    {"pause-tube", Verb::kPauseTube},
};

// docs/EXTENSIONS.md's verbs, each matched as a whole word.
constexpr VerbWord kExtensionWords[] = {
    {"put-ext", Verb::kPutExt},
    {"put-many", Verb::kPutMany},
    {"reserve-ext", Verb::kReserveExt},
    {"delete-many", Verb::kDeleteMany},
    {"purge", Verb::kPurge},
    {"list-jobs", Verb::kListJobs},
    {"tube-tries", Verb::kTubeTries},
};

Verb BeanstalkdVerb(std::string_view line) {
  for (const VerbWord& v : kBeanstalkdPrefixes) {
    if (line.starts_with(v.word)) return v.verb;
  }
  return Verb::kUnknown;
}

// docs/EXTENSIONS.md's extended stats verbs. beanstalkd's "stats" prefix matches each (and
// answers BAD_FORMAT, as its stats takes no argument); stalkd reads the line as the
// beanstalkd verb named, extended.
constexpr VerbWord kExtendedStatsPrefixes[] = {
    {"stats-ext", Verb::kStats},
    {"stats-tube-ext ", Verb::kStatsTube},
    {"stats-job-ext ", Verb::kStatsJob},
};

Verb ExtendedStatsVerb(std::string_view line) {
  for (const VerbWord& v : kExtendedStatsPrefixes) {
    if (line.starts_with(v.word)) return v.verb;
  }
  return Verb::kUnknown;
}

// The extension verb `line` begins with as a whole word (kUnknown if none), and its length.
Verb ExtensionVerb(std::string_view line, size_t* len) {
  for (const VerbWord& v : kExtensionWords) {
    if (line.starts_with(v.word) && (line.size() == v.word.size() || line[v.word.size()] == ' ')) {
      *len = v.word.size();
      return v.verb;
    }
  }
  return Verb::kUnknown;
}

// ------------------------------------------------- beanstalkd 1.13's numeric arguments
// Written from prot.c, independently of parser.cc: read_u32/read_u64 skip spaces (only
// spaces), need a digit, read decimal digits and fail on overflow; with no end pointer the
// number must end the line. kick's count is strtoul()'s (any white space, a sign, the low
// 32 bits); reserve-with-timeout's is read_u32 with an end pointer, at most INT_MAX.

struct RefReader {
  std::string_view s;
  size_t i = 0;
  bool Read(uint64_t max, bool last, uint64_t* out) {
    while (i < s.size() && s[i] == ' ') i++;
    if (i == s.size() || s[i] < '0' || s[i] > '9') return false;
    uint64_t v = 0;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; i++) {
      uint64_t digit = static_cast<uint64_t>(s[i] - '0');
      if (v > (max - digit) / 10) return false;
      v = v * 10 + digit;
    }
    *out = v;
    return !last || i == s.size();
  }
};

bool RefStrtoul32(std::string_view s, uint32_t* out) {
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r'))) i++;
  bool minus = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) minus = s[i++] == '-';
  RefReader r{s, i};
  if (i == s.size() || s[i] < '0' || s[i] > '9') return false;
  uint64_t v = 0;
  if (!r.Read(UINT64_MAX, false, &v)) return false;
  *out = static_cast<uint32_t>(minus ? 0 - v : v);
  return true;
}

// Checks ParseCommand's answer to a line whose beanstalkd verb takes numbers.
void CheckNumbers(std::string_view line, Verb verb, ParseStatus st, const Command& cmd) {
  auto args = [&](std::string_view prefix) { return RefReader{line.substr(prefix.size())}; };
  uint64_t a = 0, b = 0, c = 0, d = 0;
  bool ok = false;
  Command want;
  want.verb = verb;
  switch (verb) {
    case Verb::kPut: {
      RefReader r = args("put ");
      ok = r.Read(UINT32_MAX, false, &a) && r.Read(UINT32_MAX, false, &b) &&
           r.Read(UINT32_MAX, false, &c) && r.Read(UINT32_MAX, false, &d);
      want.pri = static_cast<uint32_t>(a);
      want.delay = static_cast<uint32_t>(b);
      want.ttr = static_cast<uint32_t>(c);
      want.bytes = static_cast<uint32_t>(d);
      want.trailing_garbage = ok && r.i != r.s.size();
      break;
    }
    case Verb::kPeek:
    case Verb::kReserveJob:
    case Verb::kDelete:
    case Verb::kTouch:
    case Verb::kKickJob:
    case Verb::kStatsJob: {
      RefReader r{line.substr(line.find(' ') + 1)};
      ok = r.Read(UINT64_MAX, true, &a);
      want.id = a;
      break;
    }
    case Verb::kRelease: {
      RefReader r = args("release ");
      ok = r.Read(UINT64_MAX, false, &a) && r.Read(UINT32_MAX, false, &b) &&
           r.Read(UINT32_MAX, true, &c);
      want.id = a;
      want.pri = static_cast<uint32_t>(b);
      want.delay = static_cast<uint32_t>(c);
      break;
    }
    case Verb::kBury: {
      RefReader r = args("bury ");
      ok = r.Read(UINT64_MAX, false, &a) && r.Read(UINT32_MAX, true, &b);
      want.id = a;
      want.pri = static_cast<uint32_t>(b);
      break;
    }
    case Verb::kReserveWithTimeout: {
      RefReader r = args("reserve-with-timeout ");
      ok = r.Read(INT32_MAX, false, &a);
      want.timeout = static_cast<uint32_t>(a);
      break;
    }
    case Verb::kKick:
      ok = RefStrtoul32(line.substr(5), &want.count);
      break;
    case Verb::kPauseTube: {  // read_tube_name, then the delay
      size_t i = 10;
      while (i < line.size() && line[i] == ' ') i++;
      size_t start = i;
      while (i < line.size() && IsTubeNameChar(line[i])) i++;
      RefReader r{line, i};
      ok = i > start && r.Read(UINT32_MAX, true, &a);
      want.delay = static_cast<uint32_t>(a);
      break;
    }
    default:
      return;
  }
  STALKD_CHECK(st == (ok ? ParseStatus::kOk : ParseStatus::kBadFormat));
  if (!ok) return;
  STALKD_CHECK(cmd.id == want.id && cmd.pri == want.pri && cmd.delay == want.delay);
  STALKD_CHECK(cmd.ttr == want.ttr && cmd.bytes == want.bytes && cmd.count == want.count);
  STALKD_CHECK(cmd.timeout == want.timeout && cmd.trailing_garbage == want.trailing_garbage);
}

// ---------------------------------------------------------------- the extensions' grammar
// Written from docs/EXTENSIONS.md, independently of extensions.cc.

// Words separated by runs of spaces (only spaces).
std::vector<std::string_view> SplitWords(std::string_view s) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == ' ') {
      i++;
      continue;
    }
    size_t end = s.find(' ', i);
    if (end == std::string_view::npos) end = s.size();
    words.push_back(s.substr(i, end - i));
    i = end;
  }
  return words;
}

// Decimal digits without a sign, at most `max`.
bool RefNumber(std::string_view w, uint64_t max, uint64_t* out) {
  if (w.empty()) return false;
  uint64_t v = 0;
  for (char c : w) {
    if (c < '0' || c > '9') return false;
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (max - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

bool RefU32(std::string_view w, uint64_t min, uint64_t max, uint64_t* out) {
  return RefNumber(w, max, out) && *out >= min;
}

bool RefPrintable(std::string_view s) {
  for (char c : s) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

bool RefAttributeName(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

// put-ext's options (also those of a put-many entry); *key: the key, empty if none.
bool RefPutOptions(const std::vector<std::string_view>& words, size_t first,
                   std::string_view* key) {
  bool tries = false, ttl = false, has_key = false;
  std::vector<std::string_view> names;
  uint64_t n;
  for (size_t i = first; i < words.size(); i++) {
    std::string_view w = words[i];
    if (w.starts_with("tries=")) {
      if (tries || !RefU32(w.substr(6), 1, UINT32_MAX, &n)) return false;
      tries = true;
    } else if (w.starts_with("ttl=")) {
      if (ttl || !RefU32(w.substr(4), 0, UINT32_MAX, &n)) return false;
      ttl = true;
    } else if (w.starts_with("key=")) {
      std::string_view v = w.substr(4);
      if (has_key || v.empty() || v.size() > 200 || !RefPrintable(v)) return false;
      has_key = true;
      *key = v;
    } else if (w.starts_with("attr.")) {
      std::string_view nv = w.substr(5);
      size_t eq = nv.find('=');
      if (eq == std::string_view::npos) return false;
      std::string_view name = nv.substr(0, eq), value = nv.substr(eq + 1);
      if (!RefAttributeName(name) || value.size() > 255 || !RefPrintable(value)) return false;
      if (names.size() == 16) return false;
      for (std::string_view other : names) {
        if (other == name) return false;
      }
      names.push_back(name);
    } else {
      return false;
    }
  }
  return true;
}

// pri delay ttr bytes [options]: *bytes and *key.
bool RefPutLine(std::string_view args, uint64_t* bytes, std::string_view* key) {
  std::vector<std::string_view> w = SplitWords(args);
  uint64_t n;
  if (w.size() < 4) return false;
  for (size_t i = 0; i < 4; i++) {
    if (!RefU32(w[i], 0, UINT32_MAX, &n)) return false;
  }
  *bytes = n;
  *key = {};
  return RefPutOptions(w, 4, key);
}

bool RefTubeState(std::string_view w, bool reserved_ok, bool all_ok) {
  return w == "ready" || w == "delayed" || w == "buried" || (reserved_ok && w == "reserved") ||
         (all_ok && w == "all");
}

// The conversation's client: over the memory store nothing answers late; over a
// DeferredStore everything but use/watch/ignore does, and the replies are the same.
class LateResults final : public stalkd::command::Client {
 public:
  explicit LateResults(bool deferred) : deferred_(deferred) {}
  void OnResult(const stalkd::command::Result& r) override {
    STALKD_CHECK(deferred_ && conv);
    conv->OnResult(r);
  }
  stalkd::protocol::Conversation* conv = nullptr;

 private:
  bool deferred_;
};

constexpr size_t kStoreMaxJobSize = 64;
// EXTENSIONS.md: "A block larger than count x (the job size limit + 8192) is JOB_TOO_BIG".
// Bodies and blocks are only sent when at most this big, to keep runs fast. (A put-many block
// over 16 MiB is JOB_TOO_BIG, docs/EXTENSIONS.md; each entry is held to the job size limit,
// which CheckPutManyBlock checks. No such block is ever sent.)
constexpr uint64_t kMaxSentBody = 256 * 1024;

// `payload` cut, or padded (with 'x', then a CRLF), to exactly n bytes.
std::string Fit(std::string_view payload, size_t n) {
  std::string s(payload.substr(0, n));
  size_t had = s.size();
  if (had < n) {
    s.resize(n, 'x');
    if (n >= 2 && had <= n - 2) s[n - 2] = '\r';
    s[n - 1] = '\n';
  }
  return s;
}

// The replies to a put-many block, checked against the reference parse of the block.
void CheckPutManyBlock(const std::string& out, uint64_t count, std::string_view block) {
  if (!block.ends_with("\r\n")) {
    STALKD_CHECK(out == "EXPECTED_CRLF\r\n");
    return;
  }
  block.remove_suffix(2);
  struct Entry {
    uint64_t bytes;
    std::string_view key;
  };
  std::vector<Entry> entries;
  bool ok = true;
  while (ok && entries.size() < count) {
    size_t eol = block.find("\r\n");
    Entry e{};
    if (eol == std::string_view::npos || eol + 2 > stalkd::protocol::kMaxExtensionLineLength ||
        !RefPutLine(block.substr(0, eol), &e.bytes, &e.key)) {
      ok = false;
      break;
    }
    block.remove_prefix(eol + 2);
    if (block.size() < e.bytes + 2 || block.substr(e.bytes, 2) != "\r\n") {
      ok = false;
      break;
    }
    block.remove_prefix(e.bytes + 2);
    entries.push_back(e);
  }
  if (!ok || !block.empty()) {
    STALKD_CHECK(out == "BAD_FORMAT\r\n");
    return;
  }
  std::string head = "INSERTED-MANY " + std::to_string(count) + "\r\n";
  STALKD_CHECK(out.starts_with(head));
  size_t pos = head.size();
  uint64_t last_id = 0;
  std::vector<std::pair<std::string_view, uint64_t>> keys;  // key -> id, of this batch
  for (const Entry& e : entries) {
    size_t eol = out.find("\r\n", pos);
    STALKD_CHECK(eol != std::string::npos);
    std::string line = out.substr(pos, eol - pos);
    pos = eol + 2;
    if (e.bytes > kStoreMaxJobSize) {
      STALKD_CHECK(line == "JOB_TOO_BIG");
      continue;
    }
    uint64_t existing = 0;
    for (const auto& [k, id] : keys) {
      if (!e.key.empty() && k == e.key) existing = id;
    }
    if (existing != 0) {
      STALKD_CHECK(line == "EXISTS " + std::to_string(existing));
      continue;
    }
    uint64_t id = 0;
    STALKD_CHECK(line.starts_with("INSERTED ") &&
                 RefNumber(std::string_view(line).substr(9), UINT64_MAX, &id) && id > last_id);
    last_id = id;
    if (!e.key.empty()) keys.emplace_back(e.key, id);
  }
  STALKD_CHECK(pos == out.size());
}

// Sends `line` (without CRLF; an extension verb's) and then, for put-ext and put-many, a
// body or block made of `payload` to a Conversation on a fresh store, and checks the
// replies against the reference grammar.
void CheckExtensionConversation(Verb verb, size_t verb_len, std::string_view line,
                                std::string_view payload, bool deferred) {
  stalkd::FakeClock clock;
  stalkd::store::MemoryStore memory(clock, {{}, kStoreMaxJobSize}, nullptr);
  stalkd::store::DeferredStore late(memory);
  stalkd::command::Store& store = deferred ? static_cast<stalkd::command::Store&>(late) : memory;
  LateResults client(deferred);
  stalkd::protocol::Conversation conv(store, client);
  client.conv = &conv;
  auto send = [&conv, &store](std::string_view bytes) {
    char* p = conv.PrepareInput(bytes.size());
    std::memcpy(p, bytes.data(), bytes.size());
    conv.CommitInput(bytes.size());
    conv.Run(16);
    // put-many's puts answer one per Tick: at most 1000 of them.
    for (int i = 0; i < 2000 && store.Busy(); i++) {
      store.Tick();
      conv.Run(16);
    }
    STALKD_CHECK(!store.Busy());
    std::string out = std::move(conv.output());
    conv.output().clear();
    return out;
  };
  std::string out = send(std::string(line) + "\r\n");
  std::string_view args = line.substr(verb_len);
  std::vector<std::string_view> w = SplitWords(args);
  bool nul = line.find('\0') != std::string_view::npos;
  uint64_t n = 0, m = 0;
  std::string want;   // the reply to the line; empty: none yet (a body follows, or it waits)
  uint64_t body = 0;  // put-ext, put-many: the body or block that follows
  std::string_view key;
  switch (verb) {
    case Verb::kPutExt:
      if (nul || !RefPutLine(args, &body, &key)) want = "BAD_FORMAT\r\n";
      break;
    case Verb::kPutMany:
      if (nul || w.size() != 2 || !RefU32(w[0], 1, 1000, &n) ||
          !RefU32(w[1], 0, UINT32_MAX, &body)) {
        want = "BAD_FORMAT\r\n";
      }
      break;
    case Verb::kReserveExt: {
      bool ok = !nul && !w.empty() && RefU32(w[0], 0, UINT32_MAX, &n);
      bool count = false, ttr = false, freeze = false, detached = false;
      for (size_t i = 1; ok && i < w.size(); i++) {
        if (w[i].starts_with("count=")) {
          ok = !count && RefU32(w[i].substr(6), 1, 1000, &m);
          count = true;
        } else if (w[i].starts_with("ttr=")) {
          ok = !ttr && RefU32(w[i].substr(4), 1, UINT32_MAX, &m);
          ttr = true;
        } else if (w[i] == "freeze-tries") {
          ok = !freeze;
          freeze = true;
        } else if (w[i] == "detached") {
          ok = !detached;
          detached = true;
        } else {
          ok = false;
        }
      }
      // Nothing is ready in a fresh store: a zero timeout times out, any other waits.
      want = !ok ? "BAD_FORMAT\r\n" : n == 0 ? "TIMED_OUT\r\n" : "";
      break;
    }
    case Verb::kDeleteMany: {
      bool ok = !nul && !w.empty() && w.size() <= 1000;
      for (std::string_view id : w) ok = ok && RefNumber(id, UINT64_MAX, &n);
      want = ok ? "DELETED-MANY 0\r\n" : "BAD_FORMAT\r\n";
      break;
    }
    case Verb::kPurge:
      if (nul || w.size() != 2 || !IsValidTubeName(w[0]) || !RefTubeState(w[1], false, true)) {
        want = "BAD_FORMAT\r\n";
      } else {
        want = w[0] == "default" ? "PURGED 0\r\n" : "NOT_FOUND\r\n";
      }
      break;
    case Verb::kListJobs:
      if (nul || w.size() != 4 || !IsValidTubeName(w[0]) || !RefTubeState(w[1], true, false) ||
          !RefNumber(w[2], UINT64_MAX, &n) || !RefU32(w[3], 1, 1000, &m)) {
        want = "BAD_FORMAT\r\n";
      } else if (w[0] == "default") {
        constexpr std::string_view kEmpty = "---\nnext: 0\nids: []\n";
        want = "OK " + std::to_string(kEmpty.size()) + "\r\n" + std::string(kEmpty) + "\r\n";
      } else {
        want = "NOT_FOUND\r\n";
      }
      break;
    case Verb::kTubeTries:
      if (nul || w.size() != 2 || !IsValidTubeName(w[0]) || !RefU32(w[1], 0, UINT32_MAX, &n)) {
        want = "BAD_FORMAT\r\n";
      } else {
        want = "TUBE-TRIES " + std::to_string(n) + "\r\n";
      }
      break;
    default:
      STALKD_CHECK(false && "not an extension verb");
  }
  if (out != want) {
    std::fprintf(stderr, "parser_fuzz: line '%.*s': reply '%s', want '%s'\n",
                 static_cast<int>(line.size()), line.data(), out.c_str(), want.c_str());
    STALKD_CHECK(out == want);
  }
  if (!want.empty() || (verb != Verb::kPutExt && verb != Verb::kPutMany)) return;
  if (body > kMaxSentBody) return;
  std::string data = Fit(payload, static_cast<size_t>(body) + 2);
  out = send(data);
  if (verb == Verb::kPutExt) {
    if (body > kStoreMaxJobSize) {
      want = "JOB_TOO_BIG\r\n";
    } else if (!data.ends_with("\r\n")) {
      want = "EXPECTED_CRLF\r\n";
    } else {
      want = "INSERTED 1\r\n";
    }
    STALKD_CHECK(out == want);
  } else {
    CheckPutManyBlock(out, n, data);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Lines are at most 222 bytes on the wire (an extension line 8190; 1024 covers its grammar,
  // and the rest of the input is a put-ext body or a put-many block).
  if (size > 1024) return -1;
  // A private copy, so any read past the end is caught by ASan.
  std::string copy(reinterpret_cast<const char*>(data), size);
  std::string_view line(copy);

  bool valid_name = IsValidTubeName(line);
  if (valid_name) {
    STALKD_CHECK(!line.empty() && line.size() <= 200 && line[0] != '-');
    for (char c : line) STALKD_CHECK(IsTubeNameChar(c));
  }

  Command cmd;
  ParseStatus st = ParseCommand(line, &cmd);
  bool has_nul = line.find('\0') != std::string_view::npos;
  if (has_nul) STALKD_CHECK(st == ParseStatus::kBadFormat);
  if (st == ParseStatus::kUnknownCommand) STALKD_CHECK(cmd.verb == Verb::kUnknown);
  if (!has_nul) {
    // An extension verb as a whole word is that extension, with the rest of the line as its
    // arguments; anything else is what beanstalkd makes of it.
    size_t len = 0;
    Verb ext = ExtensionVerb(line, &len);
    STALKD_CHECK(StartsExtensionLine(line) == (ext != Verb::kUnknown && line.size() > len));
    if (ext != Verb::kUnknown) {
      STALKD_CHECK(st == ParseStatus::kOk && cmd.verb == ext);
      STALKD_CHECK(cmd.args == line.substr(len) && Inside(cmd.args, line));
    } else {
      STALKD_CHECK(!IsExtension(cmd.verb) && cmd.args.empty());
      Verb want = BeanstalkdVerb(line);
      Verb extended = want == Verb::kStats ? ExtendedStatsVerb(line) : Verb::kUnknown;
      if (extended != Verb::kUnknown) want = extended;
      STALKD_CHECK((st == ParseStatus::kUnknownCommand) == (want == Verb::kUnknown));
      if (want != Verb::kUnknown) STALKD_CHECK(cmd.verb == want);
      if (st == ParseStatus::kOk) STALKD_CHECK(cmd.extended == (extended != Verb::kUnknown));
      CheckNumbers(line, want, st, cmd);
    }
  }
  // The conversation's answer to an extension line: the input up to its first CRLF, then
  // the rest as a body or block.
  size_t eol = line.find("\r\n");
  std::string_view first = line.substr(0, eol);
  size_t first_len = 0;
  Verb first_ext = ExtensionVerb(first, &first_len);
  if (first_ext != Verb::kUnknown) {
    // Over a store that answers everything late for inputs of odd length.
    CheckExtensionConversation(first_ext, first_len, first,
                               eol == std::string_view::npos ? "" : line.substr(eol + 2),
                               size % 2 == 1);
  }
  if (st != ParseStatus::kOk) return 0;

  STALKD_CHECK(cmd.verb != Verb::kUnknown);
  switch (cmd.verb) {
    case Verb::kUse:
    case Verb::kWatch:
    case Verb::kIgnore:
    case Verb::kStatsTube:
      STALKD_CHECK(IsValidTubeName(cmd.tube));
      STALKD_CHECK(Inside(cmd.tube, line));
      break;
    case Verb::kPauseTube: {
      // As beanstalkd's read_tube_name: after the verb, spaces, then the longest run of name
      // characters; the delay follows after a space.
      STALKD_CHECK(!cmd.tube.empty() && Inside(cmd.tube, line));
      for (char c : cmd.tube) STALKD_CHECK(IsTubeNameChar(c));
      constexpr std::string_view kVerb = "pause-tube";
      size_t start = static_cast<size_t>(cmd.tube.data() - line.data());
      size_t end = start + cmd.tube.size();
      STALKD_CHECK(line.substr(0, kVerb.size()) == kVerb && start >= kVerb.size());
      for (size_t i = kVerb.size(); i < start; i++) STALKD_CHECK(line[i] == ' ');
      STALKD_CHECK(end < line.size() && line[end] == ' ');
      break;
    }
    default:
      STALKD_CHECK(cmd.tube.empty());
      break;
  }
  CheckRoundTrip(cmd);
  return 0;
}
