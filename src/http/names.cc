#include "http/names.h"

#include "command/values.h"

namespace stalkd::http {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

bool IsName(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!IsNameChar(c)) return false;
  }
  return true;
}

}  // namespace

const char* QueueTube(std::string_view ns, std::string_view queue, std::string* tube) {
  if (ns.size() > kMaxNameLength || queue.size() > kMaxNameLength) {
    return "namespace or queue name too long";
  }
  if (!IsName(ns)) return "namespace name contains forbidden characters";
  if (queue.starts_with('_') || !IsName(queue)) {
    return "queue name contains forbidden characters";
  }
  // Valid for lmstfy, but not as a tube: beanstalkd's 200-byte limit and leading '-'.
  if (ns.size() + 1 + queue.size() > command::kMaxTubeNameLength) {
    return "namespace or queue name too long";
  }
  if (ns.starts_with('-')) return "namespace name contains forbidden characters";
  tube->assign(ns);
  tube->push_back('/');
  tube->append(queue);
  return nullptr;
}

bool SplitTube(std::string_view tube, std::string_view* ns, std::string_view* queue) {
  size_t slash = tube.find('/');
  if (slash == std::string_view::npos) return false;
  std::string_view n = tube.substr(0, slash), q = tube.substr(slash + 1);
  if (!IsName(n) || !IsName(q) || q.starts_with('_')) return false;
  *ns = n;
  *queue = q;
  return true;
}

}  // namespace stalkd::http
