#include "cli/ui.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cli/codec.h"
#include "cli/errors.h"

namespace stalkd::cli {

Client& Context::client() {
  if (!client_) client_ = NewClient();
  return *client_;
}

bool Context::ProgressWanted() const { return !quiet && !no_progress && IsTerminal(2); }

void Context::Note(const std::string& text) const {
  if (!quiet) fprintf(stderr, "%s\n", text.c_str());
}

bool IsTerminal(int fd) { return isatty(fd) == 1; }

void TerminalSize(int fd, int* cols, int* rows) {
  winsize ws{};
  if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
    *cols = ws.ws_col;
    *rows = ws.ws_row;
  } else {
    *cols = 80;
    *rows = 24;
  }
}

Progress::Progress(bool enabled, std::string label, uint64_t total)
    : on_(enabled), label_(std::move(label)), total_(total) {
  Draw(true);
}

void Progress::Add(uint64_t n) {
  done_ += n;
  Draw(false);
}

void Progress::SetTotal(uint64_t total) {
  total_ = total;
  Draw(false);
}

void Progress::Draw(bool force) {
  if (!on_) return;
  auto now = std::chrono::steady_clock::now();
  if (!force && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  int cols, rows;
  TerminalSize(2, &cols, &rows);
  std::string line = "\r\x1b[K" + label_ + " ";
  std::string count = std::to_string(done_);
  if (total_ > 0) {
    uint64_t shown = std::min(done_, total_);
    count += "/" + std::to_string(total_);
    int pct = static_cast<int>(shown * 100 / total_);
    int width = std::max(10, cols - static_cast<int>(label_.size() + count.size()) - 12);
    int full = static_cast<int>(static_cast<double>(shown) / static_cast<double>(total_) * width);
    line += "[" + std::string(static_cast<size_t>(full), '#') +
            std::string(static_cast<size_t>(width - full), '-') + "] ";
    char p[8];
    snprintf(p, sizeof p, "%3d%%", pct);
    line += std::string(p) + " ";
  }
  line += count;
  fputs(line.c_str(), stderr);
  fflush(stderr);
  drawn_ = true;
}

void Progress::Finish() {
  if (on_ && drawn_) {
    fputs("\r\x1b[K", stderr);
    fflush(stderr);
  }
  on_ = false;
}

void PrintTable(const std::vector<std::vector<std::string>>& rows, FILE* out) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); i++) width[i] = std::max(width[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); i++) {
      std::string pad(width[i] - row[i].size(), ' ');
      if (i == 0) {
        line += row[i] + (row.size() > 1 ? pad : "");
      } else {
        line += "  " + pad + row[i];
      }
    }
    fprintf(out, "%s\n", line.c_str());
  }
}

void PrintJob(const JobRecord& job) {
  std::string head = "id " + std::to_string(job.id) + "  tube " + job.tube + "  state " +
                     job.state + "  pri " + std::to_string(job.pri) + "  ttr " +
                     std::to_string(job.ttr);
  if (job.state == "delayed") head += "  delay " + std::to_string(job.delay);
  if (job.tries) head += "  tries " + std::to_string(*job.tries);
  if (job.ttl) head += "  ttl " + std::to_string(*job.ttl);
  if (job.key) head += "  key " + Printable(*job.key);
  for (const auto& [k, v] : job.attrs) head += "  attr." + k + " " + Printable(v);
  head += "  " + Plural(job.body.size(), "byte");
  std::string body = Printable(job.body);
  if (body.empty() || body.back() != '\n') body += '\n';
  fprintf(stdout, "%s\n", head.c_str());
  fwrite(body.data(), 1, body.size(), stdout);
}

void JobFormat::Print(const JobRecord& job, bool json) const {
  if (raw) {
    fwrite(job.body.data(), 1, job.body.size(), stdout);
  } else if (json) {
    std::string line = JobToJson(job, text);
    fprintf(stdout, "%s\n", line.c_str());
  } else {
    PrintJob(job);
  }
  fflush(stdout);
}

std::string Plural(uint64_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many.empty() ? one + "s" : many);
}

std::string ReadAll(const std::string& path) {
  int fd = path == "-" ? 0 : open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Failure(kExitInput, "cannot open " + path + ": " + strerror(errno));
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      int err = errno;
      if (fd != 0) close(fd);
      throw Failure(kExitInput, "cannot read " + path + ": " + strerror(err));
    }
  }
  if (fd != 0) close(fd);
  return out;
}

}  // namespace stalkd::cli
