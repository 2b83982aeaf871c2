// dump and load: every job of a server as JSON lines, and back.
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <tuple>

#include "cli/commands.h"
#include "cli/errors.h"
#include "cli/json.h"

namespace stalkd::cli {

namespace {

constexpr size_t kBatch = 256;
// A job loaded as buried is first put with this delay (30 days), so that no worker can
// reserve it before `reserve-job` and `bury` make it buried.
constexpr uint64_t kBuryHold = 30 * 86400;
constexpr const char* kStates[] = {"ready", "delayed", "reserved", "buried"};

struct Counts {
  std::map<std::string, uint64_t> by_state;
  uint64_t total = 0;
  void Add(const std::string& state) {
    by_state[state]++;
    total++;
  }
  std::string Text() const {
    std::string s;
    for (const char* st : kStates) {
      auto it = by_state.find(st);
      if (it == by_state.end()) continue;
      s += (s.empty() ? "" : ", ") + std::to_string(it->second) + " " + st;
    }
    return s.empty() ? "" : " (" + s + ")";
  }
};

class Output {
 public:
  explicit Output(const std::string& path) {
    if (path == "-") {
      f_ = stdout;
    } else if (!(f_ = fopen(path.c_str(), "we"))) {
      throw Failure(kExitInput, "cannot write " + path + ": " + strerror(errno));
    }
  }
  ~Output() {
    if (f_ != stdout) fclose(f_);
  }
  void Line(const std::string& s) {
    fwrite(s.data(), 1, s.size(), f_);
    fputc('\n', f_);
  }
  void Close(const std::string& path) {
    if (fflush(f_) != 0 || ferror(f_)) {
      throw Failure(kExitInput, "cannot write " + path + ": " + strerror(errno));
    }
  }

 private:
  FILE* f_;
};

// stalkd: the ids of each tube's jobs in every state (list-jobs), in id order. The first
// list-jobs of every tube and state is pipelined; a tube with more jobs than one reply
// holds is then followed up alone.
std::vector<std::vector<uint64_t>> ListIds(Client& c, const std::vector<std::string>& tubes) {
  auto ask = [&](const std::string& tube, const char* state, uint64_t from) {
    c.conn().SendLine("list-jobs " + tube + " " + state + " " + std::to_string(from) + " 1000");
  };
  // Adds a reply's ids to `ids`; returns where to continue (0: done, or no such tube).
  auto take = [&](const std::string& tube, std::vector<uint64_t>* ids) {
    Reply r = c.conn().Read();
    if (r.Is("NOT_FOUND")) return uint64_t{0};  // the tube is gone
    if (!r.Is("OK")) Client::Unexpected("list-jobs " + tube, r);
    for (const std::string& id : ParseList(r.body)) ids->push_back(std::stoull(id));
    return ParseDict(r.body).Number("next");
  };
  std::vector<std::vector<uint64_t>> out(tubes.size());
  for (const std::string& t : tubes) {
    for (const char* state : kStates) ask(t, state, 1);
  }
  std::vector<std::tuple<size_t, const char*, uint64_t>> more;
  for (size_t i = 0; i < tubes.size(); i++) {
    for (const char* state : kStates) {
      if (uint64_t next = take(tubes[i], &out[i])) more.emplace_back(i, state, next);
    }
  }
  for (auto [i, state, next] : more) {
    do {
      ask(tubes[i], state, next);
    } while ((next = take(tubes[i], &out[i])) != 0);
  }
  for (std::vector<uint64_t>& ids : out) {
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());  // a job that changed state
  }
  return out;
}

}  // namespace

int Dump(Context& ctx, const DumpOptions& o) {
  for (const std::string& t : o.tubes) CheckTubeName(t);
  Client& c = ctx.client();
  Output out(o.output);
  Counts counts;
  auto emit = [&](JobRecord&& job) {
    out.Line(JobToJson(job, o.text));
    counts.Add(job.state);
  };
  if (c.Extensions()) {
    // stalkd: list-jobs, then stats-job and peek: nothing changes state.
    std::vector<std::string> tubes = o.tubes.empty() ? c.Tubes() : o.tubes;
    uint64_t total = 0;
    for (const auto& d : c.StatsTubes(tubes)) {
      for (const char* s : kStates) total += d ? d->Number(std::string("current-jobs-") + s) : 0;
    }
    Progress bar(ctx.ProgressWanted(), "dump", total);
    constexpr size_t kTubes = 64;  // tubes whose ids are asked for at once
    for (size_t i = 0; i < tubes.size(); i += kTubes) {
      std::vector<std::string> some(
          tubes.begin() + static_cast<ptrdiff_t>(i),
          tubes.begin() + static_cast<ptrdiff_t>(std::min(tubes.size(), i + kTubes)));
      for (const std::vector<uint64_t>& ids : ListIds(c, some)) {
        c.FetchJobs(ids, [&](JobRecord&& job) {
          emit(std::move(job));
          bar.Add();
        });
      }
    }
  } else {
    // beanstalkd: stats-job for every id up to the highest, then peek for the jobs found.
    std::set<std::string> wanted(o.tubes.begin(), o.tubes.end());
    uint64_t top = o.max_id;
    if (!top) {
      try {
        top = c.TopId();
      } catch (const Failure& f) {
        throw Failure(f.code(), std::string("dump: ") + f.what() + "; give --max-id");
      }
    }
    Progress bar(ctx.ProgressWanted(), "dump (ids)", top);
    c.ScanJobs(
        1, top,
        [&](const Dict& d) { return wanted.empty() || wanted.count(d.Get("tube").value_or("")); },
        emit, [&](uint64_t n) { bar.Add(n); });
  }
  out.Close(o.output);
  ctx.Note("stalk: dumped " + Plural(counts.total, "job") + counts.Text());
  return kExitOk;
}

