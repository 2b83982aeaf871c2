#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "command/values.h"

namespace stalkd::command {

// A Result with everything it points to copied: the job body, the name, the stats structs
// (a JobStats' JobExtensionStats and attributes too), the tube list, the jobs, the ids. Its
// result() views its own storage, so it stays valid for as long as the OwnedResult (a
// move keeps it valid; a copy copies again). For a front end that must keep a late result
// beyond Client::OnResult, and for a store that answers from data it does not keep.
class OwnedResult {
 public:
  OwnedResult() = default;
  explicit OwnedResult(const Result& r) { Assign(r); }
  OwnedResult(const OwnedResult& o) { Assign(o.result_); }
  OwnedResult& operator=(const OwnedResult& o) {
    if (this != &o) Assign(o.result_);
    return *this;
  }
  OwnedResult(OwnedResult&&) noexcept = default;
  OwnedResult& operator=(OwnedResult&&) noexcept = default;

  // Copies `r` and all it points to, replacing what was held.
  void Assign(const Result& r);
  const Result& result() const { return result_; }

 private:
  // Everything the result points to; allocated only for a result that points anywhere, and
  // never moved once made (the views point into it).
  struct Storage {
    std::deque<std::string> text;  // every string viewed (a deque never moves its elements)
    ServerStats stats;
    TubeStats tube_stats;
    JobStats job_stats;
    JobExtensionStats extension;
    std::vector<Attribute> attributes;
    std::vector<std::string_view> tubes;
    std::vector<JobView> jobs;
    std::vector<uint64_t> ids;
    std::string_view Keep(std::string_view s) { return s.empty() ? s : text.emplace_back(s); }
  };

  Result result_;
  std::unique_ptr<Storage> storage_;
};

}  // namespace stalkd::command
