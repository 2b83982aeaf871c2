// top: a live view of a server's tubes and rates, redrawn in place like htop.
#include <poll.h>
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include "cli/commands.h"
#include "cli/errors.h"
#include "cli/json.h"

namespace stalkd::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct TubeRow {
  std::string name;
  uint64_t ready = 0, urgent = 0, reserved = 0, delayed = 0, buried = 0, waiting = 0;
  uint64_t watching = 0, total = 0, deletes_total = 0, pause_left = 0;
  bool paused = false;
  double puts = -1, deletes = -1;  // per second; -1 until there is an earlier snapshot
};

struct Snapshot {
  Clock::time_point at;
  Dict stats;
  std::vector<TubeRow> tubes;
  double puts = -1, reserves = -1, deletes = -1;  // the server's, per second
};

uint64_t Reserves(const Dict& d) {
  return d.Number("cmd-reserve") + d.Number("cmd-reserve-with-timeout");
}

double Rate(uint64_t now, uint64_t before, double seconds) {
  return now >= before && seconds > 0 ? static_cast<double>(now - before) / seconds : 0;
}

Snapshot Take(Client& c, const Snapshot* prev) {
  Snapshot s;
  s.stats = c.Stats();
  std::vector<std::string> names = c.Tubes();
  std::vector<std::optional<Dict>> dicts = c.StatsTubes(names);
  s.at = Clock::now();
  std::map<std::string, const TubeRow*> before;
  double dt = 0;
  if (prev) {
    dt = std::chrono::duration<double>(s.at - prev->at).count();
    for (const TubeRow& t : prev->tubes) before[t.name] = &t;
    s.puts = Rate(s.stats.Number("cmd-put"), prev->stats.Number("cmd-put"), dt);
    s.reserves = Rate(Reserves(s.stats), Reserves(prev->stats), dt);
    s.deletes = Rate(s.stats.Number("cmd-delete"), prev->stats.Number("cmd-delete"), dt);
  }
  for (size_t i = 0; i < names.size(); i++) {
    if (!dicts[i]) continue;
    const Dict& d = *dicts[i];
    TubeRow t;
    t.name = names[i];
    t.ready = d.Number("current-jobs-ready");
    t.urgent = d.Number("current-jobs-urgent");
    t.reserved = d.Number("current-jobs-reserved");
    t.delayed = d.Number("current-jobs-delayed");
    t.buried = d.Number("current-jobs-buried");
    t.waiting = d.Number("current-waiting");
    t.watching = d.Number("current-watching");
    t.total = d.Number("total-jobs");
    t.deletes_total = d.Number("cmd-delete");
    t.paused = d.Number("pause") > 0;
    t.pause_left = d.Number("pause-time-left");
    if (auto it = before.find(t.name); it != before.end()) {
      t.puts = Rate(t.total, it->second->total, dt);
      t.deletes = Rate(t.deletes_total, it->second->deletes_total, dt);
    }
    s.tubes.push_back(std::move(t));
  }
  return s;
}

// ---- sorting

double SortValue(const TubeRow& t, const std::string& key) {
  if (key == "ready") return static_cast<double>(t.ready);
  if (key == "reserved") return static_cast<double>(t.reserved);
  if (key == "delayed") return static_cast<double>(t.delayed);
  if (key == "buried") return static_cast<double>(t.buried);
  if (key == "waiting") return static_cast<double>(t.waiting);
  if (key == "puts") return t.puts;
  if (key == "deletes") return t.deletes;
  return static_cast<double>(t.total);  // "total"
}

// Numbers largest first, names A to Z; `reverse` turns either around. Ties go by name.
void Sort(std::vector<TubeRow>* tubes, const std::string& key, bool reverse) {
  std::sort(tubes->begin(), tubes->end(), [&](const TubeRow& a, const TubeRow& b) {
    if (key != "name") {
      double x = SortValue(a, key), y = SortValue(b, key);
      if (x != y) return (x > y) != reverse;
    }
    return (a.name < b.name) != (key == "name" && reverse);
  });
}

