#include "protocol/conversation.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"

namespace stalkd::protocol {

using engine::Event;
using engine::Job;
using engine::Op;

namespace {

constexpr std::string_view kBadFormat = "BAD_FORMAT\r\n";
constexpr std::string_view kUnknownCommand = "UNKNOWN_COMMAND\r\n";
constexpr std::string_view kNotFound = "NOT_FOUND\r\n";
constexpr std::string_view kJobTooBig = "JOB_TOO_BIG\r\n";
constexpr std::string_view kOutOfMemory = "OUT_OF_MEMORY\r\n";
constexpr std::string_view kExpectedCrlf = "EXPECTED_CRLF\r\n";

}  // namespace

Conversation::Conversation(engine::Engine& engine, const Host& host, void* owner)
    : engine_(engine), host_(host), session_(engine.OpenSession(owner)) {}

Conversation::~Conversation() {
  if (in_job_) engine_.Discard(in_job_);
  engine_.CloseSession(session_);
}

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
    case State::kKicking:
      return true;
    case State::kWaiting:
    case State::kClosing:
      return false;
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
      case State::kKicking:
        // One slice per Run: a huge kick must not hold up the other connections.
        if (steps++ > 0) return true;
        KickStep();
        continue;
      case State::kCommand: {
        if (avail == 0) return false;
        if (steps == max_steps) return true;
        size_t scan = std::min(avail, kMaxLineLength);
        const char* cr = nullptr;
        for (const char* q = p; (q = static_cast<const char*>(std::memchr(q, '\r', p + scan - q)));
             q++) {
          if (q + 1 < p + scan && q[1] == '\n') {
            cr = q;
            break;
          }
        }
        if (!cr) {
          if (avail < kMaxLineLength) {
            needs_input_ = true;
            return false;
          }
          // An overlong line: refuse it once and drop the rest of it, keeping the last byte
          // in case it is the '\r' of the line's CRLF.
          Reply(kBadFormat);
          Consume(kMaxLineLength - 1);
          state_ = State::kSkipLine;
          steps++;
          continue;
        }
        std::string_view line(p, static_cast<size_t>(cr - p));
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
        std::memcpy(in_job_->data() + (in_job_->data_size() - bytes_left_), p, n);
        bytes_left_ -= n;
        Consume(n);
        if (bytes_left_ == 0) FinishPut();
        continue;
      }
      case State::kSkipBody: {
        size_t n = static_cast<size_t>(std::min<uint64_t>(bytes_left_, avail));
        Consume(n);
        bytes_left_ -= n;
        if (bytes_left_ > 0) return false;
        Reply(*skip_reply_);
        state_ = State::kCommand;
        continue;
      }
    }
  }
  return false;
}

void Conversation::OnEvent(const Event& ev) {
  // Only a waiting session gets events; a reserved job nobody hears of would be lost.
  STALKD_CHECK(state_ == State::kWaiting);
  state_ = State::kCommand;
  switch (ev.kind) {
    case Event::Kind::kReserved:
      ReplyJob("RESERVED", *ev.job);
      break;
    case Event::Kind::kTimedOut:
      Reply("TIMED_OUT\r\n");
      break;
    case Event::Kind::kDeadlineSoon:
      Reply("DEADLINE_SOON\r\n");
      break;
  }
  if (input_closed_) state_ = State::kClosing;
}

void Conversation::OnInputClosed() {
  input_closed_ = true;
  if (state_ == State::kWaiting) {
    engine_.CancelReserve(session_);
    Reply("TIMED_OUT\r\n");
    state_ = State::kClosing;
  }
}

namespace {

// Writes n in decimal at p (at most 20 bytes); returns the end.
char* PutDecimal(char* p, uint64_t n) {
  char digits[20];
  int i = 0;
  do {
    digits[i++] = static_cast<char>('0' + n % 10);
    n /= 10;
  } while (n != 0);
  while (i > 0) *p++ = digits[--i];
  return p;
}

}  // namespace

void Conversation::ReplyJob(std::string_view word, const Job& j) {
  // "WORD id bytes\r\n" then the body and its CRLF, formatted without printf (hot path).
  char tail[48];  // " " 20 digits " " 10 digits "\r\n"
  char* p = tail;
  *p++ = ' ';
  p = PutDecimal(p, j.id);
  *p++ = ' ';
  p = PutDecimal(p, j.body_size);
  *p++ = '\r';
  *p++ = '\n';
  need_mark_ = std::max(need_mark_, engine_.LogMarkOf(j));
  out_.append(word);
  out_.append(tail, p);
  out_.append(j.data(), j.data_size());
}

