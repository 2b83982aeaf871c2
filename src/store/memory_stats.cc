// What the stats verbs report, assembled from the engine's counters.
#include <algorithm>
#include <iterator>

#include "store/memory_store.h"

namespace stalkd::store {

namespace {

// Whole seconds of a nanosecond span, truncated toward zero as beanstalkd's C division.
int64_t Secs(Nanos d) { return d / kSecond; }

}  // namespace

const command::ServerStats& MemoryStore::FillStats() {
  const engine::GlobalCounters& c = engine_.counters();
  command::ServerStats& s = stats_;
  const engine::ColdTier::ReadyCounts cold_ready =
      cold_ ? cold_->ReadyOnDisk(nullptr) : engine::ColdTier::ReadyCounts{};
  s.urgent = c.urgent + cold_ready.urgent;
  s.ready = c.ready + cold_ready.ready;
  s.reserved = c.reserved;
  s.delayed = c.delayed + (cold_ ? cold_->Count() : 0);
  s.buried = c.buried + (cold_ ? cold_->BuriedOnDisk(nullptr) : 0);
  std::copy(std::begin(cmds_), std::end(cmds_), std::begin(s.cmds));
  s.timeouts = c.timeouts;
  s.total_jobs = c.total_jobs;
  s.max_job_size = max_job_size_;
  s.tubes = engine_.tubes().size();
  s.connections = c.sessions;
  s.producers = c.producers;
  s.workers = c.workers;
  s.waiting = c.waiting;
  s.total_connections = c.total_sessions;
  s.draining = engine_.draining();
  s.memory_used = engine_.memory_used();
  s.memory_limit = engine_.max_memory();
  s.expired = c.expired;
  s.tries_exhausted = c.tries_exhausted;
  if (cold_) {
    const engine::ColdTier::Stats t = cold_->stats();
    s.disk = {true,          c.ready + c.reserved + c.delayed + c.buried,
              t.cold,        t.index_bytes,
              t.budget,      t.promotions,
              t.demotions,   t.waited_reads,
              t.read_errors, t.rewrites};
  }
  s.host = host_ ? host_->CurrentStats() : command::HostStats{};
  return s;
}

const command::TubeStats& MemoryStore::FillTubeStats(const engine::Tube& t) {
  command::TubeStats& s = tube_stats_;
  s.name = t.name();
  const engine::ColdTier::ReadyCounts cold_ready =
      cold_ ? cold_->ReadyOnDisk(&t) : engine::ColdTier::ReadyCounts{};
  s.urgent = t.stat.urgent + cold_ready.urgent;
  s.ready = t.ready.size() + cold_ready.ready;
  s.reserved = t.stat.reserved;
  s.delayed = t.delayed.size() + (cold_ ? cold_->Count(&t) : 0);
  s.buried = BuriedCount(&t);
  s.total_jobs = t.stat.total_jobs;
  s.using_ct = t.stat.using_ct;
  s.watching_ct = t.stat.watching_ct;
  s.waiting = t.waiters.size();
  s.deletes = t.stat.deletes;
  s.pauses = t.stat.pauses;
  s.pause_s = Secs(t.pause_ns);
  s.pause_left_s = t.paused() ? Secs(t.unpause_at - engine_.clock().Now()) : 0;
  s.expired = t.stat.expired;
  s.tries_exhausted = t.stat.tries_exhausted;
  s.default_tries = t.default_tries;
  return s;
}

const command::JobStats& MemoryStore::FillJobStats(const engine::Job& j) {
  Nanos now = engine_.clock().Now();
  engine::JobState state = j.state();
  bool timed = state == engine::JobState::kReserved || state == engine::JobState::kDelayed;
  command::JobStats& s = job_stats_;
  s.id = j.id;
  s.tube = j.tube->name();
  s.state = engine::JobStateName(state);
  s.pri = j.pri;
  s.age_s = Secs(now - j.created());
  s.age_ms = (now - j.created()) / 1000000;
  s.delay_s = j.delay_s();
  s.ttr_s = j.ttr_s;
  s.time_left_s = timed ? Secs(j.deadline() - now) : 0;
  s.file = engine_.LogFile(j);
  engine::JobCounts n = j.counts();
  s.reserves = n.reserves;
  s.timeouts = n.timeouts;
  s.releases = n.releases;
  s.buries = n.buries;
  s.kicks = n.kicks;
  s.detached = state == engine::JobState::kReserved && j.reserver() == engine_.detached();
  s.extension = nullptr;
  if (const engine::JobExtra* x = j.extra(); x && x->has_options()) {
    command::JobExtensionStats& e = job_extension_;
    e.limited = x->limited;
    e.tries_left = x->tries_left;
    e.bury_reason =
        state == engine::JobState::kBuried && x->bury_reason != engine::BuryReason::kNone
            ? engine::BuryReasonName(x->bury_reason)
            : std::string_view();
    e.has_ttl = x->has_ttl();  // still true once it passed while the job is reserved
    e.ttl_left_s = x->has_ttl() ? std::max<int64_t>(0, Secs(x->expires_at - now)) : 0;
    e.ttl_left_ms =
        x->has_ttl() ? std::max<int64_t>(0, (x->expires_at - now) / (kSecond / 1000)) : 0;
    e.key = x->key();
    attributes_.clear();
    x->ForEachAttribute([this](engine::JobAttribute a) {
      attributes_.push_back({a.name, a.value});
    });
    e.attributes = attributes_;
    s.extension = &e;
  }
  return s;
}

}  // namespace stalkd::store
