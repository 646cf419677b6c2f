// `bench step`: decode and prefill steps timed through BeamModel on one device (no engine, no
// scheduler), with per-layer times split by layer kind and their roofline floors (roofline.h).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <vector>

#include "core/status.h"
#include "kernels/api/context.h"
#include "model/weights.h"

namespace beam {

struct StepBenchOptions {
  std::vector<int64_t> batches{1, 8, 32, 128};
  int64_t context = 512;  // KV tokens cached per sequence before the timed decode steps
  int64_t warmup_steps = 3;
  int64_t timed_steps = 20;       // decode: the median of these
  int64_t prefill_tokens = 8192;  // one sequence, one step; 0 skips the prefill measurement
  int64_t prefill_reps = 3;       // timed prefill steps after one warm-up (median)
  int64_t prefill_chunk = 8192;   // tokens per step while filling the decode context
  int64_t block_size = 64;
  // The model the per-layer times are extrapolated to (Beam: 3 dense + 49 MoE layers).
  int64_t target_dense_layers = 3;
  int64_t target_moe_layers = 49;
  uint64_t seed = 1;  // token ids
  // --breakdown: also profile eager decode steps op by op (kernels/api/step_profiler.h) and
  // report the median ms per op kind over breakdown_steps steps, summed over layers.
  bool breakdown = false;
  int64_t breakdown_steps = 5;
  // --lora-slots S > 0: every sequence uses adapter slot s % S of rank lora_rank (zero factors:
  // the same kernels and work as trained ones; model/lora_slots.h); 0 serves the base model alone.
  int lora_slots = 0;
  int lora_rank = 16;
  bool lora_experts = false;  // the slots serve the routed experts too (--lora-experts)
  // --draft-tokens K > 0: each decode step is a speculative verification, every sequence feeding
  // 1 + K tokens with logits for each (eager: no decode graph); the floors stay the one-token
  // decode's, so the ratios compare the verification with plain decoding's floor.
  int64_t draft_tokens = 0;
};

// Runs every measurement on weights (on ctx.device) and returns one JSON object:
// {"decode": [per batch ...], "prefill": {...}} with every time next to its floor; with
// options.breakdown each decode entry also has "breakdown" (see breakdown_report in the .cpp).
// Per-layer split: the LM head (+ embedding) is timed alone with the same kernels; a second
// model made of the MoE layers only (same device weights) gives MoE vs dense layer time.
Expected<nlohmann::json> run_step_bench(const KernelContext& ctx,
                                        std::shared_ptr<const BeamWeights> weights,
                                        const StepBenchOptions& options);

// A model of the layers of `weights` whose MLP kind is `kind`, sharing its device memory.
std::shared_ptr<const BeamWeights> layers_of_kind(std::shared_ptr<const BeamWeights> weights,
                                                  MlpKind kind);

}  // namespace beam
