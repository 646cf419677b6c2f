// think_tags and reasoning_budget (see think_tags.h).
#include "server/api/think_tags.h"

#include "server/api/response_format.h"
#include "server/parsers/response_stream.h"
#include "server/parsers/response_template.h"

namespace beam::server {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

// Whether the model's response template has a reasoning region (its output is split into
// reasoning and content), i.e. it is a model that thinks first.
bool template_has_reasoning(const ServedModel& model) {
  if (!model.response_template) return false;
  for (const std::string& name : FieldRoles{}.reasoning)
    if (model.response_template->field_index(name)) return true;
  return false;
}

}  // namespace

std::optional<ThinkTags> think_tags(const ServedModel& model, std::string_view prompt_text) {
  if (!model.tokenizer || !template_has_reasoning(model)) return std::nullopt;
  const std::optional<int32_t> open = added_token_id(*model.tokenizer, kThinkOpen);
  const std::optional<int32_t> close = added_token_id(*model.tokenizer, kThinkClose);
  if (!open || !close) return std::nullopt;
  std::string_view tail = prompt_text;
  if (auto t = model.response_template->truncate_past_last_anchor(prompt_text); t.ok()) tail = *t;
  ThinkTags tags{*open, *close};
  const size_t open_at = tail.rfind(kThinkOpen), close_at = tail.rfind(kThinkClose);
  if (close_at != std::string_view::npos &&
      (open_at == std::string_view::npos || close_at > open_at)) {
    tags.after = ThinkTags::After::kClosed;
  } else if (open_at != std::string_view::npos) {
    tags.after = ThinkTags::After::kOpen;
  }
  return tags;
}

ApiExpected<std::optional<ReasoningBudget>> reasoning_budget(const ServedModel& model,
                                                             std::string_view prompt_text,
                                                             int64_t max_tokens,
                                                             const std::string& field) {
  const std::optional<ThinkTags> tags = think_tags(model, prompt_text);
  if (!tags)
    return invalid_request("'" + field +
                               "' needs a thinking model whose template reasons between "
                               "<think> and </think> tokens; this model has none",
                           field);
  if (tags->after == ThinkTags::After::kClosed) return std::optional<ReasoningBudget>();
  ReasoningBudget budget{max_tokens, {tags->close}, std::nullopt};
  if (tags->after == ThinkTags::After::kNeither) budget.start_token = tags->open;
  return std::optional<ReasoningBudget>(std::move(budget));
}

}  // namespace beam::server
