#include "redis/resp.h"

#include <charconv>
#include <new>
#include <utility>

#include <hiredis/read.h>

#include "base/check.h"

namespace stalkd::redis {

namespace {

void AppendHeader(std::string& out, char type, size_t n) {
  char buf[24];
  buf[0] = type;
  char* end = std::to_chars(buf + 1, buf + sizeof buf - 2, n).ptr;
  *end++ = '\r';
  *end++ = '\n';
  out.append(buf, end);
}

// hiredis' reply-building functions, making Replies: the root is allocated, a nested reply is
// the slot of its parent's elements (sized when the parent was made), so only the root is
// ever freed. hiredis reports a null result as out of memory.
void* Place(const redisReadTask* task, Reply&& r) {
  try {
    if (task->parent != nullptr) {
      Reply& slot = static_cast<Reply*>(task->parent->obj)->elements[task->idx];
      slot = std::move(r);
      return &slot;
    }
    return new Reply(std::move(r));
  } catch (...) {
    return nullptr;
  }
}

void* CreateString(const redisReadTask* task, char* str, size_t len) {
  Reply r;
  r.type = task->type == REDIS_REPLY_ERROR    ? Reply::Type::kError
           : task->type == REDIS_REPLY_STATUS ? Reply::Type::kStatus
                                              : Reply::Type::kString;
  try {
    r.str.assign(str, len);
  } catch (...) {
    return nullptr;
  }
  return Place(task, std::move(r));
}

void* CreateArray(const redisReadTask* task, int elements) {
  Reply r;
  r.type = Reply::Type::kArray;
  try {
    r.elements.resize(static_cast<size_t>(elements));
  } catch (...) {
    return nullptr;
  }
  return Place(task, std::move(r));
}

void* CreateInteger(const redisReadTask* task, long long value) {
  Reply r;
  r.type = Reply::Type::kInteger;
  r.integer = value;
  return Place(task, std::move(r));
}

void* CreateNil(const redisReadTask* task) { return Place(task, Reply{}); }

void FreeObject(void* obj) { delete static_cast<Reply*>(obj); }

redisReplyObjectFunctions kFunctions = {CreateString, CreateArray, CreateInteger, CreateNil,
                                        FreeObject};

// hiredis frees its buffer when it is empty and holds more than this, so that one large
// reply does not keep its room for the life of the connection.
constexpr size_t kReaderMaxIdleBuffer = 64 * 1024;

redisReader* NewReader() {
  redisReader* r = redisReaderCreateWithFunctions(&kFunctions);
  STALKD_CHECK(r != nullptr);
  r->maxbuf = kReaderMaxIdleBuffer;
  return r;
}

}  // namespace

void AppendCommand(std::string& out, std::span<const std::string_view> argv) {
  AppendHeader(out, '*', argv.size());
  for (std::string_view a : argv) {
    AppendHeader(out, '$', a.size());
    out.append(a);
    out.append("\r\n", 2);
  }
}

ReplyReader::ReplyReader() : r_(NewReader()) {}

ReplyReader::~ReplyReader() { redisReaderFree(r_); }

void ReplyReader::Feed(const char* data, size_t n) {
  // Fails only when out of memory (its buffer is an sds string).
  STALKD_CHECK(redisReaderFeed(r_, data, n) == REDIS_OK);
}

int ReplyReader::Next(Reply* out) {
  void* obj = nullptr;
  if (redisReaderGetReply(r_, &obj) != REDIS_OK) return -1;
  if (obj == nullptr) return 0;
  Reply* r = static_cast<Reply*>(obj);
  *out = std::move(*r);
  delete r;
  return 1;
}

std::string ReplyReader::error() const { return r_->errstr; }

void ReplyReader::Clear() {
  redisReaderFree(r_);
  r_ = NewReader();
}

std::string Describe(const Reply& r) {
  switch (r.type) {
    case Reply::Type::kNil:
      return "(nil)";
    case Reply::Type::kInteger:
      return std::to_string(r.integer);
    case Reply::Type::kArray: {
      std::string s = "[";
      for (size_t i = 0; i < r.elements.size(); i++) {
        if (i > 0) s += ", ";
        s += Describe(r.elements[i]);
      }
      return s + "]";
    }
    case Reply::Type::kString:
      if (r.str.size() > 64) return r.str.substr(0, 64) + "...";
      return r.str;
    case Reply::Type::kStatus:
    case Reply::Type::kError:
    case Reply::Type::kLost:
      return r.str;
  }
  return "?";
}

}  // namespace stalkd::redis
