#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "command/front_end.h"
#include "command/identity.h"
#include "command/store.h"
#include "protocol/command.h"

namespace stalkd::protocol {

// A put-many under way (the entries: extensions.cc): its block while it arrives, then the
// replies of its puts so far. All of it behind one pointer, null while no put-many is under
// way, so that it costs a connection that never sends one 8 bytes.
struct PutManyBatch {
  virtual ~PutManyBatch() = default;
  std::string block;  // the block (and its CRLF); the entries view it
  std::string replies;
  uint32_t count = 0;  // the jobs put-many announced
};

// Calls a conversation makes on its own behalf (auth.cc), each of which may be answered
// late: the tube of each job id a namespace's command names, then the command runs with
// the verdict; or `auth`'s setting of a namespace's tubes. Null while none is under way.
struct Aside {
  enum class Kind : uint8_t { kCheckIds, kAuthSetup };
  Kind kind = Kind::kCheckIds;
  uint32_t step = 0;     // kCheckIds: the id being checked; kAuthSetup: the call
  bool failed = false;   // a call failed: INTERNAL_ERROR (kAuthSetup: or BAD_FORMAT)
  bool checked = false;  // kCheckIds: done; the command line runs again with `allowed`
  std::string line;      // kCheckIds: the command
  std::vector<uint64_t> ids, allowed;      // kCheckIds: named; of the namespace's tubes
  std::unique_ptr<command::Identity> who;  // kAuthSetup: the identity, once set up
  std::vector<std::string> ignore;         // kAuthSetup: watched tubes to ignore
  command::Outcome failure = command::Outcome::kInternalError;  // kAuthSetup's answer then
  bool silent = false;  // kAuthSetup for a certificate (ProvenBy): no reply
};

// One client of the beanstalkd text protocol, without sockets: bytes in, reply bytes out.
// It frames command lines and job bodies, parses each line, calls its store session
// (Call, in handlers.cc: one line per verb) and appends the encoded result (reply.h). A
// result that is pending (a reserve that waits, a long kick) blocks the conversation until
// it arrives through OnResult; further pipelined commands wait in the buffer, as in
// beanstalkd, unless the session lets them go ahead (Session::CanPipeline: a store across
// a network, whose every answer is late); their replies then wait behind the pending ones,
// in order. The server feeds it what it reads and writes out what it produces; tests and
// fuzzers drive it directly.
class Conversation final : public command::FrontEnd {
 public:
  // Opens a session on `store`; its late results go to `client`, which forwards them to
  // OnResult. Both must outlive the Conversation.
  Conversation(command::Store& store, command::Client& client);
  // The same, on a listener whose `auth` follows `auth` (docs/SECURITY.md); it must
  // outlive the Conversation.
  Conversation(command::Store& store, const command::AuthPolicy& auth, command::Client& client);
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
  bool waiting() const override {
    return state_ == State::kWaiting || first_pending_ || later_ != nullptr;
  }
  bool waiting_for_client() const override { return ReservePending(); }
  bool input_closed() const override { return input_closed_; }
  // True if Run() could make progress now (buffered input not already found incomplete).
  bool runnable() const override;
  size_t buffered_input() const override { return in_end_ - in_begin_; }
  const command::Session& session() const override { return *session_; }
  size_t input_capacity() const { return in_capacity_; }  // 0 whenever nothing is buffered
  // Who the client proved to be with `auth` (or its certificate); null: nobody (yet).
  const command::Identity* identity() const { return who_.get(); }
  void ProvenBy(const command::Identity& who) override;

 private:
  enum class State : uint8_t {
    kCommand,
    kBody,
    kBlock,    // put-many's block arriving into block_
    kPutMany,  // put-many's puts under way: the next one is made by Run
    kSkipBody,
    kSkipLine,
    kAside,    // a call of aside_ answered: Run makes the next
    kWaiting,  // blocked until the pending results have arrived
    kClosing
  };

  // A reply in order behind a pending result (pipelining): ready, or a result still pending.
  struct Later {
    std::string reply;  // ready: the encoded reply
    Nanos started = 0;  // with observer_: when its command was read
    command::Verb verb = command::Verb::kUnknown;
    bool ready = false;
    bool reserve = false;   // a reserve's pending result
    bool extended = false;  // a pending stats result of stats-ext & co. (Command::extended)
  };

