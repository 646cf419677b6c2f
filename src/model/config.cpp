// config.json → BeamConfig: the key alias table (the one place real checkpoint spellings are
// added) and every validation rule; errors name the file and the key.
#include "model/config.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "model/config_keys.h"
#include "model/param_count.h"

namespace beam {

using nlohmann::json;

namespace {

// Canonical config.json key → other spellings accepted for it (DeepSeek-V3, Mixtral/Qwen-MoE,
// Megatron and llama.cpp names). Add the real Beam spellings here.
const std::vector<KeySpelling>& key_spellings() {
  static const std::vector<KeySpelling> kSpellings = {
      {"hidden_size", {"d_model", "n_embd"}},
      {"num_hidden_layers", {"num_layers", "n_layer"}},
      {"num_attention_heads", {"num_heads", "n_head"}},
      {"num_key_value_heads", {"num_kv_heads", "n_head_kv", "num_query_groups"}},
      {"head_dim", {"kv_channels", "attention_head_dim"}},
      {"intermediate_size", {"ffn_hidden_size", "dense_intermediate_size"}},
      {"moe_intermediate_size", {"expert_intermediate_size", "moe_ffn_hidden_size"}},
      {"n_routed_experts", {"num_experts", "num_local_experts", "moe_num_experts"}},
      {"num_experts_per_tok", {"moe_top_k", "moe_router_topk"}},
      {"n_group", {"num_expert_groups", "moe_router_num_groups"}},
      {"topk_group", {"moe_router_group_topk"}},
      {"routed_scaling_factor", {"moe_router_topk_scaling_factor", "expert_weights_scale"}},
      {"norm_topk_prob", {"expert_weights_norm"}},
      {"n_shared_experts", {"num_shared_experts"}},
      {"rms_norm_eps", {"layer_norm_eps", "layernorm_epsilon", "norm_eps"}},
      {"sliding_window", {"sliding_window_size"}},
      {"final_logit_softcapping", {"logit_softcapping", "final_logit_softcap"}},
      {"max_position_embeddings", {"max_seq_len", "seq_length"}},
      {"hidden_act", {"hidden_activation", "activation"}},
      {"torch_dtype", {"dtype"}},
  };
  return kSpellings;
}

// A number as JSON writes it ("30.0", "1e-06"), for error messages.
std::string num(double x) { return json(x).dump(); }

constexpr std::string_view kSliding = "sliding_attention";
constexpr std::string_view kFull = "full_attention";

// Reads a list of `num_layers` strings, each mapped by `parse` (nullopt = unknown value).
template <typename Kind, typename Parse>
Expected<std::vector<Kind>> read_layer_list(const ConfigKeys& keys, std::string_view canonical,
                                            int64_t num_layers, const char* known, Parse parse) {
  BEAM_ASSIGN_OR_RETURN(const json* list, keys.required_array(canonical));
  std::string name = keys.spelled(canonical);
  if (static_cast<int64_t>(list->size()) != num_layers) {
    return keys.error(name, "has " + std::to_string(list->size()) +
                                " entries, expected num_hidden_layers = " + std::to_string(num_layers));
  }
  std::vector<Kind> out;
  for (size_t i = 0; i < list->size(); ++i) {
    const json& v = (*list)[i];
    std::optional<Kind> kind = v.is_string() ? parse(v.get<std::string>()) : std::nullopt;
    if (!kind) {
      return keys.error(name, "entry " + std::to_string(i) + " is " + describe_json(v) +
                                  ", expected one of " + known);
    }
    out.push_back(*kind);
  }
  return out;
}

Status read_identity(const ConfigKeys& keys) {
  BEAM_ASSIGN_OR_RETURN(std::string model_type, keys.required_string("model_type"));
  if (model_type != "beam") return keys.error("model_type", "is '" + model_type + "', expected 'beam'");
  BEAM_ASSIGN_OR_RETURN(auto arch, keys.find("architectures"));
  if (!arch || arch->value->is_null()) return ok_status();
  const json& a = *arch->value;
  bool is_beam = a.is_array() && std::any_of(a.begin(), a.end(), [](const json& v) {
                   return v.is_string() && v.get<std::string>() == "BeamForCausalLM";
                 });
  if (!is_beam) return keys.error(arch->name, "is " + describe_json(a) + ", expected [\"BeamForCausalLM\"]");
  return ok_status();
}

Status read_shape(const ConfigKeys& keys, BeamConfig& c) {
  BEAM_ASSIGN_OR_RETURN(c.vocab_size, keys.required_size("vocab_size"));
  BEAM_ASSIGN_OR_RETURN(c.hidden_size, keys.required_size("hidden_size"));
  BEAM_ASSIGN_OR_RETURN(c.num_layers, keys.required_size("num_hidden_layers"));
  BEAM_ASSIGN_OR_RETURN(c.num_heads, keys.required_size("num_attention_heads"));
  BEAM_ASSIGN_OR_RETURN(c.num_kv_heads, keys.required_size("num_key_value_heads"));
  BEAM_ASSIGN_OR_RETURN(c.head_dim, keys.required_size("head_dim"));
  BEAM_ASSIGN_OR_RETURN(c.max_position_embeddings, keys.required_size("max_position_embeddings"));
  if (c.num_heads % c.num_kv_heads != 0) {
    return keys.error(keys.spelled("num_attention_heads"),
                      "= " + std::to_string(c.num_heads) + " is not a multiple of " +
                          keys.spelled("num_key_value_heads") + " = " + std::to_string(c.num_kv_heads));
  }
  BEAM_ASSIGN_OR_RETURN(c.layer_types, read_layer_list<AttentionKind>(
      keys, "layer_types", c.num_layers, "\"sliding_attention\", \"full_attention\"",
      [](const std::string& s) -> std::optional<AttentionKind> {
        if (s == kSliding) return AttentionKind::kSliding;
        if (s == kFull) return AttentionKind::kFull;
        return std::nullopt;
      }));
  BEAM_ASSIGN_OR_RETURN(c.mlp_layer_types, read_layer_list<MlpKind>(
      keys, "mlp_layer_types", c.num_layers, "\"dense\", \"sparse\"",
      [](const std::string& s) -> std::optional<MlpKind> {
        if (s == "dense") return MlpKind::kDense;
        if (s == "sparse") return MlpKind::kSparse;
        return std::nullopt;
      }));
  return ok_status();
}

// A positive finite number (or the fallback when absent/null).
Expected<double> positive_number(const ConfigKeys& keys, std::string_view canonical, double fallback,
                                 bool required) {
  BEAM_ASSIGN_OR_RETURN(std::optional<double> x, keys.optional_number(canonical));
  if (!x) {
    if (required) return keys.error(keys.spelled(canonical), "is missing (required)");
    return fallback;
  }
  if (*x <= 0) return keys.error(keys.spelled(canonical), "must be positive, got " + num(*x));
  return *x;
}

Status read_routing_fixed_choices(const ConfigKeys& keys) {
  BEAM_ASSIGN_OR_RETURN(auto scoring, keys.optional_string("scoring_func"));
  if (scoring && *scoring != "sigmoid") return keys.error("scoring_func", "is '" + *scoring + "', only 'sigmoid' is supported");
  BEAM_ASSIGN_OR_RETURN(auto method, keys.optional_string("topk_method"));
  if (method && *method != "noaux_tc") return keys.error("topk_method", "is '" + *method + "', only 'noaux_tc' is supported");
  BEAM_ASSIGN_OR_RETURN(auto shared, keys.optional_int("n_shared_experts"));
  if (shared && *shared != 0) {
    return keys.error(keys.spelled("n_shared_experts"), "is " + std::to_string(*shared) + ", shared experts are not supported (expected 0)");
  }
  return ok_status();
}

Status read_moe(const ConfigKeys& keys, BeamConfig& c) {
  BEAM_RETURN_IF_ERROR(read_routing_fixed_choices(keys));
  if (c.num_layers_of(MlpKind::kDense) > 0) {
    BEAM_ASSIGN_OR_RETURN(c.intermediate_size, keys.required_size("intermediate_size"));
  } else {
    BEAM_ASSIGN_OR_RETURN(auto i, keys.optional_size("intermediate_size"));
    c.intermediate_size = i.value_or(0);
  }
  BEAM_ASSIGN_OR_RETURN(auto norm, keys.optional_bool("norm_topk_prob"));
  c.norm_topk_prob = norm.value_or(true);
  BEAM_ASSIGN_OR_RETURN(double scale, positive_number(keys, "routed_scaling_factor", 1.0, false));
  c.routed_scaling_factor = static_cast<float>(scale);
  if (c.num_layers_of(MlpKind::kSparse) == 0) return ok_status();
  BEAM_ASSIGN_OR_RETURN(c.moe_intermediate_size, keys.required_size("moe_intermediate_size"));
  BEAM_ASSIGN_OR_RETURN(c.num_experts, keys.required_size("n_routed_experts"));
  BEAM_ASSIGN_OR_RETURN(c.num_experts_per_tok, keys.required_size("num_experts_per_tok"));
  BEAM_ASSIGN_OR_RETURN(auto groups, keys.optional_size("n_group"));
  BEAM_ASSIGN_OR_RETURN(auto kept, keys.optional_size("topk_group"));
  c.num_groups = groups.value_or(1);
  c.topk_groups = kept.value_or(c.num_groups);
  std::string e_key = keys.spelled("n_routed_experts"), g_key = keys.spelled("n_group");
  if (c.num_experts % c.num_groups != 0) {
    return keys.error(e_key, "= " + std::to_string(c.num_experts) + " is not a multiple of " + g_key +
                                 " = " + std::to_string(c.num_groups));
  }
  if (c.topk_groups > c.num_groups) {
    return keys.error(keys.spelled("topk_group"), "= " + std::to_string(c.topk_groups) +
                                                      " exceeds " + g_key + " = " + std::to_string(c.num_groups));
  }
  int64_t selectable = c.topk_groups * c.experts_per_group();
  if (c.num_experts_per_tok > selectable) {
    return keys.error(keys.spelled("num_experts_per_tok"),
                      "= " + std::to_string(c.num_experts_per_tok) + " exceeds the " +
                          std::to_string(selectable) + " experts in the " + std::to_string(c.topk_groups) +
                          " kept groups (topk_group x n_routed_experts / n_group)");
  }
  return ok_status();
}

// The rope type of one rope dict ("rope_type" or legacy "type"; absent = "default").
Status check_rope_type(const ConfigKeys& keys, const std::string& key, const json& dict) {
  for (const char* type_key : {"rope_type", "type"}) {
    auto it = dict.find(type_key);
    if (it == dict.end() || it->is_null()) continue;
    if (!it->is_string() || it->get<std::string>() != "default") {
      return keys.error(key, "has unsupported rope_type " + describe_json(*it) +
                                 " (only \"default\" is supported)");
    }
  }
  return ok_status();
}

// rope_parameters for sliding layers: {rope_type, rope_theta} (per layer type or flat).
Expected<float> read_rope_dict(const ConfigKeys& keys, const std::string& key, const json& dict) {
  if (!dict.is_object()) return keys.error(key, "must be an object, got " + describe_json(dict));
  BEAM_RETURN_IF_ERROR(check_rope_type(keys, key, dict));
  auto theta = dict.find("rope_theta");
  if (theta == dict.end() || !theta->is_number() || theta->get<double>() <= 0) {
    return keys.error(key, "needs a positive number rope_theta, got " +
                               (theta == dict.end() ? std::string("none") : describe_json(*theta)));
  }
  auto partial = dict.find("partial_rotary_factor");
  if (partial != dict.end() && !partial->is_null() && *partial != 1.0) {
    return keys.error(key, "has partial_rotary_factor " + partial->dump() + " (only 1.0 is supported)");
  }
  return static_cast<float>(theta->get<double>());
}

Expected<std::optional<float>> read_rope_parameters(const ConfigKeys& keys) {
  BEAM_ASSIGN_OR_RETURN(auto params, keys.find("rope_parameters"));
  if (!params || params->value->is_null()) return std::optional<float>();
  const json& p = *params->value;
  if (!p.is_object()) return keys.error(params->name, "must be an object, got " + describe_json(p));
  if (p.contains("rope_theta") || p.contains("rope_type")) {  // flat form: applies to sliding layers
    BEAM_ASSIGN_OR_RETURN(float theta, read_rope_dict(keys, params->name, p));
    return std::optional<float>(theta);
  }
  for (const auto& [kind, value] : p.items()) {
    if (kind != kSliding && kind != kFull) {
      return keys.error(params->name, "has unknown layer type '" + kind + "' (expected sliding_attention, full_attention)");
    }
    if (kind == kFull && !value.is_null()) {
      return keys.error(params->name + ".full_attention", "must be null: full-attention layers use no RoPE (NoPE), got " + describe_json(value));
    }
  }
  auto sliding = p.find(kSliding);
  if (sliding == p.end() || sliding->is_null()) return std::optional<float>();
  BEAM_ASSIGN_OR_RETURN(float theta, read_rope_dict(keys, params->name + ".sliding_attention", *sliding));
  return std::optional<float>(theta);
}

// rope_parameters (preferred) or the legacy flat rope_theta / rope_scaling.
Status read_rope(const ConfigKeys& keys, BeamConfig& c) {
  BEAM_ASSIGN_OR_RETURN(std::optional<float> theta, read_rope_parameters(keys));
  BEAM_ASSIGN_OR_RETURN(auto scaling, keys.find("rope_scaling"));
  if (scaling && !scaling->value->is_null()) {
    if (!scaling->value->is_object()) return keys.error(scaling->name, "must be an object or null, got " + describe_json(*scaling->value));
    BEAM_RETURN_IF_ERROR(check_rope_type(keys, scaling->name, *scaling->value));
  }
  BEAM_ASSIGN_OR_RETURN(std::optional<double> flat, keys.optional_number("rope_theta"));
  if (flat && *flat <= 0) return keys.error("rope_theta", "must be positive, got " + num(*flat));
  if (theta && flat && static_cast<float>(*flat) != *theta) {
    return keys.error("rope_theta", "= " + num(*flat) + " disagrees with rope_parameters (" + num(*theta) + ")");
  }
  if (!theta && flat) theta = static_cast<float>(*flat);
  if (c.num_layers_of(AttentionKind::kSliding) == 0) return ok_status();
  if (!theta) {
    return keys.error("rope_parameters", "is missing: sliding_attention layers need rope_parameters.sliding_attention.rope_theta (or the legacy rope_theta)");
  }
  c.rope_theta = *theta;
  BEAM_ASSIGN_OR_RETURN(auto window, keys.optional_int("sliding_window"));
  if (!window || *window <= 0) {
    return keys.error(keys.spelled("sliding_window"), "must be a positive integer when any layer is sliding_attention, got " +
                                                          (window ? std::to_string(*window) : std::string("none")));
  }
  c.sliding_window = *window;
  return ok_status();
}

Status read_numerics(const ConfigKeys& keys, BeamConfig& c) {
  BEAM_ASSIGN_OR_RETURN(double eps, positive_number(keys, "rms_norm_eps", 0, true));
  c.rms_norm_eps = static_cast<float>(eps);
  BEAM_ASSIGN_OR_RETURN(auto act, keys.optional_string("hidden_act"));
  if (act && *act != "silu") return keys.error(keys.spelled("hidden_act"), "is '" + *act + "', only 'silu' is supported");
  BEAM_ASSIGN_OR_RETURN(auto cap, keys.optional_number("final_logit_softcapping"));
  if (cap && *cap <= 0) {
    return keys.error(keys.spelled("final_logit_softcapping"), "must be positive or null (no softcap), got " + num(*cap));
  }
  if (cap) c.final_logit_softcapping = static_cast<float>(*cap);
  BEAM_ASSIGN_OR_RETURN(auto attn_bias, keys.optional_bool("attention_bias"));
  if (attn_bias.value_or(false)) return keys.error("attention_bias", "is true; q/k/v/o biases are not supported");
  BEAM_ASSIGN_OR_RETURN(auto tie, keys.optional_bool("tie_word_embeddings"));
  c.tie_word_embeddings = tie.value_or(false);
  BEAM_ASSIGN_OR_RETURN(auto dtype, keys.optional_string("torch_dtype"));
  c.torch_dtype = dtype.value_or("");
  BEAM_ASSIGN_OR_RETURN(c.eos_token_ids, keys.token_ids("eos_token_id"));
  BEAM_ASSIGN_OR_RETURN(auto bos, keys.token_ids("bos_token_id"));
  if (bos.size() > 1) return keys.error("bos_token_id", "must be a single token id");
  if (!bos.empty()) c.bos_token_id = bos[0];
  BEAM_ASSIGN_OR_RETURN(auto pad, keys.token_ids("pad_token_id"));
  if (pad.size() > 1) return keys.error("pad_token_id", "must be a single token id");
  if (!pad.empty()) c.pad_token_id = pad[0];
  return ok_status();
}

// generation_config.json overrides bos and adds its eos ids (kept in order, no duplicates).
Status merge_generation_config(const std::string& path, BeamConfig& c) {
  BEAM_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  BEAM_ASSIGN_OR_RETURN(json j, parse_json_object(text, path));
  ConfigKeys keys(j, path, key_spellings());
  BEAM_ASSIGN_OR_RETURN(auto eos, keys.token_ids("eos_token_id"));
  for (int64_t id : eos) {
    if (std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) == c.eos_token_ids.end())
      c.eos_token_ids.push_back(id);
  }
  BEAM_ASSIGN_OR_RETURN(auto bos, keys.token_ids("bos_token_id"));
  if (bos.size() > 1) return keys.error("bos_token_id", "must be a single token id");
  if (!bos.empty()) c.bos_token_id = bos[0];
  return ok_status();
}

// Sizes that each pass but together describe more than any model: past 2^50 parameters or 2^50
// bytes of KV for one sequence of max_position_embeddings (or sliding_window) tokens, the int64_t
// arithmetic of parameter counts, memory plans and buffers would overflow.
Status check_magnitudes(const BeamConfig& c, const std::string& source) {
  constexpr double kLimit = 0x1p50;
  const double params = approximate_total_params(c);
  if (params > kLimit)
    return make_error(source + ": describes " + num(params) +
                      " parameters, more than the 2^50 supported: check hidden_size, "
                      "vocab_size, intermediate_size, moe_intermediate_size, n_routed_experts, "
                      "the heads and num_hidden_layers");
  const double kv_bytes = 4.0 * static_cast<double>(c.num_kv_heads) *
                          static_cast<double>(c.head_dim) * static_cast<double>(c.num_layers) *
                          static_cast<double>(std::max(c.max_position_embeddings, c.sliding_window));
  if (kv_bytes > kLimit)
    return make_error(source + ": one sequence of max_position_embeddings (or sliding_window) " +
                      "tokens would hold " + num(kv_bytes) + " bytes of KV, more than the 2^50 " +
                      "supported: check max_position_embeddings, sliding_window, " +
                      "num_key_value_heads, head_dim and num_hidden_layers");
  return ok_status();
}

}  // namespace

