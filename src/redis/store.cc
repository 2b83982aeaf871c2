// RedisStore: the front end's side of the Redis store (docs/SCALE-OUT.md).
#include "redis/store.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <utility>

#include "base/check.h"
#include "redis/resp.h"
#include "redis/session.h"

namespace stalkd::redis {

namespace {

constexpr int kPumpLimit = 1000;  // timer transitions per pump call
constexpr Nanos kMs = 1'000'000;

std::string_view Text(const Reply& r) { return r.str; }

std::string Ms(Nanos d) { return std::to_string(d / kMs); }

}  // namespace

int64_t ToInt(const Reply& r) {
  if (r.type == Reply::Type::kInteger) return r.integer;
  int64_t v = 0;
  std::from_chars(r.str.data(), r.str.data() + r.str.size(), v);
  return v;
}

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
      // Pub/sub ignores the db number, so the db is part of every name: two deployments on
      // one Redis, apart by db alone, do not wake each other's waiters.
      base_(opt_.prefix + (opt_.url.db ? "@" + std::to_string(opt_.url.db) : "") + ":"),
      channel_(base_ + "w") {
  if (opt_.url.kind == StoreUrl::Kind::kCluster) {
    parts_ = kClusterPartitions;
    cluster_ = std::make_unique<ClusterLink>(
        loop, clock, opt_.url, static_cast<ClusterLink::Listener&>(*this), opt_.retry);
    for (uint32_t p = 0; p < parts_; p++) {
      tags_.push_back(base_ + "{" + std::to_string(p) + "/" + std::to_string(parts_) + "}");
    }
    tags_.push_back(base_ + "{g}");
    for (const std::string& t : tags_) slots_.push_back(KeySlot(t));
  } else {
    link_ = std::make_unique<Link>(loop, clock, opt_.url, static_cast<Link::Listener&>(*this),
                                   opt_.retry);
    tags_.push_back(base_ + "{0}");
    masters_.push_back(std::make_unique<Master>());
  }
  due_.assign(parts_, kForever);
  seen_seq_.assign(parts_, 0);
  touched_.assign(tags_.size(), 0);
  pumping_part_.assign(tags_.size(), 0);
}

RedisStore::~RedisStore() = default;

uint32_t TubePartition(std::string_view tube, uint32_t parts) {
  if (parts <= 1) return 0;
  // Tubes named (group)... share the group's partition.
  if (size_t open = tube.find('('); open != std::string_view::npos) {
    size_t close = tube.find(')', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      tube = tube.substr(open + 1, close - open - 1);
    }
  }
  return Crc16(tube) % parts;
}

Nanos RedisStore::PollLinks() { return cluster_ ? cluster_->Poll() : link_->Poll(); }

void RedisStore::FlushLinks() {
  if (cluster_) {
    cluster_->Flush();
  } else {
    link_->Flush();
  }
}

void RedisStore::Stop() {
  if (!started_ || fid_ == "0" || (link_ && !link_->ready())) return;
  // quit in every partition this front end left something in (on a cluster), then globally:
  // only once every one of those answered, for the lease is what lets other front ends reap
  // a partition whose quit was lost (a master down).
  size_t left = 0;
  bool clean = true, global = !cluster_;  // on one Redis, its partition is the global one
  std::function<void(uint32_t)> quit = [&](uint32_t p) {
    Call(p, "quit", {fid_}, true, [&, p](const Answer& a) {
      if (a.status == "MORE") return quit(p);
      clean = clean && !a.lost && !a.oom;
      if (--left > 0 || global || !clean) return;
      global = true;
      left = 1;
      quit(Global());
    });
  };
  std::vector<uint32_t> parts;
  if (cluster_) {
    for (uint32_t p = 0; p < parts_; p++) {
      if (touched_[p]) parts.push_back(p);
    }
  }
  if (parts.empty()) {
    global = true;
    parts.push_back(Global());
  }
  left = parts.size();
  for (uint32_t p : parts) quit(p);
  Nanos deadline = clock_.Now() + 5 * kSecond;
  while (left > 0 && clock_.Now() < deadline) {
    SendWaits();
    FlushLinks();
    PollLinks();
    loop_.Poll(10 * kMs);
  }
}

void RedisStore::OnMessage(std::string_view channel, std::string_view message) {
  if (channel == channel_) Wake(message);
}

void RedisStore::Learn(uint32_t part, int64_t redis_now_ms, int64_t next_due_ms) {
  Nanos now = clock_.Now();
  offset_ = redis_now_ms * kMs - now;
  if (part < parts_) LearnDue(part, next_due_ms < 0 ? kForever : LocalTime(next_due_ms));
}

void RedisStore::LearnDue(uint32_t part, Nanos due) {
  if (due_[part] == due) return;
  if (due_[part] != kForever) timers_.erase({due_[part], part});
  due_[part] = due;
  if (due != kForever) timers_.insert({due, part});
}

RedisStore::Master& RedisStore::MasterNamed(const std::string& name) {
  for (auto& m : masters_) {
    if (m->name == name) return *m;
  }
  masters_.push_back(std::make_unique<Master>());
  masters_.back()->name = name;
  return *masters_.back();
}

void RedisStore::Call(uint32_t part, std::string_view fn, std::span<const std::string_view> args,
                      bool writes, Handler done) {
  if (!started_) return Hold(part, fn, args, writes, std::move(done));
  // `stats` names the front end whose counters are left out: never the provisional 0 (a
  // held one takes the id in Born).
  STALKD_CHECK(fn != "stats" || args.empty() || args[0] != "0");
  std::string name = "stalkd_";
  name.append(fn);
  std::vector<std::string_view> argv;
  argv.reserve(args.size() + 4);
  argv.insert(argv.end(), {"FCALL", name, "1", tags_[part]});
  argv.insert(argv.end(), args.begin(), args.end());
  auto command = std::make_shared<std::string>();
  AppendCommand(*command, std::span<const std::string_view>(argv));
  SendCall(part, std::move(command), writes && opt_.wait_replicas > 0, std::move(done), false);
}

void RedisStore::SendCall(uint32_t part, std::shared_ptr<const std::string> command, bool wait,
                          Handler done, bool again) {
  Master* predicted = nullptr;
  uint64_t mark = 0;
  if (wait) {
    // The master it should reach asks for a WAIT behind it (sent after this is written, so
    // it covers it), unless a redirection or a retry takes it elsewhere or later: Answered.
    predicted = cluster_ ? &MasterNamed(cluster_->master_of(slots_[part])) : masters_[0].get();
    predicted->need_wait = true;
    mark = predicted->waits_sent;
  }
  Callback cb = [this, part, command, wait, predicted, mark, again,
                 done = std::move(done)](const Reply& r) {
    // The master lost our functions (FUNCTION FLUSH, restarted empty, a replica promoted that
    // never had them): nothing ran. Loaded again, then this call once more, behind the load
    // on the same connection.
    if (!again && r.ErrorIs("ERR Function not found")) {
      ReloadFunctions(cluster_ ? cluster_->answered_by() : std::string());
      return SendCall(part, command, wait, done, true);
    }
    Answered(r, done, part, wait, predicted, mark);
  };
  if (cluster_) {
    cluster_->SendEncoded(tags_[part], *command, std::move(cb));
  } else {
    link_->SendEncoded(*command, std::move(cb));
  }
}

void RedisStore::CallNode(const std::string& master, std::string_view fn,
                          std::span<const std::string_view> args, Callback done) {
  std::string name = "stalkd_";
  name.append(fn);
  std::vector<std::string_view> argv{"FCALL_RO", name, "0"};
  argv.insert(argv.end(), args.begin(), args.end());
  cluster_->SendTo(master, std::span<const std::string_view>(argv), std::move(done));
}

std::vector<std::string> RedisStore::ReadPerMaster(
    std::string_view fn, std::span<const std::string_view> lead,
    const std::function<void(uint32_t)>& alone, const Read& read,
    const std::function<bool(const std::string&)>& skip) {
  std::vector<std::string> sent;
  for (auto& [master, parts] : PartitionsByMaster()) {
    // Before Born every partition is asked alone: those calls are held and go out after the
    // tube references made meanwhile, so a read sees the tubes its clients named first.
    if (!started_ || master.empty() || (skip && skip(master))) {
      for (uint32_t p : parts) alone(p);
      continue;
    }
    std::vector<std::string_view> args(lead.begin(), lead.end());
    for (uint32_t p : parts) args.push_back(tags_[p]);
    sent.push_back(master);
    CallNode(master, fn, std::span<const std::string_view>(args),
             [read, master = master, parts = std::move(parts)](const Reply& r) {
               read(master, r, parts);
             });
  }
  return sent;
}

std::vector<std::pair<std::string, std::vector<uint32_t>>> RedisStore::PartitionsByMaster() const {
  std::vector<std::pair<std::string, std::vector<uint32_t>>> out;
  for (uint32_t p = 0; p < parts_; p++) {
    std::string m = cluster_->master_of(slots_[p]);
    auto it = std::find_if(out.begin(), out.end(), [&m](const auto& e) { return e.first == m; });
    if (it == out.end()) it = out.insert(out.end(), {m, {}});
    it->second.push_back(p);
  }
  return out;
}

void RedisStore::Answered(const Reply& r, const Handler& done, uint32_t part, bool wait,
                          Master* predicted, uint64_t mark) {
  bool waits = wait && !r.error();
  Master* m = nullptr;
  if (cluster_) {
    std::string by = cluster_->answered_by();
    if (by.empty()) return Deliver(part, r, done);  // lost: nothing to wait for
    m = &MasterNamed(by);
  } else {
    m = masters_[0].get();
  }
  if (r.ErrorIs("NOREPLICAS")) {
    m->behind = "replicas behind: " + (m->name.empty() ? link_->master() : m->name) + ": " + r.str;
  } else if (!r.error() && opt_.wait_replicas == 0) {
    m->behind.clear();
  }
  // A WAIT on the master that answered covers this change if it was sent after the change
  // was (on the same connection): the one out now, if it was sent after the call reached
  // there first; else the next one.
  uint64_t needs = 0;
  if (waits) {
    if (m == predicted && m->waits_sent > mark && m->waits_answered < m->waits_sent) {
      needs = m->waits_sent;
    } else {
      needs = m->waits_sent + 1;
      m->need_wait = true;
    }
  }
  if (needs > 0 || !m->held.empty()) {
    m->held.push_back({r, done, part, waits, needs, false});
    return;
  }
  Deliver(part, r, done);
}

void RedisStore::Deliver(uint32_t part, const Reply& r, const Handler& done) {
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
    Learn(part, ToInt(r.elements[0]), ToInt(r.elements[1]));
    a.offset = offset_;
    if (r.elements.size() > 2) a.status = r.elements[2].str;
    a.words = &r.elements;
    a.first = 3;
  }
  done(a);
}

