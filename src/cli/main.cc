// stalk: a command-line client for stalkd and beanstalkd (stalk(1)).
#include <cstdio>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/errors.h"

#ifndef STALK_VERSION
#define STALK_VERSION "unknown"
#endif

namespace stalkd::cli {
namespace {

constexpr size_t kHelpColumn = 28;  // where descriptions start
constexpr size_t kHelpWidth = 80;   // where they are wrapped

// CLI11's help, with what it would add to an option's name column (the options it excludes,
// its environment variable) said in words at the end of its description instead, and each
// description wrapped at kHelpWidth, continued at kHelpColumn.
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_opts(const CLI::Option* opt) const override {
    std::string out;
    if (opt->get_type_size() != 0) {
      if (!opt->get_type_name().empty()) out += " " + opt->get_type_name();
      if (!opt->get_default_str().empty()) out += "=" + opt->get_default_str();
      if (opt->get_expected_max() == CLI::detail::expected_max_vector_size) out += " ...";
      if (opt->get_required()) out += " REQUIRED";
    }
    return out;
  }

  std::string make_option_desc(const CLI::Option* opt) const override {
    std::string desc = opt->get_description();
    if (!opt->get_envname().empty()) desc += " ($" + opt->get_envname() + " when it is set)";
    if (!opt->get_excludes().empty()) {
      std::string names;
      for (const CLI::Option* other : opt->get_excludes()) {
        names += (names.empty() ? "" : ", ") + other->get_name();
      }
      desc += " (not with " + names + ")";
    }
    return desc;
  }

  std::string make_option(const CLI::Option* opt, bool is_positional) const override {
    return Entry(make_option_name(opt, is_positional) + make_option_opts(opt),
                 make_option_desc(opt));
  }

  std::string make_subcommand(const CLI::App* sub) const override {
    return Entry(sub->get_display_name(true), sub->get_description());
  }

  std::string make_description(const CLI::App* app) const override {
    return Paragraphs(app->get_description());
  }

  std::string make_footer(const CLI::App* app) const override {
    return Paragraphs(app->get_footer());
  }

 private:
  // Each line of `text` wrapped, each ending in a newline ("" for "").
  static std::string Paragraphs(const std::string& text) {
    std::string out;
    size_t start = 0;
    while (!text.empty() && start <= text.size()) {
      size_t nl = text.find('\n', start);
      if (nl == std::string::npos) nl = text.size();
      out += Wrap(text.substr(start, nl - start), 0, 0) + "\n";
      start = nl + 1;
    }
    return out;
  }

  // "  NAME", then the description from kHelpColumn (on the next line when the name leaves
  // fewer than two spaces), wrapped.
  static std::string Entry(const std::string& name, const std::string& desc) {
    std::string out = "  " + name;
    size_t col = out.size();
    if (col + 2 > kHelpColumn) out += "\n", col = 0;
    out += std::string(kHelpColumn - col, ' ');
    return out + Wrap(desc, kHelpColumn, kHelpColumn) + "\n";
  }

  // The words of `text`, as lines of at most kHelpWidth columns (a longer word stays whole);
  // the first starts at column `col`, the others are indented by `indent`.
  static std::string Wrap(const std::string& text, size_t col, size_t indent) {
    std::string out;
    bool first = true;
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find(' ', start);
      if (end == std::string::npos) end = text.size();
      std::string word = text.substr(start, end - start);
      start = end + 1;
      if (word.empty()) continue;
      if (!first && col + 1 + word.size() > kHelpWidth) {
        out += "\n" + std::string(indent, ' ');
        col = indent;
      } else if (!first) {
        out += ' ';
        col++;
      }
      out += word;
      col += word.size();
      first = false;
    }
    return out;
  }
};

// Adds subcommand `name`; when it is the one chosen, ctx.run calls fn.
template <typename Fn>
CLI::App* Command(CLI::App& app, Context& ctx, const std::string& name, const std::string& help,
                  Fn fn) {
  CLI::App* sub = app.add_subcommand(name, help);
  sub->callback([&ctx, fn] { ctx.run = fn; });
  return sub;
}

// A number from 0 to 4294967295, as the protocol's priorities, delays and TTRs are.
CLI::Option* U32(CLI::App* sub, const std::string& name, uint64_t& v, const std::string& help,
                 const std::string& type = "N") {
  return sub->add_option(name, v, help)
      ->check(CLI::Range(uint64_t{0}, kMaxU32).description(""))
      ->type_name(type)
      ->capture_default_str();
}

