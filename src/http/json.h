#pragma once

#include <rapidjson/writer.h>

#include <cstdint>
#include <string>
#include <string_view>

// JSON output through RapidJSON's Writer, appending straight into a std::string.
namespace stalkd::http {

// RapidJSON's output-stream concept over a std::string.
class StringSink {
 public:
  using Ch = char;
  explicit StringSink(std::string* s) : s_(s) {}
  void Put(char c) { s_->push_back(c); }
  void Flush() {}

 private:
  std::string* s_;
};

class JsonWriter {
 public:
  explicit JsonWriter(std::string* out) : sink_(out), w_(sink_) {}
  void StartObject() { w_.StartObject(); }
  void EndObject() { w_.EndObject(); }
  void StartArray() { w_.StartArray(); }
  void EndArray() { w_.EndArray(); }
  void Key(std::string_view k) { w_.Key(k.data(), static_cast<rapidjson::SizeType>(k.size())); }
  void String(std::string_view v) {
    w_.String(v.data(), static_cast<rapidjson::SizeType>(v.size()));
  }
  void Int(int64_t v) { w_.Int64(v); }
  void Uint(uint64_t v) { w_.Uint64(v); }
  void Double(double v) { w_.Double(v); }
  void Bool(bool v) { w_.Bool(v); }
  void Null() { w_.Null(); }
  // A value already encoded as JSON (e.g. a base64 string built in place).
  void Raw(std::string_view json) { w_.RawValue(json.data(), json.size(), rapidjson::kStringType); }

 private:
  StringSink sink_;
  rapidjson::Writer<StringSink> w_;
};

}  // namespace stalkd::http
