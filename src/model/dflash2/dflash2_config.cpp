// DFlash2 config.json → DFlash2Config; errors name the file and the key.
#include "model/dflash2/dflash2_config.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "model/config_keys.h"

namespace beam {

using nlohmann::json;

namespace {

const std::vector<KeySpelling>& spellings() {
  static const std::vector<KeySpelling> kSpellings = {
      {"hidden_size", {"d_model"}},
      {"num_hidden_layers", {"num_layers"}},
      {"num_attention_heads", {"num_heads"}},
      {"num_key_value_heads", {"num_kv_heads"}},
      {"rms_norm_eps", {"layer_norm_eps", "norm_eps"}},
  };
  return kSpellings;
}

// The rotary base: rope_parameters.rope_theta, rope_theta or rope_scaling.rope_theta (10000);
// where several are present they must agree.
Expected<float> rope_theta(const json& j, const ConfigKeys& keys) {
  std::optional<double> theta;
  std::string from;
  auto take = [&](const std::string& name, const json& v) -> Status {
    if (!v.is_number() || v.get<double>() <= 0)
      return keys.error(name, "needs a positive number, got " + describe_json(v));
    if (theta && *theta != v.get<double>())
      return keys.error(name,
                        "= " + v.dump() + " disagrees with " + from + " = " + json(*theta).dump());
    theta = v.get<double>();
    from = name;
    return ok_status();
  };
  for (const char* dict : {"rope_parameters", "rope_scaling"}) {
    auto it = j.find(dict);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_object()) return keys.error(dict, "must be an object, got " + describe_json(*it));
    if (auto t = it->find("rope_theta"); t != it->end())
      BEAM_RETURN_IF_ERROR(take(std::string(dict) + ".rope_theta", *t));
  }
  if (auto t = j.find("rope_theta"); t != j.end() && !t->is_null())
    BEAM_RETURN_IF_ERROR(take("rope_theta", *t));
  return static_cast<float>(theta.value_or(10000.0));
}

// The dflash_config object's fields.
Status parse_dflash_fields(const json& d, const ConfigKeys& top, const BeamConfig& target,
                           DFlash2Config& c) {
  static const std::vector<KeySpelling> kNone;
  const ConfigKeys keys(d, top.source() + " dflash_config", kNone);
  BEAM_ASSIGN_OR_RETURN(const json* ids, keys.required_array("target_layer_ids"));
  if (ids->empty()) return keys.error("target_layer_ids", "must name at least one target layer");
  for (const json& id : *ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= target.num_layers)
      return keys.error("target_layer_ids", "holds " + describe_json(id) +
                                                ", not a layer of the target (0.." +
                                                std::to_string(target.num_layers - 1) + ")");
    c.target_layer_ids.push_back(id.get<int64_t>());
  }
  BEAM_ASSIGN_OR_RETURN(c.block_size, keys.required_size("block_size"));
  if (c.block_size < 2)
    return keys.error("block_size", "must be at least 2 (an anchor and a draft)");
  BEAM_ASSIGN_OR_RETURN(int64_t mask, keys.required_int("mask_token_id"));
  if (mask < 0 || mask >= target.vocab_size)
    return keys.error("mask_token_id", "= " + std::to_string(mask) + " is outside the vocabulary");
  c.mask_token_id = static_cast<int32_t>(mask);
  BEAM_ASSIGN_OR_RETURN(std::optional<int64_t> kernel, keys.optional_size("conv_kernel_size"));
  if (kernel.value_or(2) != 2)
    return keys.error("conv_kernel_size", "= " + std::to_string(*kernel) +
                                              ": only the two-tap convolution is supported");
  BEAM_ASSIGN_OR_RETURN(std::optional<int64_t> group, keys.optional_size("conv_group_size"));
  c.conv_group_size = group.value_or(16);
  if (c.hidden_size % c.conv_group_size != 0)
    return keys.error("conv_group_size", "= " + std::to_string(c.conv_group_size) +
                                             " does not divide hidden_size " +
                                             std::to_string(c.hidden_size));
  BEAM_ASSIGN_OR_RETURN(std::optional<int64_t> rank, keys.optional_size("selector_rank"));
  c.selector_rank = rank.value_or(256);
  BEAM_ASSIGN_OR_RETURN(std::optional<int64_t> top_k, keys.optional_size("selector_top_k"));
  c.selector_top_k = top_k.value_or(16);
  if (c.selector_top_k > c.vocab_size)
    return keys.error("selector_top_k", "exceeds the vocabulary");
  BEAM_ASSIGN_OR_RETURN(std::optional<double> mult, keys.optional_number("output_multiplier"));
  c.output_multiplier = static_cast<float>(mult.value_or(1.0));
  BEAM_ASSIGN_OR_RETURN(std::optional<double> cap, keys.optional_number("final_logit_softcapping"));
  if (cap && *cap < 0) return keys.error("final_logit_softcapping", "must not be negative");
  if (cap && *cap > 0) c.final_logit_softcapping = static_cast<float>(*cap);
  return ok_status();
}

}  // namespace

