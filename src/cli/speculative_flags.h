// The serve and generate commands' speculative-decoding flags as vLLM and SGLang spell them,
// parsed into the engine's n-gram settings (EngineOptions::speculative).
#pragma once

#include "cli/args.h"
#include "core/status.h"
#include "runtime/speculative/ngram_proposer.h"

namespace beam::cli {

// The flags speculative_from_args reads (for Args::parse's accepted set): vLLM's first, then
// SGLang's.
inline constexpr const char* kSpeculativeFlags[] = {"speculative-config",
                                                    "speculative-algorithm",
                                                    "speculative-num-draft-tokens",
                                                    "speculative-ngram-min-match-window-size",
                                                    "speculative-ngram-max-match-window-size",
                                                    "speculative-ngram-capacity",
                                                    "speculative-draft-model-path"};

// vLLM's --speculative-config JSON {"method": "ngram", "num_speculative_tokens",
// "prompt_lookup_min", "prompt_lookup_max", "disable_by_batch_size"} (one lookup length given:
// both take it; neither: 5, as vLLM sets them) or {"method": "dflash" (or "dflash2"), "model":
// DIR, "num_speculative_tokens" (optional: the drafter's block_size - 1),
// "disable_by_batch_size"}; or SGLang's --speculative-algorithm NGRAM with
// --speculative-num-draft-tokens (the verified block: the last token and N - 1 drafts; default
// 8), --speculative-ngram-{min,max}-match-window-size (defaults 1 and 12) and
// --speculative-ngram-capacity (finished requests' tokens kept to draft from, SGLang's corpus;
// default 10,000,000 as SGLang's; 0: none; vLLM's form keeps none), or --speculative-algorithm
// DFLASH with --speculative-draft-model-path DIR (and optionally --speculative-num-draft-tokens).
// None given: speculation off. Errors name the flag, the key and what is wrong.
Expected<Speculation> speculative_from_args(const Args& args);

}  // namespace beam::cli
