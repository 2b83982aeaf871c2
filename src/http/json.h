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

// The length of the valid UTF-8 sequence that starts s[i], or 0 if none does (an invalid
// byte, as Go's utf8.DecodeRuneInString sees it: overlong forms, surrogates and code points
// above U+10FFFF are invalid).
inline size_t Utf8SequenceAt(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the second byte's range
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (s.size() - i < n || byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; k++) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xbf) return 0;
  }
  return n;
}

// s as valid UTF-8: each byte that is not part of a valid sequence becomes U+FFFD, as Go's
// encoding/json writes a string. `scratch` holds the result when s needs it.
inline std::string_view CoerceUtf8(std::string_view s, std::string* scratch) {
  size_t i = 0;
  for (size_t n; i < s.size() && (n = Utf8SequenceAt(s, i)) != 0;) i += n;
  if (i == s.size()) return s;
  scratch->assign(s.substr(0, i));
  while (i < s.size()) {
    size_t n = Utf8SequenceAt(s, i);
    if (n == 0) {
      scratch->append("\xef\xbf\xbd");
      i++;
    } else {
      scratch->append(s.substr(i, n));
      i += n;
    }
  }
  return *scratch;
}

// Keys and strings are written as valid UTF-8 (CoerceUtf8): a JSON text is UTF-8, and some
// strings come from clients as any bytes (a token's description).
class JsonWriter {
 public:
  explicit JsonWriter(std::string* out) : sink_(out), w_(sink_) {}
  void StartObject() { w_.StartObject(); }
  void EndObject() { w_.EndObject(); }
  void StartArray() { w_.StartArray(); }
  void EndArray() { w_.EndArray(); }
  void Key(std::string_view k) {
    std::string scratch;
    k = CoerceUtf8(k, &scratch);
    w_.Key(k.data(), static_cast<rapidjson::SizeType>(k.size()));
  }
  void String(std::string_view v) {
    std::string scratch;
    v = CoerceUtf8(v, &scratch);
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
