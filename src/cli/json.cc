#include "cli/json.h"

#include <cstdio>

namespace stalkd::cli {

namespace {

// A YAML number as the server writes them: digits, optionally a fraction.
bool IsNumber(std::string_view s) {
  if (!s.empty() && s[0] == '-') s.remove_prefix(1);
  if (s.empty() || s[0] == '.' || s.back() == '.') return false;
  if (s.size() > 1 && s[0] == '0' && s[1] != '.') return false;  // JSON has no leading zeros
  bool dot = false;
  for (char c : s) {
    if (c == '.' && !dot) {
      dot = true;
    } else if (c < '0' || c > '9') {
      return false;
    }
  }
  return true;
}

}  // namespace

Json& Json::Value(const Scalar& v) {
  if (!v.quoted && IsNumber(v.text)) {
    w_.RawValue(v.text.data(), v.text.size(), rapidjson::kNumberType);
  } else if (!v.quoted && (v.text == "true" || v.text == "false")) {
    w_.Bool(v.text == "true");
  } else {
    Str(v.text);
  }
  return *this;
}

Json& Json::Object(const Dict& d) {
  Begin();
  for (const auto& [k, v] : d.items()) Key(k).Value(v);
  return End();
}

void PrintLine(const Json& j) {
  std::string_view t = j.text();
  fwrite(t.data(), 1, t.size(), stdout);
  fputc('\n', stdout);
}

}  // namespace stalkd::cli
