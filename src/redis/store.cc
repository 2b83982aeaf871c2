// RedisStore: the front end's side of the Redis store (docs/SCALE-OUT.md).
#include "redis/store.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "redis/session.h"

namespace stalkd::redis {

namespace {

constexpr int kPumpLimit = 1000;  // timer transitions per pump call
constexpr Nanos kMs = 1'000'000;

std::string_view Text(const Reply& r) { return r.str; }

int64_t ToInt(const Reply& r) {
  if (r.type == Reply::Type::kInteger) return r.integer;
  int64_t v = 0;
  std::from_chars(r.str.data(), r.str.data() + r.str.size(), v);
  return v;
}

std::string Ms(Nanos d) { return std::to_string(d / kMs); }

}  // namespace

std::string_view RedisStore::Answer::Word(size_t i) const {
  if (!words || first + i >= words->size()) return {};
  return Text((*words)[first + i]);
}

uint64_t RedisStore::Answer::Number(size_t i) const {
  int64_t v = Signed(i);
  return v < 0 ? 0 : static_cast<uint64_t>(v);
}

int64_t RedisStore::Answer::Signed(size_t i) const {
  if (!words || first + i >= words->size()) return 0;
  return ToInt((*words)[first + i]);
}

RedisStore::RedisStore(net::EventLoop& loop, const Clock& clock, StoreOptions options,
                       command::Host* host)
    : loop_(loop),
      clock_(clock),
      opt_(std::move(options)),
      host_(host),
      link_(loop, clock, opt_.url, *this, opt_.retry),
      // Pub/sub ignores the db number, so the db is part of every name: two deployments on
      // one Redis, apart by db alone, do not wake each other's waiters.
      tag_(opt_.prefix + (opt_.url.db ? "@" + std::to_string(opt_.url.db) : "") + ":{0}"),
      channel_(tag_ + ":w") {}

RedisStore::~RedisStore() = default;

bool RedisStore::Start(std::string* error) {
  link_.Subscribe(channel_);
  link_.Start();
  Nanos deadline = clock_.Now() + opt_.retry;
  while (!started_ && !setup_failed_ && clock_.Now() < deadline) {
    Nanos next = link_.Poll();
    Nanos wait = std::min<Nanos>(10 * kMs, std::max<Nanos>(0, next - clock_.Now()));
    loop_.Poll(wait);
  }
  if (setup_failed_) {
    *error = setup_error_;
    return false;
  }
  if (!started_) {
    *error = "--store: no Redis master within --store-retry: " + link_.why_not_ready();
    return false;
  }
  return true;
}

void RedisStore::Stop() {
  if (!link_.ready() || fid_ == "0") return;
  bool done = false;
  std::function<void(const Answer&)> next = [&](const Answer& a) {
    if (a.status == "MORE") return Call("quit", {fid_}, true, next);
    done = true;
  };
  Call("quit", {fid_}, true, next);
  Nanos deadline = clock_.Now() + 5 * kSecond;
  while (!done && clock_.Now() < deadline) {
    SendWait();
    link_.Flush();
    link_.Poll();
    loop_.Poll(10 * kMs);
  }
}

void RedisStore::OnConnected() {
  // The settings stalkd relies on (docs/SCALE-OUT.md, "Redis settings").
  auto fail = [this](std::string why) { SetupFailed("Redis at " + link_.master() + ": " + why); };
  link_.SendSetup({"CONFIG", "GET", "appendonly"}, [this, fail](const Reply& r) {
    if (r.error() || r.elements.size() < 2 || r.elements[1].str != "yes") {
      return fail("appendonly must be yes (an acknowledged job must survive a restart)");
    }
  });
  link_.SendSetup({"CONFIG", "GET", "maxmemory-policy"}, [fail](const Reply& r) {
    if (r.error() || r.elements.size() < 2 || r.elements[1].str != "noeviction") {
      return fail("maxmemory-policy must be noeviction (Redis must never evict a job)");
    }
  });
  if (opt_.wait_replicas > 0) {
    link_.SendSetup({"CONFIG", "GET", "min-replicas-to-write"}, [fail](const Reply& r) {
      if (r.error() || r.elements.size() < 2 || ToInt(r.elements[1]) < 1) {
        return fail(
            "min-replicas-to-write must be at least 1 with --store-wait above 0 (or run "
            "with --store-wait 0 on a Redis without replicas)");
      }
    });
  }
  link_.SendSetup({"FCALL", "stalkd_version", "0"}, [this](const Reply& r) {
    if (setup_failed_) return;
    if (!r.error() && r.str == kFunctionsVersion) return Setup();
    link_.SendSetup({"FUNCTION", "LOAD", "REPLACE", kFunctionsLua}, [this](const Reply& l) {
      if (setup_failed_) return;
      if (l.error()) return SetupFailed("FUNCTION LOAD failed: " + l.str);
      Setup();
    });
  });
}

void RedisStore::SetupFailed(std::string why) {
  if (!started_) {
    setup_failed_ = true;
    setup_error_ = "--store: " + why;
  } else {
    fprintf(stderr, "stalkd: %s\n", why.c_str());
  }
  link_.Reset(why);
}

void RedisStore::Setup() {
  link_.SendSetup({"FCALL", "stalkd_lease", "1", tag_, fid_, Ms(opt_.lease)},
                  [this](const Reply& r) {
                    if (r.error() || r.elements.size() < 4) {
                      return SetupFailed("taking a front-end id failed: " + r.str);
                    }
                    fid_ = r.elements[3].str;
                    Learn(ToInt(r.elements[0]), ToInt(r.elements[1]));
                    // Away from Redis: reaped meanwhile, or a promoted replica without the
                    // last listings. Sessions list themselves again with their next reserve.
                    enlist_epoch_++;
                    started_ = true;
                    link_.SetReady();
                    next_lease_ = clock_.Now() + opt_.lease / 4;
                    next_pump_ = 0;
                    std::vector<std::string> orphans;
                    orphans.swap(orphans_);
                    for (const std::string& sid : orphans) ReleaseConnection(sid);
                    // Pub/sub may have missed wake-ups while we were away.
                    for (RedisSession* s : waiters_) {
                      if (s->claims_out_ == 0) s->Claim();
                    }
                    next_waiter_lease_ = 0;
                  });
}

void RedisStore::OnLost(std::string_view why) {
  fprintf(stderr, "stalkd: lost the Redis master (%.*s); reconnecting\n",
          static_cast<int>(why.size()), why.data());
}

void RedisStore::OnMessage(std::string_view channel, std::string_view message) {
  if (channel == channel_) Wake(message);
}

void RedisStore::Learn(int64_t redis_now_ms, int64_t next_due_ms) {
  Nanos now = clock_.Now();
  offset_ = redis_now_ms * kMs - now;
  next_due_ = next_due_ms < 0 ? kForever : LocalTime(next_due_ms);
}

void RedisStore::Call(std::string_view fn, std::span<const std::string_view> args, bool writes,
                      Handler done) {
  std::string name = "stalkd_";
  name.append(fn);
  std::vector<std::string_view> argv;
  argv.reserve(args.size() + 4);
  argv.insert(argv.end(), {"FCALL", name, "1", tag_});
  argv.insert(argv.end(), args.begin(), args.end());
  bool wait = writes && opt_.wait_replicas > 0;
  if (wait) need_wait_ = true;
  link_.Send(std::span<const std::string_view>(argv),
             [this, wait, done = std::move(done)](const Reply& r) mutable {
               bool waits = wait && !r.error();
               if (waits || !held_.empty()) {
                 held_.push_back({r, std::move(done), waits});
                 return;
               }
               Deliver(r, done);
             });
}

void RedisStore::Deliver(const Reply& r, const Handler& done) {
  Answer a;
  if (r.type == Reply::Type::kLost) {
    a.lost = true;
  } else if (r.type == Reply::Type::kError) {
    a.oom = r.ErrorIs("OOM");
    a.lost = !a.oom;
    if (a.lost) {
      fprintf(stderr, "stalkd: Redis answered an error: %s\n", r.str.c_str());
    }
  } else if (r.type != Reply::Type::kArray || r.elements.size() < 2) {
    a.lost = true;
  } else {
    Learn(ToInt(r.elements[0]), ToInt(r.elements[1]));
    if (r.elements.size() > 2) a.status = r.elements[2].str;
    a.words = &r.elements;
    a.first = 3;
  }
  done(a);
}

void RedisStore::SendWait() {
  if (!need_wait_ || wait_out_) return;
  need_wait_ = false;
  wait_out_ = true;
  std::string n = std::to_string(opt_.wait_replicas);
  std::string ms = Ms(opt_.wait_timeout);
  link_.Send({"WAIT", n, ms}, [this](const Reply& r) {
    wait_out_ = false;
    std::vector<Held> batch;
    batch.swap(held_);
    bool ok = r.type == Reply::Type::kInteger && r.integer >= opt_.wait_replicas;
    if (!ok) {
      fprintf(stderr, "stalkd: WAIT %d answered %s: %zu replies say INTERNAL_ERROR\n",
              opt_.wait_replicas,
              r.type == Reply::Type::kInteger ? std::to_string(r.integer).c_str() : r.str.c_str(),
              batch.size());
    }
    Reply lost;
    lost.type = Reply::Type::kLost;
    lost.str = "WAIT did not confirm a replica";
    for (Held& h : batch) Deliver(ok || !h.waits ? h.reply : lost, h.done);
    SendWait();  // for the changes sent meanwhile (and by those deliveries)
  });
}

std::unique_ptr<command::Session> RedisStore::Open(command::Client& client) {
  uint64_t fid = 0;
  std::from_chars(fid_.data(), fid_.data() + fid_.size(), fid);
  uint64_t sid = fid * (uint64_t{1} << 24) + (++next_conn_ % (uint64_t{1} << 24));
  total_connections_++;
  return std::make_unique<RedisSession>(*this, client, sid);
}

void RedisStore::Ref(std::string_view tube, int using_delta, int watching_delta) {
  std::string du = std::to_string(using_delta), dw = std::to_string(watching_delta);
  Call("ref", {fid_, tube, du, dw}, false, [](const Answer&) {});
}

void RedisStore::ReleaseConnection(const std::string& sid) {
  // 1000 reservations a call, so Redis serves others between the slices.
  Call("release_conn", {sid}, true, [this, sid](const Answer& a) {
    if (a.status == "MORE") return ReleaseConnection(sid);
    // Redis was away too long: give them back once it is here again, not at their TTRs.
    if (a.lost) orphans_.push_back(sid);
  });
}

void RedisStore::AddWaiter(RedisSession* s) {
  s->waiter_at_ = waiters_.insert(waiters_.end(), s);
  s->tube_at_.clear();
  for (const std::string& tube : s->watch_) {
    WaiterList& l = tube_waiters_[tube];
    s->tube_at_.push_back(l.insert(l.end(), s));
  }
}

void RedisStore::Parked(const RedisSession& s) {
  next_waiter_check_ = std::min({next_waiter_check_, s.wait_until_, s.NextDeadlineSoon()});
}

void RedisStore::CheckWaiters(Nanos now) {
  // Only when a waiter's time has come, so an idle loop iteration does not walk the waiters.
  next_waiter_check_ = kForever;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    RedisSession* s = *it++;           // answering may take it off the list
    if (s->claims_out_ > 0) continue;  // one whose call is out is parked when it returns
    // Answering its head reserve may leave it waiting for the next one (pipelined): that
    // one's claim is out then.
    if (now >= s->wait_until_) {
      s->AnswerHead(Result::Of(Outcome::kTimedOut));
    } else if (s->DeadlineSoon(now)) {
      s->AnswerHead(Result::Of(Outcome::kDeadlineSoon));
    } else {
      Parked(*s);
    }
  }
}

