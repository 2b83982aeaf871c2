// The text protocol's extension commands (docs/EXTENSIONS.md): their grammar, and the calls
// they make. beanstalkd's own commands never reach this file.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/check.h"
#include "protocol/conversation.h"
#include "protocol/reply.h"

namespace stalkd::protocol {

using command::Outcome;

namespace {

constexpr uint32_t kMaxBatch = 1000;  // put-many's jobs, reserve-ext's count, ids, list-jobs
// put-many's block: at most this many bytes (its entries' lines and bodies).
constexpr uint32_t kMaxBlock = 16 * 1024 * 1024;

// The words of an argument string, separated by runs of spaces.
class Words {
 public:
  explicit Words(std::string_view s) : rest_(s) {}
  // The next word, or false at the end.
  bool Next(std::string_view* w) {
    size_t i = rest_.find_first_not_of(' ');
    if (i == std::string_view::npos) return false;
    rest_ = rest_.substr(i);
    size_t end = std::min(rest_.find(' '), rest_.size());
    *w = rest_.substr(0, end);
    rest_ = rest_.substr(end);
    return true;
  }
  bool NextU32(uint32_t* v) {
    std::string_view w;
    return Next(&w) && ReadU32(&w, true, v);
  }
  bool NextU64(uint64_t* v) {
    std::string_view w;
    return Next(&w) && ReadU64(&w, true, v);
  }
  bool NextTube(std::string_view* name) { return Next(name) && command::IsValidTubeName(*name); }
  bool AtEnd() const { return rest_.find_first_not_of(' ') == std::string_view::npos; }

