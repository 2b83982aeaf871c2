// Micro-benchmarks of stalkd's hot paths, without sockets: the engine's put/reserve/delete
// cycle, the command parser, a whole Conversation turning pipelined bytes into replies, and
// an idle Tick of the disk tier with many tubes.
// Run: build/release/bench/stalkd_micro_bench; for instruction counts that do not drift on a
// noisy machine: valgrind --tool=callgrind build/release/bench/stalkd_micro_bench
//   --benchmark_filter=BM_ConversationCycle --benchmark_min_time=0.05
#include <cstring>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "base/clock.h"
#include "engine/cold_hooks.h"
#include "engine/engine.h"
#include "engine/tube.h"
#include "protocol/command.h"
#include "protocol/conversation.h"
#include "storage/cold_store.h"
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

// The disk tier's reader with nothing behind it: every job may leave memory, and none is read
// back (an idle Tick reads none).
class NoReader final : public stalkd::engine::ColdReader {
 public:
  bool Demotable(const Job&) const override { return true; }
  bool Read(uint64_t, std::string*, stalkd::engine::RestoredJob*) override { return false; }
  Rewrite RewriteWhole(const Job&) override { return Rewrite::kNo; }
  bool RewritePending(const Job&) const override { return false; }
  size_t RewritesUnwritten() const override { return 0; }
};

// What a Tick did before for ready jobs with nothing changed: every tube with ready jobs on
// disk listed, and each one's first on disk compared with its first in memory, and its count
// with the refill mark (1 with ready_hot 2).
size_t OldIdleWalk(const stalkd::storage::ColdStore& cold,
                   std::vector<const stalkd::engine::Tube*>* tubes) {
  using Key = stalkd::storage::ColdReadyIndex::Key;
  tubes->clear();
  cold.ready_index().ForEachTube([tubes](const stalkd::engine::Tube* t) { tubes->push_back(t); });
  size_t due = 0;
  for (const stalkd::engine::Tube* t : *tubes) {
    Key first{};
    const Job* hot = t->ready.top();
    if (cold.ready_index().First(t, &first) && !(hot && Key::Of(hot->pri, hot->id) < first)) due++;
    if (t->ready.size() < 1) due++;
  }
  return due;
}

// `tubes` tubes of 3 ready jobs each, and the disk tier over them with ready_hot 2 (a tube
// keeps 2 in memory) and `budget`, run until a Tick has nothing left to demote.
struct ColdBench {
  FakeClock clock;
  Engine e{clock};
  stalkd::engine::Session* s = e.OpenSession(nullptr);
  NoReader reader;
  stalkd::storage::ColdStore cold;

  ColdBench(int64_t tubes, size_t budget) : cold(e, reader, Options(budget)) {
    for (int64_t i = 0; i < tubes; i++) {
      e.Use(s, "t" + std::to_string(i));
      for (int k = 0; k < 3; k++) e.Put(s, MakeJob(e, s, 100, 0));
    }
    e.set_cold(&cold);
    for (uint64_t before = ~uint64_t{0}; before != cold.stats().demotions;) {
      before = cold.stats().demotions;
      cold.Tick();
    }
  }
  ~ColdBench() {
    e.set_cold(nullptr);
    e.CloseSession(s);
  }
  static stalkd::storage::ColdStoreOptions Options(size_t budget) {
    stalkd::storage::ColdStoreOptions o;
    o.budget = budget;
    o.ready_hot = 2;
    return o;
  }
};

// An idle Tick of the disk tier (nothing due, memory under the budget, no change) with
// `state.range(0)` tubes, each with 2 ready jobs in memory and 1 on disk; range(1) 1: with
// the walk over every such tube that a Tick did before (OldIdleWalk).
void BM_ColdIdleTick(benchmark::State& state) {
  const int64_t tubes = state.range(0);
  size_t settled = 0;  // memory once every job that may go went: the budget is a bit above
  {
    ColdBench all(tubes, 1);
    settled = all.e.memory_used();
  }
  ColdBench b(tubes, settled + settled / 32);
  if (b.cold.ReadyOnDisk(nullptr).ready != size_t(tubes) || b.e.memory_used() > settled) {
    state.SkipWithError("the tier did not settle");
  }
  const bool old_walk = state.range(1) != 0;
  std::vector<const stalkd::engine::Tube*> scratch;
  const uint64_t looked = b.cold.looked_tubes();
  for (auto _ : state) {
    benchmark::DoNotOptimize(b.cold.Tick());
    if (old_walk) benchmark::DoNotOptimize(OldIdleWalk(b.cold, &scratch));
  }
  state.counters["looked_tubes"] = benchmark::Counter(
      static_cast<double>(b.cold.looked_tubes() - looked), benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_ColdIdleTick)->ArgsProduct({{10, 1000, 10000}, {0, 1}});

}  // namespace