uint64_t RedisStore::Waiting() const {
  // A reserve that may wait counts from its first call on (its answer may still be on the
  // way: beanstalkd, answering at once, would count it unless a job was ready).
  return waiters_.size();
}

void RedisStore::RemoveWaiter(RedisSession* s) {
  waiters_.erase(s->waiter_at_);
  for (size_t i = 0; i < s->tube_at_.size(); i++) {
    auto l = tube_waiters_.find(s->watch_[i]);
    l->second.erase(s->tube_at_[i]);
    if (l->second.empty()) tube_waiters_.erase(l);
  }
  s->tube_at_.clear();
}

void RedisStore::Wake(std::string_view tube) {
  // One job became ready in `tube`: the first idle waiter watching it claims it; if every
  // one is already claiming, the first of those claims again when its call returns empty.
  auto l = tube_waiters_.find(std::string(tube));
  if (l == tube_waiters_.end()) return;
  RedisSession* busy = nullptr;
  for (RedisSession* s : l->second) {
    if (s->claims_out_ == 0) return s->Claim();
    if (!busy && !s->reclaim_) busy = s;
  }
  if (busy) busy->reclaim_ = true;
}

void RedisStore::Pump() {
  if (pumping_ || !link_.ready()) return;
  pumping_ = true;
  next_pump_ = clock_.Now() + kSecond;  // the safety net: every front end pumps each second
  Call("pump", {std::to_string(kPumpLimit)}, true, [this](const Answer& a) {
    pumping_ = false;
    if (!a.lost && a.Number(0) >= static_cast<uint64_t>(kPumpLimit)) next_pump_ = 0;
  });
}

