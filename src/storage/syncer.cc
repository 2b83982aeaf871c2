#include "storage/syncer.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <system_error>

#include "base/check.h"
#include "storage/file.h"

namespace stalkd::storage {

Syncer::Syncer() {
  notify_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (notify_fd_ < 0) return;
  // Signals are the loop thread's (signalfd): the new thread starts with all of them
  // blocked, or the kernel could deliver SIGTERM or SIGUSR1 to it with their default action.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  try {
    thread_ = std::thread([this] { Main(); });
  } catch (const std::system_error&) {
    close(notify_fd_);
    notify_fd_ = -1;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

int Syncer::SyncAll(const std::vector<Target>& targets, uint32_t* failed_id) {
  for (const Target& t : targets) {
    int err = t.dir ? file::SyncDir(t.fd) : file::SyncData(t.fd);
    if (err != 0) {
      *failed_id = t.id;
      return err;
    }
  }
  return 0;
}

Syncer::~Syncer() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  if (notify_fd_ >= 0) close(notify_fd_);
}

void Syncer::Start(std::vector<Target> targets) {
  STALKD_CHECK(!busy_);
  busy_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    request_ = std::move(targets);
    pending_ = true;
    done_ = false;
  }
  cv_.notify_one();
}

bool Syncer::Collect(Result* r) {
  std::lock_guard<std::mutex> lock(mu_);
  if (busy_ && !done_) return false;
  // The thread signals under mu_ together with done_, so this takes exactly its signal
  // and the eventfd is not left readable.
  uint64_t n;
  ssize_t got = read(notify_fd_, &n, sizeof n);
  (void)got;  // nonblocking: nothing to read when nothing was started
  if (!busy_) return false;
  *r = result_;
  busy_ = false;
  return true;
}

bool Syncer::Wait(Result* r) {
  if (!busy_) return false;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_; });
  }
  return Collect(r);
}

void Syncer::Fill(int fd, uint32_t id, int64_t from, int64_t to) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    fills_.push_back({fd, id, from, to});
  }
  cv_.notify_all();
}

void Syncer::StopFill(uint32_t id) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !filling_ || fills_.front().id != id; });
  std::erase_if(fills_, [&](const FillJob& f) { return f.id == id; });
}

size_t Syncer::fills_pending() {
  std::lock_guard<std::mutex> lock(mu_);
  return fills_.size();
}

// One chunk of the first fill, written without the lock held.
void Syncer::FillChunk(std::unique_lock<std::mutex>& lock) {
  static const char kZeros[kFillChunk] = {};
  FillJob f = fills_.front();
  int64_t n = std::min(kFillChunk, f.to - f.pos);
  filling_ = true;
  lock.unlock();
  bool ok = pwrite(f.fd, kZeros, static_cast<size_t>(n), f.pos) == n;
  bool last = f.pos + n >= f.to;
  // Written back now, a chunk at a time, so no later sync inherits these pages.
  if (ok) {
    ok = last ? fdatasync(f.fd) == 0
              : sync_file_range(f.fd, f.pos, n,
                                SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                    SYNC_FILE_RANGE_WAIT_AFTER) == 0;
  }
  lock.lock();
  filling_ = false;
  fills_.front().pos += n;
  if (!ok || last) fills_.erase(fills_.begin());
  cv_.notify_all();  // StopFill
}

void Syncer::Main() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || pending_ || !fills_.empty(); });
    if (stop_ && !pending_) return;
    if (!pending_) {
      FillChunk(lock);
      continue;
    }
    pending_ = false;
    std::vector<Target> targets = std::move(request_);
    lock.unlock();
    Result r;
    r.err = SyncAll(targets, &r.failed_id);
    lock.lock();
    result_ = r;
    done_ = true;
    cv_.notify_all();  // Wait
    uint64_t one = 1;
    ssize_t w = write(notify_fd_, &one, sizeof one);
    (void)w;  // an eventfd write only fails at a counter of 2^64 - 2
  }
}

}  // namespace stalkd::storage
