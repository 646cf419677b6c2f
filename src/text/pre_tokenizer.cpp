// Pre-tokenization: Split behaviours and the ByteLevel step.
#include "text/pre_tokenizer.h"

#include <algorithm>

namespace beam::text {

namespace {

// The regex of the ByteLevel pre-tokenizer when use_regex is set (GPT-2).
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct Span {
  ByteRange range;
  bool is_match;
};

}  // namespace

void apply_split_behavior(const std::vector<ByteRange>& matches, uint32_t length,
                          SplitBehavior behavior, bool invert, std::vector<ByteRange>& pieces) {
  pieces.clear();
  // Every byte belongs to one span; a span is a match or a gap (swapped by invert).
  // Spans are produced on the fly and folded into pieces per behaviour.
  bool previous_match = false;
  bool have_previous = false;
  auto fold = [&](ByteRange r, bool is_match) {
    switch (behavior) {
      case SplitBehavior::kRemoved:
        if (!is_match) pieces.push_back(r);
        break;
      case SplitBehavior::kIsolated:
        pieces.push_back(r);
        break;
      case SplitBehavior::kMergedWithPrevious:
        if (is_match && !previous_match && !pieces.empty()) {
          pieces.back().second = r.second;
        } else {
          pieces.push_back(r);
        }
        break;
      case SplitBehavior::kContiguous:
        if (have_previous && is_match == previous_match) {
          pieces.back().second = r.second;
        } else {
          pieces.push_back(r);
        }
        break;
      case SplitBehavior::kMergedWithNext:
        // Folded right to left below; never reached here.
        break;
    }
    previous_match = is_match;
    have_previous = true;
  };
  std::vector<Span> spans;
  spans.reserve(matches.size() * 2 + 1);
  uint32_t prev = 0;
  for (const ByteRange& m : matches) {
    if (m.first > prev) spans.push_back({{prev, m.first}, invert});
    spans.push_back({m, !invert});
    prev = m.second;
  }
  if (prev < length) spans.push_back({{prev, length}, invert});
  if (behavior == SplitBehavior::kMergedWithNext) {
    // Mirror of MergedWithPrevious: a match joins the piece that follows it.
    for (size_t i = spans.size(); i-- > 0;) {
      const Span& s = spans[i];
      if (s.is_match && !previous_match && !pieces.empty()) {
        pieces.back().first = s.range.first;
      } else {
        pieces.push_back(s.range);
      }
      previous_match = s.is_match;
    }
    std::reverse(pieces.begin(), pieces.end());
  } else {
    for (const Span& s : spans) fold(s.range, s.is_match);
  }
  std::erase_if(pieces, [](const ByteRange& r) { return r.second <= r.first; });
}

Expected<PreTokenizer> PreTokenizer::create(std::vector<SplitStep> splits, bool byte_level_use_regex,
                                            bool add_prefix_space) {
  PreTokenizer p;
  p.steps_ = std::move(splits);
  p.add_prefix_space_ = add_prefix_space;
  if (byte_level_use_regex) {
    BEAM_ASSIGN_OR_RETURN(Pcre2Regex gpt2, Pcre2Regex::from_oniguruma(kGpt2Pattern));
    p.byte_level_regex_ = std::move(gpt2);
  }
  return p;
}

Status PreTokenizer::run(std::string_view text, PreTokenizerScratch& scratch,
                         const std::function<void(std::string_view)>& on_word) const {
  if (scratch.matches.size() < steps_.size()) {
    scratch.matches.resize(steps_.size());
    scratch.pieces.resize(steps_.size());
  }
  return run_step(0, text, scratch, on_word);
}

Status PreTokenizer::run_step(size_t step, std::string_view text, PreTokenizerScratch& scratch,
                              const std::function<void(std::string_view)>& on_word) const {
  if (text.empty()) return ok_status();
  if (step == steps_.size()) return run_byte_level(text, scratch, on_word);
  const SplitStep& split = steps_[step];
  std::vector<ByteRange>& matches = scratch.matches[step];
  BEAM_RETURN_IF_ERROR(split.pattern.find_all(text, scratch.match_data, matches));
  if (split.behavior == SplitBehavior::kIsolated && !split.invert) {
    // Hot path: matches and the gaps between them, in order, without a pieces list.
    uint32_t prev = 0;
    for (const ByteRange& m : matches) {
      if (m.first > prev) BEAM_RETURN_IF_ERROR(run_step(step + 1, text.substr(prev, m.first - prev), scratch, on_word));
      BEAM_RETURN_IF_ERROR(run_step(step + 1, text.substr(m.first, m.second - m.first), scratch, on_word));
      prev = m.second;
    }
    if (prev < text.size()) BEAM_RETURN_IF_ERROR(run_step(step + 1, text.substr(prev), scratch, on_word));
    return ok_status();
  }
  std::vector<ByteRange>& pieces = scratch.pieces[step];
  apply_split_behavior(matches, static_cast<uint32_t>(text.size()), split.behavior, split.invert, pieces);
  for (const ByteRange& p : pieces) {
    BEAM_RETURN_IF_ERROR(run_step(step + 1, text.substr(p.first, p.second - p.first), scratch, on_word));
  }
  return ok_status();
}

// The ByteLevel step on one piece: the prefix space first, then the GPT-2 split (Isolated).
Status PreTokenizer::run_byte_level(std::string_view piece, PreTokenizerScratch& scratch,
                                    const std::function<void(std::string_view)>& on_word) const {
  if (add_prefix_space_ && piece.front() != ' ') {
    scratch.prefixed.assign(1, ' ');
    scratch.prefixed += piece;
    piece = scratch.prefixed;
  }
  if (!byte_level_regex_) {
    on_word(piece);
    return ok_status();
  }
  std::vector<ByteRange>& matches = scratch.byte_level_matches;
  BEAM_RETURN_IF_ERROR(byte_level_regex_->find_all(piece, scratch.match_data, matches));
  uint32_t prev = 0;
  for (const ByteRange& m : matches) {
    if (m.first > prev) on_word(piece.substr(prev, m.first - prev));
    on_word(piece.substr(m.first, m.second - m.first));
    prev = m.second;
  }
  if (prev < piece.size()) on_word(piece.substr(prev));
  return ok_status();
}

}  // namespace beam::text
