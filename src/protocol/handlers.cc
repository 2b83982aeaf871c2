// The text protocol's verbs: each one call into the store session with the parsed
// arguments. Its result is encoded by AppendReply (reply.cc). put (body framing) and quit
// (the connection's own business) are handled in Conversation::Execute.
#include "protocol/conversation.h"

namespace stalkd::protocol {

command::Result Conversation::Call(const Command& c) {
  command::Session& s = *session_;
  switch (c.verb) {
    case Verb::kReserve:
      return s.Reserve(kForever);
    case Verb::kReserveWithTimeout:
      return s.Reserve(static_cast<Nanos>(c.timeout) * kSecond);
    case Verb::kReserveJob:
      return s.ReserveJob(c.id);
    case Verb::kPeek:
      return s.Peek(c.id);
    case Verb::kPeekReady:
      return s.PeekReady();
    case Verb::kPeekDelayed:
      return s.PeekDelayed();
    case Verb::kPeekBuried:
      return s.PeekBuried();
    case Verb::kDelete:
      return s.Delete(c.id);
    case Verb::kRelease:
      return s.Release(c.id, c.pri, c.delay);
    case Verb::kBury:
      return s.Bury(c.id, c.pri);
    case Verb::kTouch:
      return s.Touch(c.id);
    case Verb::kKick:
      return s.Kick(c.count);
    case Verb::kKickJob:
      return s.KickJob(c.id);
    case Verb::kUse:
      return s.Use(c.tube);
    case Verb::kWatch:
      return s.Watch(c.tube);
    case Verb::kIgnore:
      return s.Ignore(c.tube);
    case Verb::kListTubeUsed:
      return s.ListTubeUsed();
    case Verb::kListTubesWatched:
      return s.ListTubesWatched();
    case Verb::kListTubes:
      return s.ListTubes();
    case Verb::kPauseTube:
      return s.PauseTube(c.tube, c.delay);
    case Verb::kStats:
      return s.Stats();
    case Verb::kStatsJob:
      return s.StatsJob(c.id);
    case Verb::kStatsTube:
      return s.StatsTube(c.tube);
    case Verb::kPut:
    case Verb::kPutExt:  // the extensions: Conversation::ExecuteExtension (extensions.cc)
    case Verb::kPutMany:
    case Verb::kReserveExt:
    case Verb::kDeleteMany:
    case Verb::kPurge:
    case Verb::kListJobs:
    case Verb::kTubeTries:
    case Verb::kQuit:
    case Verb::kUnknown:
    case Verb::kCount:
      break;
  }
  return command::Result::Of(command::Outcome::kUnknownCommand);
}

}  // namespace stalkd::protocol
