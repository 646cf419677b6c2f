// Roofline floors for benchmarks: the bytes a forward step must move and the FLOPs it must do, per
// layer and for the LM head, against the H200 ceilings measured in GPU.md (4.3 TB/s copy,
// 798 TFLOP/s bf16 GEMM). A floor is max(bytes / bandwidth, FLOPs / peak).
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace beam {

inline constexpr double kHbmBytesPerSecond = 4.3e12;   // device-to-device copy (GPU.md)
inline constexpr double kBf16FlopsPerSecond = 798e12;  // cuBLAS bf16 GEMM 8192^3 (GPU.md)

struct Cost {
  double bytes = 0;
  double flops = 0;
  double bandwidth_ms() const { return bytes / kHbmBytesPerSecond * 1e3; }
  double compute_ms() const { return flops / kBf16FlopsPerSecond * 1e3; }
  double floor_ms() const { return bandwidth_ms() > compute_ms() ? bandwidth_ms() : compute_ms(); }
  Cost& operator+=(const Cost& o) {
    bytes += o.bytes;
    flops += o.flops;
    return *this;
  }
};

// The query/key work of one attention layer over a step.
struct AttentionWork {
  int64_t num_tokens = 0;      // new tokens (queries) of the step
  int64_t keys_attended = 0;   // Σ over queries of the keys each one sees
  int64_t kv_tokens_read = 0;  // distinct cached K/V rows the step reads (GQA: once per sequence)
};

// Attention branch of one layer: packed qkvg + o_proj weights, gate bias and q/k norms read once;
// K/V rows read (kv_tokens_read) and written (num_tokens); GEMM FLOPs 2·T·params plus
// 4·Nq·D per attended key (QKᵀ and PV). Norm, RoPE and activation traffic are not counted.
Cost attention_cost(const BeamConfig& c, const AttentionWork& w);
// Dense SwiGLU MLP over num_tokens tokens: gate_up + down weights once, 6·T·H·I FLOPs.
Cost dense_mlp_cost(const BeamConfig& c, int64_t num_tokens);
// Routed MoE over num_tokens tokens whose routing touched experts_touched distinct experts: the
// fp32 router and those experts' weights read once; router 2·T·E·H and experts 6·T·k·H·Im FLOPs.
Cost moe_cost(const BeamConfig& c, int64_t num_tokens, int64_t experts_touched);
// Final norm + LM head for `rows` logit rows: lm_head weights once, the bf16 and fp32 logits
// written, 2·rows·V·H FLOPs.
Cost lm_head_cost(const BeamConfig& c, int64_t rows);

// Keys a query at 0-based position p sees in a layer of kind k (p + 1, capped at the window).
int64_t keys_seen(const BeamConfig& c, AttentionKind k, int64_t position);
// Σ keys_seen over positions [first, first + count).
int64_t keys_seen_sum(const BeamConfig& c, AttentionKind k, int64_t first, int64_t count);

// Expected distinct experts under uniform random top-k routing of num_tokens tokens:
// E · (1 − (1 − k/E)^T) (≈ 163 of 256 at T = 32, k = 8).
double expected_experts_touched(const BeamConfig& c, int64_t num_tokens);

// Per MoE layer of routed [num_layers, T, k] expert ids: the distinct experts (moe_cost's
// experts_touched) and the rows routed to the most-chosen one (the load skew the routed-expert
// kernels must absorb).
struct ExpertLoad {
  std::vector<int64_t> touched, max_rows;
};
ExpertLoad expert_load(const std::vector<int32_t>& routed, int64_t num_layers);

}  // namespace beam
