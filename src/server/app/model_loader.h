// Loads what `beamserve serve` serves: weights → Engine, tokenizer.json, the chat template, and the
// response_template (tokenizer_config.json's, else the built-in Hermes one). Errors name the file.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "server/api/served_model.h"

namespace beam::server {

// A per-request LoRA adapter loaded at start (serve's --lora-modules / --lora-paths).
struct StartupAdapter {
  std::string name;
  std::string dir;
  bool pinned = false;  // Engine::load_lora_adapter's pinned (SGLang's)
};

struct ModelLoadOptions {
  std::string model_dir;
  std::string tokenizer_dir;      // empty: model_dir
  std::string served_model_name;  // empty: the model directory's name
  EngineOptions engine;
  bool enable_return_routed_experts = false;  // requests may ask for routed experts (serve flag)
  bool enable_return_hidden_states = false;  // requests may ask for hidden states (serve flag)
  bool enable_weight_updates = false;  // POST /update_weights_from_disk is served (serve flag)
  // Requests may send their own chat template (vLLM's --trust-request-chat-template).
  bool trust_request_chat_template = false;
  std::string merge_lora_dir;          // a PEFT LoRA adapter merged into the weights (empty: none)
  // Random weights of model_dir's config.json instead of its checkpoint (--load-format dummy).
  bool dummy_weights = false;
  // Per-request LoRA adapters loaded at start; needs engine.max_loras >= 1.
  std::vector<StartupAdapter> lora_modules;
  std::string lora_resolver_dir;  // ServedModel::lora_resolver_dir (empty: off)
  // The logprobs_mode of requests that do not set one (serve --logprobs-mode).
  LogprobsMode logprobs_mode = LogprobsMode::kScaled;
};

Expected<std::unique_ptr<ServedModel>> load_served_model(const ModelLoadOptions& options);

}  // namespace beam::server