 private:
  std::string_view rest_;
};

bool Printable(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

bool IsAttributeNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

// "name=value" with the given name: the value in *value.
bool Option(std::string_view word, std::string_view name, std::string_view* value) {
  if (word.size() <= name.size() || word.substr(0, name.size()) != name ||
      word[name.size()] != '=') {
    return false;
  }
  *value = word.substr(name.size() + 1);
  return true;
}

bool NumberOption(std::string_view word, std::string_view name, uint32_t min, uint32_t* out,
                  bool* seen, bool* bad) {
  std::string_view v;
  if (!Option(word, name, &v)) return false;
  uint32_t n = 0;
  if (*seen || !ReadU32(&v, true, &n) || n < min) *bad = true;
  *seen = true;
  *out = n;
  return true;
}

// The options of a put-ext (and of each put-many entry). The attributes' storage is the
// caller's.
class PutOptionParser {
 public:
  bool Parse(Words& w, command::PutOptions* o) {
    std::string_view word;
    bool tries = false, ttl = false, key = false, bad = false;
    while (w.Next(&word)) {
      std::string_view v;
      if (NumberOption(word, "tries", 1, &o->tries, &tries, &bad) ||
          NumberOption(word, "ttl", 0, &o->ttl_s, &ttl, &bad)) {
        if (bad) return false;
      } else if (Option(word, "key", &v)) {
        if (key || v.empty() || !Printable(v) || v.size() > command::kMaxJobKey) return false;
        key = true;
        o->key = v;
      } else if (word.substr(0, 5) == "attr.") {
        if (!AddAttribute(word.substr(5))) return false;
      } else {
        return false;
      }
    }
    o->attributes = std::span<const command::Attribute>(attrs_, count_);
    return true;
  }

 private:
  bool AddAttribute(std::string_view nv) {
    size_t eq = nv.find('=');
    if (eq == 0 || eq == std::string_view::npos || eq > command::kMaxAttributeName) return false;
    std::string_view name = nv.substr(0, eq), value = nv.substr(eq + 1);
    if (!std::all_of(name.begin(), name.end(), IsAttributeNameChar)) return false;
    if (value.size() > command::kMaxAttributeValue || !Printable(value)) return false;
    if (count_ == command::kMaxAttributes) return false;
    for (size_t i = 0; i < count_; i++) {
      if (attrs_[i].name == name) return false;
    }
    attrs_[count_++] = {name, value};
    return true;
  }

  command::Attribute attrs_[command::kMaxAttributes];
  size_t count_ = 0;
};

// ready | delayed | reserved | buried | all
bool ParseState(std::string_view w, command::StateFilter* out) {
  using command::StateFilter;
  static constexpr struct {
    std::string_view name;
    StateFilter state;
  } kStates[] = {{"ready", StateFilter::kReady},
                 {"delayed", StateFilter::kDelayed},
                 {"reserved", StateFilter::kReserved},
                 {"buried", StateFilter::kBuried},
                 {"all", StateFilter::kAll}};
  for (const auto& s : kStates) {
    if (w == s.name) {
      *out = s.state;
      return true;
    }
  }
  return false;
}

bool ParseReserveArgs(Words& w, command::ReserveArgs* a) {
  uint32_t timeout;
  if (!w.NextU32(&timeout)) return false;
  a->timeout = static_cast<Nanos>(timeout) * kSecond;
  std::string_view word;
  bool count = false, ttr = false, freeze = false, detached = false, bad = false;
  while (w.Next(&word)) {
    if (NumberOption(word, "count", 1, &a->count, &count, &bad) ||
        NumberOption(word, "ttr", 1, &a->ttr_s, &ttr, &bad)) {
      if (bad || a->count > kMaxBatch) return false;
    } else if (word == "freeze-tries" && !freeze) {
      freeze = a->freeze_tries = true;
    } else if (word == "detached" && !detached) {
      detached = a->detached = true;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

void Conversation::ExecuteExtension(const Command& cmd) {
  Words w(cmd.args);
  command::Session& s = *session_;
  std::string_view tube, state_word;
  command::StateFilter state;
  switch (cmd.verb) {
    case Verb::kPutExt:
      return StartPutExt(cmd.args);
    case Verb::kPutMany:
      return StartPutMany(cmd.args);
    case Verb::kReserveExt: {
      command::ReserveArgs a;
      if (!ParseReserveArgs(w, &a)) return Reply(Outcome::kBadFormat);
      return AnswerReserve(s.ReserveExt(a));
    }
    case Verb::kDeleteMany: {
      std::vector<uint64_t> ids;
      uint64_t id;
      while (!w.AtEnd()) {
        if (ids.size() == kMaxBatch || !w.NextU64(&id)) return Reply(Outcome::kBadFormat);
        ids.push_back(id);
      }
      if (ids.empty()) return Reply(Outcome::kBadFormat);
      KeepCheckedIds(&ids);  // a namespace's: of its tubes only
      if (ids.empty()) {     // counted as a delete-many of missing jobs is
        s.CountBatch(Verb::kDeleteMany);
        return Answer(command::Result::Of(Outcome::kDeletedMany, 0));
      }
      return Answer(s.DeleteMany(ids));
    }
    case Verb::kPurge:
      if (!w.NextTube(&tube) || !w.Next(&state_word) || !ParseState(state_word, &state) ||
          state == command::StateFilter::kReserved || !w.AtEnd()) {
        return Reply(Outcome::kBadFormat);
      }
      return Answer(s.Purge(tube, state));
    case Verb::kListJobs: {
      uint64_t from;
      uint32_t count;
      if (!w.NextTube(&tube) || !w.Next(&state_word) || !ParseState(state_word, &state) ||
          state == command::StateFilter::kAll || !w.NextU64(&from) || !w.NextU32(&count) ||
          count == 0 || count > kMaxBatch || !w.AtEnd()) {
        return Reply(Outcome::kBadFormat);
      }
      return Answer(s.ListJobs(tube, state, from, count));
    }
    case Verb::kTubeTries: {
      uint32_t tries;
      if (!w.NextTube(&tube) || !w.NextU32(&tries) || !w.AtEnd()) {
        return Reply(Outcome::kBadFormat);
      }
      return Answer(s.TubeTries(tube, tries));
    }
    default:
      break;
  }
  STALKD_CHECK(false && "not an extension verb");
}

void Conversation::StartPutExt(std::string_view args) {
  Words w(args);
  command::PutArgs a;
  command::PutOptions o;
  PutOptionParser options;
  if (!w.NextU32(&a.pri) || !w.NextU32(&a.delay_s) || !w.NextU32(&a.ttr_s) ||
      !w.NextU32(&a.bytes) || !options.Parse(w, &o)) {
    return Reply(Outcome::kBadFormat);
  }
  a.verb = Verb::kPutExt;
  a.options = &o;
  StartPut(a);
}

void Conversation::StartPutMany(std::string_view args) {
  Words w(args);
  uint32_t count, bytes;
  if (!w.NextU32(&count) || !w.NextU32(&bytes) || !w.AtEnd() || count == 0 || count > kMaxBatch) {
    return Reply(Outcome::kBadFormat);
  }
  session_->CountBatch(Verb::kPutMany);
  if (bytes > kMaxBlock) return Skip(uint64_t{bytes} + 2, Outcome::kJobTooBig);
  put_many_ = NewPutMany();
  put_many_->count = count;
  put_many_->block.reserve(bytes + 2);
  bytes_left_ = uint64_t{bytes} + 2;
  state_ = State::kBlock;
}

namespace {

// One entry of a put-many block.
struct BlockEntry {
  command::PutArgs args;
  command::PutOptions options;
  PutOptionParser parser;
  std::string_view body;
};

// Splits the block into exactly `count` entries; false if it is not that.
bool ParseBlock(std::string_view block, uint32_t count, std::vector<BlockEntry>* out) {
  out->resize(count);
  for (BlockEntry& e : *out) {
    size_t eol = block.find("\r\n");
    if (eol == std::string_view::npos || eol + 2 > kMaxExtensionLineLength) return false;
    Words w(block.substr(0, eol));
    command::PutArgs& a = e.args;
    if (!w.NextU32(&a.pri) || !w.NextU32(&a.delay_s) || !w.NextU32(&a.ttr_s) ||
        !w.NextU32(&a.bytes) || !e.parser.Parse(w, &e.options)) {
      return false;
    }
    block = block.substr(eol + 2);
    if (block.size() < uint64_t{a.bytes} + 2 || block.substr(a.bytes, 2) != "\r\n") return false;
    e.body = block.substr(0, a.bytes);
    block = block.substr(a.bytes + 2);
    a.verb = Verb::kCount;  // the batch was counted once, as put-many
    a.options = &e.options;
  }
  return block.empty();
}

// Made when put-many's line is read; the block arrives into `block` (which stays where it
// is: the entries view it).
struct PutMany final : PutManyBatch {
  std::vector<BlockEntry> entries;
  size_t next = 0;  // the entry to put next
};

}  // namespace

std::unique_ptr<PutManyBatch> Conversation::NewPutMany() { return std::make_unique<PutMany>(); }

void Conversation::FinishPutMany() {
  state_ = State::kCommand;
  PutMany& pm = static_cast<PutMany&>(*put_many_);
  const std::string& block = pm.block;
  if (block.size() < 2 || block.compare(block.size() - 2, 2, "\r\n") != 0) {
    put_many_.reset();
    return Reply(Outcome::kExpectedCrlf);
  }
  std::string_view data(block.data(), block.size() - 2);
  if (!ParseBlock(data, pm.count, &pm.entries)) {
    put_many_.reset();
    return Reply(Outcome::kBadFormat);
  }
  state_ = State::kPutMany;
  ContinuePutMany();
}

void Conversation::ContinuePutMany() {
  PutMany& pm = static_cast<PutMany&>(*put_many_);
  while (pm.next < pm.entries.size()) {
    BlockEntry& e = pm.entries[pm.next++];
    command::PutSlot slot = session_->BeginPut(e.args);
    command::Result r = command::Result::Of(slot.refusal);
    if (slot.data) {
      std::memcpy(slot.data, e.body.data(), e.body.size());
      std::memcpy(slot.data + e.body.size(), "\r\n", 2);
      r = session_->CommitPut();
    }
    if (r.outcome == Outcome::kPending) {
      state_ = State::kWaiting;  // OnResult adds its reply
      return;
    }
    AppendReply(r, &pm.replies);
  }
  out_.append("INSERTED-MANY ").append(std::to_string(pm.entries.size())).append("\r\n");
  out_.append(pm.replies);
  Timed();
  put_many_.reset();
  state_ = State::kCommand;
}

}  // namespace stalkd::protocol