// A number of seconds from `low` to 3600.
CLI::Option* Seconds(CLI::App* sub, const std::string& name, double& v, const std::string& help,
                     double low) {
  return sub->add_option(name, v, help)
      ->check(CLI::Range(low, 3600.0).description(""))
      ->type_name("SECONDS")
      ->capture_default_str();
}

void AddJobFormat(CLI::App* sub, JobFormat& f, bool raw) {
  if (raw) sub->add_flag("--raw", f.raw, "write the body's bytes only, as they are");
  sub->add_flag("--text", f.text,
                "with --json: a body that is valid UTF-8 as \"body\" (a JSON string) instead "
                "of \"body64\" (base64)");
}

void Build(CLI::App& app, Context& ctx) {
  app.set_help_flag("-h,--help", "show this help and exit (every command has its own)");
  app.set_version_flag("--version", "stalk " STALK_VERSION, "show the version and exit");
  app.require_subcommand(1);
  app.fallthrough();
  auto help = std::make_shared<HelpFormatter>();
  help->column_width(kHelpColumn);
  app.formatter(help);
  app.add_option("-s,--server", ctx.server,
                 "the server: HOST:PORT, [IPv6]:PORT, HOST (port 11300) or unix:PATH")
      ->type_name("ADDR")
      ->envname("STALK_SERVER")
      ->capture_default_str();
  app.add_flag("--tls", ctx.tls.on, "speak TLS to the server (its tls:// listener)");
  app.add_option("--ca", ctx.tls.ca,
                 "with --tls: the CA certificates (PEM) the server's must chain to; default: "
                 "the system's")
      ->type_name("FILE");
  app.add_option("--cert", ctx.tls.cert, "with --tls: stalk's certificate (PEM), for mutual TLS")
      ->type_name("FILE");
  app.add_option("--key", ctx.tls.key, "with --tls: its private key (PEM)")->type_name("FILE");
  app.add_option("--token", ctx.auth.token,
                 "send auth TOKEN right after connecting, for a listener that requires it; a "
                 "token of the HTTP API or an admin account USER:PASSWORD")
      ->type_name("TOKEN")
      ->envname("STALK_TOKEN");
  app.add_option("--ns", ctx.auth.ns,
                 "with --token: the token's namespace, sent as auth NS TOKEN, for a token an "
                 "admin chose")
      ->type_name("NS")
      ->envname("STALK_NS");
  app.add_flag("--json", ctx.json, "JSON output for scripts (one object per line)");
  app.add_flag("-q,--quiet", ctx.quiet, "no progress bars, summaries or notes on stderr");
  app.add_flag("--no-progress", ctx.no_progress, "no progress bars");
  app.footer(
      "Options of stalk itself (-s ADDR, --tls, --token, --json, -q, ...) go before or after the "
      "command.\nExit status: 0 done; 1 no such job or tube, or nothing to reserve or peek; 2 "
      "bad arguments; 3 cannot connect, or the connection broke; 4 the server answered an "
      "error; 5 bad input (a load line, a file). See stalk(1).");

  // ---- jobs
  auto put = std::make_shared<PutOptions>();
  CLI::App* sub = Command(app, ctx, "put", "put a job (the body: the words, --file, or stdin)",
                          [&ctx, put] { return Put(ctx, *put); });
  sub->add_option("-t,--tube", put->tube, "the tube")->type_name("TUBE")->capture_default_str();
  U32(sub, "-p,--pri", put->pri, "priority (0 is the most urgent)", "PRI");
  U32(sub, "-d,--delay", put->delay, "seconds before the job is ready", "SECONDS");
  U32(sub, "-r,--ttr", put->ttr, "time to run: seconds a worker may hold it", "SECONDS");
  sub->add_option("-f,--file", put->file, "read the body from this file (- for stdin)")
      ->type_name("FILE");
  sub->add_flag("-l,--lines", put->lines,
                "one job per line of the input (or per word given); empty lines are skipped");
  sub->add_option("body", put->words, "the body (words joined by spaces)");

  auto reserve = std::make_shared<ReserveOptions>();
  sub =
      Command(app, ctx, "reserve", "reserve a job, show it, then release it (or --delete, --bury)",
              [&ctx, reserve] { return Reserve(ctx, *reserve); });
  sub->add_option("-t,--tube", reserve->tubes,
                  "a tube to watch (repeat for more; default: "
                  "default)")
      ->type_name("TUBE");
  auto* timeout = U32(sub, "--timeout", reserve->timeout,
                      "seconds to wait for a job (exit 1 if none comes)", "SECONDS");
  sub->add_flag("-w,--wait", reserve->wait, "wait as long as it takes")->excludes(timeout);
  sub->add_option("-n,--count", reserve->count,
                  "reserve up to this many different jobs; without --delete or --bury they "
                  "are held until the last, then all released")
      ->check(CLI::Range(uint64_t{1}, kMaxU32).description(""))
      ->type_name("N")
      ->capture_default_str();
  auto* del = sub->add_flag("--delete", reserve->del, "delete each job reserved");
  sub->add_flag("--bury", reserve->bury, "bury each job reserved (keeping its priority)")
      ->excludes(del);
  AddJobFormat(sub, reserve->format, true);

  auto peek = std::make_shared<PeekOptions>();
  sub = Command(app, ctx, "peek",
                "show a job without reserving it: by id, or a tube's next "
                "ready, delayed or buried job",
                [&ctx, peek] { return Peek(ctx, *peek); });
  sub->add_option("what", peek->what, "a job id, or ready, delayed or buried")
      ->type_name("ID|STATE")
      ->required();
  sub->add_option("-t,--tube", peek->tube, "the tube, for ready, delayed or buried")
      ->type_name("TUBE")
      ->capture_default_str();
  AddJobFormat(sub, peek->format, true);

  auto ids = std::make_shared<std::vector<uint64_t>>();
  sub = Command(app, ctx, "delete", "delete jobs by id", [&ctx, ids] { return Delete(ctx, *ids); });
  sub->add_option("id", *ids, "job ids")->type_name("ID")->required();

  auto kick = std::make_shared<KickOptions>();
  sub = Command(app, ctx, "kick",
                "kick buried jobs of a tube (or, when it has none, delayed ones) to ready",
                [&ctx, kick] { return Kick(ctx, *kick); });
  auto* count = U32(sub, "count", kick->count, "how many");
  sub->add_option("-t,--tube", kick->tube, "the tube")->type_name("TUBE")->capture_default_str();
  auto* all = sub->add_flag("-a,--all", kick->all, "all of them")->excludes(count);
  sub->add_option("-j,--job", kick->jobs, "kick these jobs by id instead (kick-job)")
      ->type_name("ID")
      ->excludes(count)
      ->excludes(all);

  auto bury = std::make_shared<BuryOptions>();
  sub = Command(app, ctx, "bury", "bury jobs by id (reserve-job, then bury)",
                [&ctx, bury] { return Bury(ctx, *bury); });
  sub->add_option("id", bury->ids, "job ids")->type_name("ID")->required();
  sub->add_option("-p,--pri", bury->pri, "the priority to bury them with (default: their own)")
      ->check(CLI::Range(int64_t{0}, static_cast<int64_t>(kMaxU32)).description(""))
      ->type_name("PRI");

  // ---- stats
  auto keys = std::make_shared<std::vector<std::string>>();
  sub = Command(app, ctx, "stats", "the server's statistics (all, or the values of KEYs)",
                [&ctx, keys] { return Stats(ctx, *keys); });
  sub->add_option("key", *keys, "keys to show, e.g. current-jobs-ready")->type_name("KEY");

  auto tubes = std::make_shared<std::vector<std::string>>();
  sub = Command(app, ctx, "stats-tube", "statistics of tubes",
                [&ctx, tubes] { return StatsTube(ctx, *tubes); });
  sub->add_option("tube", *tubes, "tube names")->type_name("TUBE")->required();

  auto job_ids = std::make_shared<std::vector<uint64_t>>();
  sub = Command(app, ctx, "stats-job", "statistics of jobs",
                [&ctx, job_ids] { return StatsJob(ctx, *job_ids); });
  sub->add_option("id", *job_ids, "job ids")->type_name("ID")->required();

  auto names = std::make_shared<bool>(false);
  sub = Command(app, ctx, "tubes", "the tubes, with their jobs by state",
                [&ctx, names] { return Tubes(ctx, *names); });
  sub->add_flag("--names", *names, "names only");

  auto pause_tube = std::make_shared<std::string>();
  auto pause_secs = std::make_shared<uint64_t>(0);
  sub = Command(app, ctx, "pause", "stop handing out a tube's jobs for SECONDS (0: resume)",
                [&ctx, pause_tube, pause_secs] { return Pause(ctx, *pause_tube, *pause_secs); });
  sub->add_option("tube", *pause_tube, "the tube")->type_name("TUBE")->required();
  U32(sub, "seconds", *pause_secs, "how long", "SECONDS")->required();

  // ---- purge
  auto purge_tube = std::make_shared<std::string>();
  auto purge_state = std::make_shared<std::string>("all");
  sub = Command(app, ctx, "purge",
                "delete a tube's ready, delayed or buried jobs (all: the three; a reserved job "
                "is never purged)",
                [&ctx, purge_tube, purge_state] { return Purge(ctx, *purge_tube, *purge_state); });
  sub->add_option("tube", *purge_tube, "the tube")->type_name("TUBE")->required();
  sub->add_option("state", *purge_state, "ready, delayed, buried or all")
      ->check(CLI::IsMember({"ready", "delayed", "buried", "all"}).description(""))
      ->type_name("STATE")
      ->capture_default_str();

  // ---- tail
  auto tail = std::make_shared<TailOptions>();
  sub = Command(app, ctx, "tail",
                "show the jobs put into a tube as they arrive, without "
                "reserving them (until Ctrl-C); or take each (--delete, --bury)",
                [&ctx, tail] { return Tail(ctx, *tail); });
  sub->add_option("tube", tail->tube, "the tube")->type_name("TUBE")->required();
  auto* interval =
      Seconds(sub, "-i,--interval", tail->interval, "seconds between looks (0.01 to 3600)", 0.01);
  auto* existing =
      sub->add_flag("-e,--existing", tail->existing, "show the jobs already in the tube first");
  sub->add_option("-n,--count", tail->count, "stop after this many jobs")->type_name("N");
  auto* tail_del = sub->add_flag("--delete", tail->del,
                                 "reserve each job as a worker does (those already ready too), "
                                 "show it, delete it");
  sub->add_flag("--bury", tail->bury,
                "reserve each job as a worker does (those already ready too), show it, bury "
                "it with its priority")
      ->excludes(tail_del);
  for (CLI::Option* taking : {tail_del, sub->get_option("--bury")}) {
    taking->excludes(interval)->excludes(existing);
  }
  AddJobFormat(sub, tail->format, false);

  // ---- top
  auto top = std::make_shared<TopOptions>();
  sub = Command(app, ctx, "top",
                "a live view of the tubes and rates (keys: s sort, r reverse, arrows scroll, "
                "q quit)",
                [&ctx, top] { return Top(ctx, *top); });
  Seconds(sub, "-i,--interval", top->interval, "seconds between refreshes (0.1 to 3600)", 0.1);
  sub->add_option("--sort", top->sort,
                  "sort by ready, reserved, delayed, buried, waiting, puts, deletes, total or "
                  "name")
      ->check(CLI::IsMember(TopSortKeys()).description(""))
      ->type_name("KEY")
      ->capture_default_str();
  sub->add_option("-n,--iterations", top->iterations,
                  "stop after this many refreshes (batch mode: default 1)")
      ->type_name("N");
  sub->add_flag("-b,--batch", top->batch,
                "plain text snapshots instead of a screen (also when stdout is not a terminal)");

  // ---- dump, load
  auto dump = std::make_shared<DumpOptions>();
  sub = Command(app, ctx, "dump", "write every job (or the jobs of TUBEs) as JSON lines",
                [&ctx, dump] { return Dump(ctx, *dump); });
  sub->add_option("tube", dump->tubes, "only these tubes")->type_name("TUBE");
  sub->add_flag("--text", dump->text,
                "a body that is valid UTF-8 as \"body\" (a JSON string), not \"body64\"");
  sub->add_option("-o,--output", dump->output, "write to this file (- for stdout)")
      ->type_name("FILE")
      ->capture_default_str();
  sub->add_option("--max-id", dump->max_id,
                  "beanstalkd: look at ids up to this one instead of finding the highest by "
                  "putting and deleting a job")
      ->type_name("ID");

  auto load = std::make_shared<LoadOptions>();
  sub = Command(app, ctx, "load", "put the jobs of `stalk dump` JSON lines into the server",
                [&ctx, load] { return Load(ctx, *load); });
  sub->add_option("file", load->input, "the dump (- for stdin)")
      ->type_name("FILE")
      ->capture_default_str();
}

}  // namespace
}  // namespace stalkd::cli

int main(int argc, char** argv) {
  using namespace stalkd::cli;
  Context ctx;
  CLI::App app{"stalk: a command-line client for stalkd and beanstalkd", "stalk"};
  Build(app, ctx);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  try {
    return ctx.run();
  } catch (const Failure& f) {
    fflush(stdout);
    fprintf(stderr, "stalk: %s\n", f.what());
    return f.code();
  } catch (const std::exception& e) {  // e.g. a number in a reply that is not one
    fflush(stdout);
    fprintf(stderr, "stalk: %s\n", e.what());
    return kExitServer;
  }
}