void RedisStore::SendWaits() {
  for (auto& m : masters_) SendWait(*m);
}

void RedisStore::SendWait(Master& m) {
  // One WAIT out at a time per master: Redis runs nothing behind a blocked WAIT on the
  // connection, so the calls sent meanwhile wait there anyway, and the next WAIT, sent when
  // this one answers, covers them all.
  if (!m.need_wait || m.waits_answered < m.waits_sent) return;
  m.need_wait = false;
  uint64_t k = ++m.waits_sent;
  std::string n = std::to_string(opt_.wait_replicas);
  // Within the retry window, after which the link gives up on an answer.
  std::string ms = Ms(std::min(opt_.wait_timeout, opt_.retry / 2));
  std::string_view argv[] = {"WAIT", n, ms};
  Callback cb = [this, &m, k](const Reply& r) {
    m.waits_answered = k;
    bool ok = r.type == Reply::Type::kInteger && r.integer >= opt_.wait_replicas;
    if (ok) {
      m.behind.clear();
    } else if (r.type == Reply::Type::kInteger) {
      m.behind = "replicas behind: " + (m.name.empty() ? link_->master() : m.name) + ": WAIT " +
                 std::to_string(opt_.wait_replicas) + " confirmed " + std::to_string(r.integer);
    }
    if (!ok) {
      fprintf(stderr, "stalkd: WAIT %d answered %s on %s\n", opt_.wait_replicas,
              r.type == Reply::Type::kInteger ? std::to_string(r.integer).c_str() : r.str.c_str(),
              m.name.empty() ? "the master" : m.name.c_str());
    }
    Reply lost;
    lost.type = Reply::Type::kLost;
    lost.str = "WAIT did not confirm a replica";
    // Held answers need not be in WAIT order (one redirected to this master needs the next
    // WAIT, one behind it this one): those this WAIT did not confirm and that stay held
    // behind remember it.
    if (!ok) {
      for (Held& h : m.held) h.failed = h.failed || h.needs == k;
    }
    while (!m.held.empty() && m.held.front().needs <= k) {
      Held h = std::move(m.held.front());
      m.held.pop_front();
      Deliver(h.part, ok || !h.waits || (h.needs < k && !h.failed) ? h.reply : lost, h.done);
    }
    SendWait(m);  // for the changes answered meanwhile
  };
  if (cluster_) {
    cluster_->SendTo(m.name, argv, std::move(cb));
  } else {
    link_->Send(argv, std::move(cb));
  }
}

