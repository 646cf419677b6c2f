// What a finished choice reports of the positions the model read on the OpenAI-style endpoints,
// where SGLang puts it: its routed experts (sgl_ext.routed_experts) and its last hidden state
// (hidden_states), each when the request asked for them.
#pragma once

#include "server/api/hidden_states.h"
#include "server/api/routed_experts.h"
#include "server/generation/sibling_decoder.h"

namespace beam::server {

inline void add_choice_records(const SiblingResult& result, Json& choice) {
  add_routed_experts(result.routed_experts, choice);
  add_last_hidden_state(result.hidden_states, choice);
}

}  // namespace beam::server
