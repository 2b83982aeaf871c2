#include "storage/beanstalkd_binlog.h"

#include <cstring>

namespace stalkd::storage {

namespace {

// beanstalkd's struct Jobrec on x86-64 (natural alignment, 80 bytes):
//   0 u64 id | 8 u32 pri | 16 i64 delay | 24 i64 ttr | 32 i32 body_size | 40 i64 created_at
//   48 i64 deadline_at | 56..75 u32 reserve/timeout/release/bury/kick counts | 76 u8 state
constexpr size_t kJobrecSize = 80;
constexpr int32_t kMaxTubeNameLen = 201;
enum : uint8_t { kInvalid = 0, kReady = 1, kReserved = 2, kBuried = 3, kDelayed = 4 };

template <typename T>
T Load(const char* p) {
  T v;
  memcpy(&v, p, sizeof v);  // the format is the host's: x86-64, little-endian
  return v;
}

}  // namespace

bool ReadBeanstalkdBinlog(const std::vector<BeanstalkdFile>& files, bool skip_damaged,
                          BeanstalkdReadResult* out, std::string* error) {
  for (size_t fi = 0; fi < files.size(); fi++) {
    const BeanstalkdFile& f = files[fi];
    const char* d = f.data.data();
    size_t n = f.data.size();
    bool last = fi + 1 == files.size();
    if (n == 0) continue;
    if (n < 4 || Load<int32_t>(d) != kBeanstalkdVersion) {
      *error = f.path + ": not a beanstalkd binlog of version 7";
      return false;
    }
    size_t off = 4;
    std::string why;
    size_t bad_at = 0;
    while (true) {
      size_t at = off;
      if (n - off < 4) break;  // end of file (beanstalkd truncates files when it closes them)
      int32_t namelen = Load<int32_t>(d + off);
      if (namelen < 0 || namelen >= kMaxTubeNameLen) {
        why = "tube name length " + std::to_string(namelen) + " out of range";
        bad_at = at;
        break;
      }
      size_t need = 4 + static_cast<size_t>(namelen) + kJobrecSize;
      if (n - off < need) {
        // Preallocated zeros shorter than a record also end the data.
        bool zeros = true;
        for (size_t k = off; k < n && zeros; k++) zeros = d[k] == 0;
        if (zeros) break;
        why = "record cut short";
        bad_at = at;
        break;
      }
      std::string_view tube(d + off + 4, static_cast<size_t>(namelen));
      const char* r = d + off + 4 + namelen;
      uint64_t id = Load<uint64_t>(r);
      if (id == 0) break;  // trailing zeros of a preallocated file
      int32_t body_size = Load<int32_t>(r + 32);
      uint8_t state = static_cast<uint8_t>(r[76]);
      if (state > kDelayed) {
        why = "unknown job state " + std::to_string(state);
        bad_at = at;
        break;
      }
      size_t rec_size = need;
      if (namelen > 0) {
        if (body_size < 2 || static_cast<size_t>(body_size) > n - off - need) {
          why = "job body of " + std::to_string(body_size) + " bytes cut short";
          bad_at = at;
          break;
        }
        rec_size += static_cast<size_t>(body_size);
      }
      off += rec_size;
      if (id > out->max_id) out->max_id = id;

      auto it = out->jobs.find(id);
      if (state == kInvalid) {
        if (it != out->jobs.end()) out->jobs.erase(it);
        continue;
      }
      if (it == out->jobs.end()) {
        // A short record whose full record was in a file beanstalkd already removed: the
        // job was deleted or moved; as beanstalkd does, ignore it.
        if (namelen == 0) continue;
        it = out->jobs.emplace(id, BeanstalkdJob{}).first;
      }
      BeanstalkdJob& j = it->second;
      if (namelen > 0) {
        j.tube.assign(tube);
        j.body.assign(r + kJobrecSize, static_cast<size_t>(body_size) - 2);
      }
      JobRecord& x = j.rec;
      x.id = id;
      x.pri = Load<uint32_t>(r + 8);
      x.delay_s = static_cast<uint32_t>(Load<int64_t>(r + 16) / 1'000'000'000);
      x.ttr_s = static_cast<uint32_t>(Load<int64_t>(r + 24) / 1'000'000'000);
      x.created_wall = Load<int64_t>(r + 40);
      x.deadline_wall = Load<int64_t>(r + 48);
      x.counts.reserves = Load<uint32_t>(r + 56);
      x.counts.timeouts = Load<uint32_t>(r + 60);
      x.counts.releases = Load<uint32_t>(r + 64);
      x.counts.buries = Load<uint32_t>(r + 68);
      x.counts.kicks = Load<uint32_t>(r + 72);
      x.state = state == kBuried    ? DiskState::kBuried
                : state == kDelayed ? DiskState::kDelayed
                                    : DiskState::kReady;  // reserved comes back ready
    }
    if (why.empty()) continue;
    std::string where = f.path + ": offset " + std::to_string(bad_at);
    if (last) {
      out->notes.push_back(where + ": " + why + "; torn tail of the newest file ignored");
    } else if (skip_damaged) {
      out->skipped++;
      out->notes.push_back(where + ": " + why + "; skipped the rest of the file");
    } else {
      *error =
          where + ": damaged record (" + why + "); start with --binlog-skip-damaged to skip it";
      return false;
    }
  }
  return true;
}

}  // namespace stalkd::storage
