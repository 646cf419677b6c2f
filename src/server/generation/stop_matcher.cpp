// StopMatcher (see stop_matcher.h). Why chunking cannot change the answer: released text never
// contains the start of a partial stop occurrence (the longest buffer suffix that is a proper
// prefix of a stop is held back), so every occurrence is seen whole in the buffer of the feed in
// which it completes, and occurrences are found in order of their end offsets.
#include "server/generation/stop_matcher.h"

#include <algorithm>

#include "core/check.h"

namespace beam::server {
namespace {

struct Found {
  size_t index = 0;
  size_t start = 0;
  size_t end = 0;
};

// The occurrence in `text` that ends first; at equal ends the one that starts first.
std::optional<Found> first_ending(std::string_view text, const std::vector<std::string>& stops) {
  std::optional<Found> best;
  for (size_t i = 0; i < stops.size(); ++i) {
    const size_t pos = text.find(stops[i]);
    if (pos == std::string_view::npos) continue;
    Found f{i, pos, pos + stops[i].size()};
    if (!best || f.end < best->end || (f.end == best->end && f.start < best->start)) best = f;
  }
  return best;
}

// Length of the longest suffix of `text` that is a proper prefix of some stop string.
size_t held_suffix(std::string_view text, const std::vector<std::string>& stops) {
  size_t held = 0;
  for (const std::string& s : stops) {
    const size_t max_len = std::min(text.size(), s.size() - 1);
    for (size_t len = max_len; len > held; --len) {
      if (text.substr(text.size() - len) == std::string_view(s).substr(0, len)) {
        held = len;
        break;
      }
    }
  }
  return held;
}

}  // namespace

StopMatcher::StopMatcher(std::vector<std::string> stops, bool include_stop,
                         std::vector<StopRegex> regexes)
    : stops_(std::move(stops)),
      include_stop_(include_stop),
      regexes_(std::move(regexes)),
      live_(regexes_.size()) {
  for (const std::string& s : stops_) BEAM_CHECK(!s.empty()) << "stop strings are validated non-empty";
  for (const StopRegex& x : regexes_)
    BEAM_CHECK(x.dfa && !x.dfa->accepting(x.dfa->start())) << "stop regex '" << x.pattern << "'";
}

std::optional<size_t> StopMatcher::step_regex(size_t r, uint8_t byte, size_t at) {
  const ByteDfa& dfa = *regexes_[r].dfa;
  std::vector<Live>& live = live_[r];
  live.push_back({dfa.start(), at});  // a match starting at this byte
  scratch_.clear();
  std::optional<size_t> match;
  for (const Live& l : live) {  // in order of start: the first to reach a state keeps it
    const int32_t s = dfa.next(l.state, byte);
    if (s == ByteDfa::kDead) continue;
    bool seen = false;
    for (const Live& k : scratch_) seen = seen || k.state == s;
    if (seen) continue;
    scratch_.push_back({s, l.start});
    if (dfa.accepting(s) && !match) match = l.start;
  }
  live.swap(scratch_);
  return match;
}

StopMatcher::Result StopMatcher::feed(std::string_view text) {
  Result r;
  if (stopped_) return r;
  const size_t base = released_bytes_ + buffer_.size();  // stream offset of text[0]
  buffer_.append(text);
  if (stops_.empty() && regexes_.empty()) {
    r.released.swap(buffer_);
    released_bytes_ += r.released.size();
    return r;
  }
  // The first stop found (found: whether there is one), as stream offsets. (Plain values, not
  // std::optional: gcc 12 reports its copies as maybe uninitialized.)
  Found f;
  bool found = false;
  if (!stops_.empty()) {
    if (const std::optional<Found> s = first_ending(buffer_, stops_)) {
      f = Found{s->index, s->start + released_bytes_, s->end + released_bytes_};
      found = true;
    }
  }
  // The regexes read the new bytes up to the first match (none can end before a string's end).
  for (size_t i = 0; i < text.size() && !(found && f.end <= base + i); ++i) {
    Found m;
    bool matched = false;
    for (size_t x = 0; x < regexes_.size(); ++x) {
      const std::optional<size_t> start = step_regex(x, static_cast<uint8_t>(text[i]), base + i);
      if (start && (!matched || *start < m.start)) {
        m = Found{stops_.size() + x, *start, base + i + 1};
        matched = true;
      }
    }
    if (matched) {
      if (!found || m.end < f.end || (m.end == f.end && m.start < f.start)) f = m;
      found = true;
      break;
    }
  }
  if (found) {
    stopped_ = true;
    r.stop = f.index;
    r.stop_offset_bytes = f.start;
    r.stop_end_bytes = f.end;
    r.released = buffer_.substr(0, (include_stop_ ? f.end : f.start) - released_bytes_);
    released_bytes_ += r.released.size();
    buffer_.clear();
    return r;
  }
  size_t keep = stops_.empty() ? 0 : held_suffix(buffer_, stops_);
  for (const std::vector<Live>& live : live_)  // from the earliest start a regex may still match
    for (const Live& l : live) keep = std::max(keep, released_bytes_ + buffer_.size() - l.start);
  r.released = buffer_.substr(0, buffer_.size() - keep);
  buffer_.erase(0, buffer_.size() - keep);
  released_bytes_ += r.released.size();
  return r;
}

std::string StopMatcher::flush() {
  std::string out;
  if (stopped_) return out;
  out.swap(buffer_);
  released_bytes_ += out.size();
  return out;
}

StopMatcher::Result match_stop_strings(std::string_view text, const std::vector<std::string>& stops,
                                       bool include_stop) {
  StopMatcher::Result r;
  std::optional<Found> f = stops.empty() ? std::nullopt : first_ending(text, stops);
  if (!f) {
    r.released = std::string(text);
    return r;
  }
  r.stop = f->index;
  r.stop_offset_bytes = f->start;
  r.stop_end_bytes = f->end;
  r.released = std::string(text.substr(0, include_stop ? f->end : f->start));
  return r;
}

}  // namespace beam::server
