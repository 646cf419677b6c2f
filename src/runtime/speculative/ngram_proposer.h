// Draft tokens without a draft model (vLLM's "ngram" speculative method, SGLang's NGRAM, prompt
// lookup decoding): the tokens that followed an earlier occurrence of the sequence's last n tokens.
#pragma once

#include <cstdint>
#include <span>

#include "core/status.h"
#include "runtime/speculative/speculation.h"

namespace beam {

// An occurrence source[end - length, end) of the last `length` tokens of a sequence; length 0:
// none.
struct NgramMatch {
  int64_t length = 0;
  int64_t end = 0;
};

// The longest suffix of `tokens` with min_match..max_match tokens that occurs in `source` with a
// token after it (the most recent such occurrence when several do). `source` may be `tokens`
// itself (the suffix is then no occurrence of itself) or another text (a sibling sample's tokens).
// O(source length) with a fast reject on the suffix's last token.
NgramMatch find_ngram_match(std::span<const int32_t> tokens, std::span<const int32_t> source,
                            const Speculation& config);
// Writes up to out.size() tokens that follow `match` in `source`; returns how many.
int64_t copy_ngram_drafts(std::span<const int32_t> source, const NgramMatch& match,
                          std::span<int32_t> out);

// Writes up to out.size() drafts for the tokens after `tokens` and returns how many: the longest
// suffix of `tokens` with min_match..max_match tokens that also occurs earlier in `tokens` (the
// most recent such occurrence when several do), then the tokens that follow that occurrence
// (which may run into the suffix itself). 0 when no suffix of min_match tokens recurs. O(length)
// with a fast reject on the suffix's last token.
int64_t propose_ngram_drafts(std::span<const int32_t> tokens, const Speculation& config,
                             std::span<int32_t> out);

// Steps a sequence proposes no drafts after `misses` verifications in a row accepted none of
// theirs: 2, 4, 8, 16, then 32 (wrong drafts cost a verification's extra tokens in every step;
// text that stopped repeating rarely starts again at once). 0 for no misses.
int64_t draft_cooldown_steps(int64_t misses);

// The most drafts a sequence proposes next, after a verification that accepted `accepted` of the
// `fed` drafts it fed while allowed `current` (Hugging Face's assisted-generation heuristic): 2
// more when all were accepted, 1 fewer otherwise, within [1, max_drafts]. Partly right drafts
// cost a verification's extra tokens (each brings its routed experts) for little gain.
int64_t next_draft_limit(int64_t current, int64_t fed, int64_t accepted, int64_t max_drafts);

// How many leading drafts a verification accepts: drafts[j] is accepted while it equals
// sampled[j], the token sampled at its position with drafts[0, j) as pending tokens.
// sampled.size() must be drafts.size() + 1; sampled[result] is the step's bonus token.
int64_t count_accepted_drafts(std::span<const int32_t> drafts, std::span<const int32_t> sampled);

}  // namespace beam