std::string_view attention_kind_name(AttentionKind k) {
  switch (k) {
    case AttentionKind::kSliding: return kSliding;
    case AttentionKind::kFull: return kFull;
  }
  return "?";
}

std::string_view mlp_kind_name(MlpKind k) {
  switch (k) {
    case MlpKind::kDense: return "dense";
    case MlpKind::kSparse: return "sparse";
  }
  return "?";
}

int64_t BeamConfig::num_layers_of(AttentionKind k) const {
  return std::count(layer_types.begin(), layer_types.end(), k);
}

int64_t BeamConfig::num_layers_of(MlpKind k) const {
  return std::count(mlp_layer_types.begin(), mlp_layer_types.end(), k);
}

Expected<BeamConfig> parse_beam_config(const std::string& json_text, const std::string& source) {
  BEAM_ASSIGN_OR_RETURN(json j, parse_json_object(json_text, source));
  ConfigKeys keys(j, source, key_spellings());
  BeamConfig c;
  BEAM_RETURN_IF_ERROR(read_identity(keys));
  BEAM_RETURN_IF_ERROR(read_shape(keys, c));
  BEAM_RETURN_IF_ERROR(read_moe(keys, c));
  BEAM_RETURN_IF_ERROR(read_rope(keys, c));
  BEAM_RETURN_IF_ERROR(read_numerics(keys, c));
  BEAM_RETURN_IF_ERROR(check_magnitudes(c, source));
  return c;
}

