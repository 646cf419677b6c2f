// LoraAdapter::open: adapter_config.json's scales (lora_alpha, alpha_pattern) and the options it
// cannot merge, then the safetensors file's lora_A / lora_B pairs by module; merge_lora_rows: the
// f32 merge.
#include "model/lora_adapter.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <utility>
#include <vector>

#include "core/bf16.h"
#include "model/mapped_file.h"
#include "model/tensor_convert.h"

namespace beam {
namespace {

using nlohmann::json;

constexpr std::string_view kPrefix = "base_model.model.";

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// One alpha_pattern entry: PEFT's key (a module name, or a regular expression for the end of
// one) and its alpha.
struct AlphaPattern {
  std::string key;
  std::regex name_end;  // (.*\.)?(key): the whole module name, or a dotted suffix of it
  double alpha;
};

// adapter_config.json's alphas, after refusing what a merge cannot reproduce.
struct LoraConfig {
  double alpha = 0;
  bool rslora = false;
  std::vector<AlphaPattern> alpha_pattern;  // in the file's order

  // The alpha of `module` (its name without ".weight"), as PEFT's get_pattern_key picks it: an
  // alpha_pattern key equal to the name, else the first key matching the name's end, else
  // lora_alpha. (The rank is each module's own, read from its factors: rank_pattern needs no
  // lookup.)
  double alpha_of(const std::string& module) const {
    for (const AlphaPattern& p : alpha_pattern)
      if (p.key == module) return p.alpha;
    for (const AlphaPattern& p : alpha_pattern)
      if (std::regex_match(module, p.name_end)) return p.alpha;
    return alpha;
  }
};

// alpha_pattern's entries in the file's order (nlohmann::json sorts an object's keys; PEFT
// matches in the order they were written).
Expected<std::vector<AlphaPattern>> read_alpha_pattern(const std::string& text,
                                                       const std::string& path) {
  const auto c = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  std::vector<AlphaPattern> out;
  if (!c.contains("alpha_pattern") || c["alpha_pattern"].is_null()) return out;
  const auto& pattern = c["alpha_pattern"];
  if (!pattern.is_object())
    return make_error(path + ": alpha_pattern must be an object of module names to alphas");
  for (const auto& [key, value] : pattern.items()) {
    if (!value.is_number() || !(value.get<double>() > 0))
      return make_error(path + ": alpha_pattern['" + key + "'] must be a positive number");
    try {
      out.push_back(AlphaPattern{key, std::regex("(.*\\.)?(" + key + ")"), value.get<double>()});
    } catch (const std::regex_error&) {
      return make_error(path + ": alpha_pattern key '" + key + "' is not a regular expression");
    }
  }
  return out;
}

Expected<LoraConfig> read_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(path + ": cannot be read (a PEFT LoRA adapter has one)");
  std::stringstream text;
  text << in.rdbuf();
  const json c = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (c.is_discarded() || !c.is_object()) return make_error(path + ": not a JSON object");
  const auto fail = [&](const std::string& what) { return make_error(path + ": " + what); };
  if (c.contains("peft_type") && c["peft_type"] != "LORA")
    return fail("peft_type " + c["peft_type"].dump() + " is not LORA");
  const auto flag = [&](const char* key) {
    return c.contains(key) && c[key].is_boolean() && c[key].get<bool>();
  };
  if (flag("use_dora")) return fail("use_dora: DoRA adapters cannot be merged as W + s·B·A");
  if (flag("fan_in_fan_out")) return fail("fan_in_fan_out (Conv1D weights) is not supported");
  if (c.contains("bias") && c["bias"] != "none")
    return fail("bias " + c["bias"].dump() + ": LoRA biases are not supported");
  if (c.contains("modules_to_save") && !c["modules_to_save"].is_null() &&
      !c["modules_to_save"].empty())
    return fail("modules_to_save (whole trained modules) are not supported");
  if (!c.contains("lora_alpha") || !c["lora_alpha"].is_number() ||
      !(c["lora_alpha"].get<double>() > 0))
    return fail("lora_alpha must be a positive number");
  BEAM_ASSIGN_OR_RETURN(std::vector<AlphaPattern> alpha_pattern,
                        read_alpha_pattern(text.str(), path));
  return LoraConfig{c["lora_alpha"].get<double>(), flag("use_rslora"), std::move(alpha_pattern)};
}

}  // namespace

