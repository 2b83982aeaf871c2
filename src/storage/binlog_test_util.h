#pragma once

// What the binlog's tests share (binlog_test.cc, binlog_ext_test.cc): temporary
// directories, files, and an engine with a binlog flushed as the server does it.

#include <dirent.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "base/clock.h"
#include "engine/engine.h"
#include "storage/binlog.h"

namespace stalkd::storage {
namespace testing_util {

using engine::Engine;
using engine::Job;

inline std::string MakeTempDir() {
  char tmpl[] = "/tmp/stalkd_store_test.XXXXXX";
  char* d = mkdtemp(tmpl);
  EXPECT_NE(d, nullptr);
  return d;
}

inline void RemoveDir(const std::string& dir) {
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
        unlink((dir + "/" + e->d_name).c_str());
      }
    }
    closedir(d);
  }
  rmdir(dir.c_str());
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << data;
}

inline std::vector<std::string> Segments(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (strncmp(e->d_name, "binlog.", 7) == 0) out.push_back(e->d_name);
    }
    closedir(d);
  }
  return out;
}

// An engine with a store on `dir`; the store is flushed like the server does.
struct Instance {
  FakeClock& clock;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Binlog> store;
  engine::Session* session = nullptr;
  std::string error;
  bool ok = false;

  Instance(FakeClock& c, const std::string& dir, int64_t segment = 4096, bool skip_damaged = false,
           bool background = false, bool disk_tier = false)
      : clock(c) {
    engine = std::make_unique<Engine>(clock);
    BinlogOptions o;
    o.dir = dir;
    o.segment_size = segment;
    o.fsync_ms = 0;
    o.skip_damaged = skip_damaged;
    o.background_sync = background;
    o.disk_tier = disk_tier;  // keeps the kFull records' places (RewriteWhole), no tier
    store = std::make_unique<Binlog>(o, clock);
    ok = store->Lock(&error) && store->Recover(engine.get(), &error);
    if (ok) engine->set_log(store.get());
    session = engine->OpenSession(nullptr);
  }
  ~Instance() {
    if (ok) store->Close();
    engine->set_log(nullptr);
    engine->CloseSession(session);
  }
  uint64_t Put(std::string_view body, uint32_t pri = 1, uint32_t delay = 0,
               const std::string& tube = "default", const engine::JobOptions& opts = {}) {
    engine->Use(session, tube);
    Job* j = engine->NewJob(session, pri, delay, 60, static_cast<uint32_t>(body.size()), opts);
    memcpy(j->data(), body.data(), body.size());
    memcpy(j->data() + body.size(), "\r\n", 2);
    uint64_t id = j->id;
    if (engine->Put(session, j) != Engine::PutResult::kInserted) return 0;
    return id;
  }
  void Flush() { store->Flush(); }
  // Puts a job of `size` bytes and deletes it, each flushed: what makes compaction work.
  bool PutAndDelete(size_t size) {
    uint64_t id = Put(std::string(size, 'x'));
    Flush();
    bool deleted = id != 0 && engine->Delete(session, id);
    Flush();
    return deleted;
  }
  // Closes the store as a shutdown does (so another Instance may open the directory).
  void Stop() {
    store->Close();
    engine->set_log(nullptr);
    ok = false;
    store.reset();
  }
  // background: waits for the running sync and takes its result, as the server does.
  bool FinishSync() {
    pollfd p{store->sync_fd(), POLLIN, 0};
    if (poll(&p, 1, 10'000) != 1) return false;
    store->OnSyncDone();
    return true;
  }
};

class BinlogTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir(); }
  void TearDown() override { RemoveDir(dir_); }
  std::string dir_;
  FakeClock clock_;
};

}  // namespace testing_util
}  // namespace stalkd::storage