  bool RunSteps(size_t max_steps);
  void Execute(std::string_view line);
  // The store call for one parsed command line (handlers.cc).
  command::Result Call(const Command& cmd);
  // The current command's result: written, or pending, or held behind pending ones.
  // `extended`: the reply of stats-ext & co. (Command::extended).
  void Answer(const command::Result& r, bool reserve = false, bool extended = false);
  void AnswerReserve(const command::Result& r);
  // Whether the command on `line` may go ahead of the pending results (Session::CanPipeline).
  bool MayPipeline(std::string_view line) const;
  bool ReservePending() const {
    if (close_after_) return false;  // no longer waiting for the client
    return first_pending_ ? pending_reserve_ : (later_ && later_->front().reserve);
  }
  void StartPut(const Command& cmd);
  void StartPut(const command::PutArgs& args);
  void FinishPut();
  // The extension commands (extensions.cc).
  void ExecuteExtension(const Command& cmd);
  void StartPutExt(std::string_view args);
  void StartPutMany(std::string_view args);
  static std::unique_ptr<PutManyBatch> NewPutMany();  // the batch with room for its entries
  void FinishPutMany();
  // Makes put-many's puts until one is pending (then OnResult takes its reply and Run
  // makes the next) or all are made (then the reply goes out).
  void ContinuePutMany();
  void Reply(command::Outcome o);
  // `auth` and what it allows (auth.cc).
  void ExecuteAuth(std::string_view line);
  // Whether `cmd` (read from `line`) may run now for this connection's identity; if not,
  // it has been answered (or an aside call started for it).
  bool Admitted(std::string_view line, const Command& cmd);
  // Answers a refused command whose body, if it has one, is then skipped.
  void Refuse(const Command& cmd, command::Outcome o);
  void StartIdCheck(std::string_view line, std::vector<uint64_t> ids);
  void StartAuthSetup(std::unique_ptr<command::Identity> who, bool silent = false);
  void ContinueAside();
  void TakeAside(const command::Result& r);
  // delete-many's ids that the namespace's identity may touch (those checked).
  void KeepCheckedIds(std::vector<uint64_t>* ids) const;
  bool Scoped() const { return who_ && who_->scoped(); }
  // r as this connection may see it: a namespace's list-tubes shows its tubes only.
  command::Result Shown(const command::Result& r, std::vector<std::string_view>* keep) const;
  void Encode(const command::Result& r, std::string* out, bool extended = false) const;
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
  bool input_closed_ : 1 = false;
  bool needs_input_ : 1 = false;  // Run() stopped because the buffered input is incomplete
  // One result is pending and nothing was made after it: its reply goes straight out.
  bool first_pending_ : 1 = false;
  bool pending_reserve_ : 1 = false;   // first_pending_: the pending result is a reserve's
  bool pending_extended_ : 1 = false;  // first_pending_: it is stats-ext's & co.
  // Input closed while reserves were on their way (Session::CloseReserve): their answers
  // go out until one is TIMED_OUT, then the connection closes.
  bool close_after_ : 1 = false;
  bool revoked_ : 1 = false;  // the identity's token was deleted: auth again
  command::Outcome skip_reply_ = command::Outcome::kBadFormat;  // kSkipBody: the reply after

  std::string out_;
  // While commands were made behind a pending result (pipelining): the replies from the
  // oldest pending one on, in order; each one goes out once those before it have. Null
  // otherwise, so that a connection that never pipelines holds none.
  std::unique_ptr<std::deque<Later>> later_;

  char* body_end_ = nullptr;  // kBody: the end of the put's slot (body + CRLF)
  // kBlock: put-many's block arriving; kPutMany (and kWaiting within it): the block's
  // entries and the replies so far.
  std::unique_ptr<PutManyBatch> put_many_;
  const command::AuthPolicy* auth_ = nullptr;  // null: `auth` is an unknown command
  std::unique_ptr<command::Identity> who_;
  std::unique_ptr<Aside> aside_;  // null unless an aside call is under way
  // kBody: bytes of data (body + CRLF) still to arrive; kSkipBody: bytes still to discard.
  uint64_t bytes_left_ = 0;
};

}  // namespace stalkd::protocol
