// StopMatcher: finds stop strings and stop regexes (SGLang's stop_regex) in streamed text. Text
// that could still be the start of a stop is held back; nothing after a stop is ever released.
// The result does not depend on how the text is split into chunks: the stop that ends first wins
// (at equal ends, the longest). One owner thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/api/stop_regex.h"

namespace beam::server {

class StopMatcher {
 public:
  // `stops` must be non-empty strings. include_stop: the matched stop text is released too.
  explicit StopMatcher(std::vector<std::string> stops, bool include_stop = false,
                       std::vector<StopRegex> regexes = {});

  struct Result {
    std::string released;  // text that can no longer change (up to the stop, if any)
    // When a stop completed: its index in the stop strings, then the regexes (stops().size() + i).
    std::optional<size_t> stop;
    size_t stop_offset_bytes = 0;  // with `stop`: stream offsets where the stopping text starts
    size_t stop_end_bytes = 0;     // and ends
  };

  // Appends text. After a stop has been found, further input is ignored.
  Result feed(std::string_view text);
  // End of the stream: releases whatever is still held back (no stop can complete any more).
  std::string flush();

  bool stopped() const { return stopped_; }
  size_t held_back_bytes() const { return buffer_.size(); }
  const std::vector<std::string>& stops() const { return stops_; }

 private:
  // One regex's search: the states of the matches still possible, each with its earliest start
  // (stream offset); two starts in one state have the same future, so the earlier one is kept.
  struct Live {
    int32_t state;
    size_t start;
  };
  // Moves regex r's search past `byte` at stream offset `at`; the earliest start of a match
  // ending after it, if any.
  std::optional<size_t> step_regex(size_t r, uint8_t byte, size_t at);

  std::vector<std::string> stops_;
  bool include_stop_ = false;
  std::vector<StopRegex> regexes_;
  std::vector<std::vector<Live>> live_;  // [regex]
  std::vector<Live> scratch_;
  std::string buffer_;        // unreleased text
  size_t released_bytes_ = 0;  // stream offset of buffer_[0]
  bool stopped_ = false;
};

// The one-shot answer StopMatcher gives for a whole text: the prefix to return and the stop.
StopMatcher::Result match_stop_strings(std::string_view text, const std::vector<std::string>& stops,
                                       bool include_stop = false);

}  // namespace beam::server
