#include "protocol/conversation.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "base/check.h"
#include "protocol/reply.h"

namespace stalkd::protocol {

using command::Outcome;
using command::Result;

namespace {

// The first CRLF in p[0, n), or null.
const char* FindCrlf(const char* p, size_t n) {
  for (const char* q = p; (q = static_cast<const char*>(std::memchr(q, '\r', p + n - q))); q++) {
    if (q + 1 < p + n && q[1] == '\n') return q;
  }
  return nullptr;
}

}  // namespace

Conversation::Conversation(command::Store& store, command::Client& client)
    : session_(store.Open(client)), observer_(store.observer()) {}

Conversation::Conversation(command::Store& store, const command::AuthPolicy& auth,
                           command::Client& client)
    : Conversation(store, client) {
  if (auth.authenticator) auth_ = &auth;
}

void Conversation::Timed() {
  if (observer_ && started_ != 0) {
    observer_->OnCommand(verb_, observer_->Now() - started_);
    started_ = 0;
  }
}

Conversation::~Conversation() = default;

char* Conversation::PrepareInput(size_t n) {
  size_t used = in_end_ - in_begin_;
  if (used == 0) in_begin_ = in_end_ = 0;
  if (in_end_ + n > in_capacity_) {
    // The offsets are 32-bit; the server never buffers more than a few hundred KiB.
    constexpr size_t kMaxCapacity = UINT32_MAX / 2;
    STALKD_CHECK(n <= kMaxCapacity - used);
    if (used + n <= in_capacity_) {
      std::memmove(in_.get(), in_.get() + in_begin_, used);
      in_begin_ = 0;
      in_end_ = static_cast<uint32_t>(used);
    } else {
      ReallocateInput(std::min(std::max(used + n, size_t{in_capacity_} * 2), kMaxCapacity));
    }
  }
  return in_.get() + in_end_;
}

void Conversation::ReallocateInput(size_t capacity) {
  size_t used = in_end_ - in_begin_;
  STALKD_DCHECK(used <= capacity);
  std::unique_ptr<char[]> block;
  if (capacity > 0) {
    block = std::make_unique_for_overwrite<char[]>(capacity);
    if (used > 0) std::memcpy(block.get(), in_.get() + in_begin_, used);
  }
  in_ = std::move(block);
  in_capacity_ = static_cast<uint32_t>(capacity);
  in_begin_ = 0;
  in_end_ = static_cast<uint32_t>(used);
}

void Conversation::CommitInput(size_t n) {
  STALKD_DCHECK(in_end_ + n <= in_capacity_);
  in_end_ += static_cast<uint32_t>(n);
  needs_input_ = false;
}

bool Conversation::runnable() const {
  switch (state_) {
    case State::kWaiting:
    case State::kClosing:
      return false;
    case State::kPutMany:  // a put-many goes on with its next entry: it needs no input
    case State::kAside:    // so does an aside call's next one
      return true;
    default:
      return in_end_ > in_begin_ && !needs_input_;
  }
}

bool Conversation::Run(size_t max_steps) {
  bool more = RunSteps(max_steps);
  size_t left = in_end_ - in_begin_;
  if (left == 0) {
    // Everything was consumed: free the buffer (the next read allocates what it needs), so
    // idle connections hold none.
    if (in_) ReallocateInput(0);
  } else if (left < 4096 && in_capacity_ > 128 * 1024) {
    // Don't keep a big buffer for a few leftover bytes (after a flood of pipelined input).
    // Above what one read needs (64 KiB on top of a partial line), so steady reading never
    // reallocates.
    ReallocateInput(left);
  }
  return more;
}

bool Conversation::RunSteps(size_t max_steps) {
  needs_input_ = false;
  size_t steps = 0;
  while (out_.size() < kOutputHighWater) {
    const char* p = in_.get() + in_begin_;
    size_t avail = in_end_ - in_begin_;
    switch (state_) {
      case State::kWaiting:
      case State::kClosing:
        return false;
      case State::kCommand: {
        if (avail == 0) return false;
        if (steps == max_steps) return true;
        size_t limit = kMaxLineLength;
        const char* cr = FindCrlf(p, std::min(avail, limit));
        if (!cr && avail >= limit && StartsExtensionLine({p, avail})) {
          limit = kMaxExtensionLineLength;
          cr = FindCrlf(p, std::min(avail, limit));
        }
        if (!cr) {
          if (avail < limit) {
            needs_input_ = true;
            return false;
          }
          if (first_pending_ || later_) {  // its reply waits for theirs
            state_ = State::kWaiting;
            return false;
          }
          // An overlong line: refuse it once and drop the rest of it, keeping the last byte
          // in case it is the '\r' of the line's CRLF.
          Reply(Outcome::kBadFormat);
          Consume(limit - 1);
          state_ = State::kSkipLine;
          steps++;
          continue;
        }
        std::string_view line(p, static_cast<size_t>(cr - p));
        if (first_pending_ || later_) {
          if (!MayPipeline(line)) {
            state_ = State::kWaiting;  // until the pending results are in
            return false;
          }
          if (first_pending_) {
            // From now on every reply queues behind the pending one.
            later_ = std::make_unique<std::deque<Later>>();
            later_->push_back({{}, started_, verb_, false, pending_reserve_, pending_extended_});
            first_pending_ = pending_reserve_ = pending_extended_ = false;
            started_ = 0;
          }
        }
        Consume(line.size() + 2);
        steps++;
        Execute(line);
        continue;
      }
      case State::kSkipLine: {
        if (avail < 2) {
          needs_input_ = avail > 0;
          return false;
        }
        const char* end = p + avail;
        const char* q = p;
        while ((q = static_cast<const char*>(std::memchr(q, '\r', end - q))) && q + 1 < end &&
               q[1] != '\n') {
          q++;
        }
        if (q && q + 1 < end) {
          Consume(static_cast<size_t>(q - p) + 2);
          state_ = State::kCommand;
        } else {
          Consume(avail - 1);
          needs_input_ = true;
          return false;
        }
        continue;
      }
      case State::kBody: {
        if (avail == 0) return false;
        size_t n = static_cast<size_t>(std::min<uint64_t>(bytes_left_, avail));
        std::memcpy(body_end_ - bytes_left_, p, n);
        bytes_left_ -= n;
        Consume(n);
        if (bytes_left_ == 0) FinishPut();
        continue;
      }
      case State::kBlock: {
        if (avail == 0) return false;
        size_t n = static_cast<size_t>(std::min<uint64_t>(bytes_left_, avail));
        put_many_->block.append(p, n);
        bytes_left_ -= n;
        Consume(n);
        if (bytes_left_ == 0) FinishPutMany();
        continue;
      }
      case State::kPutMany:
        ContinuePutMany();
        continue;
      case State::kAside:
        ContinueAside();
        continue;
      case State::kSkipBody: {
        size_t n = static_cast<size_t>(std::min<uint64_t>(bytes_left_, avail));
        Consume(n);
        bytes_left_ -= n;
        if (bytes_left_ > 0) return false;
        Reply(skip_reply_);
        state_ = State::kCommand;
        continue;
      }
    }
  }
  return false;
}

void Conversation::Reply(Outcome o) { Answer(Result::Of(o)); }

bool Conversation::MayPipeline(std::string_view line) const {
  // Not while the output is already past its mark (what goes ahead adds to it), nor a
  // put-many, whose puts' results OnResult takes into its own reply.
  // Nor a namespace's command whose ids are checked first (its check is a call of its own).
  Command cmd;
  return !put_many_ && out_.size() < kOutputHighWater &&
         ParseCommand(line, &cmd) == ParseStatus::kOk && cmd.verb != Verb::kPutMany &&
         !(Scoped() && NeedsIdCheck(cmd.verb)) && session_->CanPipeline(cmd.verb);
}

void Conversation::Answer(const Result& r, bool reserve, bool extended) {
  bool pending = r.outcome == Outcome::kPending;
  if (later_) {
    Later l{{}, started_, verb_, !pending, pending && reserve, pending && extended};
    if (!pending) {
      Encode(r, &l.reply, extended);
      Timed();
    }
    started_ = 0;
    later_->push_back(std::move(l));
    return;
  }
  STALKD_DCHECK(!first_pending_);
  if (pending) {
    first_pending_ = true;
    pending_reserve_ = reserve;
    pending_extended_ = extended;
    return;
  }
  Encode(r, &out_, extended);
  Timed();
}

void Conversation::Encode(const Result& r, std::string* out, bool extended) const {
  if (!auth_) return AppendReply(r, out, extended);
  std::vector<std::string_view> keep;
  AppendReply(Shown(r, &keep), out, extended);
}

// A reserve that waits ends when its client goes away; once it is answered, a client that
// has gone is answered nothing more (DEADLINE_SOON, answered before waiting, is not).
void Conversation::AnswerReserve(const Result& r) {
  Answer(r, true);
  if (r.outcome == Outcome::kPending) {
    if (input_closed_) OnInputClosed();  // nobody could ever read a later reply
  } else if (r.outcome != Outcome::kDeadlineSoon && input_closed_) {
    state_ = State::kClosing;
  }
}

void Conversation::OnResult(const Result& r) {
  // Only a conversation waiting for a result gets one; a reserved job nobody hears of
  // would be lost.
  STALKD_CHECK(waiting() && r.outcome != Outcome::kPending);
  if (aside_ && state_ == State::kWaiting) {
    // An aside call's: Run makes the next (or runs the command the calls were for).
    TakeAside(r);
    state_ = State::kAside;
    return;
  }
  if (put_many_ && state_ != State::kBlock) {
    // One of put-many's puts: its reply waits for the others'; Run makes the next.
    STALKD_CHECK(state_ == State::kWaiting);
    AppendReply(r, &put_many_->replies);
    state_ = State::kPutMany;
    return;
  }
  bool reserve;
  if (later_) {
    // The oldest pending result (the ones before it have gone out), then the replies
    // behind it that are ready.
    Later& first = later_->front();
    STALKD_CHECK(!first.ready);
    reserve = first.reserve;
    Encode(r, &out_, first.extended);
    if (observer_ && first.started != 0) {
      observer_->OnCommand(first.verb, observer_->Now() - first.started);
    }
    later_->pop_front();
    if (close_after_ && r.outcome == Outcome::kTimedOut) later_->clear();
    while (!later_->empty() && later_->front().ready) {
      out_.append(later_->front().reply);
      later_->pop_front();
    }
    if (!later_->empty()) {
      // A line held back may go ahead now (the session bounds what it has in flight).
      if (state_ == State::kWaiting) state_ = State::kCommand;
      return;
    }
    later_.reset();
  } else {
    STALKD_CHECK(first_pending_);
    first_pending_ = false;
    reserve = pending_reserve_;
    bool extended = pending_extended_;
    pending_reserve_ = pending_extended_ = false;
    Encode(r, &out_, extended);
    Timed();
  }
  if (state_ == State::kWaiting) state_ = State::kCommand;
  if (reserve && input_closed_) state_ = State::kClosing;
  if (close_after_ && r.outcome == Outcome::kTimedOut) state_ = State::kClosing;
}

void Conversation::OnInputClosed() {
  input_closed_ = true;
  if (!ReservePending()) return;
  // beanstalkd never reads the commands behind a waiting reserve once its client has gone:
  // reserves pipelined behind it are dropped unanswered (AbandonReserve ends them all). A
  // session that let anything else go ahead of a reserve answers that too, so the wait
  // then ends by its timeout.
  if (later_ &&
      !std::all_of(later_->begin(), later_->end(), [](const Later& l) { return l.reserve; })) {
    return;
  }
  Result r = session_->CloseReserve();
  if (r.outcome == Outcome::kPending) {
    close_after_ = true;  // its answer, and those of the reserves behind it, are coming
    return;
  }
  first_pending_ = pending_reserve_ = pending_extended_ = false;
  later_.reset();
  AppendReply(r, &out_);
  state_ = State::kClosing;
}

void Conversation::Skip(uint64_t bytes, Outcome reply_after) {
  bytes_left_ = bytes;
  skip_reply_ = reply_after;
  state_ = State::kSkipBody;
}

void Conversation::StartPut(const Command& cmd) {
  StartPut({cmd.pri, cmd.delay, cmd.ttr, cmd.bytes, cmd.trailing_garbage});
}

void Conversation::StartPut(const command::PutArgs& args) {
  command::PutSlot slot = session_->BeginPut(args);
  if (!slot.data) {
    // A put refused for its line is answered at once; one refused for its body (too big,
    // no room) once the body has been skipped.
    if (slot.refusal == Outcome::kBadFormat) return Reply(slot.refusal);
    return Skip(uint64_t{args.bytes} + 2, slot.refusal);
  }
  body_end_ = slot.data + slot.size;
  bytes_left_ = slot.size;
  state_ = State::kBody;
}

void Conversation::FinishPut() {
  state_ = State::kCommand;
  if (std::memcmp(body_end_ - 2, "\r\n", 2) != 0) {
    session_->AbandonPut();
    return Reply(Outcome::kExpectedCrlf);
  }
  Answer(session_->CommitPut());
}

void Conversation::Execute(std::string_view line) {
  if (auth_ && IsAuthLine(line)) return ExecuteAuth(line);
  Command cmd;
  switch (ParseCommand(line, &cmd)) {
    case ParseStatus::kOk:
      break;
    case ParseStatus::kBadFormat:
      return Reply(Outcome::kBadFormat);
    case ParseStatus::kUnknownCommand:
      return Reply(Outcome::kUnknownCommand);
  }
  if (observer_) {
    verb_ = cmd.verb;
    started_ = observer_->Now();
  }
  if (auth_ && !Admitted(line, cmd)) return;
  switch (cmd.verb) {
    case Verb::kPut:
      return StartPut(cmd);
    case Verb::kQuit:
      state_ = State::kClosing;
      return;
    case Verb::kReserve:
    case Verb::kReserveWithTimeout:
      return AnswerReserve(Call(cmd));
    default:
      if (IsExtension(cmd.verb)) return ExecuteExtension(cmd);
      return Answer(Call(cmd), false, cmd.extended);
  }
}

}  // namespace stalkd::protocol
