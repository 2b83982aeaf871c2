// Pipelining, differentially: the same command bytes, in the same chunks, go to two clients'
// Conversations over a MemoryStore (every answer at once) and to two over a DeferredStore on
// a second MemoryStore (every answer late, and commands going ahead of pending results:
// Session::CanPipeline, as on the Redis store). After each chunk both sides run until
// nothing is left to do (the stores ticked, no time passing); every client's replies so far
// must then be byte for byte the same on both sides, and so at the end, after the inputs
// close. A client that quit (or whose connection would close) is reconnected on both sides.
// A chunk is one client's: the sides settle before the other client's bytes come, since
// between clients late answers are a different interleaving, not a different result.
//
// Input: ops, each a byte `code` and its arguments; the client is code % 2, and code / 2 % 4
// says what: 0-2 a dictionary command (Command: two more bytes), 3 raw bytes (a length byte
// % 32, then that many bytes). An op whose code / 8 % 4 is 0 ends the chunk, and so does the
// next op's being another client's.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#define FUZZ_NAME "pipeline_fuzz"
#include "base/check.h"
#include "base/clock.h"
#include "command/store.h"
#include "fuzz_support.h"
#include "protocol/conversation.h"
#include "store/deferred_store.h"
#include "store/memory_store.h"

namespace {

using stalkd::fuzz::Format;
using stalkd::fuzz::Input;

constexpr int kClients = 2;
constexpr uint32_t kMaxJobSize = 64;

// A dictionary command from two bytes (ids and counts are small, so they meet real jobs).
std::string Command(uint8_t which, uint8_t arg) {
  unsigned id = arg % 8, tube = arg % 3;
  switch (which % 26) {
    case 0:
    case 1:
      return Format("put %u 0 %u %u\r\n%s\r\n", arg % 4 * 512, arg % 3 + 1, arg % 5,
                    std::string(arg % 5, 'x').c_str());
    case 2:
      return "reserve-with-timeout 0\r\n";
    case 3:
      return "reserve\r\n";
    case 4:
      return Format("delete %u\r\n", id);
    case 5:
      return Format("release %u %u 0\r\n", id, arg % 2 * 2048);
    case 6:
      return Format("bury %u 0\r\n", id);
    case 7:
      return Format("touch %u\r\n", id);
    case 8:
      return Format("peek %u\r\n", id);
    case 9:
      return arg % 3 == 0   ? "peek-ready\r\n"
             : arg % 3 == 1 ? "peek-delayed\r\n"
                            : "peek-buried\r\n";
    case 10:
      return Format("kick %u\r\n", arg % 4);
    case 11:
      return Format("kick-job %u\r\n", id);
    case 12:
      return Format("use t%u\r\n", tube);
    case 13:
      return Format("watch t%u\r\n", tube);
    case 14:
      return Format("ignore t%u\r\n", tube);
    case 15:
      return arg % 3 == 0   ? "list-tubes\r\n"
             : arg % 3 == 1 ? "list-tube-used\r\n"
                            : "list-tubes-watched\r\n";
    case 16:
      return Format("stats-job %u\r\n", id);
    case 17:
      return Format("stats-tube t%u\r\n", tube);
    case 18:
      return Format("put 0 %u 10 1\r\ny\r\n", arg % 2 * 100);
    case 19:
      return Format("put-ext 1 0 10 1 key=k%u tries=%u\r\nz\r\n", arg % 3, arg % 3 + 1);
    case 20:
      return Format("reserve-ext 0 count=%u\r\n", arg % 3 + 1);
    case 21:
      return Format("delete-many %u %u\r\n", id, (id + 1) % 8);
    case 22:
      return Format("purge t%u all\r\n", tube);
    case 23:
      return "put-many 2 20\r\n0 0 10 1\r\na\r\n0 0 10 1\r\nb\r\n\r\n";
    case 24:
      return "stats\r\n";
    default:
      return arg % 4 == 0 ? "quit\r\n" : Format("pause-tube t%u 0\r\n", tube);
  }
}

// One side: a store, and per client a Conversation whose late results it forwards.
class Side {
 public:
  explicit Side(bool deferred) : memory_(clock_, {{}, kMaxJobSize}, &host_), deferred_(memory_) {
    store_ = deferred ? static_cast<stalkd::command::Store*>(&deferred_) : &memory_;
    for (int c = 0; c < kClients; c++) Connect(c);
  }
  ~Side() {
    for (auto& c : clients_) c.conv.reset();
  }