// ---- text

std::string Fixed(double v) {
  if (v < 0) return "-";
  char buf[32];
  snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string Uptime(uint64_t s) {
  char buf[48];
  if (s >= 86400) {
    snprintf(buf, sizeof buf, "%llud %02llu:%02llu:%02llu",
             static_cast<unsigned long long>(s / 86400),
             static_cast<unsigned long long>(s / 3600 % 24),
             static_cast<unsigned long long>(s / 60 % 60), static_cast<unsigned long long>(s % 60));
  } else {
    snprintf(buf, sizeof buf, "%02llu:%02llu:%02llu", static_cast<unsigned long long>(s / 3600),
             static_cast<unsigned long long>(s / 60 % 60), static_cast<unsigned long long>(s % 60));
  }
  return buf;
}

std::string Bytes(uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  size_t u = 0;
  while (v >= 1024 && u + 1 < sizeof units / sizeof *units) v /= 1024, u++;
  char buf[32];
  snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

std::string N(uint64_t v) { return std::to_string(v); }

// The lines above the table.
std::vector<std::string> Summary(const Snapshot& s, const std::string& server) {
  const Dict& d = s.stats;
  std::vector<std::string> out;
  out.push_back("stalk top  " + server + "  version " + d.Get("version").value_or("?") + "  up " +
                Uptime(d.Number("uptime")) + "  " +
                Plural(d.Number("current-connections"), "connection") + " (" +
                Plural(d.Number("current-workers"), "worker") + ", " +
                N(d.Number("current-waiting")) + " waiting)  " + Plural(s.tubes.size(), "tube"));
  out.push_back("jobs  ready " + N(d.Number("current-jobs-ready")) + "  urgent " +
                N(d.Number("current-jobs-urgent")) + "  reserved " +
                N(d.Number("current-jobs-reserved")) + "  delayed " +
                N(d.Number("current-jobs-delayed")) + "  buried " +
                N(d.Number("current-jobs-buried")) + "   put/s " + Fixed(s.puts) + "  reserve/s " +
                Fixed(s.reserves) + "  delete/s " + Fixed(s.deletes));
  if (d.Get("memory-used")) {
    out.push_back("memory  " + Bytes(d.Number("memory-used")) + " of " +
                  Bytes(d.Number("memory-limit")) + "  total jobs " + N(d.Number("total-jobs")));
  } else {
    out.push_back("total jobs " + N(d.Number("total-jobs")));
  }
  return out;
}

std::vector<std::string> Header() {
  return {"TUBE",    "READY", "URGENT", "RESERVED", "DELAYED", "BURIED",
          "WAITING", "PUT/s", "DEL/s",  "TOTAL",    "PAUSED"};
}

std::vector<std::string> Row(const TubeRow& t) {
  return {t.name,
          N(t.ready),
          N(t.urgent),
          N(t.reserved),
          N(t.delayed),
          N(t.buried),
          N(t.waiting),
          Fixed(t.puts),
          Fixed(t.deletes),
          N(t.total),
          t.paused ? N(t.pause_left) + "s" : "-"};
}

// The column of each sort key but "name" (the tube column).
const char* SortColumn(const std::string& key) {
  static const std::map<std::string, const char*> columns = {
      {"ready", "READY"},   {"reserved", "RESERVED"}, {"delayed", "DELAYED"},
      {"buried", "BURIED"}, {"waiting", "WAITING"},   {"puts", "PUT/s"},
      {"deletes", "DEL/s"}, {"total", "TOTAL"}};
  auto it = columns.find(key);
  return it == columns.end() ? "" : it->second;
}

// `name` in at most `width` columns: its start and its end, with a ~ for what is left out
// between them (tube names often differ at either end: "orders.eu", "orders.us").
std::string Squeeze(const std::string& name, size_t width) {
  if (name.size() <= width) return name;
  if (width < 3) return name.substr(0, width);
  size_t tail = (width - 1) / 2, head = width - 1 - tail;
  return name.substr(0, head) + "~" + name.substr(name.size() - tail);
}

// The table's rows `first` to `first + count` as aligned lines, at most `cols` wide. In a
// narrow terminal the tube names keep room to be read: columns go first, the least telling
// ones first (never the one sorted by), until the names fit or have kMinName columns; only
// then are names cut short, in the middle.
std::vector<std::string> Table(const std::vector<TubeRow>& tubes, size_t first, size_t count,
                               size_t cols, const std::string& sort = "") {
  constexpr size_t kMinName = 16;
  static const char* const kDropOrder[] = {"URGENT", "TOTAL",   "WAITING", "PAUSED",  "DEL/s",
                                           "PUT/s",  "DELAYED", "BURIED",  "RESERVED"};
  std::vector<std::vector<std::string>> rows = {Header()};
  for (size_t i = first; i < tubes.size() && i < first + count; i++) rows.push_back(Row(tubes[i]));
  std::vector<size_t> w(rows[0].size(), 0);
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size(); i++) w[i] = std::max(w[i], r[i].size());
  }
  std::vector<bool> shown(w.size(), true);
  auto rest = [&] {
    size_t n = 0;
    for (size_t i = 1; i < w.size(); i++) n += shown[i] ? w[i] + 2 : 0;
    return n;
  };
  size_t want = std::min(w[0], kMinName);
  for (const char* drop : kDropOrder) {
    if (rest() + want <= cols) break;
    if (drop == std::string_view(SortColumn(sort))) continue;
    auto it = std::find(rows[0].begin(), rows[0].end(), drop);
    shown[static_cast<size_t>(it - rows[0].begin())] = false;
  }
  w[0] = std::max<size_t>(4, std::min(w[0], cols > rest() ? cols - rest() : 4));
  std::vector<std::string> out;
  for (const auto& r : rows) {
    std::string name = Squeeze(r[0], w[0]);
    std::string line = name + std::string(w[0] - name.size(), ' ');
    for (size_t i = 1; i < r.size(); i++) {
      if (shown[i]) line += std::string(w[i] + 2 - r[i].size(), ' ') + r[i];
    }
    out.push_back(line);
  }
  return out;
}