std::unique_ptr<command::Session> RedisStore::Open(command::Client& client) {
  uint64_t fid = 0;
  std::from_chars(fid_.data(), fid_.data() + fid_.size(), fid);
  uint64_t sid = fid * (uint64_t{1} << 24) + (++next_conn_ % (uint64_t{1} << 24));
  total_connections_++;
  // Before the front-end id is known (fid 0): a provisional id, completed by Born().
  auto s = std::make_unique<RedisSession>(*this, client, sid);
  if (!started_) unborn_[s->sid_text_.data()] = s->cell_;
  return s;
}

void RedisStore::Ref(std::string_view tube, int using_delta, int watching_delta) {
  if (!started_) {  // the front-end id is not known yet: sent by Born()
    auto [at, made] = pending_ref_at_.try_emplace(std::string(tube), pending_refs_.size());
    if (made) pending_refs_.push_back({std::string(tube), {0, 0}});
    auto& d = pending_refs_[at->second].second;
    d.first += using_delta;
    d.second += watching_delta;
    if (d.first == 0 && d.second == 0) {  // none outstanding: nothing to send for it
      pending_refs_[at->second].first.clear();
      pending_ref_at_.erase(at);
      if (pending_refs_.size() > 2 * pending_ref_at_.size() + 64) {
        std::erase_if(pending_refs_, [](const auto& e) { return e.first.empty(); });
        for (size_t i = 0; i < pending_refs_.size(); i++)
          pending_ref_at_[pending_refs_[i].first] = i;
      }
    }
    return;
  }
  std::string du = std::to_string(using_delta), dw = std::to_string(watching_delta);
  uint32_t p = PartitionOf(tube);
  Touched(p);
  Call(p, "ref", {fid_, tube, du, dw}, false, [](const Answer&) {});
}

