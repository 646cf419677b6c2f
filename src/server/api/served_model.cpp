// ServedModel request checks (see served_model.h).
#include "server/api/served_model.h"

#include <filesystem>
#include <optional>
#include <system_error>

namespace beam::server {

void apply_sampling_defaults(const ServedModel& model, Json* body) {
  if (!body->is_object()) return;
  for (const auto& [key, value] : model.sampling_defaults.items()) {
    if (!body->contains(key) || (*body)[key].is_null()) (*body)[key] = value;
  }
}

ServedWeights::Info ServedWeights::get() const {
  std::lock_guard<std::mutex> lock(mu_);
  return info_;
}

void ServedWeights::set(Info info) {
  std::lock_guard<std::mutex> lock(mu_);
  info_ = std::move(info);
}

namespace {

// The folder the resolver would load `name` from: <dir>/<name> when `name` is one plain path
// component (no separator, not . or ..) and that folder holds an adapter_config.json.
std::optional<std::string> resolver_folder(const ServedModel& model, const std::string& name) {
  if (model.lora_resolver_dir.empty() || !model.lora_enabled || name.empty() || name == "." ||
      name == ".." || name.find('/') != std::string::npos || name.find('\0') != std::string::npos)
    return std::nullopt;
  const std::filesystem::path folder = std::filesystem::path(model.lora_resolver_dir) / name;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(folder / "adapter_config.json", ec)) return std::nullopt;
  return folder.string();
}

}  // namespace

ApiExpected<std::optional<std::string>> resolve_adapter(const ServedModel& model,
                                                        const std::string& name) {
  const std::optional<std::string> folder = resolver_folder(model, name);
  if (!folder) return std::optional<std::string>();
  const Status st = model.engine->load_lora_adapter(name, *folder, /*replace=*/false);
  if (st.ok()) return std::optional<std::string>(name);
  // (a request that raced this one may have loaded it first)
  for (const LoraAdapterInfo& a : served_adapters(model))
    if (a.name == name) return std::optional<std::string>(name);
  return invalid_request("the LoRA adapter '" + name + "' in " + *folder +
                         " does not load: " + st.error().message);
}

ApiExpected<std::string> model_adapter(const ServedModel& model, const std::string& requested) {
  if (requested.empty()) return std::string();
  // An adapter loaded under the served name shadows the base model (vLLM resolves adapters
  // first): an RL loop then serves its trained adapter under one stable name.
  std::string adapters;
  for (const LoraAdapterInfo& a : served_adapters(model)) {
    if (a.name == requested) return a.name;
    adapters += ", '" + a.name + "'";
  }
  if (requested == model.name) return std::string();
  API_ASSIGN_OR_RETURN(const std::optional<std::string> resolved,
                       resolve_adapter(model, requested));
  if (resolved) return *resolved;
  return api_error(ErrorKind::kNotFound,
                   "The model '" + requested + "' does not exist; this server serves '" +
                       model.name + "'" + (adapters.empty() ? "" : " and the LoRA adapters") +
                       adapters.substr(adapters.empty() ? 0 : 1),
                   "model", "model_not_found");
}

std::string shown_model_name(const ServedModel& model, const std::string& lora_name) {
  return lora_name.empty() ? model.name : lora_name;
}

std::vector<LoraAdapterInfo> served_adapters(const ServedModel& model) {
  return model.lora_enabled ? model.engine->lora_adapters() : std::vector<LoraAdapterInfo>{};
}

Json adapter_paths(const ServedModel& model) {
  Json paths = Json::object();
  for (const LoraAdapterInfo& a : served_adapters(model)) paths[a.name] = a.path;
  return paths;
}

ApiExpected<bool> require_tokenizer(const ServedModel& model) {
  if (model.tokenizer) return true;
  return invalid_request("the model in " + model.dir +
                         " has no tokenizer.json; only the token-id endpoint /generate is available");
}

ApiExpected<bool> require_chat_template(const ServedModel& model) {
  API_ASSIGN_OR_RETURN(bool ok, require_tokenizer(model));
  if (ok && model.chat_template) return true;
  return invalid_request("the model in " + model.dir +
                         " has no chat template (tokenizer_config.json chat_template or chat_template.jinja); "
                         "use /v1/completions with a raw prompt");
}

ApiExpected<int> check_data_parallel_rank(const ServedModel& model, int64_t rank,
                                          const char* field) {
  const int dp = model.engine->data_parallel_size();
  if (rank < 0 || rank >= dp)
    return invalid_request("'" + std::string(field) + "' " + std::to_string(rank) +
                               " names no data-parallel replica: the server runs " +
                               std::to_string(dp) + " (--data-parallel-size), 0 to " +
                               std::to_string(dp - 1),
                           field);
  return static_cast<int>(rank);
}

ApiExpected<bool> check_prompt_fits(const ServedModel& model, int64_t prompt_tokens,
                                    const std::optional<int64_t>& max_tokens, const char* max_tokens_field) {
  if (prompt_tokens >= model.max_context_tokens) {
    return invalid_request("This model's maximum context length is " + std::to_string(model.max_context_tokens) +
                               " tokens; the prompt has " + std::to_string(prompt_tokens) +
                               " tokens, which leaves no room for output",
                           "messages", "context_length_exceeded");
  }
  if (max_tokens && prompt_tokens + *max_tokens > model.max_context_tokens) {
    return invalid_request("This model's maximum context length is " + std::to_string(model.max_context_tokens) +
                               " tokens; you requested " + std::to_string(prompt_tokens + *max_tokens) +
                               " tokens (" + std::to_string(prompt_tokens) + " in the prompt, " +
                               std::to_string(*max_tokens) + " for the output)",
                           max_tokens_field, "context_length_exceeded");
  }
  if (prompt_tokens + 1 > model.kv_capacity_tokens) {
    return invalid_request("the prompt has " + std::to_string(prompt_tokens) +
                               " tokens but the KV cache holds " + std::to_string(model.kv_capacity_tokens) +
                               " tokens; start the server with a larger --kv-budget-mb",
                           "messages", "context_length_exceeded");
  }
  return true;
}

}  // namespace beam::server
