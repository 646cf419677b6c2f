// StopRegex: a stop condition given as a regular expression (SGLang's stop_regex), read by
// read_stop_regexes (sampling_fields.h) and searched in the output text by StopMatcher
// (server/generation/stop_matcher.h).
#pragma once

#include <memory>
#include <string>

#include "runtime/structured/byte_dfa.h"

namespace beam::server {

// Its pattern (what finish reasons name) and its automaton matching a whole text
// (ByteDfa::from_full_match), which never matches the empty text.
struct StopRegex {
  std::string pattern;
  std::shared_ptr<const ByteDfa> dfa;
};

}  // namespace beam::server
