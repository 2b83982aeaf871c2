// lmstfy's publish routes: a job (PUT /api/ns/q), a republish (PUT /api/ns/q/job/id) and a
// bulk publish (PUT /api/ns/q/bulk), with the checks lmstfy's handlers make of their
// parameters, body and Job-Attr-* headers, as puts on the connection's session.
#include <rapidjson/document.h>

#include <algorithm>

#include "http/api_call.h"
#include "http/json.h"
#include "http/put_job.h"

namespace stalkd::http::api {

using command::Outcome;
using command::Result;

namespace {

// A job put over HTTP also has a beanstalkd TTR, for a text client that reserves it;
// lmstfy's consumers choose theirs at consume.
constexpr uint32_t kPutTtrS = kDefaultTtrS;

// The elements of a JSON array that RapidJSON has already found valid, as the text of
// each: the array is walked by depth, skipping strings, and each element trimmed.
std::vector<std::string_view> SplitJsonArray(std::string_view text) {
  std::vector<std::string_view> out;
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  size_t i = text.find('[');
  if (i == std::string_view::npos) return out;
  int depth = 0;
  size_t start = i + 1;
  auto add = [&](size_t end) {
    std::string_view e = text.substr(start, end - start);
    while (!e.empty() && blank(e.front())) e.remove_prefix(1);
    while (!e.empty() && blank(e.back())) e.remove_suffix(1);
    if (!e.empty()) out.push_back(e);
  };
  for (i = i + 1; i < text.size(); i++) {
    char c = text[i];
    if (c == '"') {
      for (i++; i < text.size() && text[i] != '"'; i++) {
        if (text[i] == '\\') i++;
      }
    } else if (c == '[' || c == '{') {
      depth++;
    } else if (c == ']' || c == '}') {
      if (depth == 0) {
        add(i);
        break;
      }
      depth--;
    } else if (c == ',' && depth == 0) {
      add(i);
      start = i + 1;
    }
  }
  return out;
}

// The attributes of Job-Attr-* headers, checked against the engine's limits
// (docs/EXTENSIONS.md).
const char* CheckAttributes(const Request& req, std::vector<command::Attribute>* out) {
  if (req.attributes.size() > command::kMaxAttributes) {
    return "too many attributes, cannot exceed 16";
  }
  for (const auto& [name, value] : req.attributes) {
    if (name.empty()) return "invalid attribute name";
    if (name.size() > command::kMaxAttributeName) {
      return "attribute name too long, cannot exceed 64";
    }
    for (char c : name) {
      bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '-' || c == '_';
      if (!ok) return "invalid attribute name";
    }
    if (value.size() > command::kMaxAttributeValue) {
      return "attribute value too long, cannot exceed 255";
    }
    for (char c : value) {
      if (c < 0x20 || c > 0x7e) return "invalid attribute value";
    }
    out->push_back({name, value});
  }
  return nullptr;
}

}  // namespace

bool Call::ReadPutParams(PutParams* p) {
  uint64_t delay, ttl, tries, priority;
  if (!Uint("delay", 0, 32, &delay) || !Uint("ttl", kDefaultTtlS, 32, &ttl)) return false;
  if (ttl > 0 && ttl < delay) {
    Fail(400, "ttl is shorter than delay");
    return false;
  }
  if (!Uint("tries", kDefaultTries, 16, &tries)) return false;
  if (tries == 0) {
    Fail(400, "tries shouldn't be zero");
    return false;
  }
  if (!Uint("priority", 0, 8, &priority)) return false;
  // lmstfy's priority: higher is consumed first; beanstalkd's: lower is.
  p->pri = static_cast<uint32_t>(255 - priority);
  p->delay_s = static_cast<uint32_t>(delay);
  p->ttl_s = static_cast<uint32_t>(ttl);
  p->tries = static_cast<uint32_t>(tries);
  return true;
}

Co<bool> Call::Put(std::string_view body, const PutParams& p,
                   std::span<const command::Attribute> attrs, uint64_t* id) {
  Result u = co_await Ask(s_.Use(tube_));
  if (u.outcome != Outcome::kUsing) {
    Fail(400, "invalid queue name");
    co_return false;
  }
  command::PutOptions opts;
  opts.tries = p.tries;
  opts.ttl_s = p.ttl_s;
  opts.attributes = attrs;
  command::PutArgs args;
  args.pri = p.pri;
  args.delay_s = p.delay_s;
  args.ttr_s = kPutTtrS;
  args.verb = command::Verb::kPut;
  args.options = &opts;
  PutDone put = co_await PutJob(s_, args, body);
  if (put.outcome == Outcome::kInserted) {
    *id = put.id;
    co_return true;
  }
  switch (put.outcome) {
    case Outcome::kJobTooBig:
      Fail(413, "body too large");
      break;
    case Outcome::kDraining:
      Fail(503, "server is draining");
      break;
    case Outcome::kOutOfMemory:
      Fail(503, "out of memory");
      break;
    default:
      Fail(500, "internal error");
  }
  co_return false;
}

Co<> Call::Publish(bool republish) {
  std::optional<uint64_t> old_id;
  if (republish) {
    old_id = ParseJobId(target_.segments()[4]);
    if (!old_id) co_return Fail(400, "invalid job id");
  }
  PutParams params;
  if (!ReadPutParams(&params)) co_return;
  const std::string& body = ex_.request.body;
  if (body.size() > options_.max_job_size) co_return Fail(413, "body too large");
  std::vector<command::Attribute> attrs;
  if (const char* e = CheckAttributes(ex_.request, &attrs)) co_return Fail(400, e);
  if (old_id) co_await DeleteInTube(*old_id);
  uint64_t id;
  bool put = co_await Put(body, params, attrs, &id);
  if (!put) co_return;
  resp().status = 201;
  JsonWriter w(&resp().body);
  w.StartObject();
  w.Key("job_id");
  w.String(JobIdString(id));
  w.Key("msg");
  w.String("published");
  w.EndObject();
}

Co<> Call::PublishBulk() {
  PutParams params;
  if (!ReadPutParams(&params)) co_return;
  const std::string& text = ex_.request.body;
  rapidjson::Document doc;
  // Iterative: a recursive parse of a deeply nested body would overflow the stack.
  doc.Parse<rapidjson::kParseIterativeFlag>(text.data(), text.size());
  if (doc.HasParseError() || (!doc.IsArray() && !doc.IsNull())) {
    co_return Fail(400, "request body should be an array of objects");
  }
  size_t count = doc.IsArray() ? doc.Size() : 0;  // Go reads null as an empty array
  if (count == 0) co_return Fail(400, "no jobs");
  if (count > kMaxBulkJobs) co_return Fail(400, "too many jobs");
  // Each job is an element's JSON text as sent, as lmstfy stores json.RawMessage.
  std::vector<std::string_view> bodies = SplitJsonArray(text);
  if (bodies.size() != count) co_return Fail(400, "request body should be an array of objects");
  for (std::string_view b : bodies) {
    if (b.size() > options_.max_job_size) co_return Fail(413, "job too large");
  }
  std::vector<command::Attribute> attrs;
  if (const char* e = CheckAttributes(ex_.request, &attrs)) co_return Fail(400, e);
  std::vector<uint64_t> ids;
  for (std::string_view b : bodies) {
    uint64_t id;
    bool put = co_await Put(b, params, attrs, &id);
    if (!put) co_return;
    ids.push_back(id);
  }
  resp().status = 201;
  JsonWriter w(&resp().body);
  w.StartObject();
  w.Key("job_ids");
  w.StartArray();
  for (uint64_t id : ids) w.String(JobIdString(id));
  w.EndArray();
  w.Key("msg");
  w.String("published");
  w.EndObject();
}

}  // namespace stalkd::http::api
