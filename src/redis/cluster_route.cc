// A command's way through a ClusterLink (cluster.h): the hash slot of its key (CRC16), the
// master the slot map names for it, the order of one slot's commands (parked behind the slot's
// earlier ones while those are retried or still out on another node, waiting in Send order for
// a master that is not ready), and what a reply means: MOVED is followed, ASK, TRYAGAIN and
// CLUSTERDOWN retried on the same owner after a backoff, anything else is the answer. Also the
// commands addressed to masters rather than slots (SendTo, SendAll). The slot map itself is
// cluster_slots.cc's; the timers that resend and expire are in Poll (cluster.cc).
#include <algorithm>
#include <array>
#include <charconv>
#include <string>
#include <utility>

#include "redis/cluster.h"
#include "redis/cluster_impl.h"
#include "redis/resp.h"

namespace stalkd::redis {

// ---- Hash slots

namespace {

constexpr std::array<uint16_t, 256> MakeCrc16Table() {
  std::array<uint16_t, 256> table{};
  for (int i = 0; i < 256; i++) {
    uint16_t crc = static_cast<uint16_t>(i << 8);
    for (int bit = 0; bit < 8; bit++) {
      crc = static_cast<uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    table[static_cast<size_t>(i)] = crc;
  }
  return table;
}

constexpr std::array<uint16_t, 256> kCrc16Table = MakeCrc16Table();

}  // namespace

uint16_t Crc16(std::string_view data) {
  uint16_t crc = 0;
  for (unsigned char c : data) {
    crc = static_cast<uint16_t>((crc << 8) ^ kCrc16Table[((crc >> 8) ^ c) & 0xff]);
  }
  return crc;
}

int KeySlot(std::string_view key) {
  if (size_t open = key.find('{'); open != std::string_view::npos) {
    size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return Crc16(key) & (kClusterSlots - 1);
}

// ---- Commands by slot

namespace {

// "host:port" (the host may be empty: then `fallback_host`).
bool ParseHostPort(std::string_view s, const std::string& fallback_host, Endpoint* out) {
  size_t colon = s.rfind(':');
  if (colon == std::string_view::npos) return false;
  int port = 0;
  std::string_view p = s.substr(colon + 1);
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
  if (ec != std::errc() || end != p.data() + p.size() || port <= 0 || port > 65535) return false;
  out->host = colon == 0 ? fallback_host : std::string(s.substr(0, colon));
  out->port = port;
  return true;
}

}  // namespace

void ClusterLink::Impl::Send(std::string_view key, std::span<const std::string_view> argv,
                             Callback cb) {
  std::string command;
  AppendCommand(command, argv);
  SendEncoded(key, std::move(command), std::move(cb));
}

void ClusterLink::Impl::SendEncoded(std::string_view key, std::string command, Callback cb) {
  auto c = std::make_shared<Command>();
  c->slot = KeySlot(key);
  c->seq = ++seq_;
  c->command = std::move(command);
  c->cb = std::move(cb);
  c->deadline = clock_.Now() + retry_window_;
  Dispatch(c);
}

void ClusterLink::Impl::Park(const CommandPtr& c) {
  std::deque<CommandPtr>& q = parked_[c->slot];
  auto at = q.end();
  while (at != q.begin() && (*(at - 1))->seq > c->seq) --at;
  q.insert(at, c);
  parked_count_++;
}

void ClusterLink::Impl::Wait(const CommandPtr& c) {
  auto at = waiting_.end();
  while (at != waiting_.begin() && (*(at - 1))->seq > c->seq) --at;
  waiting_.insert(at, c);
  waiting_slots_[c->slot]++;
  waiting_deadline_ = std::min(waiting_deadline_, c->deadline);
  if (depth_ > 0) Wake();
}

void ClusterLink::Impl::Dispatch(const CommandPtr& c) {
  if (parked_.contains(c->slot)) return Park(c);  // behind the slot's earlier commands
  if (waiting_slots_.contains(c->slot)) return Wait(c);
  Node* n = slots_[static_cast<size_t>(c->slot)];
  if (n == nullptr || !n->link->ready()) {
    if (n == nullptr) {
      WantRefresh();
      c->last_error = "no master known for slot " + std::to_string(c->slot);
    } else {
      c->last_error = n->link->why_not_ready();
    }
    return Wait(c);
  }
  Flight& f = flights_[c->slot];
  if (f.n > 0 && f.node != n) return Park(c);  // earlier ones still out on the old owner
  f.node = n;
  f.n++;
  written_++;
  c->impl = this;
  c->to = n;
  n->link->SendEncoded(c->command, [c](const Reply& r) {
    Impl& impl = *c->impl;
    impl.written_--;
    impl.AsCallback([&] {
      auto out = impl.flights_.find(c->slot);
      if (out != impl.flights_.end() && --out->second.n == 0) impl.flights_.erase(out);
      impl.OnCommandReply(c, *c->to, r);
      impl.Landed(c->slot);
    });
  });
  MarkDirty(*n);
}

void ClusterLink::Impl::Landed(int slot) {
  if (flights_.contains(slot) || backoff_.contains(slot)) return;
  auto p = parked_.find(slot);
  if (p == parked_.end()) return;
  std::deque<CommandPtr> again = std::move(p->second);
  parked_.erase(p);
  parked_count_ -= again.size();
  for (const CommandPtr& c : again) Dispatch(c);  // in order
}

void ClusterLink::Impl::OnCommandReply(const CommandPtr& c, Node& from, const Reply& r) {
  if (r.ErrorIs("MOVED ")) {
    // "MOVED <slot> <host>:<port>"
    std::string_view text = r.str;
    size_t space = text.rfind(' ');
    Endpoint to;
    if (++c->redirections <= kMaxRedirections && space != std::string_view::npos &&
        ParseHostPort(text.substr(space + 1), from.at.host, &to)) {
      counters_.moved++;
      WantRefresh();
      rotate_probe_ = true;
      Node* owner = &NodeAt(to);
      if (slots_[static_cast<size_t>(c->slot)] != owner) {
        slots_[static_cast<size_t>(c->slot)] = owner;
        Recount();
      }
      return Dispatch(c);
    }
    return Complete(c, r);
  }
  if (r.ErrorIs("ASK ") || r.ErrorIs("TRYAGAIN")) return Retry(c, from, r);
  if (r.ErrorIs("CLUSTERDOWN")) {
    WantRefresh();
    return Retry(c, from, r);
  }
  if (r.type == Reply::Type::kLost) WantRefresh();
  Complete(c, r);
}

void ClusterLink::Impl::Retry(const CommandPtr& c, const Node& from, const Reply& r) {
  Nanos now = clock_.Now();
  if (now + c->backoff > c->deadline) return Complete(c, r);
  counters_.retried++;
  c->last_error = from.name + ": " + r.str;
  Park(c);
  if (!backoff_.insert(c->slot).second) return;  // goes again with the slot's first one
  retries_.emplace(now + c->backoff, c->slot);
  c->backoff = std::min(2 * c->backoff, kMaxRetry);
  Wake();  // Poll returns the retry's time
}

void ClusterLink::Impl::Complete(const CommandPtr& c, const Reply& r) {
  Callback cb = std::move(c->cb);
  const std::string* outer = answered_by_;
  answered_by_ = r.type == Reply::Type::kLost ? nullptr : &c->to->name;
  AsCallback([&] { cb(r); });
  answered_by_ = outer;
}

void ClusterLink::Impl::DispatchWaiting() {
  std::deque<CommandPtr> waiting;
  waiting.swap(waiting_);
  waiting_slots_.clear();
  waiting_deadline_ = kForever;
  for (const CommandPtr& c : waiting) Dispatch(c);
}

void ClusterLink::Impl::Expire(Nanos now) {
  if (now < waiting_deadline_) return;
  waiting_deadline_ = kForever;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if ((*it)->deadline > now) {
      waiting_deadline_ = std::min(waiting_deadline_, (*it)->deadline);
      ++it;
      continue;
    }
    CommandPtr c = std::move(*it);
    it = waiting_.erase(it);
    if (auto w = waiting_slots_.find(c->slot); w != waiting_slots_.end() && --w->second == 0) {
      waiting_slots_.erase(w);
    }
    Defer(std::move(c->cb), Reply{Reply::Type::kLost, 0, "not connected: " + c->last_error, {}});
  }
}

void ClusterLink::Impl::MarkDirty(Node& n) {
  n.dirty = true;
  if (depth_ > 0) Wake();  // written when the loop comes back to us
}

// ---- Commands by master

void ClusterLink::Impl::SendTo(const std::string& master, std::span<const std::string_view> argv,
                               Callback cb) {
  Node* n = FindNode(master);
  if (n == nullptr || !n->link->ready()) {
    std::string why = n == nullptr ? master + " is not a known master" : n->link->why_not_ready();
    return Defer(std::move(cb), Reply{Reply::Type::kLost, 0, "not connected: " + why, {}});
  }
  n->link->Send(argv, Ours(std::move(cb)));
  MarkDirty(*n);
}

void ClusterLink::Impl::SendAll(std::span<const std::string_view> argv,
                                std::function<void(const std::string&, const Reply&)> cb) {
  auto shared =
      std::make_shared<std::function<void(const std::string&, const Reply&)>>(std::move(cb));
  for (const std::string& m : masters()) {
    SendTo(m, argv, [shared, m](const Reply& r) { (*shared)(m, r); });
  }
}

}  // namespace stalkd::redis