void PrintJsonSnapshot(const Snapshot& s) {
  Json j;
  j.Begin().Key("server").Object(s.stats).Key("rates").Begin();
  auto rate = [&](const char* k, double v) {
    j.Key(k);
    v < 0 ? j.Null() : j.Double(v);
  };
  rate("put", s.puts);
  rate("reserve", s.reserves);
  rate("delete", s.deletes);
  j.End().Key("tubes").BeginArray();
  for (const TubeRow& t : s.tubes) {
    j.Begin().Key("name").Str(t.name).Key("ready").Uint(t.ready).Key("urgent").Uint(t.urgent);
    j.Key("reserved").Uint(t.reserved).Key("delayed").Uint(t.delayed);
    j.Key("buried").Uint(t.buried).Key("waiting").Uint(t.waiting);
    j.Key("watching").Uint(t.watching).Key("total").Uint(t.total);
    j.Key("pause_left").Uint(t.paused ? t.pause_left : 0);
    rate("put_rate", t.puts);
    rate("delete_rate", t.deletes);
    j.End();
  }
  PrintLine(j.EndArray().End());
}

Clock::duration Interval(const TopOptions& o) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.interval));
}

void SleepUntil(Clock::time_point t) {
  while (Clock::now() < t) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
    poll(nullptr, 0, static_cast<int>(std::max<int64_t>(1, ms)));
  }
}

