// Speculation::validate.
#include "runtime/speculative/speculation.h"

#include <string>

namespace beam {

Status Speculation::validate() const {
  if (num_draft_tokens < 0 || num_draft_tokens > kMaxDraftTokens)
    return make_error("speculative num_draft_tokens " + std::to_string(num_draft_tokens) +
                      " is outside [0, " + std::to_string(kMaxDraftTokens) + "]");
  if (min_match < 1 || max_match < min_match || max_match > 64)
    return make_error("speculative n-gram lengths: need 1 <= min (" + std::to_string(min_match) +
                      ") <= max (" + std::to_string(max_match) + ") <= 64");
  if (max_batch < 0)
    return make_error("speculative max_batch " + std::to_string(max_batch) + " is negative");
  if (corpus_tokens < 0 || corpus_tokens > kMaxCorpusTokens)
    return make_error("speculative corpus_tokens " + std::to_string(corpus_tokens) +
                      " is outside [0, " + std::to_string(kMaxCorpusTokens) + "]");
  if (dflash2_context_pool_bytes < 0)
    return make_error("speculative dflash2_context_pool_bytes " +
                      std::to_string(dflash2_context_pool_bytes) + " is negative");
  return ok_status();
}

}  // namespace beam