// ---- load

namespace {

// " was" for one, " were" for more.
const char* Were(uint64_t n) { return n == 1 ? " was" : " were"; }

// A line that cannot be loaded (Load adds which line).
[[noreturn]] void BadLine(const std::string& what) { throw Failure(kExitInput, what); }

bool Printable21(std::string_view s) {
  for (char c : s) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

// The put-ext options of a job, checked as docs/EXTENSIONS.md limits them (a put-ext line
// the server refuses would make it read the body as commands).
std::string ExtOptions(const JobRecord& j) {
  std::string opts;
  if (j.tries) {
    uint64_t tries = *j.tries + (j.state == "buried" ? 1 : 0);  // reserve-job uses one
    opts += " tries=" + std::to_string(std::clamp<uint64_t>(tries, 1, kMaxU32));
  }
  if (j.ttl) opts += " ttl=" + std::to_string(std::clamp<uint64_t>(*j.ttl, 1, kMaxU32));
  if (j.key) {
    if (j.key->empty() || j.key->size() > 200 || !Printable21(*j.key)) {
      BadLine("\"key\" must be 1 to 200 printable bytes without spaces");
    }
    opts += " key=" + *j.key;
  }
  if (j.attrs.size() > 16) BadLine("at most 16 attributes");
  for (const auto& [name, value] : j.attrs) {
    bool ok = !name.empty() && name.size() <= 64 && value.size() <= 255 && Printable21(value);
    for (char ch : name) {
      ok = ok && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_');
    }
    if (!ok) {
      BadLine("attribute \"" + name +
              "\": a name of 1 to 64 of A-Z a-z 0-9 - _ and a value of up to 255 "
              "printable bytes without spaces");
    }
    opts += " attr." + name + "=" + value;
  }
  return opts;
}

class Loader {
 public:
  Loader(Context& ctx, Client& c) : ctx_(ctx), c_(c), ext_(c.Extensions()) {}

  void Add(JobRecord job, uint64_t line) {
    try {
      CheckTubeName(job.tube);
    } catch (const Failure& f) {
      BadLine(f.what());
    }
    if (job.HasExtensions() && !ext_) {
      dropped_++;
      job.tries.reset();
      job.ttl.reset();
      job.key.reset();
      job.attrs.clear();
    }
    std::string opts = job.HasExtensions() ? ExtOptions(job) : "";
    uint64_t delay = job.state == "delayed" ? job.delay : job.state == "buried" ? kBuryHold : 0;
    std::string args = std::to_string(job.pri) + " " + std::to_string(delay) + " " +
                       std::to_string(job.ttr) + " " + std::to_string(job.body.size());
    Pending p{line, c_.QueueUse(job.tube), job.state, job.pri};
    c_.conn().SendLine((opts.empty() ? "put " : "put-ext ") + args + opts);
    c_.conn().Send(job.body);
    c_.conn().Send("\r\n");
    pending_.push_back(p);
    if (pending_.size() >= kBatch) Finish();
  }

  // Reads the replies of what was sent, then buries what has to be.
  void Finish() {
    std::vector<std::pair<uint64_t, uint64_t>> bury;  // id, pri
    std::string error;
    for (const Pending& p : pending_) {
      if (p.use) {
        Reply u = c_.conn().Read();
        if (!u.Is("USING")) Client::Unexpected("use", u);
      }
      Reply r = c_.conn().Read();
      if (r.Is("INSERTED")) {
        if (p.state == "buried") {
          bury.emplace_back(r.Number(1), p.pri);
        } else {
          counts_.Add(p.state == "reserved" ? "ready" : p.state);
          reserved_ += p.state == "reserved";
        }
      } else if (r.Is("EXISTS")) {
        exists_++;
      } else if (error.empty()) {
        error = "line " + std::to_string(p.line) + ": " + Client::Answered("put", r);
      }
    }
    pending_.clear();
    for (const auto& [id, pri] : bury) {
      c_.conn().SendLine("reserve-job " + std::to_string(id));
      c_.conn().SendLine("bury " + std::to_string(id) + " " + std::to_string(pri));
    }
    for (size_t i = 0; i < bury.size(); i++) {
      Reply r = c_.conn().Read();
      Reply b = c_.conn().Read();
      if (r.Is("RESERVED") && b.Is("BURIED")) {
        counts_.Add("buried");
      } else if (error.empty()) {
        error = "job " + std::to_string(bury[i].first) +
                " stays delayed: " + (r.Is("RESERVED") ? "bury" : "reserve-job") +
                " was answered " + (r.Is("RESERVED") ? b.line : r.line) +
                (r.Is("UNKNOWN_COMMAND") ? " (a buried job is loaded with reserve-job, which "
                                           "beanstalkd has from 1.12)"
                                         : "");
      }
    }
    if (!error.empty()) {
      throw Failure(kExitServer, error + "; loaded " + Plural(counts_.total, "job"));
    }
  }

  uint64_t loaded() const { return counts_.total; }

  void Report(uint64_t skipped_lines) const {
    if (ctx_.json) {
      Json j;
      j.Begin().Key("loaded").Uint(counts_.total);
      for (const char* st : {"ready", "delayed", "buried"}) {
        auto it = counts_.by_state.find(st);
        j.Key(st).Uint(it == counts_.by_state.end() ? 0 : it->second);
      }
      j.Key("reserved_as_ready").Uint(reserved_).Key("key_exists").Uint(exists_);
      j.Key("extensions_dropped").Uint(dropped_).Key("blank_lines").Uint(skipped_lines);
      PrintLine(j.End());
    } else {
      printf("loaded %s%s\n", Plural(counts_.total, "job").c_str(), counts_.Text().c_str());
    }
    if (reserved_) {
      ctx_.Note("stalk: " + Plural(reserved_, "job") + Were(reserved_) +
                " reserved when dumped, and loaded ready");
    }
    if (exists_) {
      ctx_.Note("stalk: " + Plural(exists_, "job") + Were(exists_) +
                " not loaded: a job with the same key is in the tube");
    }
    if (dropped_) {
      ctx_.Note("stalk: " + Plural(dropped_, "job") + Were(dropped_) +
                " loaded without their tries, ttl, key or attributes: the server "
                "does not have stalkd's extensions");
    }
  }

 private:
  struct Pending {
    uint64_t line;
    bool use;
    std::string state;
    uint64_t pri;
  };
  Context& ctx_;
  Client& c_;
  bool ext_;
  std::vector<Pending> pending_;
  Counts counts_;
  uint64_t reserved_ = 0, exists_ = 0, dropped_ = 0;
};

}  // namespace

int Load(Context& ctx, const LoadOptions& o) {
  FILE* in = o.input == "-" ? stdin : fopen(o.input.c_str(), "re");
  if (!in) throw Failure(kExitInput, "cannot open " + o.input + ": " + strerror(errno));
  std::unique_ptr<FILE, int (*)(FILE*)> closer(in == stdin ? nullptr : in, fclose);
  struct stat st {};
  uint64_t size = fstat(fileno(in), &st) == 0 && S_ISREG(st.st_mode) ? st.st_size : 0;
  Client& c = ctx.client();
  Loader loader(ctx, c);
  Progress bar(ctx.ProgressWanted(), "load", size);
  struct LineBuffer {
    char* data = nullptr;
    size_t cap = 0;
    ~LineBuffer() { free(data); }
  } buf;
  uint64_t line = 0, blank = 0;
  for (ssize_t n; (n = getline(&buf.data, &buf.cap, in)) >= 0;) {
    line++;
    std::string_view text(buf.data, static_cast<size_t>(n));
    bar.Add(text.size());
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
    if (text.find_first_not_of(" \t") == std::string_view::npos) {
      blank++;
      continue;
    }
    try {
      loader.Add(JobFromJson(text), line);
    } catch (const Failure& f) {
      if (f.code() != kExitInput) throw;
      loader.Finish();  // what came before the bad line is loaded
      throw Failure(kExitInput,
                    "line " + std::to_string(line) + ": " + f.what() + "; " +
                        (loader.loaded() ? "loaded " + Plural(loader.loaded(), "job") + " before it"
                                         : std::string("nothing was loaded")));
    }
  }
  if (ferror(in)) throw Failure(kExitInput, "cannot read " + o.input + ": " + strerror(errno));
  loader.Finish();
  bar.Finish();
  loader.Report(blank);
  return kExitOk;
}

}  // namespace stalkd::cli