void RedisStore::ReleaseConnection(const std::string& sid, uint32_t part) {
  // 1000 reservations a call, so Redis serves others between the slices.
  Call(part, "release_conn", {sid}, true, [this, sid, part](const Answer& a) {
    if (a.status == "MORE") return ReleaseConnection(sid, part);
    // Redis was away too long: give them back once it is here again, not at their TTRs.
    if (a.lost) orphans_.emplace_back(sid, part);
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
      s->TimeUp();
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

void RedisStore::Pump(uint32_t part, const std::vector<std::string>& dead) {
  if (pumping_part_[part]) return;
  pumping_part_[part] = 1;
  std::string limit = std::to_string(kPumpLimit), floor = SeqFloor(part);
  std::vector<std::string_view> args{limit, floor};
  args.insert(args.end(), dead.begin(), dead.end());
  Call(part, "pump", std::span<const std::string_view>(args), true,
       [this, part, dead = dead](const Answer& a) {
         pumping_part_[part] = 0;
         if (a.lost || a.Number(0) < static_cast<uint64_t>(kPumpLimit)) return;
         // More to do: at once, the reaping too (the answer's next timer was just learned).
         if (!dead.empty()) return Pump(part, dead);
         if (part < parts_) LearnDue(part, clock_.Now());
       });
}

void RedisStore::Sweep() {
  struct Round {
    size_t left = 0;
    bool clean = true;  // every partition answered, none holds a dead front end's state
  };
  auto round = std::make_shared<Round>();
  std::vector<std::string> dead = dead_;
  std::string nd = std::to_string(dead.size());
  std::vector<std::string_view> lead{nd};
  lead.insert(lead.end(), dead.begin(), dead.end());
  auto scanning = [this](const std::string& m) {
    return std::find(scanning_.begin(), scanning_.end(), m) != scanning_.end();
  };
  std::vector<std::string> sent = ReadPerMaster(
      "scan_node", lead,
      // No master serves it now, or its master has not answered the last sweep yet (a
      // stalled master holds up only its own partitions): not swept this time.
      [round](uint32_t) { round->clean = false; },
      [this, round, dead](const std::string& master, const Reply& r,
                          const std::vector<uint32_t>& parts) {
        std::erase(scanning_, master);
        if (r.type != Reply::Type::kArray) {
          round->clean = false;
        } else {
          bool dead_part = false;
          for (const Reply& e : r.elements) {
            if (e.str == "--") {
              dead_part = true;
              continue;
            }
            size_t i = static_cast<size_t>(ToInt(e));
            if (i < 1 || i > parts.size()) continue;
            if (dead_part) round->clean = false;
            Pump(parts[i - 1], dead);
          }
        }
        if (--round->left > 0) return;
        // No partition holds anything of the dead front ends any more: their leases go:
        // those this round looked for, not others found dead since, whose partitions were
        // not looked at.
        if (round->clean && !dead.empty()) Pump(Global(), dead);
      },
      scanning);
  round->left = sent.size();
  scanning_.insert(scanning_.end(), sent.begin(), sent.end());
}

void RedisStore::RenewLease(bool sweep) {
  next_lease_ = clock_.Now() + opt_.lease / 4;
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
  Call(Global(), "lease", std::span<const std::string_view>(args), false,
       [this, sweep](const Answer& a) {
         if (a.lost) {
           dead_.clear();  // not known now: the sweep reaps none
           if (sweep) Sweep();
           return;
         }
         // Another front end took this one for dead (a stall longer than the lease) and
         // gave back its sessions' reservations and their listing; or Redis was wiped
         // (FLUSHALL, a restart without its data): each partition this front end saw ids
         // of goes on numbering above them (a pump carries the floor, SawId).
         if (a.Word(1) == "1") {
           enlist_epoch_++;
           for (uint32_t p = 0; p < parts_; p++) {
             if (seen_seq_[p] > 0) Pump(p, {});
           }
         }
         // Front ends whose lease ran out, for the sweep (a cluster) to reap.
         dead_.clear();
         for (size_t i = 2; i < a.size(); i++) dead_.emplace_back(a.Word(i));
         if (sweep) Sweep();
       });
}

void RedisStore::RefreshWaiterLease() {
  next_waiter_lease_ = clock_.Now() + opt_.lease / 2;
  if (tube_waiters_.empty()) return;
  std::string lease = Ms(opt_.lease);
  // One call per partition of the tubes waited on.
  std::vector<std::pair<uint32_t, std::string_view>> tubes;
  for (const auto& [tube, waiting] : tube_waiters_) tubes.emplace_back(PartitionOf(tube), tube);
  std::sort(tubes.begin(), tubes.end());
  for (size_t i = 0; i < tubes.size();) {
    uint32_t p = tubes[i].first;
    std::vector<std::string_view> args{lease};
    for (; i < tubes.size() && tubes[i].first == p; i++) args.push_back(tubes[i].second);
    Call(p, "wait", std::span<const std::string_view>(args), false, [](const Answer&) {});
  }
}

command::Result RedisStore::FillStats(const Answer& a, const uint64_t* more) {
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
  if (more) {
    // A cluster: the global partition holds no jobs; the masters' sums and "default".
    uint64_t* f[] = {&s.ready,      &s.urgent,   &s.reserved, &s.delayed,         &s.buried,
                     &s.total_jobs, &s.timeouts, &s.expired,  &s.tries_exhausted, &s.tubes};
    for (size_t i = 0; i < 10; i++) *f[i] = more[i];
    s.tubes += 1;
  }
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
  std::vector<std::function<void()>> later;
  later.swap(later_);
  for (auto& f : later) f();
  Nanos next = PollLinks();
  Nanos now = clock_.Now();
  // On a cluster the front-end id is taken once its global partition's master is ready (one
  // Redis: as the last step of the master's setup).
  if (cluster_ && !started_ && !asking_fid_ && fatal_.empty() && now >= next_fid_ask_ &&
      cluster_->ready(slots_[Global()])) {
    asking_fid_ = true;
    Setup();
  }
  if (!started_) {
    next = std::min(next, ExpireHeld(now));
    if (next_fid_ask_ > now) next = std::min(next, next_fid_ask_);
  }
  // Each change of state is logged once; a normal start-up's first second is not.
  std::string why = why_not_ready();
  if (started_ || now - created_ >= kSecond) LogState(why);
  // Credentials refused (or an ACL user not allowed what stalkd needs) stop a front end that
  // has not started yet, as a bad flag would; later (a password being rotated) they are
  // logged and tried again like any outage.
  if (!started_ && fatal_.empty() && IsAccessRefused(why)) fatal_ = "--store: " + why;
  bool up = started_ && (cluster_ || link_->ready());
  if (up) {
    // Each second, the safety net; on a cluster the sweep, after a renewal (see RenewLease).
    bool each_second = now >= next_pump_;
    if (each_second) next_pump_ = now + kSecond;
    bool sweep = each_second && cluster_;
    if (now >= next_lease_ || sweep) RenewLease(sweep);
    if (now >= next_waiter_lease_) RefreshWaiterLease();
    if (each_second && !cluster_) Pump(0, {});  // its pump reaps dead front ends itself
    // Partitions whose timers are due, as their last answers said.
    while (!timers_.empty() && timers_.begin()->first <= now) {
      uint32_t p = timers_.begin()->second;
      LearnDue(p, kForever);
      Pump(p, {});  // no reaping named: dead_ may be older than a lease renewed since
    }
  }
  if (now >= next_waiter_check_) CheckWaiters(now);
  next = std::min(next, next_waiter_check_);
  SendWaits();
  FlushLinks();
  if (!later_.empty()) next = now;
  if (up) {
    next = std::min({next, next_lease_, next_pump_, next_waiter_lease_});
    if (!timers_.empty()) next = std::min(next, timers_.begin()->first);
  }
  return next;
}

}  // namespace stalkd::redis