// Plain snapshots, one per interval, for a pipe or --batch.
int Batch(Context& ctx, const TopOptions& o) {
  Snapshot prev;
  bool have = false;
  uint64_t n = o.iterations ? o.iterations : 1;
  for (uint64_t i = 0; i < n; i++) {
    if (i > 0) SleepUntil(prev.at + Interval(o));
    Snapshot s = Take(ctx.client(), have ? &prev : nullptr);
    Sort(&s.tubes, o.sort, false);
    if (ctx.json) {
      PrintJsonSnapshot(s);
    } else {
      if (i > 0) printf("\n");
      for (const std::string& l : Summary(s, ctx.server)) printf("%s\n", l.c_str());
      printf("\n");
      for (const std::string& l : Table(s.tubes, 0, s.tubes.size(), 1000))
        printf("%s\n", l.c_str());
    }
    fflush(stdout);
    prev = std::move(s);
    have = true;
  }
  return kExitOk;
}

// ---- the screen

volatile sig_atomic_t g_stop = 0;
volatile sig_atomic_t g_resized = 0;

// Puts the terminal in raw mode on the alternate screen, and back when it goes.
class Screen {
 public:
  Screen() {
    keys_ = IsTerminal(0) && tcgetattr(0, &saved_) == 0;
    if (keys_) {
      termios raw = saved_;
      raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
      raw.c_cc[VMIN] = 0;
      raw.c_cc[VTIME] = 0;
      tcsetattr(0, TCSANOW, &raw);
    }
    struct sigaction sa {};
    sa.sa_handler = [](int sig) {
      if (sig == SIGWINCH) {
        g_resized = 1;
      } else {
        g_stop = 1;
      }
    };
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGWINCH}) sigaction(sig, &sa, nullptr);
    Write("\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J");
  }
  ~Screen() {
    Write("\x1b[?25h\x1b[?1049l");
    if (keys_) tcsetattr(0, TCSANOW, &saved_);
  }
  Screen(const Screen&) = delete;
  Screen& operator=(const Screen&) = delete;

  bool keys() const { return keys_; }
  static void Write(const std::string& s) {
    size_t done = 0;
    while (done < s.size()) {
      ssize_t n = write(1, s.data() + done, s.size() - done);
      if (n <= 0) return;
      done += static_cast<size_t>(n);
    }
  }

 private:
  termios saved_{};
  bool keys_ = false;
};

struct View {
  std::string sort;
  bool reverse = false;
  size_t offset = 0;
};

void Draw(const Snapshot& s, View* v, const std::string& server) {
  int cols, rows;
  TerminalSize(1, &cols, &rows);
  std::vector<TubeRow> tubes = s.tubes;
  Sort(&tubes, v->sort, v->reverse);
  std::vector<std::string> top = Summary(s, server);
  size_t fixed = top.size() + 3;  // a blank line, the table's header, the footer
  size_t room = rows > static_cast<int>(fixed) ? static_cast<size_t>(rows) - fixed : 1;
  v->offset = std::min(v->offset, tubes.size() > room ? tubes.size() - room : 0);
  std::vector<std::string> table =
      Table(tubes, v->offset, room, static_cast<size_t>(cols), v->sort);
  auto cut = [&](const std::string& l) {
    return l.size() > static_cast<size_t>(cols) ? l.substr(0, static_cast<size_t>(cols)) : l;
  };
  std::string out = "\x1b[H";
  for (const std::string& l : top) out += cut(l) + "\x1b[K\r\n";
  out += "\x1b[K\r\n\x1b[7m" + cut(table[0]) +
         std::string(static_cast<size_t>(cols) - std::min<size_t>(cols, table[0].size()), ' ') +
         "\x1b[0m\r\n";
  for (size_t i = 1; i < table.size(); i++) out += cut(table[i]) + "\x1b[K\r\n";
  out += "\x1b[J";
  // The footer, on the last line.
  std::string shown = tubes.empty() ? "no tubes"
                                    : "tubes " + N(v->offset + 1) + "-" +
                                          N(std::min(tubes.size(), v->offset + room)) + " of " +
                                          N(tubes.size());
  std::string foot = "sort: " + v->sort + (v->reverse ? " (reversed)" : "") +
                     "  s: next sort  r: reverse  arrows, PgUp, PgDn: scroll  q: quit   " + shown;
  out += "\x1b[" + N(static_cast<uint64_t>(rows)) + ";1H\x1b[7m" + cut(foot) + "\x1b[K\x1b[0m";
  Screen::Write(out);
}

