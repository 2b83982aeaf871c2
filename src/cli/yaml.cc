#include "cli/yaml.h"

#include <charconv>

namespace stalkd::cli {

std::optional<std::string> Dict::Get(std::string_view key) const {
  for (const auto& [k, v] : items_) {
    if (k == key) return v.text;
  }
  return std::nullopt;
}

uint64_t Dict::Number(std::string_view key, uint64_t otherwise) const {
  std::optional<std::string> v = Get(key);
  if (!v) return otherwise;
  uint64_t n = 0;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
  return ec == std::errc() && p == v->data() + v->size() ? n : otherwise;
}

namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Calls fn(line) for each line of the YAML after its "---" line.
template <typename Fn>
void EachLine(std::string_view yaml, Fn fn) {
  bool first = true;
  while (!yaml.empty()) {
    size_t nl = yaml.find('\n');
    std::string_view line = yaml.substr(0, nl);
    yaml = nl == std::string_view::npos ? std::string_view() : yaml.substr(nl + 1);
    if (first && line == "---") {
      first = false;
      continue;
    }
    first = false;
    if (!line.empty()) fn(line);
  }
}

}  // namespace

Scalar ParseScalar(std::string_view text) {
  Scalar s;
  if (text.size() < 2 || text.front() != '"' || text.back() != '"') {
    s.text = std::string(text);
    return s;
  }
  s.quoted = true;
  text = text.substr(1, text.size() - 2);
  for (size_t i = 0; i < text.size(); i++) {
    char c = text[i];
    if (c != '\\' || i + 1 == text.size()) {
      s.text.push_back(c);
      continue;
    }
    char e = text[++i];
    static constexpr std::string_view kNamed = "ntr0", kMeaning{"\n\t\r\0", 4};
    if (size_t k = kNamed.find(e); k != std::string_view::npos) {
      s.text.push_back(kMeaning[k]);
    } else if (e == 'x' && i + 2 < text.size() && HexDigit(text[i + 1]) >= 0 &&
               HexDigit(text[i + 2]) >= 0) {
      s.text.push_back(static_cast<char>(HexDigit(text[i + 1]) * 16 + HexDigit(text[i + 2])));
      i += 2;
    } else {  // \" \\ and anything else: the character itself
      s.text.push_back(e);
    }
  }
  return s;
}

Dict ParseDict(std::string_view yaml) {
  Dict d;
  EachLine(yaml, [&](std::string_view line) {
    size_t colon = line.find(": ");
    if (colon == std::string_view::npos || colon == 0) return;
    d.Add(std::string(line.substr(0, colon)), ParseScalar(line.substr(colon + 2)));
  });
  return d;
}

std::vector<std::string> ParseList(std::string_view yaml) {
  std::vector<std::string> out;
  EachLine(yaml, [&](std::string_view line) {
    if (line.substr(0, 2) == "- ") out.push_back(ParseScalar(line.substr(2)).text);
  });
  return out;
}

}  // namespace stalkd::cli