Expected<std::shared_ptr<const LoraAdapter>> LoraAdapter::open(const std::string& dir) {
  BEAM_ASSIGN_OR_RETURN(LoraConfig config, read_config(dir + "/adapter_config.json"));
  const std::string path = dir + "/adapter_model.safetensors";
  if (!std::filesystem::exists(path) && std::filesystem::exists(dir + "/adapter_model.bin"))
    return make_error(dir +
                      ": holds adapter_model.bin (a pickle), which beamserve does not read: "
                      "save the adapter with safe_serialization=True (PEFT's default) or "
                      "convert it to adapter_model.safetensors");
  auto adapter = std::make_shared<LoraAdapter>();
  adapter->dir_ = dir;
  // A copy, not a mapping: RL loops rewrite the adapter's file in place while it is served.
  BEAM_ASSIGN_OR_RETURN(adapter->file_, MappedFile::copy_of(path));
  BEAM_ASSIGN_OR_RETURN(adapter->tensors_, read_safetensors(*adapter->file_));
  const auto fail = [&](const std::string& what) { return make_error(path + ": " + what); };
  for (const RawTensor& t : adapter->tensors_) {
    std::string_view name = t.name;
    if (name.substr(0, kPrefix.size()) == kPrefix) name.remove_prefix(kPrefix.size());
    if (name.find("lora_embedding_") != std::string_view::npos)
      return fail("tensor '" + t.name + "': LoRA on embeddings is not supported");
    const bool is_a = ends_with(name, ".lora_A.weight"), is_b = ends_with(name, ".lora_B.weight");
    if (!is_a && !is_b) return fail("tensor '" + t.name + "' is not a lora_A or lora_B weight");
    if (t.shape.rank != 2) return fail("tensor '" + t.name + "' is not 2-D");
    const std::string module(
        name.substr(0, name.size() - std::string_view(".lora_A.weight").size()));
    LoraDelta& d = adapter->deltas_[module + ".weight"];
    (is_a ? d.a : d.b) = &t;
  }
  if (adapter->deltas_.empty()) return fail("holds no lora_A / lora_B weights");
  for (auto& [weight, d] : adapter->deltas_) {
    if (d.a == nullptr || d.b == nullptr)
      return fail("'" + weight + "' has lora_" + (d.a ? "A" : "B") + " but no lora_" +
                  (d.a ? "B" : "A"));
    if (d.b->shape[1] != d.a->shape[0])
      return fail("'" + weight + "': lora_B " + d.b->shape.str() + " and lora_A " +
                  d.a->shape.str() + " disagree on the rank");
    const auto r = static_cast<double>(d.rank());
    const std::string module = weight.substr(0, weight.size() - std::string_view(".weight").size());
    d.scale = config.alpha_of(module) / (config.rslora ? std::sqrt(r) : r);
  }
  return std::shared_ptr<const LoraAdapter>(std::move(adapter));
}

const LoraDelta* LoraAdapter::find(const std::string& weight_name) const {
  const auto it = deltas_.find(weight_name);
  return it == deltas_.end() ? nullptr : &it->second;
}

LoraFactors::LoraFactors(const LoraDelta& delta)
    : a(static_cast<size_t>(delta.a->shape.numel())),
      b(static_cast<size_t>(delta.b->shape.numel())),
      rank(delta.rank()),
      scale(static_cast<float>(delta.scale)) {
  convert_elements(delta.a->data, delta.a->dtype, delta.a->shape.numel(), a.data(), DType::kF32);
  convert_elements(delta.b->data, delta.b->dtype, delta.b->shape.numel(), b.data(), DType::kF32);
}

void merge_lora_rows(uint16_t* weight, int64_t in, const LoraFactors& f, int64_t begin,
                     int64_t end) {
  std::vector<float> row(static_cast<size_t>(in));
  for (int64_t o = begin; o < end; ++o) {
    std::fill(row.begin(), row.end(), 0.0f);
    for (int64_t k = 0; k < f.rank; ++k) {
      const float bk = f.b[static_cast<size_t>(o * f.rank + k)];
      const float* ak = f.a.data() + k * in;
      for (int64_t c = 0; c < in; ++c) row[static_cast<size_t>(c)] += bk * ak[c];
    }
    uint16_t* w = weight + o * in;
    for (int64_t c = 0; c < in; ++c)
      w[c] = to_bf16(to_float(bf16::from_bits(w[c])) + f.scale * row[static_cast<size_t>(c)]).bits;
  }
}

}  // namespace beam
