#pragma once

// The system calls the binlog uses, in one place, each returning 0 or an errno value.
//
// Test-only fault hooks, read from the environment once (never set them in production):
//   STALKD_TEST_DISK_BYTES=N          preallocations beyond N bytes in total fail (ENOSPC),
//                                     as on a disk of N bytes, which the segments found at
//                                     start-up (Found) take their room of; unlinked segments
//                                     give back
//   STALKD_TEST_FAIL_WRITES_AFTER=N   after N successful writes every write fails (EIO)
//   STALKD_TEST_FAIL_SYNCS_AFTER=N    after N successful fdatasyncs every one fails (EIO)
//   STALKD_TEST_SYNC_DELAY_MS=N       every fdatasync first sleeps N ms (a slow disk)

#include <cstddef>
#include <cstdint>

namespace stalkd::storage::file {

// Allocates [0, size) of fd so later writes there cannot fail for lack of space; `had`
// bytes of it were allocated before (a file that grows).
int Preallocate(int fd, int64_t size, int64_t had = 0);
// Writes all n bytes at offset off.
int WriteAt(int fd, const char* p, size_t n, int64_t off);
int SyncData(int fd);
int SyncDir(int fd);
// Renames `from` to `to` in the directory dir_fd, failing (EEXIST) if `to` exists.
int RenameNew(int dir_fd, const char* from, const char* to);
// The file of `size` preallocated bytes at path is removed.
int Unlink(const char* path, int64_t size);
// A segment of `size` bytes was found at start-up: it takes its room on the disk that
// STALKD_TEST_DISK_BYTES simulates (nothing otherwise).
void Found(int64_t size);

}  // namespace stalkd::storage::file
