// Commands over a Link (link.h): sent at once when the link is ready (pipelined: appended, and
// written on Flush or at 64 KiB), queued encoded while it is not (link.cc's SetReady writes
// them, its Poll expires them), setup commands ahead of them; and the master's replies, each
// to the oldest command written (the handshake's ROLE and SELECT among them, which link.cc's
// state machine awaits). The deadline of an answer is kept by Poll (link.cc).
#include <string>
#include <utility>

#include "redis/link.h"
#include "redis/link_conn.h"
#include "redis/link_impl.h"
#include "redis/resp.h"

namespace stalkd::redis {

bool Reply::ErrorIs(std::string_view prefix) const {
  return type == Type::kError && std::string_view(str).starts_with(prefix);
}

// ---- Commands

void Link::Impl::SendSetup(std::span<const std::string_view> argv, Callback cb) {
  if (state_ != State::kSetup && state_ != State::kReady) {
    lost_.push_back({std::move(cb), "not connected: " + why_});
    Wake();
    return;
  }
  data_.Append(argv);
  written_.push_back({Written::Kind::kUser, std::move(cb), clock_.Now()});
  user_written_++;
  data_.Flush();
}

void Link::Impl::Send(std::span<const std::string_view> argv, Callback cb) {
  if (state_ != State::kReady) {
    std::string command;
    AppendCommand(command, argv);
    queued_.push_back({std::move(command), std::move(cb), clock_.Now() + retry_window_});
    return;
  }
  data_.Append(argv);
  Sent(std::move(cb));
}

void Link::Impl::SendEncoded(std::string_view command, Callback cb) {
  if (state_ != State::kReady) {
    queued_.push_back({std::string(command), std::move(cb), clock_.Now() + retry_window_});
    return;
  }
  data_.AppendEncoded(command);
  Sent(std::move(cb));
}

void Link::Impl::Sent(Callback cb) {
  written_.push_back({Written::Kind::kUser, std::move(cb), clock_.Now()});
  user_written_++;
  if (data_.unwritten() >= kSendFlushSize) data_.Flush();
}

void Link::Impl::OnMasterReply(Reply& r) {
  if (written_.empty()) return Down(data_.name() + ": a reply to no command");
  Written w = std::move(written_.front());
  written_.pop_front();
  switch (w.kind) {
    case Written::Kind::kRole:
      if (r.type == Reply::Type::kArray && !r.elements.empty() && r.elements[0].str == "master") {
        return HandshakeStep();
      }
      return Down(data_.name() + " is not a master (ROLE: " + Describe(r) + ")");
    case Written::Kind::kSelect:
      if (r.error())
        return Down(data_.name() + ": SELECT " + std::to_string(url_.db) + ": " + r.str);
      return HandshakeStep();
    case Written::Kind::kUser:
      break;
  }
  user_written_--;
  uint64_t generation = data_.generation();
  w.cb(r);
  // A master demoted to a replica (by Sentinel, or by hand) refuses writes.
  if (r.ErrorIs("READONLY") && data_.generation() == generation) {
    Down(data_.name() + " is read-only now: " + r.str);
  }
  RunDeferred();
}

}  // namespace stalkd::redis
