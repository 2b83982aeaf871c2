#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "command/front_end.h"
#include "command/store.h"
#include "protocol/command.h"

namespace stalkd::protocol {

// A put-many under way: the replies of its puts so far (the entries: extensions.cc).
struct PutManyBatch {
  virtual ~PutManyBatch() = default;
  std::string replies;
};

// One client of the beanstalkd text protocol, without sockets: bytes in, reply bytes out.
// It frames command lines and job bodies, parses each line, calls its store session
// (Call, in handlers.cc: one line per verb) and appends the encoded result (reply.h). A
// result that is pending (a reserve that waits, a long kick) blocks the conversation until
// it arrives through OnResult; further pipelined commands wait in the buffer, as in
// beanstalkd. The server feeds it what it reads and writes out what it produces; tests and
// fuzzers drive it directly.
class Conversation final : public command::FrontEnd {
 public:
  // Opens a session on `store`; its late results go to `client`, which forwards them to
  // OnResult. Both must outlive the Conversation.
  Conversation(command::Store& store, command::Client& client);
  // Closes the session: a half-received job is discarded, reserved jobs go back.
  ~Conversation() override;
  Conversation(const Conversation&) = delete;
  Conversation& operator=(const Conversation&) = delete;

  char* PrepareInput(size_t n) override;
  void CommitInput(size_t n) override;
  // Processes buffered input until it runs out, the conversation blocks (a pending result,
  // closing, output above the high-water mark) or `max_steps` commands were handled.
  // Returns true if it stopped only because of `max_steps`.
  bool Run(size_t max_steps) override;
  // Completes the pending command with its result.
  void OnResult(const command::Result& r) override;
  // The peer will send nothing more. A waiting reserve is answered TIMED_OUT, as beanstalkd
  // does; the conversation then closes once its output is flushed.
  void OnInputClosed() override;

  std::string& output() override { return out_; }
  bool closing() const override { return state_ == State::kClosing; }
  bool waiting() const override { return state_ == State::kWaiting; }
  bool waiting_for_client() const override { return waiting() && pending_reserve_; }
  bool input_closed() const override { return input_closed_; }
  // True if Run() could make progress now (buffered input not already found incomplete).
  bool runnable() const override;
  size_t buffered_input() const override { return in_end_ - in_begin_; }
  const command::Session& session() const override { return *session_; }
  size_t input_capacity() const { return in_capacity_; }  // 0 whenever nothing is buffered

 private:
  enum class State : uint8_t {
    kCommand,
    kBody,
    kBlock,    // put-many's block arriving into block_
    kPutMany,  // put-many's puts under way: the next one is made by Run
    kSkipBody,
    kSkipLine,
    kWaiting,
    kClosing
  };

  bool RunSteps(size_t max_steps);
  void Execute(std::string_view line);
  // The store call for one parsed command line (handlers.cc).
  command::Result Call(const Command& cmd);
  void Answer(const command::Result& r);
  void AnswerReserve(const command::Result& r);
  void StartPut(const Command& cmd);
  void StartPut(const command::PutArgs& args);
  void FinishPut();
  // The extension commands (extensions.cc).
  void ExecuteExtension(const Command& cmd);
  void StartPutExt(std::string_view args);
  void StartPutMany(std::string_view args);
  void FinishPutMany();
  // Makes put-many's puts until one is pending (then OnResult takes its reply and Run
  // makes the next) or all are made (then the reply goes out).
  void ContinuePutMany();
  void Reply(command::Outcome o);
  // The command begun at started_ has its reply: its latency goes to observer_.
  void Timed();
  void Skip(uint64_t bytes, command::Outcome reply_after);
  void Consume(size_t n) { in_begin_ += static_cast<uint32_t>(n); }
  void ReallocateInput(size_t capacity);

  // One per open connection, so kept small: 32-bit input offsets, flags packed beside them,
  // and one counter shared by the states that count bytes.
  std::unique_ptr<command::Session> session_;
  command::Observer* observer_;  // the store's, for command latencies; null: not measured
  Nanos started_ = 0;            // when the command being answered was read (with observer_)

  // Buffered input is in_[in_begin_, in_end_). Freed whenever Run() leaves it empty, so an
  // idle connection holds no input buffer.
  std::unique_ptr<char[]> in_;
  uint32_t in_capacity_ = 0;
  uint32_t in_begin_ = 0;
  uint32_t in_end_ = 0;

  State state_ = State::kCommand;
  command::Verb verb_ = command::Verb::kUnknown;  // the command being answered (observer_)
  bool input_closed_ = false;
  bool needs_input_ = false;      // Run() stopped because the buffered input is incomplete
  bool pending_reserve_ = false;  // kWaiting: the pending result is a reserve's
  command::Outcome skip_reply_ = command::Outcome::kBadFormat;  // kSkipBody: the reply after

  std::string out_;

  char* body_end_ = nullptr;            // kBody: the end of the put's slot (body + CRLF)
  std::unique_ptr<std::string> block_;  // kBlock: put-many's block (and its CRLF)
  // kPutMany (and kWaiting within it): the block's entries and the replies so far.
  std::unique_ptr<PutManyBatch> put_many_;
  uint32_t block_count_ = 0;  // kBlock: the jobs put-many announced
  // kBody: bytes of data (body + CRLF) still to arrive; kSkipBody: bytes still to discard.
  uint64_t bytes_left_ = 0;
};

}  // namespace stalkd::protocol
