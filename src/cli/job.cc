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

// A value as the line has it (for a message), cut short when long.
std::string Shown(const rapidjson::Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v.Accept(w);
  std::string s(buf.GetString(), buf.GetSize());
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

// What is wrong with a line that is not JSON, in words.
std::string ParseProblem(rapidjson::ParseErrorCode code) {
  switch (code) {
    case rapidjson::kParseErrorDocumentEmpty:
      return "there is nothing on it";
    case rapidjson::kParseErrorDocumentRootNotSingular:
      return "something follows the job's closing }";
    case rapidjson::kParseErrorValueInvalid:
      return "a value is missing or is not one (strings are in double quotes)";
    case rapidjson::kParseErrorObjectMissName:
      return "a field name in double quotes should be here (a comma too many?)";
    case rapidjson::kParseErrorObjectMissColon:
      return "a colon should follow the field name";
    case rapidjson::kParseErrorObjectMissCommaOrCurlyBracket:
      return "a comma or the closing } should be here";
    case rapidjson::kParseErrorArrayMissCommaOrSquareBracket:
      return "a comma or the closing ] should be here";
    case rapidjson::kParseErrorStringMissQuotationMark:
      return "a string is not closed (its double quote is missing)";
    case rapidjson::kParseErrorStringEscapeInvalid:
    case rapidjson::kParseErrorStringUnicodeEscapeInvalidHex:
    case rapidjson::kParseErrorStringUnicodeSurrogateInvalid:
      return "a string has a backslash escape JSON does not have";
    case rapidjson::kParseErrorStringInvalidEncoding:
      return "a string is not valid UTF-8 (use body64 for bytes)";
    case rapidjson::kParseErrorNumberTooBig:
    case rapidjson::kParseErrorNumberMissFraction:
    case rapidjson::kParseErrorNumberMissExponent:
      return "a number is malformed or too big";
    default:
      return rapidjson::GetParseError_En(code);
  }
}

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
    Bad(std::string("\"") + name + "\" must be a whole number from 0 to " + std::to_string(max) +
        ", not " + Shown(*v));
  }
  return v->GetUint64();
}

std::string StringOf(const rapidjson::Value& v, const std::string& name) {
  if (!v.IsString()) Bad("\"" + name + "\" must be a string in double quotes, not " + Shown(v));
  return std::string(v.GetString(), v.GetStringLength());
}

}  // namespace

JobRecord JobFromJson(std::string_view line) {
  rapidjson::Document doc;
  doc.Parse(line.data(), line.size());
  if (doc.HasParseError()) {
    size_t at = doc.GetErrorOffset();
    if (at >= line.size() && doc.GetParseError() != rapidjson::kParseErrorDocumentEmpty) {
      Bad("not JSON: the line ends before the job does (a } or a \" missing?)");
    }
    Bad("not JSON at column " + std::to_string(at + 1) + ": " + ParseProblem(doc.GetParseError()));
  }
  if (!doc.IsObject()) Bad("a job is a JSON object ({\"body\":...}), not " + Shown(doc));
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
  if (text && b64) Bad("both \"body\" and \"body64\": a job has one body");
  if (!text && !b64) Bad("no body: a job has \"body\" (a string) or \"body64\" (base64)");
  if (text) {
    j.body = StringOf(*text, "body");
  } else {
    std::optional<std::string> body = Base64Decode(StringOf(*b64, "body64"));
    if (!body) Bad("\"body64\" is not base64 (A-Z a-z 0-9 + /, = at the end)");
    j.body = std::move(*body);
  }
  return j;
}

}  // namespace stalkd::cli
