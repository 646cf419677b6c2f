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

StopMatcher::StopMatcher(std::vector<std::string> stops, bool include_stop)
    : stops_(std::move(stops)), include_stop_(include_stop) {
  for (const std::string& s : stops_) BEAM_CHECK(!s.empty()) << "stop strings are validated non-empty";
}

StopMatcher::Result StopMatcher::feed(std::string_view text) {
  Result r;
  if (stopped_) return r;
  buffer_.append(text);
  if (stops_.empty()) {
    r.released.swap(buffer_);
    released_bytes_ += r.released.size();
    return r;
  }
  if (std::optional<Found> f = first_ending(buffer_, stops_)) {
    stopped_ = true;
    r.stop = f->index;
    r.stop_offset_bytes = released_bytes_ + f->start;
    r.released = buffer_.substr(0, include_stop_ ? f->end : f->start);
    released_bytes_ += r.released.size();
    buffer_.clear();
    return r;
  }
  const size_t keep = held_suffix(buffer_, stops_);
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
  r.released = std::string(text.substr(0, include_stop ? f->end : f->start));
  return r;
}

}  // namespace beam::server
