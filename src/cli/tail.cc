// tail: follow the jobs put into a tube, without reserving them.
#include <time.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <set>

#include "cli/commands.h"
#include "cli/errors.h"

namespace stalkd::cli {

namespace {

constexpr const char* kStates[] = {"ready", "delayed", "reserved", "buried"};
// beanstalkd: ids looked at beyond the highest one `total-jobs` vouches for, in case some
// were taken by puts that total-jobs does not count.
constexpr uint64_t kLookAhead = 16;

void Sleep(double seconds) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(seconds);
  ts.tv_nsec = static_cast<long>((seconds - std::floor(seconds)) * 1e9);
  while (nanosleep(&ts, &ts) != 0) {
  }
}

// Shows jobs until `count` have been shown.
class Shower {
 public:
  Shower(const TailOptions& o, bool json) : o_(o), json_(json) {}
  void operator()(JobRecord&& job) {
    if (!done()) {
      o_.format.Print(job, json_);
      shown_++;
    }
  }
  bool done() const { return o_.count && shown_ >= o_.count; }

 private:
  const TailOptions& o_;
  bool json_;
  uint64_t shown_ = 0;
};

// stalkd: list-jobs for each state, from where that state's last poll left off. Ids only
// grow: a job put after a state's poll has an id above every id that poll or an earlier
// state's poll saw, so the state's next poll starts above those. list-jobs's `next` may
// point past the highest id when it is not 0, but the `from` of a call followed by another
// one cannot (the last call looked at fewer than the 65536 ids a call covers, in the
// table's last pages), so a poll starts there at the lowest: it costs two or three calls
// per state, however many ids the server has handed out.
int TailStalkd(Client& c, const TailOptions& o, bool json) {
  Shower show(o, json);
  std::array<uint64_t, 4> pos = {1, 1, 1, 1};
  uint64_t baseline = 0;    // ids up to here were there when tail started
  std::set<uint64_t> seen;  // ids above `baseline` shown, from min(pos) on
  for (bool first = true;; first = false) {
    std::vector<uint64_t> fresh;
    uint64_t highest = 0;  // of the states polled so far
    for (size_t s = 0; s < pos.size(); s++) {
      uint64_t from = pos[s], safe = pos[s];
      for (;;) {
        Reply r = c.Expect(
            "list-jobs " + o.tube + " " + kStates[s] + " " + std::to_string(from) + " 1000",
            {"OK", "NOT_FOUND"});
        if (r.Is("NOT_FOUND")) break;  // no such tube (yet)
        for (const std::string& text : ParseList(r.body)) {
          uint64_t id = std::stoull(text);
          highest = std::max(highest, id);
          bool wanted = first ? o.existing : id > baseline;
          if (wanted && seen.insert(id).second) fresh.push_back(id);
        }
        uint64_t next = ParseDict(r.body).Number("next");
        if (next == 0) break;
        safe = std::max(safe, from);
        from = next;
      }
      pos[s] = std::max(safe, highest + 1);
    }
    if (first && !o.existing) baseline = highest;
    seen.erase(seen.begin(), seen.lower_bound(*std::min_element(pos.begin(), pos.end())));
    std::sort(fresh.begin(), fresh.end());
    c.FetchJobs(fresh, std::ref(show));
    if (show.done()) return kExitOk;
    Sleep(o.interval);
  }
}

// beanstalkd: stats-job by id above the highest id at the start. `total-jobs` counts the
// puts, so the ids below top + (total-jobs - total-jobs at the start) are looked at once,
// and a few more each time until they are.
int TailBeanstalkd(Client& c, const TailOptions& o, bool json) {
  Shower show(o, json);
  auto in_tube = [&](const Dict& d) { return d.Get("tube") == o.tube; };
  uint64_t top = c.TopId() + 1;  // the probe's own id, counted in `puts`
  uint64_t puts = c.Stats().Number("total-jobs");
  if (o.existing) c.ScanJobs(1, top, in_tube, std::ref(show));
  std::set<uint64_t> shown;  // above `top`
  auto once = [&](JobRecord&& job) {
    if (shown.insert(job.id).second) show(std::move(job));
  };
  while (!show.done()) {
    Sleep(o.interval);
    uint64_t now = c.Stats().Number("total-jobs");
    uint64_t sure = top + (now > puts ? now - puts : 0);  // every id up to here is taken
    c.ScanJobs(top + 1, sure + kLookAhead, in_tube, once);
    top = std::max(top, sure);
    puts = std::max(puts, now);
    shown.erase(shown.begin(), shown.upper_bound(top));
  }
  return kExitOk;
}

// --delete, --bury: as beanstool's tail, each job is taken as a worker takes it (reserve,
// waiting for the next one), shown, then deleted or buried with its priority. Ready jobs
// already in the tube are taken too; delayed ones when they become ready. Ctrl-C between a
// reserve and its delete closes the connection, and the server gives the job back.
int TailTaking(Client& c, const TailOptions& o, bool json) {
  Shower show(o, json);
  c.WatchOnly({o.tube});
  while (!show.done()) {
    JobRecord job = c.Describe(c.Expect("reserve", {"RESERVED"}));
    job.state = "reserved";
    std::string id = std::to_string(job.id);
    show(JobRecord(job));
    if (o.del) {
      c.Expect("delete " + id, {"DELETED"});
    } else {
      c.Expect("bury " + id + " " + std::to_string(job.pri), {"BURIED"});
    }
  }
  return kExitOk;
}

}  // namespace

int Tail(Context& ctx, const TailOptions& o) {
  CheckTubeName(o.tube);
  Client& c = ctx.client();
  if (o.del || o.bury) return TailTaking(c, o, ctx.json);
  return c.Extensions() ? TailStalkd(c, o, ctx.json) : TailBeanstalkd(c, o, ctx.json);
}

}  // namespace stalkd::cli