void RedisStore::RenewLease() {
  next_lease_ = clock_.Now() + opt_.lease / 4;
  if (!link_.ready()) return;
  // This front end's counters, for the `stats` of the others.
  std::vector<std::string> kv;
  for (size_t i = 0; i < command::kVerbCount; i++) {
    if (cmds_[i] == 0) continue;
    kv.push_back("c" + std::to_string(i));
    kv.push_back(std::to_string(cmds_[i]));
  }
  kv.insert(kv.end(), {"conn", std::to_string(sessions_), "tconn",
                       std::to_string(total_connections_), "wait", std::to_string(Waiting()),
                       "prod", std::to_string(producers_), "work", std::to_string(workers_)});
  std::vector<std::string_view> args{fid_};
  std::string lease = Ms(opt_.lease);
  args.push_back(lease);
  for (const std::string& s : kv) args.push_back(s);
  Call("lease", std::span<const std::string_view>(args), false, [this](const Answer& a) {
    // Another front end took this one for dead (a stall longer than the lease) and gave
    // back its sessions' reservations and their listing.
    if (!a.lost && a.Word(1) == "1") enlist_epoch_++;
  });
}

void RedisStore::RefreshWaiterLease() {
  next_waiter_lease_ = clock_.Now() + opt_.lease / 2;
  if (tube_waiters_.empty() || !link_.ready()) return;
  std::string lease = Ms(opt_.lease);
  std::vector<std::string_view> args{lease};
  for (const auto& [tube, waiting] : tube_waiters_) args.push_back(tube);
  Call("wait", std::span<const std::string_view>(args), false, [](const Answer&) {});
}