// Handles the keys in `in`; false when one of them is q.
bool Keys(std::string_view in, View* v) {
  const auto& keys = TopSortKeys();
  for (size_t i = 0; i < in.size(); i++) {
    std::string_view rest = in.substr(i);
    auto seq = [&](std::string_view s) {
      if (rest.substr(0, s.size()) != s) return false;
      i += s.size() - 1;
      return true;
    };
    if (seq("\x1b[A") || seq("\x1bOA") || rest[0] == 'k') {
      v->offset = v->offset > 0 ? v->offset - 1 : 0;
    } else if (seq("\x1b[B") || seq("\x1bOB") || rest[0] == 'j') {
      v->offset++;
    } else if (seq("\x1b[5~")) {
      v->offset = v->offset > 10 ? v->offset - 10 : 0;
    } else if (seq("\x1b[6~") || rest[0] == ' ') {
      v->offset += 10;
    } else if (seq("\x1b[H") || seq("\x1b[1~") || rest[0] == 'g') {
      v->offset = 0;
    } else if (rest[0] == 'q' || rest[0] == 'Q') {
      return false;
    } else if (rest[0] == 's' || rest[0] == '>' || rest[0] == '<') {
      auto it = std::find(keys.begin(), keys.end(), v->sort);
      size_t at = it == keys.end() ? 0 : static_cast<size_t>(it - keys.begin());
      at = rest[0] == '<' ? (at + keys.size() - 1) % keys.size() : (at + 1) % keys.size();
      v->sort = keys[at];
      v->offset = 0;
    } else if (rest[0] == 'r') {
      v->reverse = !v->reverse;
    } else if (seq("\x1b")) {
      // an escape sequence we do not know: skip it
    }
  }
  return true;
}

int Live(Context& ctx, const TopOptions& o) {
  Client& c = ctx.client();
  Snapshot s = Take(c, nullptr);  // before the screen, so a failure prints plainly
  Screen screen;
  View v;
  v.sort = o.sort;
  uint64_t taken = 1;
  Clock::duration interval = Interval(o);
  Draw(s, &v, ctx.server);
  while (!g_stop) {
    auto next = s.at + interval;
    while (!g_stop && Clock::now() < next) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
      pollfd p{0, POLLIN, 0};
      int n = poll(&p, screen.keys() ? 1 : 0, static_cast<int>(std::max<int64_t>(1, ms)));
      if (n > 0 && (p.revents & POLLIN)) {
        char buf[64];
        ssize_t got = read(0, buf, sizeof buf);
        if (got > 0 && !Keys(std::string_view(buf, static_cast<size_t>(got)), &v)) return kExitOk;
        Draw(s, &v, ctx.server);
      }
      if (g_resized) {
        g_resized = 0;
        Screen::Write("\x1b[2J");
        Draw(s, &v, ctx.server);
      }
    }
    if (g_stop || (o.iterations && taken >= o.iterations)) break;
    s = Take(c, &s);
    taken++;
    Draw(s, &v, ctx.server);
  }
  return kExitOk;
}

}  // namespace

const std::vector<std::string>& TopSortKeys() {
  static const std::vector<std::string> keys = {"ready", "reserved", "delayed", "buried", "waiting",
                                                "puts",  "deletes",  "total",   "name"};
  return keys;
}

int Top(Context& ctx, const TopOptions& o) {
  if (o.batch || ctx.json || !IsTerminal(1)) return Batch(ctx, o);
  return Live(ctx, o);
}

}  // namespace stalkd::cli
