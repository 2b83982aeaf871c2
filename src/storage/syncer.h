#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace stalkd::storage {

// Runs fdatasync/fsync on a thread of its own, so the event loop goes on reading and
// processing the next batch of commands while the previous batch is being made durable.
// One request at a time: Start hands it a list of files, the thread syncs them in order and
// then makes notify_fd() readable; the owner (on its own thread) calls Collect.
//
// The owner must keep every fd of a request open, and not start another, until Collect has
// returned true.
//
// Between syncs the thread also fills preallocated files with zeros and writes them back
// (Fill): fallocate leaves "unwritten" extents, and the first write into one makes the next
// fdatasync write file-system metadata too, which costs about half as much again as the data
// itself. A filled file is overwritten in place, so its syncs write data only.
class Syncer {
 public:
  struct Target {
    int fd;
    bool dir;     // fsync the directory rather than fdatasync a file
    uint32_t id;  // the owner's name for it, returned on failure
  };
  struct Result {
    int err = 0;             // 0, or the errno of the first failed sync (later ones are skipped)
    uint32_t failed_id = 0;  // the Target::id that failed, when err != 0
  };

  Syncer();
  ~Syncer();  // waits for a running request
  Syncer(const Syncer&) = delete;
  Syncer& operator=(const Syncer&) = delete;

  bool ok() const { return notify_fd_ >= 0; }
  // Readable (an eventfd) once a started request has finished.
  int notify_fd() const { return notify_fd_; }
  bool busy() const { return busy_; }

  void Start(std::vector<Target> targets);
  // Syncs targets in order on the calling thread; returns 0, or the first error (and its
  // target's id in *failed_id), skipping the rest.
  static int SyncAll(const std::vector<Target>& targets, uint32_t* failed_id);
  // If the running request has finished: *r is its outcome, true. Never blocks.
  bool Collect(Result* r);
  // Blocks until the running request (if any) has finished, then returns as Collect.
  bool Wait(Result* r);

  // Zero-fills bytes [from, to) of fd, a chunk at a time while no sync is waiting, then
  // syncs them. Ends early at the first error (the file is merely left as it was).
  void Fill(int fd, uint32_t id, int64_t from, int64_t to);
  // Stops filling `id` (waiting for a chunk being written): after it returns the thread
  // never touches that fd again, and the owner may write to the file or close it.
  void StopFill(uint32_t id);
  // Fills not yet finished (for tests).
  size_t fills_pending();

  static constexpr int64_t kFillChunk = 256 * 1024;

 private:
  void Main();
  void FillChunk(std::unique_lock<std::mutex>& lock);

  struct FillJob {
    int fd;
    uint32_t id;
    int64_t pos, to;
  };

  int notify_fd_ = -1;
  bool busy_ = false;  // owner's view: started and not yet collected

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Target> request_;  // guarded by mu_
  bool pending_ = false;         // guarded: a request waits for the thread
  bool done_ = false;            // guarded: the request has finished
  bool stop_ = false;            // guarded
  Result result_;                // guarded
  std::vector<FillJob> fills_;   // guarded; the first is the one being worked on
  bool filling_ = false;         // guarded: the thread is writing a chunk of fills_[0]
  std::thread thread_;
};

}  // namespace stalkd::storage
