#include "http/dashboard_history.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace stalkd::http {
namespace {

uint32_t Clamp32(uint64_t v) {
  return static_cast<uint32_t>(std::min<uint64_t>(v, std::numeric_limits<uint32_t>::max()));
}

// How much a counter grew; a counter that went back (a tube that vanished and was made
// again starts from 0) grew by what it shows now.
uint64_t Grew(uint64_t now, uint64_t before) { return now >= before ? now - before : now; }

Nanos SumOf(uint64_t s, uint32_t ns) { return static_cast<Nanos>(s) * kSecond + ns; }

}  // namespace

DashboardHistory::DashboardHistory() : server_(new ServerSample[kRing]) {}

void DashboardHistory::Clear() {
  tubes_.clear();
  index_.clear();
  pending_.clear();
  std::fill(server_.get(), server_.get() + kRing, ServerSample{});
  syncs_ = {};
  round_ = 0;
  in_round_ = false;
  last_total_jobs_ = 0;
  last_reserves_ = 0;
  have_last_ = false;
}

void DashboardHistory::Add(std::string_view name, Nanos shown) {
  auto t = std::make_unique<Tube>();
  t->name = name;
  t->first_round = round_;
  t->last_shown = shown;
  t->ring.reset(new TubeSample[kRing]);
  index_.emplace(t->name, tubes_.size());
  tubes_.push_back(std::move(t));
}

void DashboardHistory::Remove(size_t i) {
  index_.erase(tubes_[i]->name);
  if (i + 1 != tubes_.size()) {
    tubes_[i] = std::move(tubes_.back());
    index_[tubes_[i]->name] = i;
  }
  tubes_.pop_back();
}

void DashboardHistory::Track(std::string_view name, Nanos now) {
  if (auto it = index_.find(name); it != index_.end()) {
    tubes_[it->second]->last_shown = now;
    return;
  }
  // Appending keeps the indexes of a round in progress; replacing a tube waits for the
  // next round.
  if (tubes_.size() < kMaxTubes) return Add(name, now);
  if (auto it = pending_.find(name); it != pending_.end()) {
    it->second = now;
  } else if (pending_.size() < kMaxPending) {
    pending_.emplace(std::string(name), now);
  }
}

void DashboardHistory::Discover(std::string_view name) {
  if (tubes_.size() < kMaxTubes && !index_.contains(name)) Add(name, 0);
}

void DashboardHistory::CountReserve(std::string_view tube) {
  if (auto it = index_.find(tube); it != index_.end()) tubes_[it->second]->reserves++;
}

void DashboardHistory::BeginRound(Nanos now, const command::ServerStats& s, uint64_t reserves_total,
                                  const Histogram& syncs) {
  // A tube that has not existed for the whole ring has nothing left to show.
  for (size_t i = tubes_.size(); i-- > 0;) {
    if (tubes_[i]->missing >= kSeconds) Remove(i);
  }
  if (!pending_.empty()) {
    // The tubes shown most recently win; each replaces the tube shown least recently, if
    // that was shown earlier (tubes found by Discover count as never shown).
    std::vector<std::pair<Nanos, std::string>> shown;
    shown.reserve(pending_.size());
    for (auto& [name, at] : pending_) shown.emplace_back(at, name);
    std::sort(shown.begin(), shown.end(), std::greater<>());
    pending_.clear();
    std::vector<std::pair<Nanos, std::string>> victims;
    victims.reserve(tubes_.size());
    for (const auto& t : tubes_) victims.emplace_back(t->last_shown, t->name);
    std::sort(victims.begin(), victims.end());
    size_t next_victim = 0;
    for (auto& [at, name] : shown) {
      if (auto it = index_.find(name); it != index_.end()) {
        tubes_[it->second]->last_shown = std::max(tubes_[it->second]->last_shown, at);
        continue;
      }
      if (tubes_.size() >= kMaxTubes) {
        if (next_victim == victims.size() || victims[next_victim].first >= at) break;
        auto it = index_.find(victims[next_victim++].second);
        if (it == index_.end()) continue;
        Remove(it->second);
      }
      Add(name, at);
    }
  }

  ServerSample& x = server_[round_ % kRing];
  x = ServerSample{};
  x.at = now;
  x.ready = s.ready;
  x.reserved = s.reserved;
  x.delayed = s.delayed;
  x.buried = s.buried;
  x.connections = s.connections;
  x.memory_used = s.memory_used;
  if (have_last_) {
    x.puts = Clamp32(Grew(s.total_jobs, last_total_jobs_));
    x.reserves = Clamp32(Grew(reserves_total, last_reserves_));
  }
  last_total_jobs_ = s.total_jobs;
  last_reserves_ = reserves_total;
  have_last_ = true;

  SyncSnapshot& snap = syncs_[round_ % syncs_.size()];
  for (size_t i = 0; i <= Histogram::kBuckets; i++) snap.buckets[i] = syncs.bucket(i);
  snap.count = syncs.count();
  snap.sum_s = syncs.sum_s();
  snap.sum_ns = syncs.sum_ns();
  snap.valid = true;
  in_round_ = true;
}