void Conversation::ReplyYaml(const std::string& body) {
  ReplyLine("OK", body.size());
  out_.append(body);
  out_.append("\r\n");
}

void Conversation::ReplyLine(const char* word, uint64_t n) {
  char tail[32];  // " " 20 digits "\r\n"
  char* p = tail;
  *p++ = ' ';
  p = PutDecimal(p, n);
  *p++ = '\r';
  *p++ = '\n';
  DependOnAll();
  out_.append(word);
  out_.append(tail, p);
}

void Conversation::Skip(uint64_t bytes, const std::string_view* reply_after) {
  bytes_left_ = bytes;
  skip_reply_ = reply_after;
  state_ = State::kSkipBody;
}

void Conversation::StartPut(const Command& cmd) {
  engine_.CountOp(Op::kPut);
  if (cmd.bytes > engine_.max_job_size()) return Skip(uint64_t{cmd.bytes} + 2, &kJobTooBig);
  if (cmd.trailing_garbage) return Reply(kBadFormat);
  in_job_ = engine_.NewJob(session_, cmd.pri, cmd.delay, cmd.ttr, cmd.bytes);
  if (!in_job_) return Skip(uint64_t{cmd.bytes} + 2, &kOutOfMemory);
  bytes_left_ = in_job_->data_size();
  state_ = State::kBody;
}

void Conversation::FinishPut() {
  Job* j = in_job_;
  in_job_ = nullptr;
  state_ = State::kCommand;
  if (std::memcmp(j->data() + j->body_size, "\r\n", 2) != 0) {
    engine_.Discard(j);
    return Reply(kExpectedCrlf);
  }
  uint64_t id = j->id;
  switch (engine_.Put(session_, j)) {
    case engine::Engine::PutResult::kDraining:
      return Reply("DRAINING\r\n");
    case engine::Engine::PutResult::kNotDurable:
      return Reply(kOutOfMemory);
    case engine::Engine::PutResult::kInserted:
      break;
  }
  ReplyLine("INSERTED", id);
}

void Conversation::KickStep() {
  engine::Tube* t = session_->use();
  uint32_t n = std::min(kick_left_, kKickSlice);
  uint32_t k = kick_buried_ ? engine_.KickBuried(t, n) : engine_.KickDelayed(t, n);
  kicked_ += k;
  kick_left_ -= k;
  if (k < n || kick_left_ == 0) {
    state_ = State::kCommand;
    ReplyLine("KICKED", kicked_);
  }
}