Expected<DFlash2Config> parse_dflash2_config(const std::string& text, const std::string& source,
                                             const BeamConfig& target) {
  BEAM_ASSIGN_OR_RETURN(const json j, parse_json_object(text, source));
  const ConfigKeys keys(j, source, spellings());
  DFlash2Config c;
  BEAM_ASSIGN_OR_RETURN(c.hidden_size, keys.required_size("hidden_size"));
  BEAM_ASSIGN_OR_RETURN(c.num_layers, keys.required_size("num_hidden_layers"));
  BEAM_ASSIGN_OR_RETURN(c.num_heads, keys.required_size("num_attention_heads"));
  BEAM_ASSIGN_OR_RETURN(c.num_kv_heads, keys.required_size("num_key_value_heads"));
  BEAM_ASSIGN_OR_RETURN(c.head_dim, keys.required_size("head_dim"));
  BEAM_ASSIGN_OR_RETURN(c.intermediate_size, keys.required_size("intermediate_size"));
  BEAM_ASSIGN_OR_RETURN(c.vocab_size, keys.required_size("vocab_size"));
  BEAM_ASSIGN_OR_RETURN(std::optional<double> eps, keys.optional_number("rms_norm_eps"));
  if (eps && *eps <= 0) return keys.error("rms_norm_eps", "must be positive");
  c.rms_norm_eps = static_cast<float>(eps.value_or(1e-6));
  BEAM_ASSIGN_OR_RETURN(c.rope_theta, rope_theta(j, keys));
  BEAM_ASSIGN_OR_RETURN(std::optional<int64_t> window, keys.optional_size("sliding_window"));
  c.sliding_window = window.value_or(0);
  if (c.num_heads % c.num_kv_heads != 0)
    return keys.error("num_attention_heads", "is not a multiple of num_key_value_heads");
  if (c.head_dim % 2 != 0) return keys.error("head_dim", "must be even (rotary halves)");
  if (c.hidden_size != target.hidden_size)
    return keys.error("hidden_size", "= " + std::to_string(c.hidden_size) +
                                         " differs from the target's " +
                                         std::to_string(target.hidden_size) +
                                         " (the drafter reads the target's embedding and LM head)");
  if (c.vocab_size != target.vocab_size)
    return keys.error("vocab_size", "= " + std::to_string(c.vocab_size) +
                                        " differs from the target's " +
                                        std::to_string(target.vocab_size));
  auto d = j.find("dflash_config");
  if (d == j.end() || !d->is_object())
    return make_error(source +
                      ": key 'dflash_config' is missing or not an object (a DFlash2 "
                      "drafter's config.json has one)");
  BEAM_RETURN_IF_ERROR(parse_dflash_fields(*d, keys, target, c));
  return c;
}

Expected<DFlash2Config> load_dflash2_config(const std::string& dir, const BeamConfig& target) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  BEAM_ASSIGN_OR_RETURN(const std::string text, read_text_file(path));
  return parse_dflash2_config(text, path, target);
}

}  // namespace beam