  void Feed(int c, std::string_view bytes) {
    stalkd::protocol::Conversation& conv = *clients_[c].conv;
    if (bytes.empty() || conv.closing() || conv.input_closed()) return;
    char* p = conv.PrepareInput(bytes.size());
    std::memcpy(p, bytes.data(), bytes.size());
    conv.CommitInput(bytes.size());
  }

  void CloseInputs() {
    for (auto& c : clients_) {
      if (!c.conv->input_closed()) c.conv->OnInputClosed();
    }
  }

  // Runs the conversations and ticks the store until nothing is left to do: client
  // `first` (if any) alone first, so that what the other clients do next (a reserve its put
  // woke) comes after all of its chunk on both sides, whichever of its commands waited.
  void Settle(int first) {
    for (int pass = first < 0 ? 1 : 0; pass < 2; pass++) {
      auto may_run = [&](int k) {
        return (pass == 1 || k == first) && clients_[k].conv->runnable();
      };
      for (int round = 0; round < 100000; round++) {
        bool busy = false;
        for (int k = 0; k < kClients; k++) {
          if (may_run(k)) {
            clients_[k].conv->Run(64);
            busy = true;
          }
        }
        store_->Tick();
        // The tick may have answered a conversation that waited (it can run again).
        for (int k = 0; k < kClients; k++) busy = busy || may_run(k);
        if (!busy && !store_->Busy()) break;
      }
    }
    for (auto& c : clients_) {
      c.replies += c.conv->output();
      c.conv->output().clear();
    }
  }

  const std::string& replies(int c) const { return clients_[c].replies; }
  bool closing(int c) const { return clients_[c].conv->closing(); }

  // A connection the server would close now (quit, or its input closed and answered).
  void Reconnect(int c) {
    clients_[c].conv.reset();
    Connect(c);
  }

 private:
  struct Client final : stalkd::command::Client {
    void OnResult(const stalkd::command::Result& r) override { conv->OnResult(r); }
    std::unique_ptr<stalkd::protocol::Conversation> conv;
    std::string replies;
  };
  void Connect(int c) {
    clients_[c].conv = std::make_unique<stalkd::protocol::Conversation>(*store_, clients_[c]);
  }

  stalkd::FakeClock clock_;
  stalkd::fuzz::StubHost host_;
  stalkd::store::MemoryStore memory_;
  stalkd::store::DeferredStore deferred_;
  stalkd::command::Store* store_;
  Client clients_[kClients];
};

void Compare(const Side& now, const Side& late, const char* when) {
  for (int c = 0; c < kClients; c++) {
    FUZZ_CHECK(now.replies(c) == late.replies(c),
               "%s, client %d: at once %zu bytes, late %zu bytes:\n%s\n---\n%s", when, c,
               now.replies(c).size(), late.replies(c).size(), now.replies(c).c_str(),
               late.replies(c).c_str());
    FUZZ_CHECK(now.closing(c) == late.closing(c), "%s, client %d: closing differs", when, c);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, std::min<size_t>(size, 4096));
  Side now(false), late(true);
  int last = -1;
  auto settle = [&](const char* when) {
    now.Settle(last);
    late.Settle(last);
    Compare(now, late, when);
    bool reconnected = false;
    for (int k = 0; k < kClients; k++) {
      if (now.closing(k)) {
        now.Reconnect(k);
        late.Reconnect(k);
        reconnected = true;
      }
    }
    // A connection's end releases its reserved jobs: at once on one side, by the next tick on
    // the other. Both sides settle that before anything else happens (a waiting reserve of
    // the other client gets such a job on both sides, before its own input can close).
    if (reconnected) {
      now.Settle(-1);
      late.Settle(-1);
      Compare(now, late, "after a connection ended");
    }
  };
  while (!in.empty()) {
    uint8_t code = in.Byte();
    int c = code % 2;
    if (c != last && last >= 0) settle("before another client's chunk");
    last = c;
    std::string bytes;
    if (code / 2 % 4 < 3) {
      uint8_t which = in.Byte();
      bytes = Command(which, in.Byte());
    } else {
      bytes = std::string(in.Bytes(in.Byte() % 32));
    }
    now.Feed(c, bytes);
    late.Feed(c, bytes);
    if (code / 8 % 4 == 0) settle("after a chunk");
  }
  settle("at the end");
  now.CloseInputs();
  late.CloseInputs();
  now.Settle(-1);
  late.Settle(-1);
  Compare(now, late, "after the inputs closed");
  return 0;
}
