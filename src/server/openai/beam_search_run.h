// vLLM's use_beam_search on chat and completions: beam search (generation/beam_search.h) driven
// through the engine one step at a time, as vLLM's API layer does it: each step is one
// prompt-only request per live beam (its prompt + the beam's tokens, max_tokens 1, the 2W most
// likely next tokens as logprobs; the prefix cache makes it one token's work), then the W best
// extensions live on. The answer goes to the endpoint's own observer as if the engine had
// produced each prompt's W best beams as its n siblings (best first), so text, parsing, stop
// strings, logprobs (each token's step alternatives), echo and streaming (all at the end) are the
// endpoint's usual ones.
#pragma once

#include <memory>
#include <vector>

#include "server/api/endpoint_env.h"
#include "server/generation/generation_job.h"
#include "server/openai/beam_search_fields.h"

namespace beam::server {

// The widest beam: its 2W alternatives a step are logprobs, at most kMaxTopLogprobs.
inline constexpr int64_t kMaxBeamWidth = 10;

// 400s for specs (finished by finish_spec; n = the beam width) beam search cannot run: a width
// past kMaxBeamWidth, a response format or required tool call, token filters, prompt logprobs,
// routing or hidden-state records. `n_field` names the request's width field.
ApiExpected<bool> check_beam_search(const GenerationSpec& spec, const char* n_field);

// Runs beam search for each spec (one per prompt, every spec the same width n) and answers
// through `observer`: sibling i * n + r is prompt i's r-th best beam.
void launch_beam_search(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange,
                        std::vector<GenerationSpec> specs, const BeamSearchFields& fields,
                        std::shared_ptr<GenerationObserver> observer);

}  // namespace beam::server
