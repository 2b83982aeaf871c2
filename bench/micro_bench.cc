// Micro-benchmarks of stalkd's hot paths, without sockets: the engine's put/reserve/delete
// cycle, the command parser, and a whole Conversation turning pipelined bytes into replies.
// Run: build/release/bench/stalkd_micro_bench; for instruction counts that do not drift on a
// noisy machine: valgrind --tool=callgrind build/release/bench/stalkd_micro_bench
//   --benchmark_filter=BM_ConversationCycle --benchmark_min_time=0.05
#include <cstring>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "base/clock.h"
#include "engine/engine.h"
#include "protocol/command.h"
#include "protocol/conversation.h"
#include "store/memory_store.h"

namespace {

using stalkd::FakeClock;
using stalkd::kForever;
using stalkd::kSecond;
using stalkd::engine::Engine;
using stalkd::engine::Event;
using stalkd::engine::Job;

Job* MakeJob(Engine& e, stalkd::engine::Session* s, uint32_t pri, uint32_t delay) {
  Job* j = e.NewJob(s, pri, delay, 60, 100);
  std::memset(j->data(), 'x', 100);
  j->data()[100] = '\r';
  j->data()[101] = '\n';
  return j;
}

// put → reserve → delete against an engine already holding `state.range(0)` ready jobs.
void BM_EngineCycle(benchmark::State& state) {
  FakeClock clock;
  Engine e(clock);
  auto* s = e.OpenSession(nullptr);
  for (int64_t i = 0; i < state.range(0); i++) e.Put(s, MakeJob(e, s, 1000, 0));
  std::vector<Event> events;
  Event ev{};
  for (auto _ : state) {
    e.Put(s, MakeJob(e, s, 0, 0));
    e.Reserve(s, kForever);
    e.TakeOwnEvent(s, &ev);
    e.Delete(s, ev.job->id);
  }
  state.SetItemsProcessed(state.iterations() * 3);
  e.CloseSession(s);
}
BENCHMARK(BM_EngineCycle)->Arg(0)->Arg(100000);

// Promotion of delayed jobs by Tick, 1000 per iteration.
void BM_EngineDelayedPromotion(benchmark::State& state) {
  FakeClock clock;
  Engine e(clock);
  auto* s = e.OpenSession(nullptr);
  for (auto _ : state) {
    state.PauseTiming();
    for (int i = 0; i < 1000; i++) e.Put(s, MakeJob(e, s, 0, 1));
    clock.Advance(2 * kSecond);
    state.ResumeTiming();
    e.Tick();
    state.PauseTiming();
    while (Job* j = e.PeekReady(s->use())) e.Delete(s, j->id);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * 1000);
  e.CloseSession(s);
}
BENCHMARK(BM_EngineDelayedPromotion);

void BM_ParseCommand(benchmark::State& state) {
  const std::string_view lines[] = {"put 0 0 60 100",     "reserve",
                                    "delete 123456",      "release 99 1024 5",
                                    "stats-tube default", "use emails"};
  stalkd::protocol::Command cmd;
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(stalkd::protocol::ParseCommand(lines[i++ % 6], &cmd));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ParseCommand);

class NoClient final : public stalkd::command::Client {
 public:
  void OnResult(const stalkd::command::Result&) override {}
};

// Bytes in → bytes out: 100 pipelined put/reserve/delete triples per iteration.
void BM_ConversationCycle(benchmark::State& state) {
  FakeClock clock;
  stalkd::store::MemoryStore store(clock, {}, nullptr);
  NoClient client;
  stalkd::protocol::Conversation c(store, client);
  std::string body(100, 'x');
  std::string input;
  // Ids are predictable: each iteration puts 100 jobs.
  uint64_t next_id = 1;
  for (auto _ : state) {
    state.PauseTiming();
    input.clear();
    for (int i = 0; i < 100; i++) {
      input += "put 0 0 60 100\r\n" + body + "\r\nreserve\r\ndelete " + std::to_string(next_id++) +
               "\r\n";
    }
    state.ResumeTiming();
    char* p = c.PrepareInput(input.size());
    std::memcpy(p, input.data(), input.size());
    c.CommitInput(input.size());
    while (c.Run(1000)) {
    }
    benchmark::DoNotOptimize(c.output().data());
    c.output().clear();
  }
  state.SetItemsProcessed(state.iterations() * 300);
}
BENCHMARK(BM_ConversationCycle);

}  // namespace