command::Result RedisStore::FillStats(const Answer& a) {
  // ready urgent reserved delayed buried total timeouts expired exhausted tubes, then per
  // other live front end "--" and its counters as name value pairs.
  command::ServerStats& s = stats_;
  s = {};
  s.ready = a.Number(0);
  s.urgent = a.Number(1);
  s.reserved = a.Number(2);
  s.delayed = a.Number(3);
  s.buried = a.Number(4);
  s.total_jobs = a.Number(5);
  s.timeouts = a.Number(6);
  s.expired = a.Number(7);
  s.tries_exhausted = a.Number(8);
  s.tubes = a.Number(9);
  std::copy(std::begin(cmds_), std::end(cmds_), std::begin(s.cmds));
  s.connections = sessions_;
  s.total_connections = total_connections_;
  s.waiting = Waiting();
  s.producers = producers_;
  s.workers = workers_;
  for (size_t i = 10; i + 1 < a.size(); i++) {
    std::string_view k = a.Word(i);
    if (k == "--") continue;
    uint64_t v = a.Number(++i);
    if (k.size() > 1 && k[0] == 'c') {
      size_t verb = 0;
      std::from_chars(k.data() + 1, k.data() + k.size(), verb);
      if (verb < command::kVerbCount) s.cmds[verb] += v;
    } else if (k == "conn") {
      s.connections += v;
    } else if (k == "tconn") {
      s.total_connections += v;
    } else if (k == "wait") {
      s.waiting += v;
    } else if (k == "prod") {
      s.producers += v;
    } else if (k == "work") {
      s.workers += v;
    }
  }
  s.max_job_size = opt_.max_job_size;
  s.draining = draining_;
  if (host_) s.host = host_->CurrentStats();
  command::Result r = command::Result::Of(command::Outcome::kStats);
  r.stats = &s;
  return r;
}

Nanos RedisStore::Tick() {
  Nanos next = link_.Poll();
  Nanos now = clock_.Now();
  if (link_.ready()) {
    if (now >= next_lease_) RenewLease();
    if (now >= next_due_ || now >= next_pump_) Pump();
    if (now >= next_waiter_lease_) RefreshWaiterLease();
  }
  if (now >= next_waiter_check_) CheckWaiters(now);
  next = std::min(next, next_waiter_check_);
  SendWait();
  link_.Flush();
  if (link_.ready()) next = std::min({next, next_lease_, next_pump_, next_waiter_lease_});
  if (!pumping_ && link_.ready()) next = std::min(next, next_due_);
  return next;
}

}  // namespace stalkd::redis
