// ServedModel: everything the endpoints need of the loaded model — the engine, the tokenizer and
// chat template (absent for checkpoints without them), the response_template that parses output,
// and the limits requests are checked against. Immutable after loading except the engine, which
// is thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/structured/compiled_cache.h"
#include "runtime/structured/vocab_index.h"
#include "server/api/api_error.h"
#include "server/api/json_fields.h"
#include "server/api/request_templates.h"
#include "server/parsers/response_template.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace beam::server {

// The checkpoint the engine serves now: its folder, SGLang's weight_version tag and the load
// format ("auto", or "dummy": random weights of the folder's config). Set at load, replaced by
// POST /update_weights_from_disk. Thread-safe.
class ServedWeights {
 public:
  struct Info {
    std::string path;
    std::string version = "default";
    std::string load_format = "auto";
  };
  explicit ServedWeights(Info info) : info_(std::move(info)) {}
  Info get() const;
  void set(Info info);

 private:
  mutable std::mutex mu_;
  Info info_;
};

struct ServedModel {
  std::string name;                 // the id clients send as "model"
  std::string dir;
  std::string tokenizer_dir;  // where the tokenizer came from (dir unless --tokenizer)
  std::shared_ptr<ServedWeights> weights = std::make_shared<ServedWeights>(ServedWeights::Info{});
  int64_t created_unix_s = 0;
  std::unique_ptr<Engine> engine;
  std::optional<text::Tokenizer> tokenizer;
  std::optional<text::ChatTemplate> chat_template;
  // Requests' own chat templates (vLLM's chat_template field); null unless the server trusts them
  // (--trust-request-chat-template), and then a request naming one is a 400.
  std::shared_ptr<RequestTemplates> request_templates;
  std::shared_ptr<const ResponseTemplate> response_template;
  std::vector<int32_t> extra_stop_ids;  // tokenizer eos ids the model config does not list
  // The tokenizer's text tokens arranged for constrained decoding (null without a tokenizer).
  std::shared_ptr<const VocabIndex> structured_vocab;
  // Compiled grammars, JSON schemas and regexes with their shared mask memos, by text (null
  // without a tokenizer).
  std::shared_ptr<GrammarCache> grammars;
  std::shared_ptr<SchemaCache> schemas;
  std::shared_ptr<RegexCache> regexes;
  // Special tokens a response_template delimiter can spell (e.g. a special <think>): they stay in
  // the text the output parser reads even though special tokens are otherwise not shown.
  std::vector<int32_t> template_special_ids;
  // Sampling defaults from generation_config.json (temperature, top_p, top_k, min_p,
  // repetition_penalty), used for fields a request leaves out, as vLLM does.
  Json sampling_defaults = Json::object();
  int64_t vocab_size = 0;
  int64_t max_context_tokens = 0;   // prompt + output
  int64_t kv_capacity_tokens = 0;   // tokens the full-attention pool holds (each replica's)
  bool routed_experts_enabled = false;  // --enable-return-routed-experts
  bool hidden_states_enabled = false;   // --enable-return-hidden-states
  bool weight_updates_enabled = false;  // --enable-weight-updates
  bool sleep_mode_enabled = false;      // --enable-sleep-mode (EngineOptions::enable_sleep_mode)
  bool lora_enabled = false;            // --max-loras >= 1 (EngineOptions::max_loras)
  // --lora-resolver-dir: a request naming an adapter not loaded loads <dir>/<name> when that
  // folder holds an adapter_config.json (vLLM's filesystem LoRA resolver); empty: off.
  std::string lora_resolver_dir;
};

// Adds the model's sampling defaults to a request body for the fields it does not set.
void apply_sampling_defaults(const ServedModel& model, Json* body);

// The LoRA adapter a request's "model" names (vLLM serves each loaded adapter as a model): the
// adapter's name for a loaded adapter (Engine::load_lora_adapter; one loaded under the served
// name shadows the base model), "" for the base model (empty or the served name), an adapter the
// resolver folder holds under that name, loaded now (a 400 naming it when it does not load), else
// 404.
ApiExpected<std::string> model_adapter(const ServedModel& model, const std::string& requested);
// The resolver's adapter `name` (ServedModel::lora_resolver_dir), loaded now if it is not yet:
// nullopt when the resolver is off or holds no such folder, a 400 naming the folder when its
// adapter does not load.
ApiExpected<std::optional<std::string>> resolve_adapter(const ServedModel& model,
                                                        const std::string& name);
// The "model" a response shows: the adapter's name, or the served name without one.
std::string shown_model_name(const ServedModel& model, const std::string& lora_name);
// The loaded LoRA adapters (none with LoRA off), and the same as {name: folder}.
std::vector<LoraAdapterInfo> served_adapters(const ServedModel& model);
Json adapter_paths(const ServedModel& model);
// `rank` as one of the engine's data-parallel replicas; a 400 naming `field` when there is no such
// replica.
ApiExpected<int> check_data_parallel_rank(const ServedModel& model, int64_t rank,
                                          const char* field);
// 400 unless the model has a tokenizer (text endpoints) / a chat template (chat endpoints).
ApiExpected<bool> require_tokenizer(const ServedModel& model);
ApiExpected<bool> require_chat_template(const ServedModel& model);
// 400 (code context_length_exceeded) when the prompt, or prompt + max_tokens, does not fit the
// context or the KV pools.
ApiExpected<bool> check_prompt_fits(const ServedModel& model, int64_t prompt_tokens,
                                    const std::optional<int64_t>& max_tokens, const char* max_tokens_field);

}  // namespace beam::server
