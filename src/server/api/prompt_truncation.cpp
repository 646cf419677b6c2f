// truncate_prompt_tokens (see prompt_truncation.h).
#include "server/api/prompt_truncation.h"

namespace beam::server {

void read_truncate_prompt_tokens(FieldReader& r, std::optional<int64_t>* out) {
  r.read("truncate_prompt_tokens", out);
  if (!*out || **out >= 1 || **out == -1) return;
  const std::string got = std::to_string(**out);
  r.fail("truncate_prompt_tokens",
         "must be >= 1 (keep the prompt's last k tokens) or -1 (the model's context), got " + got);
}

ApiExpected<bool> truncate_prompt(const ServedModel& model, const std::optional<int64_t>& k,
                                  std::vector<int32_t>* ids, std::string* text) {
  if (!k) return false;
  const int64_t keep = *k == -1 ? model.max_context_tokens : *k;
  if (keep > model.max_context_tokens) {
    return invalid_request("'truncate_prompt_tokens' (" + std::to_string(keep) +
                               ") is larger than the model's context (" +
                               std::to_string(model.max_context_tokens) + " tokens)",
                           "truncate_prompt_tokens");
  }
  if (static_cast<int64_t>(ids->size()) <= keep) return false;
  ids->erase(ids->begin(), ids->end() - keep);
  Expected<std::string> kept = model.tokenizer->decode(*ids, /*skip_special=*/false);
  if (!kept.ok()) {
    return invalid_request("the truncated prompt cannot be detokenized: " + kept.error().message,
                           "truncate_prompt_tokens");
  }
  *text = std::move(kept).value();
  return true;
}

}  // namespace beam::server
