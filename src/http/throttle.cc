#include "http/throttle.h"

#include <algorithm>
#include <utility>

namespace stalkd::http {

const char* Throttler::Validate(const Limit& limit) {
  if (limit.interval_s <= 0) return "interval should be > 0";
  if (limit.read == 0 && limit.write == 0) {
    return "the read and write of limiter can't be 0 at the same time";
  }
  // An interval in nanoseconds must not overflow when added to a time.
  if (limit.interval_s > kForever / kSecond / 2) return "interval is too long";
  return nullptr;
}

bool Throttler::Set(std::string_view ns, std::string_view token_id, const Limit& limit) {
  if (Validate(limit) != nullptr) return false;
  if (Entry* e = Find(ns, token_id)) {
    e->limit = limit;
    return true;
  }
  auto outer = limits_.find(ns);
  if (outer == limits_.end()) outer = limits_.emplace(std::string(ns), StringMap<Entry>()).first;
  outer->second.emplace(std::string(token_id), Entry{limit, {}});
  size_++;
  return true;
}

const Limit* Throttler::Get(std::string_view ns, std::string_view token_id) const {
  const Entry* e = Find(ns, token_id);
  return e ? &e->limit : nullptr;
}

bool Throttler::Remove(std::string_view ns, std::string_view token_id) {
  auto outer = limits_.find(ns);
  if (outer == limits_.end()) return false;
  auto inner = outer->second.find(token_id);
  if (inner == outer->second.end()) return false;
  outer->second.erase(inner);
  if (outer->second.empty()) limits_.erase(outer);
  size_--;
  return true;
}

std::vector<LimitInfo> Throttler::List() const {
  std::vector<LimitInfo> out;
  out.reserve(size_);
  for (const auto& [ns, entries] : limits_) {
    for (const auto& [id, e] : entries) out.push_back(LimitInfo{ns, id, e.limit});
  }
  std::sort(out.begin(), out.end(), [](const LimitInfo& a, const LimitInfo& b) {
    return a.ns != b.ns ? a.ns < b.ns : a.token_id < b.token_id;
  });
  return out;
}

bool Throttler::Allow(std::string_view ns, std::string_view token_id, Kind kind, Nanos now) {
  Entry* e = Find(ns, token_id);
  if (!e) return true;
  int64_t max = kind == Kind::kConsume ? e->limit.read : e->limit.write;
  if (max <= 0) return true;
  Window* w = OpenWindow(e, kind, now);
  if (!w) {
    w = &e->windows[static_cast<size_t>(kind)];
    *w = Window{now, 0};
  }
  if (w->count >= max) return false;
  w->count++;
  return true;
}

void Throttler::Refund(std::string_view ns, std::string_view token_id, Kind kind, Nanos counted_at,
                       Nanos now) {
  Entry* e = Find(ns, token_id);
  if (!e) return;
  // The window open now is the one the request was counted in if it had begun by then: a
  // later window begins after that one ended, so after counted_at.
  Window* w = OpenWindow(e, kind, now);
  if (w && w->start <= counted_at) w->count--;
}

const Throttler::Entry* Throttler::Find(std::string_view ns, std::string_view token_id) const {
  auto outer = limits_.find(ns);
  if (outer == limits_.end()) return nullptr;
  auto inner = outer->second.find(token_id);
  return inner == outer->second.end() ? nullptr : &inner->second;
}

Throttler::Entry* Throttler::Find(std::string_view ns, std::string_view token_id) {
  return const_cast<Entry*>(std::as_const(*this).Find(ns, token_id));
}

Throttler::Window* Throttler::OpenWindow(Entry* e, Kind kind, Nanos now) {
  Window* w = &e->windows[static_cast<size_t>(kind)];
  if (w->count == 0 || now - w->start >= e->limit.interval_s * kSecond) return nullptr;
  return w;
}

}  // namespace stalkd::http
