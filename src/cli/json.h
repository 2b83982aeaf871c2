#pragma once

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "cli/yaml.h"

// JSON output: one document at a time through RapidJSON's Writer.
namespace stalkd::cli {

class Json {
 public:
  Json() : w_(buf_) {}
  Json& Begin() { return w_.StartObject(), *this; }
  Json& End() { return w_.EndObject(), *this; }
  Json& BeginArray() { return w_.StartArray(), *this; }
  Json& EndArray() { return w_.EndArray(), *this; }
  Json& Key(std::string_view k) {
    return w_.Key(k.data(), static_cast<rapidjson::SizeType>(k.size())), *this;
  }
  Json& Str(std::string_view v) {
    return w_.String(v.data(), static_cast<rapidjson::SizeType>(v.size())), *this;
  }
  Json& Uint(uint64_t v) { return w_.Uint64(v), *this; }
  Json& Double(double v) { return w_.Double(v), *this; }
  Json& Bool(bool v) { return w_.Bool(v), *this; }
  Json& Null() { return w_.Null(), *this; }
  // A stats value: a number or true/false as such (the server's digits kept as they are),
  // anything else, and whatever the server quoted, as a string.
  Json& Value(const Scalar& v);
  // A whole stats dict as an object.
  Json& Object(const Dict& d);
  std::string_view text() const { return {buf_.GetString(), buf_.GetSize()}; }

 private:
  rapidjson::StringBuffer buf_;
  rapidjson::Writer<rapidjson::StringBuffer> w_;
};

// Writes the document and a newline to stdout.
void PrintLine(const Json& j);

}  // namespace stalkd::cli