void Conversation::Execute(std::string_view line) {
  Command cmd;
  switch (ParseCommand(line, &cmd)) {
    case ParseStatus::kOk:
      break;
    case ParseStatus::kBadFormat:
      // beanstalkd counts a well-formed pause-tube before it checks the tube name.
      if (cmd.verb == Verb::kPauseTube && !cmd.tube.empty()) engine_.CountOp(Op::kPauseTube);
      return Reply(kBadFormat);
    case ParseStatus::kUnknownCommand:
      return Reply(kUnknownCommand);
  }
  engine::Session* s = session_;
  switch (cmd.verb) {
    case Verb::kUnknown:
      return Reply(kUnknownCommand);
    case Verb::kPut:
      return StartPut(cmd);
    case Verb::kPeek:
    case Verb::kPeekReady:
    case Verb::kPeekDelayed:
    case Verb::kPeekBuried: {
      const Job* j = nullptr;
      if (cmd.verb == Verb::kPeek) {
        engine_.CountOp(Op::kPeek);
        j = engine_.Find(cmd.id);
      } else if (cmd.verb == Verb::kPeekReady) {
        engine_.CountOp(Op::kPeekReady);
        j = engine_.PeekReady(s->use());
      } else if (cmd.verb == Verb::kPeekDelayed) {
        engine_.CountOp(Op::kPeekDelayed);
        j = engine_.PeekDelayed(s->use());
      } else {
        engine_.CountOp(Op::kPeekBuried);
        j = engine_.PeekBuried(s->use());
      }
      if (!j) return Reply(kNotFound);
      return ReplyJob("FOUND", *j);
    }
    case Verb::kReserve:
    case Verb::kReserveWithTimeout: {
      bool timed = cmd.verb == Verb::kReserveWithTimeout;
      engine_.CountOp(timed ? Op::kReserveWithTimeout : Op::kReserve);
      Nanos timeout = timed ? static_cast<Nanos>(cmd.timeout) * kSecond : kForever;
      if (!engine_.Reserve(s, timeout)) return Reply("DEADLINE_SOON\r\n");
      state_ = State::kWaiting;
      // A reserve that completed at once is answered now, so pipelined commands after it
      // are handled in the same pass.
      engine::Event ev;
      if (engine_.TakeOwnEvent(s, &ev)) {
        OnEvent(ev);
      } else if (input_closed_) {
        OnInputClosed();  // the client is gone: nobody could ever read a later reply
      }
      return;
    }
    case Verb::kReserveJob: {
      engine_.CountOp(Op::kReserveJob);
      const Job* j = engine_.ReserveJob(s, cmd.id);
      if (!j) return Reply(kNotFound);
      return ReplyJob("RESERVED", *j);
    }
    case Verb::kDelete:
      engine_.CountOp(Op::kDelete);
      return Reply(engine_.Delete(s, cmd.id) ? "DELETED\r\n" : kNotFound);
    case Verb::kRelease:
      engine_.CountOp(Op::kRelease);
      return Reply(engine_.Release(s, cmd.id, cmd.pri, cmd.delay) ? "RELEASED\r\n" : kNotFound);
    case Verb::kBury:
      engine_.CountOp(Op::kBury);
      return Reply(engine_.Bury(s, cmd.id, cmd.pri) ? "BURIED\r\n" : kNotFound);
    case Verb::kTouch:
      engine_.CountOp(Op::kTouch);
      return Reply(engine_.Touch(s, cmd.id) ? "TOUCHED\r\n" : kNotFound);
    case Verb::kKick:
      engine_.CountOp(Op::kKick);
      kick_buried_ = !s->use()->buried.empty();
      // Never more than were there when the kick arrived: jobs re-buried between slices by
      // other clients must not be kicked again (beanstalkd does the whole kick at once).
      kick_left_ = static_cast<uint32_t>(std::min<size_t>(
          cmd.count, kick_buried_ ? s->use()->buried.size() : s->use()->delayed.size()));
      kicked_ = 0;
      state_ = State::kKicking;
      return KickStep();  // the first slice now; any further ones in later Runs
    case Verb::kKickJob:
      engine_.CountOp(Op::kKickJob);
      return Reply(engine_.KickJob(cmd.id) ? "KICKED\r\n" : kNotFound);
    case Verb::kStats:
      engine_.CountOp(Op::kStats);
      return ReplyYaml(FormatStats(engine_, host_.CurrentStats()));
    case Verb::kStatsJob: {
      engine_.CountOp(Op::kStatsJob);
      const Job* j = engine_.Find(cmd.id);
      if (!j) return Reply(kNotFound);
      return ReplyYaml(FormatJobStats(engine_, *j));
    }
    case Verb::kStatsTube: {
      engine_.CountOp(Op::kStatsTube);
      const engine::Tube* t = engine_.FindTube(cmd.tube);
      if (!t) return Reply(kNotFound);
      return ReplyYaml(FormatTubeStats(engine_, *t));
    }
    case Verb::kUse:
      engine_.CountOp(Op::kUse);
      engine_.Use(s, cmd.tube);
      // The session's own state: depends on no log record.
      out_.append("USING ").append(s->use()->name()).append("\r\n");
      return;
    case Verb::kWatch:
      engine_.CountOp(Op::kWatch);
      return ReplyLine("WATCHING", engine_.Watch(s, cmd.tube));
    case Verb::kIgnore: {
      engine_.CountOp(Op::kIgnore);
      size_t n = engine_.Ignore(s, cmd.tube);
      if (n == 0) return Reply("NOT_IGNORED\r\n");
      return ReplyLine("WATCHING", n);
    }
    case Verb::kListTubes:
      engine_.CountOp(Op::kListTubes);
      return ReplyYaml(FormatTubeList(engine_.tubes()));
    case Verb::kListTubeUsed:
      engine_.CountOp(Op::kListTubeUsed);
      out_.append("USING ").append(s->use()->name()).append("\r\n");
      return;
    case Verb::kListTubesWatched:
      engine_.CountOp(Op::kListTubesWatched);
      return ReplyYaml(FormatTubeList(s->watch()));
    case Verb::kQuit:
      state_ = State::kClosing;
      return;
    case Verb::kPauseTube:
      engine_.CountOp(Op::kPauseTube);
      return Reply(engine_.PauseTube(cmd.tube, cmd.delay) ? "PAUSED\r\n" : kNotFound);
  }
}

}  // namespace stalkd::protocol
