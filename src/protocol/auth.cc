// The text protocol's `auth` and the namespace rules it brings (docs/SECURITY.md, "Tokens
// on the beanstalkd port"). A connection that never sends `auth`, on a listener that does
// not require it, never reaches anything here but the test of its line's verb.
#include <algorithm>
#include <utility>

#include "base/check.h"
#include "protocol/conversation.h"

namespace stalkd::protocol {

using command::Identity;
using command::Outcome;
using command::Result;

namespace {

constexpr size_t kMaxCheckedIds = 1000;  // delete-many's most

// The first word of s (after spaces) and the rest after it.
std::string_view NextWord(std::string_view* s) {
  size_t b = s->find_first_not_of(' ');
  if (b == std::string_view::npos) {
    *s = {};
    return {};
  }
  *s = s->substr(b);
  size_t e = std::min(s->find(' '), s->size());
  std::string_view w = s->substr(0, e);
  *s = s->substr(e);
  return w;
}

// The n-th (from 0) word of s as a number; false if it is not one.
bool NumberWord(std::string_view s, int n, uint32_t* out) {
  std::string_view w;
  for (int i = 0; i <= n; i++) w = NextWord(&s);
  return !w.empty() && ReadU32(&w, true, out);
}

bool IsIdVerb(Verb v) {
  switch (v) {
    case Verb::kPeek:
    case Verb::kReserveJob:
    case Verb::kDelete:
    case Verb::kRelease:
    case Verb::kBury:
    case Verb::kTouch:
    case Verb::kKickJob:
    case Verb::kStatsJob:
      return true;
    default:
      return false;
  }
}

}  // namespace

bool IsAuthLine(std::string_view line) {
  return line.substr(0, 4) == "auth" && (line.size() == 4 || line[4] == ' ');
}

bool NeedsIdCheck(Verb v) { return IsIdVerb(v) || v == Verb::kDeleteMany; }

void Conversation::ExecuteAuth(std::string_view line) {
  std::string_view rest = line.substr(4);
  std::string_view first = NextWord(&rest), second = NextWord(&rest), ns, credential = first;
  if (!second.empty()) {
    ns = first;
    credential = second;
  }
  if (credential.empty() || !NextWord(&rest).empty()) return Reply(Outcome::kBadFormat);
  // A refused auth changes nothing: the connection stays who it was.
  auto who = std::make_unique<Identity>();
  if (!auth_->authenticator->Authenticate(ns, credential, who.get())) {
    return Reply(Outcome::kUnauthorized);
  }
  if (!who->scoped()) {
    who_ = std::move(who);
    revoked_ = false;
    return Reply(Outcome::kAuthenticated);
  }
  StartAuthSetup(std::move(who));
}

void Conversation::ProvenBy(const Identity& who) {
  if (auth_ == nullptr || auth_->authenticator == nullptr || aside_ || who_) return;
  auto proven = std::make_unique<Identity>(who);
  if (!proven->scoped()) {
    who_ = std::move(proven);
    return;
  }
  StartAuthSetup(std::move(proven), /*silent=*/true);
}

bool Conversation::Admitted(std::string_view line, const Command& cmd) {
  if (cmd.verb == Verb::kQuit) return true;
  if (who_ && !auth_->authenticator->StillValid(*who_)) {
    who_.reset();  // its token was deleted
    revoked_ = true;
  }
  if (!who_) {
    if (!auth_->require && !revoked_) return true;
    Refuse(cmd, Outcome::kUnauthorized);
    return false;
  }
  if (!who_->scoped()) return true;
  std::string_view args = cmd.args;
  switch (cmd.verb) {
    case Verb::kUse:
    case Verb::kWatch:
    case Verb::kIgnore:
    case Verb::kStatsTube:
    case Verb::kPauseTube:
      if (who_->Owns(cmd.tube)) return true;
      Reply(Outcome::kForbidden);
      return false;
    case Verb::kPurge:
    case Verb::kListJobs:
    case Verb::kTubeTries:
      if (who_->Owns(NextWord(&args))) return true;
      Reply(Outcome::kForbidden);
      return false;
    case Verb::kPut:
    case Verb::kPutExt:
      if (auth_->authenticator->AllowPut(*who_)) return true;
      Refuse(cmd, Outcome::kRateLimited);
      return false;
    case Verb::kPutMany: {
      // One put a job; a refused batch keeps what it counted.
      uint32_t count = 0;
      if (!NumberWord(args, 0, &count)) return true;  // answered BAD_FORMAT
      for (uint32_t i = 0; i < std::min<uint32_t>(count, kMaxCheckedIds); i++) {
        if (!auth_->authenticator->AllowPut(*who_)) {
          Refuse(cmd, Outcome::kRateLimited);
          return false;
        }
      }
      return true;
    }
    default:
      break;
  }
  if (!NeedsIdCheck(cmd.verb)) return true;  // the used tube, the watched ones, stats
  if (aside_ && aside_->checked) {
    if (cmd.verb == Verb::kDeleteMany || !aside_->allowed.empty()) return true;
    // A job of another namespace is answered, and counted, as if it did not exist.
    if (aside_->failed) {
      Reply(Outcome::kInternalError);
    } else {
      session_->CountBatch(cmd.verb);
      Reply(Outcome::kNotFound);
    }
    return false;
  }
  std::vector<uint64_t> ids;
  if (cmd.verb == Verb::kDeleteMany) {
    // Read as extensions.cc reads them; what this misreads is not checked, so not deleted.
    uint64_t id;
    std::string_view w;
    while (ids.size() < kMaxCheckedIds && !(w = NextWord(&args)).empty() &&
           ReadU64(&w, true, &id)) {
      ids.push_back(id);
    }
  } else {
    ids.push_back(cmd.id);
  }
  StartIdCheck(line, std::move(ids));
  return false;
}

void Conversation::Refuse(const Command& cmd, Outcome o) {
  uint32_t bytes = 0;
  bool body = (cmd.verb == Verb::kPut && (bytes = cmd.bytes, true)) ||
              (cmd.verb == Verb::kPutExt && NumberWord(cmd.args, 3, &bytes)) ||
              (cmd.verb == Verb::kPutMany && NumberWord(cmd.args, 1, &bytes));
  if (body) return Skip(uint64_t{bytes} + 2, o);
  Reply(o);
}

void Conversation::StartIdCheck(std::string_view line, std::vector<uint64_t> ids) {
  aside_ = std::make_unique<Aside>();
  aside_->line.assign(line);
  aside_->ids = std::move(ids);
  ContinueAside();
}

void Conversation::StartAuthSetup(std::unique_ptr<Identity> who, bool silent) {
  aside_ = std::make_unique<Aside>();
  aside_->kind = Aside::Kind::kAuthSetup;
  aside_->silent = silent;
  aside_->who = std::move(who);
  ContinueAside();
}

// kAuthSetup's calls: use and watch "<ns>/default", list the watched tubes, then ignore
// each of them outside the namespace.
void Conversation::ContinueAside() {
  state_ = State::kCommand;
  Aside& a = *aside_;
  for (;;) {
    Result r;
    if (a.kind == Aside::Kind::kCheckIds) {
      if (a.step == a.ids.size()) break;
      r = session_->JobTube(a.ids[a.step]);
    } else {
      if (a.failed || a.step >= 3 + a.ignore.size()) break;
      std::string home = a.who->ns + "/default";
      switch (a.step) {
        case 0:
          r = session_->Use(home);
          break;
        case 1:
          r = session_->Watch(home);
          break;
        case 2:
          r = session_->ListTubesWatched();
          break;
        default:
          r = session_->Ignore(a.ignore[a.step - 3]);
          break;
      }
    }
    if (r.outcome == Outcome::kPending) {
      state_ = State::kWaiting;  // OnResult takes it, Run makes the next call
      return;
    }
    TakeAside(r);
  }
  std::unique_ptr<Aside> done = std::move(aside_);
  if (done->kind == Aside::Kind::kAuthSetup) {
    // Not authenticated: the tubes may have changed, the identity has not.
    if (done->failed) return done->silent ? void() : Reply(done->failure);
    who_ = std::move(done->who);
    revoked_ = false;
    if (!done->silent) Reply(Outcome::kAuthenticated);
    return;
  }
  done->checked = true;
  if (done->failed) done->allowed.clear();
  aside_ = std::move(done);
  Execute(aside_->line);  // Admitted lets it through with its verdict
  aside_.reset();
}

void Conversation::TakeAside(const Result& r) {
  Aside& a = *aside_;
  if (r.outcome == Outcome::kInternalError) a.failed = true;
  if (a.kind == Aside::Kind::kCheckIds) {
    std::string_view tube;
    if (r.outcome == Outcome::kFound) tube = r.name;
    if (r.outcome == Outcome::kJobStats) tube = r.job_stats->tube;
    if (!tube.empty() && who_ && who_->Owns(tube)) a.allowed.push_back(a.ids[a.step]);
  } else {
    // use and watch of "<ns>/default" (BAD_FORMAT: a namespace too long for a tube name),
    // the watch list, then each ignore: anything else leaves the connection as it was.
    static constexpr Outcome kWant[] = {Outcome::kUsing, Outcome::kWatching, Outcome::kTubeList};
    Outcome want = a.step < 3 ? kWant[a.step] : Outcome::kWatching;
    if (r.outcome != want) {
      a.failed = true;
      if (r.outcome == Outcome::kBadFormat) a.failure = Outcome::kBadFormat;
    } else if (a.step == 2) {
      for (std::string_view t : *r.tubes) {
        if (!a.who->Owns(t)) a.ignore.emplace_back(t);
      }
    }
  }
  a.step++;
}

void Conversation::KeepCheckedIds(std::vector<uint64_t>* ids) const {
  if (!Scoped()) return;
  std::vector<uint64_t> allowed;
  if (aside_ && aside_->checked) allowed = aside_->allowed;
  std::sort(allowed.begin(), allowed.end());
  std::erase_if(
      *ids, [&](uint64_t id) { return !std::binary_search(allowed.begin(), allowed.end(), id); });
}

Result Conversation::Shown(const Result& r, std::vector<std::string_view>* keep) const {
  if (!Scoped() || r.outcome != Outcome::kTubeList) return r;
  for (std::string_view t : *r.tubes) {
    if (who_->Owns(t)) keep->push_back(t);
  }
  Result shown = r;
  shown.tubes = keep;
  return shown;
}

}  // namespace stalkd::protocol
