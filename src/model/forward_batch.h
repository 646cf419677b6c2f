// ForwardBatch (runtime → model) and ForwardOutput (model → runtime): one step of the forward
// pass over several sequences, each bringing new tokens and its block tables in both KV pools.
#pragma once

#include <climits>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/api/attention.h"
#include "kernels/api/lora.h"

namespace beam {

// One sequence's new tokens. Token i goes to logical KV slot num_cached + i and sits at
// absolute position kv_pos0 + num_cached + i. Block tables map logical block b (slots
// [b*block_size, (b+1)*block_size)) to a physical block of the pool: full_blocks for
// full-attention layers, sliding_blocks for sliding-window layers (-1 where a block slid out of
// the window and was released). Both tables must cover slot num_cached + tokens.size() - 1.
struct SeqChunk {
  std::span<const int32_t> tokens;
  int64_t kv_pos0 = 0;
  int64_t num_cached = 0;
  std::span<const int32_t> full_blocks;
  std::span<const int32_t> sliding_blocks;
  bool all_logits = false;  // logits for every new token, else only for the last one
  int32_t lora_slot = kNoLoraSlot;  // the LoRA slot its tokens use (model/lora_slots.h)
  // ForwardOutput::final_hidden gets the final-norm output (the LM head's input) of new tokens
  // [final_hidden_from, tokens.size()); kNoFinalHidden (or past the last token): none.
  int64_t final_hidden_from = kNoFinalHidden;
  static constexpr int64_t kNoFinalHidden = INT64_MAX;
  // Logical slots [0, num_prompt) hold the sequence's prompt, the later ones generated (or
  // drafted) tokens: a batch-invariant context computes the two kinds on their own attention
  // kernels (AttentionSeq::prompt_rows) and never replays prompt rows in a decode graph.
  int64_t num_prompt = kAllPrompt;
  static constexpr int64_t kAllPrompt = INT64_MAX;
  bool wants_final_hidden() const {
    return final_hidden_from < static_cast<int64_t>(tokens.size());
  }
};

struct ForwardBatch {
  std::vector<SeqChunk> seqs;
  bool capture_routing = false;  // fill ForwardOutput::routed_experts
  // Fill ForwardOutput::captured_hidden with the residual stream after each of these layers
  // (0-based; a DFlash2 drafter's target_layer_ids). Empty: none. Decode steps still
  // replay CUDA graphs, which then include the copies (model/beam/decode_graphs.h).
  std::vector<int64_t> capture_layers;
  // With capture_layers: fill ForwardOutput::device_captured instead of captured_hidden.
  bool captured_on_device = false;
  bool logits_on_device = false; // fill ForwardOutput::device_logits instead of copying logits back
};

// KV memory of every layer (index = layer): full-attention layers point into the full pool's
// storage, sliding layers into the sliding pool's; one block_size for both pools.
struct KvLayers {
  std::vector<PagedKv> layers;
};

struct ForwardOutput {
  // Logits rows in batch order: for each sequence, every new token (all_logits) or the last.
  std::vector<float> logits;         // [num_rows, vocab] f32 (soft-capped); empty with logits_on_device
  // With ForwardBatch::logits_on_device: the same rows, [num_rows, vocab] f32 on the model's device,
  // valid until the model's next forward() (its workspace); queued on the model's stream, not synchronized.
  TensorView device_logits;
  std::vector<int32_t> row_seq;      // [num_rows] index into ForwardBatch::seqs
  std::vector<int64_t> row_position; // [num_rows] absolute position of the token of that row
  int64_t vocab_size = 0;
  // With capture_routing: [num_sparse_layers, num_tokens, top_k] expert ids, tokens in batch order.
  std::vector<int32_t> routed_experts;
  // With capture_layers: [num_tokens, n * H] bf16 bits, tokens in batch order, row t holding the
  // residual after capture_layers[0], then [1], ... (before the final norm).
  std::vector<uint16_t> captured_hidden;
  // With capture_layers and captured_on_device: the same rows, [num_tokens, n * H] bf16 on the
  // model's device, valid until the model's next forward() (its workspace).
  TensorView device_captured;
  // The rows SeqChunk::final_hidden_from asks for: [rows, H] bf16 bits, chunks in batch order,
  // each chunk's tokens [final_hidden_from, its end) in order (what the LM head reads for them;
  // SGLang's return_hidden_states).
  std::vector<uint16_t> final_hidden;
  // Host milliseconds forward() spent before the step's last device work was queued (validation,
  // metadata, uploads, kernel or graph launches). With CUDA graphs the device idles for nearly
  // all of it, so it is the per-step CPU overhead the bench reports.
  double host_enqueue_ms = 0;
  int64_t num_rows() const {
    if (device_logits.data != nullptr) return device_logits.dim(0);
    return vocab_size ? static_cast<int64_t>(logits.size()) / vocab_size : 0;
  }
  std::span<const float> row(int64_t r) const {
    return {logits.data() + r * vocab_size, static_cast<size_t>(vocab_size)};
  }
};

}  // namespace beam
