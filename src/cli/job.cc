#include "cli/job.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include "cli/codec.h"
#include "cli/errors.h"
#include "cli/json.h"

namespace stalkd::cli {

JobRecord JobFromStats(const Dict& stats, std::string body) {
  JobRecord j;
  j.id = stats.Number("id");
  j.tube = stats.Get("tube").value_or("default");
  j.state = stats.Get("state").value_or("ready");
  j.pri = stats.Number("pri");
  j.ttr = stats.Number("ttr");
  if (j.state == "delayed") j.delay = stats.Number("time-left");
  j.body = std::move(body);
  if (stats.Get("tries-left")) j.tries = stats.Number("tries-left");
  if (stats.Get("ttl-left")) j.ttl = stats.Number("ttl-left");
  j.key = stats.Get("key");
  for (const auto& [k, v] : stats.items()) {
    if (k.rfind("attr.", 0) == 0) j.attrs.emplace_back(k.substr(5), v.text);
  }
  return j;
}

std::string JobToJson(const JobRecord& job, bool text) {
  Json j;
  j.Begin();
  if (job.id) j.Key("id").Uint(job.id);
  j.Key("tube").Str(job.tube).Key("state").Str(job.state);
  j.Key("pri").Uint(job.pri).Key("ttr").Uint(job.ttr).Key("delay").Uint(job.delay);
  if (job.tries) j.Key("tries").Uint(*job.tries);
  if (job.ttl) j.Key("ttl").Uint(*job.ttl);
  if (job.key) j.Key("key").Str(*job.key);
  if (!job.attrs.empty()) {
    j.Key("attrs").Begin();
    for (const auto& [k, v] : job.attrs) j.Key(k).Str(v);
    j.End();
  }
  if (text && IsUtf8(job.body)) {
    j.Key("body").Str(job.body);
  } else {
    j.Key("body64").Str(Base64Encode(job.body));
  }
  j.End();
  return std::string(j.text());
}

namespace {

[[noreturn]] void Bad(const std::string& what) { throw Failure(kExitInput, what); }

// The member `name` of the object, or nullptr. (Not FindMember: comparing its iterators is
// ambiguous in C++20 to clang.)
const rapidjson::Value* Field(const rapidjson::Value& doc, const char* name) {
  return doc.HasMember(name) ? &doc[name] : nullptr;
}

uint64_t NumberField(const rapidjson::Value& doc, const char* name, uint64_t otherwise,
                     uint64_t max = 4294967295u) {
  const rapidjson::Value* v = Field(doc, name);
  if (!v) return otherwise;
  if (!v->IsUint64() || v->GetUint64() > max) {
    Bad(std::string("\"") + name + "\" must be a whole number from 0 to " + std::to_string(max));
  }
  return v->GetUint64();
}

std::string StringOf(const rapidjson::Value& v, const std::string& name) {
  if (!v.IsString()) Bad("\"" + name + "\" must be a string");
  return std::string(v.GetString(), v.GetStringLength());
}

}  // namespace

JobRecord JobFromJson(std::string_view line) {
  rapidjson::Document doc;
  doc.Parse(line.data(), line.size());
  if (doc.HasParseError()) {
    Bad(std::string("not JSON: ") + rapidjson::GetParseError_En(doc.GetParseError()) +
        " at offset " + std::to_string(doc.GetErrorOffset()));
  }
  if (!doc.IsObject()) Bad("not a JSON object");
  JobRecord j;
  j.id = NumberField(doc, "id", 0, UINT64_MAX);
  if (const rapidjson::Value* v = Field(doc, "tube")) j.tube = StringOf(*v, "tube");
  if (const rapidjson::Value* v = Field(doc, "state")) {
    j.state = StringOf(*v, "state");
    if (j.state != "ready" && j.state != "delayed" && j.state != "reserved" &&
        j.state != "buried") {
      Bad("\"state\" must be ready, delayed, reserved or buried, not \"" + j.state + "\"");
    }
  }
  j.pri = NumberField(doc, "pri", j.pri);
  j.ttr = NumberField(doc, "ttr", j.ttr);
  j.delay = NumberField(doc, "delay", 0);
  if (!Field(doc, "state") && j.delay > 0) j.state = "delayed";  // a hand-written delay
  if (Field(doc, "tries")) j.tries = NumberField(doc, "tries", 0);
  if (Field(doc, "ttl")) j.ttl = NumberField(doc, "ttl", 0);
  if (const rapidjson::Value* v = Field(doc, "key")) j.key = StringOf(*v, "key");
  if (const rapidjson::Value* v = Field(doc, "attrs")) {
    if (!v->IsObject()) Bad("\"attrs\" must be an object of strings");
    for (rapidjson::SizeType i = 0; i < v->MemberCount(); i++) {
      const auto& m = v->MemberBegin()[i];
      std::string name(m.name.GetString(), m.name.GetStringLength());
      j.attrs.emplace_back(name, StringOf(m.value, "attrs." + name));
    }
  }
  const rapidjson::Value* text = Field(doc, "body");
  const rapidjson::Value* b64 = Field(doc, "body64");
  if (!text == !b64)
    Bad("a job has either \"body\" (a string) or \"body64\" (base64), and only one");
  if (text) {
    j.body = StringOf(*text, "body");
  } else {
    std::optional<std::string> body = Base64Decode(StringOf(*b64, "body64"));
    if (!body) Bad("\"body64\" is not base64");
    j.body = std::move(*body);
  }
  return j;
}

}  // namespace stalkd::cli
