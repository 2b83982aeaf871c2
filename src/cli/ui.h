#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/client.h"
#include "cli/job.h"

// What every command shares: the global options, the connection, and human output (tables,
// jobs, progress bars).
namespace stalkd::cli {

struct Context {
  std::string server = "127.0.0.1:11300";
  bool json = false;
  bool quiet = false;
  bool no_progress = false;
  TlsOptions tls;    // --tls, --ca, --cert, --key
  Credentials auth;  // --token, --ns
  // Set by the chosen command's CLI11 callback; main runs it after parsing.
  std::function<int()> run;

  // The connection, opened on first use.
  Client& client();
  // A second connection (for what one connection cannot do alone), opened each time.
  std::unique_ptr<Client> NewClient() const { return std::make_unique<Client>(server, tls, auth); }
  // Progress bars are drawn on stderr when it is a terminal, unless --quiet or
  // --no-progress.
  bool ProgressWanted() const;
  // A line for people on stderr (a summary, a note), unless --quiet.
  void Note(const std::string& text) const;

 private:
  std::unique_ptr<Client> client_;
};

bool IsTerminal(int fd);
// The terminal's size in columns and rows (80x24 when it cannot tell).
void TerminalSize(int fd, int* cols, int* rows);

// A progress bar on stderr: "label [#####-----]  45%  4500/10000", redrawn at most ten times
// a second; erased by Finish (or the destructor). Does nothing when not enabled.
class Progress {
 public:
  Progress(bool enabled, std::string label, uint64_t total);
  ~Progress() { Finish(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void Add(uint64_t n = 1);
  void SetTotal(uint64_t total);
  void Finish();

 private:
  void Draw(bool force);

  bool on_;
  std::string label_;
  uint64_t total_, done_ = 0;
  std::chrono::steady_clock::time_point last_{};
  bool drawn_ = false;
};

// Prints rows as aligned columns; the first row is the header. Columns after the first are
// right-aligned (they hold numbers).
void PrintTable(const std::vector<std::vector<std::string>>& rows, FILE* out = stdout);

// A job for people: one line of its fields, then its body (Printable), ending in a newline.
void PrintJob(const JobRecord& job);
// How a command shows a job: raw body bytes (`raw`), JSON (`json`: --json, bodies as
// JobToJson with `text`), or PrintJob.
struct JobFormat {
  bool raw = false, text = false;
  void Print(const JobRecord& job, bool json) const;
};

// "1 job", "2 jobs": n and the noun, plural unless n is 1 (`many`: an irregular plural).
std::string Plural(uint64_t n, const std::string& one, const std::string& many = "");

// Reads a whole file ("-": stdin); throws Failure(kExitInput) when it cannot.
std::string ReadAll(const std::string& path);

}  // namespace stalkd::cli
