// RedisStore's life cycle (docs/SCALE-OUT.md, "Start-up and outages"): starting without
// waiting for Redis, a master's checks and setup, the front-end id, the state /readyz and the
// log tell, the calls held until the id is known, and functions loaded again.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <utility>

#include "redis/session.h"
#include "redis/store.h"

namespace stalkd::redis {

void RedisStore::Start() {
  created_ = clock_.Now();
  if (cluster_) {
    cluster_->Subscribe(channel_);
    cluster_->Start();
  } else {
    link_->Subscribe(channel_);
    link_->Start();
  }
}

std::string RedisStore::why_not_ready() const {
  std::string why = cluster_ ? cluster_->why_not_ready() : link_->why_not_ready();
  if (!why.empty()) return why;
  if (!started_) return "starting";
  for (const auto& m : masters_) {
    if (!m->behind.empty()) return m->behind;
  }
  return "";
}

void RedisStore::CheckMaster(const std::string& name,
                             std::function<void(std::span<const std::string_view>, Callback)> send,
                             std::function<void()> ready) {
  // The settings stalkd relies on (docs/SCALE-OUT.md, "Redis settings"): one missing stops a
  // front end that has not started yet (an operator's mistake, as a bad flag); anything else
  // (and a setting found missing later) is logged and tried again. A kLost answer: the
  // connection dropped meanwhile, and the link sets up again.
  auto fail = [this, name](std::string why, bool fatal = true) {
    SetupFailed(name, "Redis at " + name + ": " + why, fatal);
  };
  auto get = [&send, fail](std::string_view key, Callback cb) {
    std::string_view argv[] = {"CONFIG", "GET", key};
    send(argv, [fail, key = std::string(key), cb = std::move(cb)](const Reply& r) {
      // NOPERM (an ACL user without +config|get): say so, not that the setting is wrong.
      if (r.type == Reply::Type::kError) return fail("CONFIG GET " + key + ": " + r.str);
      cb(r);
    });
  };
  get("appendonly", [fail](const Reply& r) {
    if (r.type == Reply::Type::kLost) return;
    if (r.error() || r.elements.size() < 2 || r.elements[1].str != "yes") {
      return fail("appendonly must be yes (an acknowledged job must survive a restart)");
    }
  });
  get("maxmemory-policy", [fail](const Reply& r) {
    if (r.type == Reply::Type::kLost) return;
    if (r.error() || r.elements.size() < 2 || r.elements[1].str != "noeviction") {
      return fail("maxmemory-policy must be noeviction (Redis must never evict a job)");
    }
  });
  if (opt_.wait_replicas > 0) {
    get("min-replicas-to-write", [fail](const Reply& r) {
      if (r.type == Reply::Type::kLost) return;
      if (r.error() || r.elements.size() < 2 || ToInt(r.elements[1]) < 1) {
        return fail(
            "min-replicas-to-write must be at least 1 with --store-wait above 0 (or run "
            "with --store-wait 0 on a Redis without replicas)");
      }
    });
  }
  std::string_view version[] = {"FCALL", "stalkd_version", "0"};
  send(version, [this, send, ready, fail](const Reply& r) {
    if (!fatal_.empty() || r.type == Reply::Type::kLost) return;
    if (!r.error() && r.str == kFunctionsVersion) return ready();
    std::string_view load[] = {"FUNCTION", "LOAD", "REPLACE", kFunctionsLua};
    send(load, [this, ready, fail](const Reply& l) {
      if (!fatal_.empty() || l.type == Reply::Type::kLost) return;
      // NOREPLICAS (replicas resyncing), LOADING, a busy master: again after a backoff.
      if (l.error()) return fail("FUNCTION LOAD failed: " + l.str, false);
      ready();
    });
  });
}

void RedisStore::OnConnected() {
  CheckMaster(
      link_->master(),
      [this](std::span<const std::string_view> argv, Callback cb) {
        link_->SendSetup(argv, std::move(cb));
      },
      [this] { Setup(); });
}

void RedisStore::OnMasterConnected(const std::string& master) {
  CheckMaster(
      master,
      [this, master](std::span<const std::string_view> argv, Callback cb) {
        cluster_->SendSetup(master, argv, std::move(cb));
      },
      [this, master] {
        cluster_->SetReady(master);
        // A master back (or a replica promoted): it may lack the last listings, and waiters
        // may have missed wake-ups from its partitions.
        if (started_) Started();
      });
}

void RedisStore::OnMasterLost(const std::string&, std::string_view) {
  // Logged by Tick (LogState) as the store's state changes: its partitions wait.
}

void RedisStore::OnSubscribed(const std::string&) {
  // Wake-ups published while no subscription was in place are missed: claim again.
  if (started_) Started();
}

void RedisStore::OnSubscriptionLost(std::string_view why) {
  fprintf(stderr, "stalkd: lost the Redis Cluster subscription (%.*s); subscribing again\n",
          static_cast<int>(why.size()), why.data());
}

void RedisStore::SetupFailed(const std::string& master, std::string why, bool fatal) {
  if (fatal && !started_) {
    fatal_ = "--store: " + why;
  } else {
    LogState(why);
  }
  if (master.empty()) return;  // the front-end id on a cluster: Tick asks again
  if (cluster_) {
    cluster_->Reset(master, why);
  } else {
    link_->Reset(why);
  }
}

void RedisStore::Setup() {
  // On one Redis, the front-end id is taken as the last step of the master's setup; on a
  // cluster, as a normal call once every slot is served.
  std::string lease = std::to_string(opt_.lease / 1'000'000);
  auto took = [this](const Reply& r) {
    if (cluster_) {
      asking_fid_ = false;
      next_fid_ask_ = clock_.Now() + kSecond;  // if it failed
    }
    if (r.type == Reply::Type::kLost) return;  // the link sets up again (one Redis)
    if (r.error() || r.elements.size() < 4) {
      return SetupFailed(cluster_ ? "" : link_->master(), "taking a front-end id failed: " + r.str,
                         false);
    }
    fid_ = r.elements[3].str;
    Learn(Global(), ToInt(r.elements[0]), ToInt(r.elements[1]));
    if (link_) link_->SetReady();
    Started();
  };
  if (link_) {
    link_->SendSetup({"FCALL", "stalkd_lease", "1", tags_[0], fid_, lease}, took);
  } else {
    cluster_->Send(tags_[Global()], {"FCALL", "stalkd_lease", "1", tags_[Global()], fid_, lease},
                   took);
  }
}

void RedisStore::Started() {
  // Away from Redis (or a master): reaped meanwhile, or a promoted replica without the last
  // listings. Sessions list themselves again with their next reserve.
  enlist_epoch_++;
  if (!std::exchange(started_, true)) Born();
  next_lease_ = clock_.Now() + opt_.lease / 4;
  next_pump_ = 0;
  std::vector<std::pair<std::string, uint32_t>> orphans;
  orphans.swap(orphans_);
  for (const auto& [sid, part] : orphans) ReleaseConnection(sid, part);
  // Pub/sub may have missed wake-ups while we were away.
  for (RedisSession* s : waiters_) {
    if (s->claims_out_ == 0) s->Claim();
  }
  next_waiter_lease_ = 0;
}

void RedisStore::OnLost(std::string_view) {
  // Logged by Tick (LogState) as the store's state changes; the link connects again.
}

void RedisStore::LogState(const std::string& why) {
  if (why == logged_) return;
  if (why.empty()) {
    fprintf(stderr, "stalkd: Redis store ready%s%s\n", link_ ? ": master " : "",
            link_ ? link_->master().c_str() : "");
  } else {
    fprintf(stderr, "stalkd: Redis store not ready: %s\n", why.c_str());
  }
  logged_ = why;
}

void RedisStore::Born() {
  // The front-end id is known: the sessions opened before take their ids (they sent nothing:
  // their calls were held), then their held calls and references go out, in order.
  uint64_t fid = 0;
  std::from_chars(fid_.data(), fid_.data() + fid_.size(), fid);
  for (const auto& [text, cell] : unborn_) {
    if (RedisSession* s = *cell) {
      s->sid_ = fid * (uint64_t{1} << 24) + s->sid_;
      s->sid_text_ = std::to_string(s->sid_);
    }
  }
  unborn_.clear();
  std::vector<std::pair<std::string, std::pair<int, int>>> refs;
  refs.swap(pending_refs_);
  pending_ref_at_.clear();
  for (const auto& [tube, d] : refs) {
    if (d.first != 0 || d.second != 0) Ref(tube, d.first, d.second);
  }
  std::deque<Unborn> held;
  held.swap(held_);
  for (Unborn& h : held) {
    if (h.owner) {
      if (!*h.owner) continue;  // closed meanwhile: its answer would go nowhere
      h.args[0] = (*h.owner)->sid_text_;
    }
    if (h.names_fid) h.args[0] = fid_;  // was "0", which names no front end (`stats`)
    std::vector<std::string_view> args(h.args.begin(), h.args.end());
    Call(h.part, h.fn, std::span<const std::string_view>(args), h.writes, std::move(h.done));
  }
}

bool RedisStore::CanRef(std::string_view tube) {
  if (started_ || pending_ref_at_.size() < kMaxPendingTubes) return true;
  if (pending_ref_at_.find(std::string(tube)) != pending_ref_at_.end()) return true;
  if (pending_refs_refused_++ == 0) {
    fprintf(stderr,
            "stalkd: Redis store not ready: %zu tubes named meanwhile; `use` and `watch` of "
            "another are answered OUT_OF_MEMORY until it is\n",
            kMaxPendingTubes);
  }
  return false;
}

void RedisStore::Hold(uint32_t part, std::string_view fn, std::span<const std::string_view> args,
                      bool writes, Handler done) {
  Unborn h{part,    std::string(fn), {args.begin(), args.end()}, writes, std::move(done),
           nullptr, false,           clock_.Now() + opt_.retry};
  // A session's call names its session id first: one opened before the front-end id was
  // known has a provisional one, replaced when the call goes out (its buffer identifies it).
  // A call that names the front-end id first (`stats`: "not this one's counters") names the
  // provisional "0"; it is replaced likewise, by the id Born knows.
  if (!args.empty() && args[0].data() == fid_.data()) {
    h.names_fid = true;
  } else if (!args.empty()) {
    auto it = unborn_.find(args[0].data());
    if (it != unborn_.end() && *it->second && (*it->second)->sid_text_.data() == args[0].data()) {
      h.owner = it->second;
    }
  }
  held_.push_back(std::move(h));
}

Nanos RedisStore::ExpireHeld(Nanos now) {
  while (!held_.empty() && held_.front().deadline <= now) {
    Unborn h = std::move(held_.front());
    held_.pop_front();
    Answer lost;
    lost.lost = true;
    h.done(lost);
  }
  return held_.empty() ? kForever : held_.front().deadline;
}

void RedisStore::ReloadFunctions(const std::string& master) {
  // Once per master until it answers: the calls that found a function missing meanwhile go
  // again behind this one load.
  if (std::find(reloading_.begin(), reloading_.end(), master) != reloading_.end()) return;
  reloading_.push_back(master);
  LogState("functions missing on " + (master.empty() ? link_->master() : master) +
           ": loading them again");
  std::string_view load[] = {"FUNCTION", "LOAD", "REPLACE", kFunctionsLua};
  Callback cb = [this, master](const Reply& r) {
    std::erase(reloading_, master);
    if (r.error()) {
      fprintf(stderr, "stalkd: FUNCTION LOAD on %s failed: %s\n",
              master.empty() ? link_->master().c_str() : master.c_str(), r.str.c_str());
    }
  };
  if (cluster_) {
    cluster_->SendTo(master, load, std::move(cb));
  } else {
    link_->Send(load, std::move(cb));
  }
}

}  // namespace stalkd::redis
