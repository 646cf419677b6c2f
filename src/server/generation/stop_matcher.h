// StopMatcher: finds stop strings in streamed text. Text that could still be the start of a stop
// string is held back; nothing after a stop is ever released. The result does not depend on how
// the text is split into chunks: the stop that ends first wins (at equal ends, the longest).
// One owner thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace beam::server {

class StopMatcher {
 public:
  // `stops` must be non-empty strings. include_stop: the matched stop string is released too.
  explicit StopMatcher(std::vector<std::string> stops, bool include_stop = false);

  struct Result {
    std::string released;           // text that can no longer change (up to the stop, if any)
    std::optional<size_t> stop;     // index into the stop list when a stop string completed
    size_t stop_offset_bytes = 0;   // with `stop`: stream offset where the stop string starts
  };

  // Appends text. After a stop has been found, further input is ignored.
  Result feed(std::string_view text);
  // End of the stream: releases whatever is still held back (no stop can complete any more).
  std::string flush();

  bool stopped() const { return stopped_; }
  size_t held_back_bytes() const { return buffer_.size(); }
  const std::vector<std::string>& stops() const { return stops_; }

 private:
  std::vector<std::string> stops_;
  bool include_stop_ = false;
  std::string buffer_;        // unreleased text
  size_t released_bytes_ = 0;  // stream offset of buffer_[0]
  bool stopped_ = false;
};

// The one-shot answer StopMatcher gives for a whole text: the prefix to return and the stop.
StopMatcher::Result match_stop_strings(std::string_view text, const std::vector<std::string>& stops,
                                       bool include_stop = false);

}  // namespace beam::server
