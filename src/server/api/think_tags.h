// Where a thinking model's reasoning stands after its rendered prompt, for models whose response
// template reasons between single <think> / </think> tokens: what constrained decoding
// (response_format.cpp) and reasoning budgets (SamplingParams::reasoning_budget) start from.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/sampling/sampling_params.h"
#include "server/api/api_error.h"
#include "server/api/served_model.h"

namespace beam::server {

struct ThinkTags {
  int32_t open = -1;   // the <think> token
  int32_t close = -1;  // the </think> token
  // What the text after the template's last start anchor leaves: an open <think> (the output is
  // reasoning from its first token), a closed one (no reasoning to come), or neither (the first
  // token chooses).
  enum class After { kNeither, kOpen, kClosed };
  After after = After::kNeither;
};

// The model's think tags and where `prompt_text` leaves them; nullopt when the model has no
// tokenizer, no reasoning field in its response template, or no single <think> / </think> tokens.
std::optional<ThinkTags> think_tags(const ServedModel& model, std::string_view prompt_text);

// The reasoning budget of a chat request asking for at most `max_tokens` reasoning tokens
// (`field`: where it asked, for errors): the </think> token forced once they are spent, counted
// from <think> or from the first token; nullopt when the prompt already closed the reasoning. A
// model without think tags is a 400 naming the field.
ApiExpected<std::optional<ReasoningBudget>> reasoning_budget(const ServedModel& model,
                                                             std::string_view prompt_text,
                                                             int64_t max_tokens,
                                                             const std::string& field);

}  // namespace beam::server