std::optional<std::string_view> config_difference(const BeamConfig& a, const BeamConfig& b) {
  const std::pair<std::string_view, bool> same[] = {
      {"vocab_size", a.vocab_size == b.vocab_size},
      {"hidden_size", a.hidden_size == b.hidden_size},
      {"num_hidden_layers", a.num_layers == b.num_layers},
      {"num_attention_heads", a.num_heads == b.num_heads},
      {"num_key_value_heads", a.num_kv_heads == b.num_kv_heads},
      {"head_dim", a.head_dim == b.head_dim},
      {"intermediate_size", a.intermediate_size == b.intermediate_size},
      {"moe_intermediate_size", a.moe_intermediate_size == b.moe_intermediate_size},
      {"n_routed_experts", a.num_experts == b.num_experts},
      {"num_experts_per_tok", a.num_experts_per_tok == b.num_experts_per_tok},
      {"n_group", a.num_groups == b.num_groups},
      {"topk_group", a.topk_groups == b.topk_groups},
      {"routed_scaling_factor", a.routed_scaling_factor == b.routed_scaling_factor},
      {"norm_topk_prob", a.norm_topk_prob == b.norm_topk_prob},
      {"rms_norm_eps", a.rms_norm_eps == b.rms_norm_eps},
      {"sliding_window", a.sliding_window == b.sliding_window},
      {"rope_theta", a.rope_theta == b.rope_theta},
      {"final_logit_softcapping", a.final_logit_softcapping == b.final_logit_softcapping},
      {"max_position_embeddings", a.max_position_embeddings == b.max_position_embeddings},
      {"tie_word_embeddings", a.tie_word_embeddings == b.tie_word_embeddings},
      {"layer_types", a.layer_types == b.layer_types},
      {"mlp_layer_types", a.mlp_layer_types == b.mlp_layer_types},
      {"eos_token_id", a.eos_token_ids == b.eos_token_ids},
  };
  for (const auto& [key, equal] : same)
    if (!equal) return key;
  return std::nullopt;
}

Expected<BeamConfig> load_beam_config(const std::string& model_dir) {
  std::filesystem::path dir(model_dir);
  std::string path = (dir / "config.json").string();
  BEAM_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  BEAM_ASSIGN_OR_RETURN(BeamConfig c, parse_beam_config(text, path));
  std::filesystem::path gen = dir / "generation_config.json";
  std::error_code ec;
  if (std::filesystem::exists(gen, ec)) BEAM_RETURN_IF_ERROR(merge_generation_config(gen.string(), c));
  return c;
}

}  // namespace beam
