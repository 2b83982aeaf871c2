#include "storage/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cstdlib>

namespace stalkd::storage::file {

namespace {

// The test hooks (see file.h). -1: off.
struct TestFaults {
  int64_t disk_bytes = -1;
  int64_t writes_left = -1;
  int64_t syncs_left = -1;  // used by one thread at a time: the loop's or the Syncer's
  int64_t sync_delay_ms = 0;
  int64_t allocated = 0;
};

TestFaults& Faults() {
  static TestFaults f = [] {
    TestFaults t;
    if (const char* v = getenv("STALKD_TEST_DISK_BYTES")) t.disk_bytes = atoll(v);
    if (const char* v = getenv("STALKD_TEST_FAIL_WRITES_AFTER")) t.writes_left = atoll(v);
    if (const char* v = getenv("STALKD_TEST_FAIL_SYNCS_AFTER")) t.syncs_left = atoll(v);
    if (const char* v = getenv("STALKD_TEST_SYNC_DELAY_MS")) t.sync_delay_ms = atoll(v);
    return t;
  }();
  return f;
}

}  // namespace

int Preallocate(int fd, int64_t size, int64_t had) {
  TestFaults& t = Faults();
  if (t.disk_bytes >= 0 && t.allocated + size - had > t.disk_bytes) return ENOSPC;
  int r = posix_fallocate(fd, 0, size);
  if (r == 0) t.allocated += size - had;
  return r;
}

int WriteAt(int fd, const char* p, size_t n, int64_t off) {
  TestFaults& t = Faults();
  if (t.writes_left == 0) return EIO;
  if (t.writes_left > 0) t.writes_left--;
  while (n > 0) {
    ssize_t w = pwrite(fd, p, n, off);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (w == 0) return EIO;
    p += w;
    n -= static_cast<size_t>(w);
    off += w;
  }
  return 0;
}

int SyncData(int fd) {
  TestFaults& t = Faults();
  if (t.syncs_left == 0) return EIO;
  if (t.syncs_left > 0) t.syncs_left--;
  if (t.sync_delay_ms > 0) usleep(static_cast<useconds_t>(t.sync_delay_ms * 1000));
  return fdatasync(fd) == 0 ? 0 : errno;
}

int SyncDir(int fd) { return fsync(fd) == 0 ? 0 : errno; }

int RenameNew(int dir_fd, const char* from, const char* to) {
  if (renameat2(dir_fd, from, dir_fd, to, RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return errno;
  // A file system without RENAME_NOREPLACE: a hard link cannot replace either.
  if (linkat(dir_fd, from, dir_fd, to, 0) != 0) return errno;
  unlinkat(dir_fd, from, 0);
  return 0;
}

void Found(int64_t size) { Faults().allocated += size; }

int Unlink(const char* path, int64_t size) {
  if (unlink(path) != 0) return errno;
  Faults().allocated -= size;
  return 0;
}

}  // namespace stalkd::storage::file
