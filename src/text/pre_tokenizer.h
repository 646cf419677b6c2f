// The tokenizer.json pre_tokenizer: Split steps (a regex or literal, with Hugging Face's five
// delimiter behaviours and invert) followed by the ByteLevel step, which may split with the GPT-2
// regex and add a prefix space. Produces the words that BPE encodes, as raw bytes.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "text/pcre2_regex.h"

namespace beam::text {

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct SplitStep {
  Pcre2Regex pattern;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
};

// Per-thread scratch for PreTokenizer::run; reuse it across calls to avoid allocations.
struct PreTokenizerScratch {
  RegexMatchData match_data;
  std::vector<std::vector<ByteRange>> matches;  // per step
  std::vector<std::vector<ByteRange>> pieces;   // per step
  std::vector<ByteRange> byte_level_matches;    // GPT-2 regex matches of the ByteLevel step
  std::string prefixed;                         // piece with the ByteLevel prefix space
};

class PreTokenizer {
 public:
  // `splits` run in order; then the ByteLevel step (use_regex splits with the GPT-2 pattern;
  // add_prefix_space prepends " " to every piece that does not start with one).
  static Expected<PreTokenizer> create(std::vector<SplitStep> splits, bool byte_level_use_regex,
                                       bool add_prefix_space);

  // Calls on_word for every word of valid UTF-8 `text`, in order.
  Status run(std::string_view text, PreTokenizerScratch& scratch,
             const std::function<void(std::string_view)>& on_word) const;

 private:
  Status run_step(size_t step, std::string_view text, PreTokenizerScratch& scratch,
                  const std::function<void(std::string_view)>& on_word) const;
  Status run_byte_level(std::string_view piece, PreTokenizerScratch& scratch,
                        const std::function<void(std::string_view)>& on_word) const;

  std::vector<SplitStep> steps_;
  std::optional<Pcre2Regex> byte_level_regex_;  // the GPT-2 split when use_regex
  bool add_prefix_space_ = false;
};

// Applies a Split behaviour to the matches of a pattern in a text of `length` bytes (invert
// swaps matches and gaps) and returns the non-empty pieces, as Hugging Face's
// NormalizedString::split does.
void apply_split_behavior(const std::vector<ByteRange>& matches, uint32_t length,
                          SplitBehavior behavior, bool invert, std::vector<ByteRange>& pieces);

}  // namespace beam::text
