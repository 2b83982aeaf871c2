#include "command/owned_result.h"

namespace stalkd::command {

void OwnedResult::Assign(const Result& r) {
  // Which of the union's pointers is set follows from the outcome (values.h).
  const void* pointed = nullptr;
  switch (r.outcome) {
    case Outcome::kStats:
    case Outcome::kTubeStats:
    case Outcome::kJobStats:
    case Outcome::kTubeList:
    case Outcome::kReservedMany:
    case Outcome::kJobList:
      pointed = r.stats;
      break;
    default:
      break;
  }
  if (r.job.body.empty() && r.name.empty() && !pointed) {
    storage_.reset();
    result_ = r;
    return;
  }
  auto s = std::make_unique<Storage>();
  Result out = r;
  out.job.body = s->Keep(r.job.body);
  out.name = s->Keep(r.name);
  if (pointed) {
    switch (r.outcome) {
      case Outcome::kStats:
        s->stats = *r.stats;
        out.stats = &s->stats;
        break;
      case Outcome::kTubeStats:
        s->tube_stats = *r.tube_stats;
        s->tube_stats.name = s->Keep(r.tube_stats->name);
        out.tube_stats = &s->tube_stats;
        break;
      case Outcome::kJobStats: {
        JobStats& js = s->job_stats;
        js = *r.job_stats;
        js.tube = s->Keep(js.tube);
        js.state = s->Keep(js.state);
        if (const JobExtensionStats* x = r.job_stats->extension) {
          JobExtensionStats& e = s->extension;
          e = *x;
          e.bury_reason = s->Keep(x->bury_reason);
          e.key = s->Keep(x->key);
          s->attributes.reserve(x->attributes.size());
          for (const Attribute& a : x->attributes) {
            s->attributes.push_back({s->Keep(a.name), s->Keep(a.value)});
          }
          e.attributes = s->attributes;
          js.extension = &e;
        }
        out.job_stats = &js;
        break;
      }
      case Outcome::kTubeList:
        s->tubes.reserve(r.tubes->size());
        for (std::string_view t : *r.tubes) s->tubes.push_back(s->Keep(t));
        out.tubes = &s->tubes;
        break;
      case Outcome::kReservedMany:
        s->jobs.reserve(r.jobs->size());
        for (const JobView& j : *r.jobs) s->jobs.push_back({j.id, s->Keep(j.body)});
        out.jobs = &s->jobs;
        break;
      case Outcome::kJobList:
        s->ids = *r.ids;
        out.ids = &s->ids;
        break;
      default:
        break;
    }
  }
  storage_ = std::move(s);
  result_ = out;
}

}  // namespace stalkd::command
