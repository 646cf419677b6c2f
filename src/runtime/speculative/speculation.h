// Speculation: the speculative-decoding settings of an engine (EngineOptions::speculative).
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace beam {

// EngineOptions::speculative: how many drafts a decode proposes, where they come from (n-grams of
// the running text, or a DFlash2 drafter) and the n-gram lengths matched.
struct Speculation {
  // Most drafts a decode verifies (0: no n-gram drafts; with a drafter, its block_size - 1).
  int64_t num_draft_tokens = 0;
  int64_t min_match = 1;  // shortest suffix matched (vLLM's prompt_lookup_min)
  int64_t max_match = 4;  // longest suffix matched (vLLM's prompt_lookup_max)
  // No drafts in a step that starts with this many sequences running or more (vLLM's
  // disable_by_batch_size: big batches are compute-bound, drafts only add work); 0: no limit.
  int64_t max_batch = 0;
  // Tokens of finished requests (prompt and output) kept to draft from where they match a decode's
  // suffix longer than its own text and its siblings' do (SGLang's speculative_ngram_capacity;
  // NgramCorpus); 0: none.
  int64_t corpus_tokens = 0;
  // A DFlash2 drafter's directory (docs/dflash2.md): drafts come from it instead of n-grams, at
  // most its block_size - 1 a step (num_draft_tokens 0: that many). Empty: n-grams.
  std::string dflash2_drafter{};
  // Bytes of the drafter's context pool, taken off the KV budget (docs/runtime.md "DFlash2
  // drafts"); 0: planned with the KV pools (every running sequence's ring, bounded by the full
  // pool's tokens, and finished contexts as the prefix cache keeps windows; a quarter of the
  // budget at most).
  int64_t dflash2_context_pool_bytes = 0;
  bool enabled() const { return num_draft_tokens > 0 || !dflash2_drafter.empty(); }
  // An error naming the field out of range: drafts in [0, kMaxDraftTokens], 1 <= min <= max <= 64,
  // max_batch >= 0, corpus_tokens in [0, kMaxCorpusTokens], dflash2_context_pool_bytes >= 0.
  Status validate() const;
};

inline constexpr int64_t kMaxDraftTokens = 64;
inline constexpr int64_t kMaxCorpusTokens = int64_t{1} << 30;  // 4 GiB of ring

}  // namespace beam
