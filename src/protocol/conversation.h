#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "engine/engine.h"
#include "protocol/command.h"
#include "protocol/reply.h"

namespace stalkd::protocol {

// One client's side of the protocol, without sockets: bytes in, reply bytes out. It frames
// command lines and job bodies, calls the engine, and formats replies in order. The network
// layer feeds it what it reads and writes out what it produces; tests and fuzzers drive it
// directly.
class Conversation {
 public:
  // `engine` and `host` must outlive the Conversation. `owner` is handed to the engine
  // session so events can be routed back to whoever owns this conversation.
  Conversation(engine::Engine& engine, const Host& host, void* owner);
  // Discards a half-received job and closes the engine session (releasing reserved jobs).
  ~Conversation();
  Conversation(const Conversation&) = delete;
  Conversation& operator=(const Conversation&) = delete;

  // Input: reserve room for up to n bytes, write into it, then commit what was written.
  char* PrepareInput(size_t n);
  void CommitInput(size_t n);

  // Processes buffered input (and pending kick slices) until input runs out, the
  // conversation blocks (waiting in reserve, closing, output above the high-water mark) or
  // `max_steps` commands/slices were handled. Returns true if it stopped only because of
  // `max_steps`, i.e. it can make progress right away if run again.
  bool Run(size_t max_steps);

  // Completes a waiting reserve with the engine's outcome.
  void OnEvent(const engine::Event& ev);
  // The peer will send nothing more. A waiting reserve is answered TIMED_OUT, as beanstalkd
  // does; the conversation then closes once its output is flushed.
  void OnInputClosed();

  std::string& output() { return out_; }
  bool closing() const { return state_ == State::kClosing; }
  bool waiting() const { return state_ == State::kWaiting; }
  bool input_closed() const { return input_closed_; }
  // True if Run() could make progress now (a kick in progress, or buffered input that was
  // not already found incomplete).
  bool runnable() const;
  size_t buffered_input() const { return in_end_ - in_begin_; }
  // How far the binlog must be written (under -f 0: synced) before the output so far may
  // be sent (engine::JobLog::Mark). It only grows.
  int64_t need_mark() const { return need_mark_; }
  size_t input_capacity() const { return in_capacity_; }  // 0 whenever nothing is buffered
  engine::Session* session() const { return session_; }

  // Output above this stops command processing until the peer reads it.
  static constexpr size_t kOutputHighWater = 1 << 20;
  // Jobs kicked per step; a large kick is spread over several steps.
  static constexpr uint32_t kKickSlice = 1000;

 private:
  enum class State : uint8_t {
    kCommand,
    kBody,
    kSkipBody,
    kSkipLine,
    kWaiting,
    kKicking,
    kClosing
  };

  bool RunSteps(size_t max_steps);
  void Execute(std::string_view line);
  void StartPut(const Command& cmd);
  void FinishPut();
  void Skip(uint64_t bytes, const std::string_view* reply_after);
  void KickStep();
  // A reply may reflect every change so far; one showing a job depends on that job only.
  void DependOnAll() { need_mark_ = std::max(need_mark_, engine_.LogMark()); }
  void Reply(std::string_view s) {
    DependOnAll();
    out_.append(s);
  }
  void ReplyJob(std::string_view word, const engine::Job& j);
  void ReplyYaml(const std::string& body);
  void ReplyLine(const char* word, uint64_t n);
  void Consume(size_t n) { in_begin_ += static_cast<uint32_t>(n); }
  void ReallocateInput(size_t capacity);

  // One per open connection, so kept small: 32-bit input offsets, flags packed beside them,
  // and one counter shared by the states that count bytes.
  engine::Engine& engine_;
  const Host& host_;
  engine::Session* session_;

  // Buffered input is in_[in_begin_, in_end_). Freed whenever Run() leaves it empty, so an
  // idle connection holds no input buffer.
  std::unique_ptr<char[]> in_;
  uint32_t in_capacity_ = 0;
  uint32_t in_begin_ = 0;
  uint32_t in_end_ = 0;

  State state_ = State::kCommand;
  bool input_closed_ = false;
  bool needs_input_ = false;  // Run() stopped because the buffered input is incomplete
  bool kick_buried_ = false;  // kKicking: which list the kick started on

  std::string out_;

  engine::Job* in_job_ = nullptr;  // kBody: the job whose body is arriving
  // kBody: bytes of data (body + CRLF) still to arrive; kSkipBody: bytes still to discard.
  uint64_t bytes_left_ = 0;
  const std::string_view* skip_reply_ = nullptr;  // kSkipBody: the reply once skipped
  uint32_t kick_left_ = 0;                        // kKicking
  uint32_t kicked_ = 0;                           // kKicking
  int64_t need_mark_ = 0;
};

}  // namespace stalkd::protocol
