// DFlash2Drafter: a DFlash2 drafter's forward (docs/dflash2.md) on the host: the context K/V of
// the target's captured hidden states, then one block of drafts per request.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/bf16.h"
#include "kernels/api/context.h"
#include "model/dflash2/dflash2_weights.h"

namespace beam {

// One sequence's drafter context: per drafter layer the K (after k_norm and RoPE) and V of the
// tokens before its anchor, for the last sliding_window + block_size positions (a ring that grows
// as positions arrive until it holds that many; every position when the drafter has no window).
// Positions never added (a prefix-cache hit's) are absent and skipped by the attention.
class DFlash2Context {
 public:
  explicit DFlash2Context(const DFlash2Config& config);
  // Where position `pos` lives, making room for it.
  int64_t slot(int64_t pos);
  // Where position `pos` would live, -1 when it is not held.
  int64_t find(int64_t pos) const;
  // The position held by `slot`, -1 when empty.
  int64_t position(int64_t slot) const { return positions_[static_cast<size_t>(slot)]; }
  int64_t capacity() const { return static_cast<int64_t>(positions_.size()); }
  // Layer l's K or V row of `slot`: [Nkv * D] bf16.
  bf16* key(int64_t l, int64_t slot) { return row(keys_, l, slot); }
  bf16* value(int64_t l, int64_t slot) { return row(values_, l, slot); }
  const bf16* key(int64_t l, int64_t slot) const { return row(keys_, l, slot); }
  const bf16* value(int64_t l, int64_t slot) const { return row(values_, l, slot); }
  void set_position(int64_t slot, int64_t pos) { positions_[static_cast<size_t>(slot)] = pos; }
  // Forgets every position at or after `pos`.
  void truncate(int64_t pos);
  // Whether it holds some position before `pos`.
  bool holds_before(int64_t pos) const;
  // Host bytes held: K and V of every layer and slot.
  int64_t bytes() const {
    return 2 * static_cast<int64_t>(keys_.size()) * capacity() * width_ *
           static_cast<int64_t>(sizeof(bf16));
  }

 private:
  void grow(int64_t capacity);
  bf16* row(const std::vector<std::vector<bf16>>& t, int64_t l, int64_t slot) const {
    return const_cast<bf16*>(t[static_cast<size_t>(l)].data()) + slot * width_;
  }

  int64_t ring_ = 0;   // the most slots (sliding_window + block_size); 0: unbounded
  int64_t width_ = 0;  // Nkv * D
  std::vector<std::vector<bf16>> keys_, values_;  // [layer][slot * width]
  std::vector<int64_t> positions_;
};

// One request's block: its anchor (the last accepted token, not yet fed to the target), the
// anchor's position and its context.
struct DFlash2Block {
  int32_t anchor = 0;
  int64_t position = 0;
  const DFlash2Context* context = nullptr;
};

// Intermediate values of one draft() call, for tests against the PyTorch reference. Rows: the
// blocks' draft positions in order, (block, j) at row block * (B - 1) + j - 1.
struct DFlash2Trace {
  std::vector<float> hidden;        // [rows, H] the final norm's output g (bf16 values)
  std::vector<float> logits;        // [rows, V] u
  std::vector<int32_t> candidates;  // [rows, top_k], u descending (lower id first on ties)
  std::vector<float> scores;        // [rows, top_k] the walk's S
};

class DFlash2Drafter {
 public:
  // embed, lm_head: the target's [V, H] bf16 host tensors. ctx: a CPU context (the drafter runs
  // on the host).
  DFlash2Drafter(std::shared_ptr<const DFlash2Weights> weights, TensorView embed,
                 TensorView lm_head, KernelContext ctx);

  const DFlash2Config& config() const { return weights_->config; }

  // Adds the tokens of `features` ([T, n_taps * H] bf16: the target's residuals after the
  // tapped layers, concatenated in target_layer_ids order) at `positions` to `context`.
  void add_context(const TensorView& features, std::span<const int64_t> positions,
                   DFlash2Context& context) const;

  // Drafts block_size - 1 tokens per block: drafts[b * (B - 1) + j - 1] is the token drafted
  // for position blocks[b].position + j. trace: intermediate values when not null.
  void draft(std::span<const DFlash2Block> blocks, std::span<int32_t> drafts,
             DFlash2Trace* trace = nullptr) const;

 private:
  // x [rows, H] → conv of `side` with this sublayer's coefficients d [rows, 4 * groups].
  void conv(const DFlash2ConvWeights& w, const TensorView& d, int64_t side, const TensorView& x,
            const TensorView& out) const;
  void attention(int64_t layer, std::span<const DFlash2Block> blocks, const TensorView& q,
                 const TensorView& k, const TensorView& v, const TensorView& out) const;
  void walk(std::span<const DFlash2Block> blocks, const TensorView& hidden,
            const TensorView& logits, std::span<int32_t> drafts, DFlash2Trace* trace) const;

  std::shared_ptr<const DFlash2Weights> weights_;
  TensorView embed_, lm_head_;
  KernelContext ctx_;
};

}  // namespace beam
