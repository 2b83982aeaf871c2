#include "http/dashboard_search.h"

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "http/dashboard_call.h"
#include "http/dashboard_json.h"

// The dashboard's search of job bodies: see dashboard_search.h and docs/DASHBOARD.md.
namespace stalkd::http::dash {

using command::Outcome;
using command::Result;
using command::Session;
using command::StateFilter;

namespace {

constexpr StateFilter kStateOrder[] = {StateFilter::kReady, StateFilter::kDelayed,
                                       StateFilter::kReserved, StateFilter::kBuried};
// A step with less than this left of its byte budget starts no body: the next step does.
constexpr size_t kMinPiece = 64 * 1024;

char Fold(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// The state searched after `s` when searching all of them, if any.
std::optional<StateFilter> StateAfter(StateFilter s) {
  const StateFilter* at = std::find(std::begin(kStateOrder), std::end(kStateOrder), s);
  if (at == std::end(kStateOrder) || at + 1 == std::end(kStateOrder)) return std::nullopt;
  return at[1];
}

struct Hit {
  uint64_t id;
  StateFilter state;
  size_t body_size, at, snippet_at;
  std::string snippet;
};

// One search: list-jobs kSearchListIds ids at a time, then each job's body by peek, at most
// kSearchSliceJobs jobs and kSearchSliceBytes bytes a step (a longer body is scanned in
// pieces over several steps, peeked again each step: it may have gone meanwhile).
class BodySearch {
 public:
  BodySearch(Session& s, BodyQuery q)
      : s_(s), q_(std::move(q)), state_(q_.at.state), from_(q_.at.from) {}

  Co<> Run(Response* resp) {
    for (;;) {
      bool done = co_await Step(resp);
      if (done) co_return;
      co_await Slice();
    }
  }

 private:
  // One step; true once *resp holds the answer.
  Co<bool> Step(Response* resp) {
    if (next_ == ids_.size() && from_ != 0) {
      Result r = co_await Ask(s_.ListJobs(q_.tube, state_, from_, kSearchListIds));
      list_calls_++;
      ids_.clear();
      next_ = 0;
      if (r.outcome == Outcome::kJobList) {
        ids_.assign(r.ids->begin(), r.ids->end());
        from_ = r.number;
      } else {
        from_ = 0;  // the tube has gone
      }
    }
    uint32_t jobs = 0;
    size_t bytes = 0;
    while (next_ < ids_.size() && jobs < kSearchSliceJobs && hits_.size() < q_.limit) {
      if (bytes > 0 && bytes + kMinPiece > kSearchSliceBytes) break;
      if (offset_ == 0 && (scanned_ >= kSearchMaxJobs || scanned_bytes_ >= kSearchMaxBytes)) break;
      uint64_t id = ids_[next_];
      Result p = co_await Ask(s_.Peek(id));
      if (p.outcome != Outcome::kFound || offset_ > p.job.body.size()) {  // gone meanwhile
        Next();
        continue;
      }
      std::string_view body = p.job.body;
      size_t end = std::min(body.size(), offset_ + (kSearchSliceBytes - bytes));
      size_t at = FindInBody(body, offset_, end, q_.text, q_.fold);
      bytes += end - offset_;
      scanned_bytes_ += end - offset_;
      if (at != std::string_view::npos) {
        size_t from = at > kSnippetContext ? at - kSnippetContext : 0;
        size_t to = std::min(body.size(), at + q_.text.size() + kSnippetContext);
        hits_.push_back(
            Hit{id, state_, body.size(), at, from, std::string(body.substr(from, to - from))});
      } else if (end < body.size()) {
        offset_ = end;  // the rest of the body in the next step
        break;
      }
      jobs++;
      Next();
    }
    if (next_ == ids_.size() && from_ == 0 && q_.state == StateFilter::kAll) {
      if (std::optional<StateFilter> after = StateAfter(state_)) {
        state_ = *after;
        from_ = 1;
      }
    }
    bool end = next_ == ids_.size() && from_ == 0;
    bool bounded = offset_ == 0 && (hits_.size() >= q_.limit || scanned_ >= kSearchMaxJobs ||
                                    scanned_bytes_ >= kSearchMaxBytes ||
                                    (next_ == ids_.size() && list_calls_ >= kSearchMaxListCalls));
    if (!end && !bounded) co_return false;
    Answer(end, resp);
    co_return true;
  }

  // The job at next_ is done with.
  void Next() {
    next_++;
    offset_ = 0;
    scanned_++;
  }

  void Answer(bool end, Response* resp) {
    Ok(resp);
    JsonWriter w(&resp->body);
    auto number = [&w](std::string_view key, uint64_t n) {
      w.Key(key);
      w.Uint(n);
    };
    auto text = [&w](std::string_view key, std::string_view s) {
      w.Key(key);
      w.String(s);
    };
    w.StartObject();
    text("tube", q_.tube);
    text("state", StateName(q_.state));
    number("scanned", scanned_);
    number("scanned_bytes", scanned_bytes_);
    w.Key("matches");
    w.StartArray();
    std::string b64;
    for (const Hit& h : hits_) {
      w.StartObject();
      number("id", h.id);
      text("state", StateName(h.state));
      number("body_size", h.body_size);
      number("at", h.at);
      number("snippet_at", h.snippet_at);
      b64.clear();
      AppendBase64(h.snippet, &b64);
      text("snippet", b64);
      w.EndObject();
    }
    w.EndArray();
    w.Key("cursor");
    if (end) {
      w.Null();
    } else {
      w.String(CursorText({state_, next_ < ids_.size() ? ids_[next_] : from_}));
    }
    w.EndObject();
  }

  Session& s_;
  BodyQuery q_;
  StateFilter state_;
  uint64_t from_;              // list-jobs' next id in state_; 0: none
  std::vector<uint64_t> ids_;  // listed, to be scanned from next_
  size_t next_ = 0;
  size_t offset_ = 0;  // of the body at next_ scanned so far
  uint32_t list_calls_ = 0;
  uint64_t scanned_ = 0, scanned_bytes_ = 0;
  std::vector<Hit> hits_;
};

}  // namespace

size_t FindInBody(std::string_view body, size_t begin, size_t end, std::string_view needle,
                  bool fold, uint64_t* comparisons) {
  end = std::min(end, body.size());
  if (needle.empty() || needle.size() > end) return std::string_view::npos;
  begin = begin >= needle.size() - 1 ? begin - (needle.size() - 1) : 0;
  if (begin >= end) return std::string_view::npos;
  std::string_view piece = body.substr(begin, end - begin);
  // Boyer-Moore (its good-suffix rule bounds a first match's search to a few comparisons a
  // byte): a naive search is bytes x needle length, a quarter of a billion comparisons a
  // step for a megabyte of "aaa..." and the needle "aaa...ab".
  auto key = [fold](char c) { return fold ? Fold(c) : c; };
  auto hash = [key](char c) { return static_cast<size_t>(static_cast<unsigned char>(key(c))); };
  auto equal = [key, comparisons](char a, char b) {
    if (comparisons) ++*comparisons;
    return key(a) == key(b);
  };
  std::boyer_moore_searcher searcher(needle.begin(), needle.end(), hash, equal);
  auto it = std::search(piece.begin(), piece.end(), searcher);
  return it == piece.end() ? std::string_view::npos : begin + (it - piece.begin());
}

std::string CursorText(const SearchCursor& c) {
  return std::string(StateName(c.state)) + ":" + std::to_string(c.from);
}

std::optional<SearchCursor> ParseCursor(std::string_view text) {
  size_t colon = text.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  std::optional<StateFilter> state = ParseState(text.substr(0, colon), false);
  std::string_view id = text.substr(colon + 1);
  std::optional<uint64_t> from = id.size() <= 20 ? ParseUint(id, 64) : std::nullopt;
  if (!state || !from || *from == 0) return std::nullopt;
  return SearchCursor{*state, *from};
}

Co<> SearchBodies(Session& s, BodyQuery q, Response* resp) {
  BodySearch search(s, std::move(q));
  co_await search.Run(resp);
}

Co<> DashboardCall::Search(const std::string& tube) {
  BodyQuery q;
  q.tube = tube;
  q.text = target_.Query("q").value_or("");
  if (q.text.empty() || q.text.size() > kMaxSearchText) co_return Fail(&resp(), 400, "invalid q");
  std::optional<uint64_t> match_case = Number("match_case", 0, 0, 1);
  if (!match_case) co_return;
  q.fold = *match_case == 0;
  if (q.fold) std::transform(q.text.begin(), q.text.end(), q.text.begin(), Fold);
  std::optional<StateFilter> state = ParseState(target_.Query("state").value_or("all"), true);
  if (!state) co_return Fail(&resp(), 400, "invalid state");
  q.state = *state;
  q.at.state = *state == StateFilter::kAll ? kStateOrder[0] : *state;
  if (std::optional<std::string_view> c = target_.Query("cursor")) {
    std::optional<SearchCursor> at = ParseCursor(*c);
    bool fits = at && (*state == StateFilter::kAll || at->state == *state);
    if (!fits) co_return Fail(&resp(), 400, "invalid cursor");
    q.at = *at;
  }
  std::optional<uint64_t> limit = Number("limit", kDefaultSearchHits, 1, kMaxSearchHits);
  if (!limit) co_return;
  q.limit = static_cast<uint32_t>(*limit);
  TubeRow row;
  bool exists = co_await TubeExists(tube, &row);
  if (!exists) co_return;
  co_await SearchBodies(s_, std::move(q), &resp());
}

}  // namespace stalkd::http::dash
