// The serve command's LoRA adapter lists as vLLM's and SGLang's flags spell them, as (name,
// folder) pairs of adapters to load at start.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "server/app/model_loader.h"

namespace beam::cli {

using LoraModules = std::vector<server::StartupAdapter>;

// --lora-modules (vLLM's): each value NAME=DIR[,NAME=DIR...] or a JSON object {"name", "path",
// "base_model_name"} (base_model_name accepted and unused: /v1/models lists every adapter with the
// served model as its parent). An error names the value and what is wrong with it.
Expected<LoraModules> parse_lora_modules(const std::vector<std::string>& values);

// --lora-paths (SGLang's): each value NAME=DIR, a bare DIR (its name is DIR, as SGLang names it),
// or a JSON object {"lora_name", "lora_path", "pinned"} (pinned: the adapter keeps its slot;
// Engine::load_lora_adapter).
Expected<LoraModules> parse_lora_paths(const std::vector<std::string>& values);

}  // namespace beam::cli
