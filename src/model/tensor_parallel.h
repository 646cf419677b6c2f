// Tensor parallelism: how a Beam model's weights split over `size` ranks (one per GPU; threads of
// one process on the CPU) that run every step together (docs/architecture.md, Tensor parallelism).
//
// Rank r of n holds
//   attention: q / gate heads [r·Nq/n, (r+1)·Nq/n) and KV heads [r·Nkv/n, ...) (whole GQA groups,
//              so its q heads read only its KV heads and its KV cache holds Nkv/n heads), the
//              gate bias of its heads and o_proj's input columns of its heads;
//   dense MLP: gate and up rows [r·I/n, ...) and down's matching input columns;
//   routed experts: experts [r·E/n, ...) whole (expert parallelism); the router on every rank;
//   LM head: vocabulary rows [r·V/n, ...); the embedding and every norm on every rank.
// o_proj, the dense down projection and the experts' combine then leave fp32 partial sums that
// the ranks sum (Communicator::all_reduce_sum) and round to bf16 once: a rank-1 model's roundings
// (BEAM.md §3), fp32 sums in another order. The logits' vocabulary slices are gathered.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "core/status.h"
#include "model/config.h"
#include "model/weights.h"

namespace beam {

struct TensorParallel {
  int rank = 0;
  int size = 1;
};

// A model's place in its group: rank tp.rank of tp.size, collectives through comm (its end of
// the group; null only for size 1).
struct ModelShard {
  TensorParallel tp;
  Communicator* comm = nullptr;
};

// One rank's share of the split dimensions.
struct ShardShape {
  int64_t num_heads = 0;  // q / gate heads
  int64_t num_kv_heads = 0;
  int64_t intermediate = 0;  // dense SwiGLU width
  int64_t first_expert = 0;  // experts [first_expert, first_expert + num_experts)
  int64_t num_experts = 0;
  int64_t first_vocab = 0;  // LM head rows [first_vocab, first_vocab + vocab)
  int64_t vocab = 0;
};

// Whether config splits over `size` ranks: an error names each dimension that does not divide
// (KV heads, q heads, the dense width, the experts, the vocabulary).
Status check_tensor_parallel(const BeamConfig& config, int size);

// Rank tp.rank's share (config checked by check_tensor_parallel for tp.size).
ShardShape shard_shape(const BeamConfig& config, TensorParallel tp);

// Rank tp.rank's weights: host tensors of `full` (on the CPU), sliced as above. `full` holds
// every expert or at least the rank's (load_beam_weights with the rank's ExpertSlice, so a rank
// never needs the whole model in host memory); an error names experts it lacks. Contiguous slices
// (gate bias, experts, LM head, the replicated tensors) are views of `full`, which the result
// keeps alive (deferred expert matrices stay deferred, with the rank's experts' pieces); q/k/v/gate
// rows and the column slices of o_proj and down are copied. The config is
// `full`'s (the model reads its shard's sizes from shard_shape). size 1 returns `full` itself, as
// does a synthetic layout made for rank tp (synthetic_layout; another rank's is an error).
Expected<std::shared_ptr<const BeamWeights>> shard_beam_weights(
    const std::shared_ptr<const BeamWeights>& full, TensorParallel tp);

// The experts rank tp holds (load_beam_weights' slice for it).
ExpertSlice rank_experts(const BeamConfig& config, TensorParallel tp);

// Where a tensor-parallel engine gets rank tp's weights: host weights holding at least that rank's
// experts, which shard_beam_weights then slices. Called once per rank (rank r's on its thread).
using RankWeights = std::function<Expected<std::shared_ptr<const BeamWeights>>(TensorParallel tp)>;
// Rank tp's slice (shard_beam_weights) of source(tp)'s weights, which the slice keeps alive.
Expected<std::shared_ptr<const BeamWeights>> load_rank_slice(const RankWeights& source,
                                                             TensorParallel tp);
// Every rank slices the same host copy.
RankWeights slices_of(std::shared_ptr<const BeamWeights> full);
// Each rank loads model_dir with only its experts (and lora_dir's adapter merged; empty: none),
// held as `copy` says (kDeferred for GPU ranks: streamed from the checkpoint at upload).
RankWeights load_rank_weights(std::string model_dir, std::string lora_dir,
                              ExpertCopy copy = ExpertCopy::kHost);

}  // namespace beam