void DashboardHistory::SampleTube(size_t i, const command::TubeStats* st) {
  Tube& t = *tubes_[i];
  TubeSample& x = t.ring[round_ % kRing];
  x = TubeSample{};
  x.reserves = Clamp32(t.reserves - t.last_reserves);
  t.last_reserves = t.reserves;
  if (!st) {
    t.missing++;
    t.have_total = false;  // a tube made again counts its jobs from 0
    t.last_total = 0;
    return;
  }
  t.missing = 0;
  x.ready = Clamp32(st->ready);
  if (t.have_total || round_ > t.first_round) {
    x.puts = Clamp32(Grew(st->total_jobs, t.last_total));
  } else {
    // The first sample has nothing to compare with: its puts are unknown, so the history
    // starts with the next one.
    t.first_round = round_ + 1;
  }
  t.last_total = st->total_jobs;
  t.have_total = true;
}

void DashboardHistory::EndRound() {
  in_round_ = false;
  round_++;
}

const DashboardHistory::Tube* DashboardHistory::Find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : tubes_[it->second].get();
}

const DashboardHistory::TubeSample* DashboardHistory::Sample(const Tube& t, uint64_t round) const {
  if (round < t.first_round || round < oldest_round() || round >= round_) return nullptr;
  return &t.ring[round % kRing];
}

bool DashboardHistory::Window(size_t seconds, uint64_t* from, Nanos* span) const {
  if (round_ < 2) return false;
  uint64_t newest = round_ - 1;
  uint64_t f = std::max<uint64_t>(oldest_round(), newest > seconds ? newest - seconds : 0);
  if (f >= newest) return false;
  *from = f;
  *span = server(newest).at - server(f).at;
  return *span > 0;
}

DashboardHistory::Rates DashboardHistory::ServerRates(size_t seconds) const {
  Rates r;
  uint64_t from;
  Nanos span;
  if (!Window(seconds, &from, &span)) return r;
  uint64_t puts = 0, reserves = 0;
  for (uint64_t k = from + 1; k < round_; k++) {
    puts += server(k).puts;
    reserves += server(k).reserves;
  }
  double s = static_cast<double>(span) / kSecond;
  r.puts = static_cast<double>(puts) / s;
  r.reserves = static_cast<double>(reserves) / s;
  return r;
}

DashboardHistory::Rates DashboardHistory::TubeRates(const Tube& t, size_t seconds) const {
  Rates r;
  uint64_t from;
  Nanos span;
  if (!Window(seconds, &from, &span)) return r;
  // The tube's first sample is the baseline its second one counts from.
  if (t.first_round > from) {
    if (t.first_round >= round_ || t.first_round == 0) return r;
    from = t.first_round - 1;
    if (from + 1 >= round_) return r;
    span = server(round_ - 1).at - server(from).at;
    if (span <= 0) return r;
  }
  uint64_t puts = 0, reserves = 0;
  for (uint64_t k = from + 1; k < round_; k++) {
    const TubeSample* x = Sample(t, k);
    if (!x) continue;
    puts += x->puts;
    reserves += x->reserves;
  }
  double s = static_cast<double>(span) / kSecond;
  r.puts = static_cast<double>(puts) / s;
  r.reserves = static_cast<double>(reserves) / s;
  return r;
}

DashboardHistory::Syncs DashboardHistory::SyncsNow(const Histogram& now) const {
  // The oldest snapshot of the window is the base; without one, everything since start.
  const SyncSnapshot* base = nullptr;
  if (round_ > 0 || in_round_) {
    uint64_t latest = in_round_ ? round_ : round_ - 1;  // the newest snapshot's round
    uint64_t oldest = latest > kSyncWindow ? latest - kSyncWindow : 0;
    const SyncSnapshot& s = syncs_[oldest % syncs_.size()];
    if (s.valid) base = &s;
  }
  Syncs out;
  uint64_t count = now.count() - (base ? base->count : 0);
  out.count = count;
  if (count == 0) return out;
  Nanos sum = SumOf(now.sum_s(), now.sum_ns()) - (base ? SumOf(base->sum_s, base->sum_ns) : 0);
  out.mean = sum / static_cast<Nanos>(count);
  uint64_t want = (count * 99 + 99) / 100;  // the 99th percentile's rank, rounded up
  uint64_t seen = 0;
  for (size_t i = 0; i <= Histogram::kBuckets; i++) {
    seen += now.bucket(i) - (base ? base->buckets[i] : 0);
    if (seen >= want) {
      out.p99 = Histogram::kBounds[std::min(i, Histogram::kBuckets - 1)];
      break;
    }
  }
  return out;
}

}  // namespace stalkd::http
