// `beamserve inspect`: summarises a model from its config.json (parameters, weight bytes, KV
// bytes per token, a per-GPU memory plan) and, when weights exist, the checkpoint's bytes per
// dtype. Human-readable by default, --json for machines.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/usage.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/memory_plan.h"
#include "model/param_count.h"

namespace beam::cli {
namespace {

using nlohmann::json;

struct Report {
  std::string model_dir;
  BeamConfig config;
  ParamCounts params;
  WeightBytes bytes;
  MemoryPlan plan;
  std::optional<std::map<DType, size_t>> checkpoint_bytes;  // when weights exist
  size_t checkpoint_tensors = 0;
};

std::string fmt_count(int64_t n) {
  char buf[32];
  if (n >= 1'000'000'000) std::snprintf(buf, sizeof(buf), "%.2fB", n / 1e9);
  else if (n >= 1'000'000) std::snprintf(buf, sizeof(buf), "%.2fM", n / 1e6);
  else if (n >= 1'000) std::snprintf(buf, sizeof(buf), "%.2fK", n / 1e3);
  else std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(n));
  return buf;
}

std::string fmt_bytes(int64_t n) {
  char buf[32];
  if (n >= 1'000'000'000) std::snprintf(buf, sizeof(buf), "%.2f GB", n / 1e9);
  else if (n >= 1'000'000) std::snprintf(buf, sizeof(buf), "%.2f MB", n / 1e6);
  else if (n >= 1'000) std::snprintf(buf, sizeof(buf), "%.2f KB", n / 1e3);
  else std::snprintf(buf, sizeof(buf), "%lld B", static_cast<long long>(n));
  return buf;
}

// One letter per layer: S/F for attention, D/M for dense/MoE.
std::string layer_letters(const BeamConfig& c, bool mlp) {
  std::string s;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    s += mlp ? (c.mlp_layer_types[l] == MlpKind::kDense ? 'D' : 'M')
             : (c.layer_types[l] == AttentionKind::kSliding ? 'S' : 'F');
  }
  return s;
}

void print_config(const Report& r) {
  const BeamConfig& c = r.config;
  std::printf("model           %s\n", r.model_dir.c_str());
  std::printf("layers          %lld: %lld sliding_attention (window %lld, RoPE theta %g), %lld full_attention (NoPE + SSMax)\n",
              (long long)c.num_layers, (long long)c.num_layers_of(AttentionKind::kSliding), (long long)c.sliding_window,
              c.rope_theta, (long long)c.num_layers_of(AttentionKind::kFull));
  std::printf("                %s  (S sliding, F full)\n", layer_letters(c, false).c_str());
  std::printf("                %s  (D dense, M MoE)\n", layer_letters(c, true).c_str());
  std::printf("attention       hidden %lld, %lld q heads / %lld kv heads x %lld (q width %lld), gated output\n",
              (long long)c.hidden_size, (long long)c.num_heads, (long long)c.num_kv_heads, (long long)c.head_dim,
              (long long)c.q_width());
  std::printf("mlp             %lld dense (width %lld), %lld MoE: %lld experts x %lld, top-%lld, %lld groups keep %lld, scale %g\n",
              (long long)c.num_layers_of(MlpKind::kDense), (long long)c.intermediate_size,
              (long long)c.num_layers_of(MlpKind::kSparse), (long long)c.num_experts, (long long)c.moe_intermediate_size,
              (long long)c.num_experts_per_tok, (long long)c.num_groups, (long long)c.topk_groups, c.routed_scaling_factor);
  char softcap[32] = "none";
  if (c.final_logit_softcapping) std::snprintf(softcap, sizeof(softcap), "%g", *c.final_logit_softcapping);
  std::printf("vocab           %lld, tied embeddings %s, softcap %s, max positions %lld, dtype %s\n",
              (long long)c.vocab_size, c.tie_word_embeddings ? "yes" : "no", softcap,
              (long long)c.max_position_embeddings, c.torch_dtype.empty() ? "-" : c.torch_dtype.c_str());
}

void print_sizes(const Report& r) {
  const ParamCounts& p = r.params;
  const BeamConfig& c = r.config;
  std::printf("\nparameters      total %s, active per token %s\n", fmt_count(p.total()).c_str(), fmt_count(p.active()).c_str());
  std::printf("  embedding %s, lm_head %s, attention %s, norms %s, dense MLP %s, routers %s\n",
              fmt_count(p.embedding).c_str(), fmt_count(p.lm_head).c_str(), fmt_count(p.attention).c_str(),
              fmt_count(p.norms).c_str(), fmt_count(p.dense_mlp).c_str(), fmt_count(p.routers).c_str());
  std::printf("  experts %s total, %s active\n", fmt_count(p.experts_total).c_str(), fmt_count(p.experts_active).c_str());
  std::printf("weights         %s loaded: bf16 %s, f32 (router) %s\n", fmt_bytes(r.bytes.total()).c_str(),
              fmt_bytes(r.bytes.bf16_bytes).c_str(), fmt_bytes(r.bytes.f32_bytes).c_str());
  if (r.checkpoint_bytes) {
    std::printf("checkpoint      %zu tensors on disk:", r.checkpoint_tensors);
    for (const auto& [dtype, n] : *r.checkpoint_bytes)
      std::printf(" %s %s", std::string(dtype_name(dtype)).c_str(), fmt_bytes(static_cast<int64_t>(n)).c_str());
    std::printf("\n");
  }
  std::printf("kv cache (bf16) per token: %lld B per layer; sliding_attention %lld layers = %lld B (at most %lld tokens "
              "per sequence); full_attention %lld layers = %lld B\n",
              (long long)c.kv_bytes_per_token_per_layer(), (long long)c.num_layers_of(AttentionKind::kSliding),
              (long long)c.kv_bytes_per_token(AttentionKind::kSliding), (long long)c.sliding_window,
              (long long)c.num_layers_of(AttentionKind::kFull), (long long)c.kv_bytes_per_token(AttentionKind::kFull));
}

void print_plan(const MemoryPlan& m) {
  std::printf("\nmemory plan     %lld GPU(s) x %s\n", (long long)m.num_gpus, fmt_bytes(m.gpu_memory_bytes).c_str());
  std::printf("  weights             %s per GPU\n", fmt_bytes(m.weight_bytes).c_str());
  std::printf("  host at load        %s per GPU rank (all but the routed experts, which stream\n"
              "                      from the checkpoint's files to the GPU)\n",
              fmt_bytes(m.host_load_bytes).c_str());
  std::printf("  activation reserve  %s\n", fmt_bytes(m.activation_reserve_bytes).c_str());
  std::printf("  kv heads per GPU    %lld\n", (long long)m.kv_heads_per_gpu);
  std::printf("  sliding pool        %lld tokens x %lld B = %s\n", (long long)m.sliding_pool_tokens,
              (long long)m.sliding_bytes_per_token, fmt_bytes(m.sliding_pool_bytes).c_str());
  if (!m.fits) {
    std::printf("  DOES NOT FIT: %s\n", m.reason.c_str());
    return;
  }
  std::printf("  full pool           %lld tokens x %lld B = %s\n", (long long)m.full_pool_tokens,
              (long long)m.full_bytes_per_token, fmt_bytes(m.full_pool_bytes).c_str());
}

json to_json(const Report& r) {
  const BeamConfig& c = r.config;
  const ParamCounts& p = r.params;
  const MemoryPlan& m = r.plan;
  json j = {
      {"model", r.model_dir},
      {"config", {{"num_layers", c.num_layers}, {"hidden_size", c.hidden_size}, {"num_heads", c.num_heads},
                  {"num_kv_heads", c.num_kv_heads}, {"head_dim", c.head_dim}, {"vocab_size", c.vocab_size},
                  {"sliding_window", c.sliding_window}, {"num_experts", c.num_experts},
                  {"num_experts_per_tok", c.num_experts_per_tok}, {"layer_types", layer_letters(c, false)},
                  {"mlp_layer_types", layer_letters(c, true)}}},
      {"parameters", {{"total", p.total()}, {"active", p.active()}, {"embedding", p.embedding},
                      {"lm_head", p.lm_head}, {"attention", p.attention}, {"norms", p.norms},
                      {"dense_mlp", p.dense_mlp}, {"routers", p.routers}, {"experts_total", p.experts_total},
                      {"experts_active", p.experts_active}}},
      {"weight_bytes", {{"bf16", r.bytes.bf16_bytes}, {"f32", r.bytes.f32_bytes}, {"total", r.bytes.total()}}},
      {"kv_bytes_per_token", {{"per_layer", c.kv_bytes_per_token_per_layer()},
                              {"sliding_attention", c.kv_bytes_per_token(AttentionKind::kSliding)},
                              {"full_attention", c.kv_bytes_per_token(AttentionKind::kFull)}}},
      {"memory_plan", {{"gpu_memory_bytes", m.gpu_memory_bytes}, {"num_gpus", m.num_gpus},
                       {"weight_bytes", m.weight_bytes}, {"host_load_bytes", m.host_load_bytes},
                       {"activation_reserve_bytes", m.activation_reserve_bytes},
                       {"kv_heads_per_gpu", m.kv_heads_per_gpu}, {"sliding_pool_tokens", m.sliding_pool_tokens},
                       {"sliding_pool_bytes", m.sliding_pool_bytes}, {"full_pool_tokens", m.full_pool_tokens},
                       {"full_pool_bytes", m.full_pool_bytes}, {"fits", m.fits}, {"reason", m.reason}}}};
  if (r.checkpoint_bytes) {
    json disk = json::object();
    for (const auto& [dtype, n] : *r.checkpoint_bytes) disk[std::string(dtype_name(dtype))] = n;
    j["checkpoint"] = {{"num_tensors", r.checkpoint_tensors}, {"bytes_by_dtype", disk}};
  }
  return j;
}

Expected<MemoryPlanOptions> plan_options(const Args& a) {
  MemoryPlanOptions o;
  BEAM_ASSIGN_OR_RETURN(double gpu_gb, a.get_double("gpu-memory-gb", 141.0));
  BEAM_ASSIGN_OR_RETURN(o.num_gpus, a.get_int("num-gpus", 1));
  BEAM_ASSIGN_OR_RETURN(o.max_num_seqs, a.get_int("max-seqs", 256));
  if (gpu_gb <= 0 || gpu_gb > 1e6) return make_error("--gpu-memory-gb must be in (0, 1e6]");
  if (o.num_gpus < 1 || o.num_gpus > 1024) return make_error("--num-gpus must be in 1..1024");
  if (o.max_num_seqs < 1 || o.max_num_seqs > 1'000'000) return make_error("--max-seqs must be in 1..1000000");
  o.gpu_memory_bytes = static_cast<int64_t>(gpu_gb * 1e9);
  if (a.has("activation-reserve-gb")) {
    BEAM_ASSIGN_OR_RETURN(double reserve_gb, a.get_double("activation-reserve-gb", 0));
    if (reserve_gb < 0 || reserve_gb > 1e6) return make_error("--activation-reserve-gb must be in [0, 1e6]");
    o.activation_reserve_bytes = static_cast<int64_t>(reserve_gb * 1e9);
  }
  return o;
}

Expected<Report> build_report(const Args& a) {
  Report r;
  r.model_dir = *a.get("model");
  BEAM_ASSIGN_OR_RETURN(r.config, load_beam_config(r.model_dir));
  BEAM_ASSIGN_OR_RETURN(MemoryPlanOptions options, plan_options(a));
  r.params = count_params(r.config);
  r.bytes = weight_bytes(r.config);
  r.plan = plan_memory(r.config, options);
  if (Checkpoint::exists(r.model_dir)) {
    BEAM_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open(r.model_dir));
    r.checkpoint_bytes = ckpt.bytes_by_dtype();
    r.checkpoint_tensors = ckpt.num_tensors();
  }
  return r;
}

}  // namespace

int cmd_inspect(int argc, char** argv) {
  auto args = Args::parse(argc, argv, {"model", "gpu-memory-gb", "num-gpus", "max-seqs", "activation-reserve-gb"},
                          {"json"});
  if (!args.ok() || !args->has("model")) {
    std::fprintf(stderr, "inspect: %s\n%s",
                 args.ok() ? "--model is required" : args.error().message.c_str(), kInspectUsage);
    return 2;
  }
  auto report = build_report(*args);
  if (!report.ok()) {
    std::fprintf(stderr, "inspect: %s\n", report.error().message.c_str());
    return 1;
  }
  if (args->has("json")) {
    std::printf("%s\n", to_json(*report).dump(2).c_str());
    return 0;
  }
  print_config(*report);
  print_sizes(*report);
  print_plan(report->plan);
  return 0;
}

}  // namespace beam::cli
