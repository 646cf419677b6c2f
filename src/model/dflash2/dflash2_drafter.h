// DFlash2Drafter: a DFlash2 drafter's forward (docs/dflash2.md) on the target's device: the
// context K/V of the target's captured hidden states, then one block of drafts per request.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <vector>

#include "core/status.h"
#include "kernels/api/context.h"
#include "kernels/api/device_memory.h"
#include "model/beam/workspace.h"
#include "model/dflash2/dflash2_context.h"
#include "model/dflash2/dflash2_draft_graphs.h"
#include "model/dflash2/dflash2_weights.h"

namespace beam {

// One request's block: its anchor (the last accepted token, not yet fed to the target), the
// anchor's position and its context.
struct DFlash2Block {
  int32_t anchor = 0;
  int64_t position = 0;
  const DFlash2Context* context = nullptr;
};

// Rows of add_context's features for one context: rows [first_row, first_row + positions.size())
// hold positions `positions` (ascending).
struct DFlash2ContextRows {
  DFlash2Context* context = nullptr;
  int64_t first_row = 0;
  std::span<const int64_t> positions;
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
  // weights, embed, lm_head (the target's [V, H] bf16) and pool on ctx's device. Single-threaded.
  DFlash2Drafter(std::shared_ptr<const DFlash2Weights> weights, TensorView embed,
                 TensorView lm_head, KernelContext ctx, std::shared_ptr<DFlash2ContextPool> pool);

  const DFlash2Config& config() const { return weights_->config; }
  // The target's embedding and LM head after a weight update gave it new ones (the CPU's are new
  // buffers): the same shapes and device; graphs over the old addresses are captured again.
  void retarget(const TensorView& embed, const TensorView& lm_head);
  DFlash2ContextPool& pool() const { return *pool_; }
  // An empty context in this drafter's pool.
  std::shared_ptr<DFlash2Context> new_context() const;

  // Makes room for add_context of `tokens` rows and draft of `blocks` blocks, so that later calls
  // of at most those sizes allocate nothing; an error when the device is out of memory.
  Status reserve(int64_t tokens, int64_t blocks);
  // The device bytes reserve(tokens, blocks) takes at most (the scratch's growth headroom
  // included), for memory plans made before the drafter exists.
  static int64_t scratch_bytes(const DFlash2Config& config, int64_t tokens, int64_t blocks);

  // Sleep mode: frees the scratch and the context pool's memory (every context must be gone);
  // returns the bytes freed. restore_memory allocates them again as reserve(tokens, blocks).
  int64_t release_memory();
  Status restore_memory(int64_t tokens, int64_t blocks);

  // Adds each item's rows of `features` ([T, n_taps * H] bf16 on the drafter's device: the
  // target's residuals after the tapped layers, concatenated in target_layer_ids order) to its
  // context. A position whose slot finds no free page stays absent. Queued on the stream. An
  // error (the context then misses these positions) when the device is out of memory; so draft.
  // On CUDA with ctx.cuda_graphs and a windowed drafter, calls of at most 256 rows copy the
  // features into the drafter's scratch and run padded to a DFlash2DraftGraphs bucket of rows,
  // replaying its graph (the same bits: the padding rows are stored where nothing reads).
  Status add_context(const TensorView& features, std::span<const DFlash2ContextRows> items);

  // Drafts block_size - 1 tokens per block: drafts[b * (B - 1) + j - 1] is the token drafted
  // for position blocks[b].position + j. trace: intermediate values when not null. Synchronizes.
  // On CUDA with ctx.cuda_graphs and a windowed drafter (fixed-size page tables), untraced calls
  // run padded to a DFlash2DraftGraphs bucket and replay its graph (the same bits: every op's
  // rows are independent of the others).
  Status draft(std::span<const DFlash2Block> blocks, std::span<int32_t> drafts,
               DFlash2Trace* trace = nullptr);
  const DFlash2DraftGraphs& graphs() const { return graphs_; }                  // tests
  const DFlash2DraftGraphs& context_graphs() const { return context_graphs_; }  // tests

 private:
  struct ContextMeta;
  struct DraftLayout;
  // The device work of add_context for the P (padded) rows of `features` ([P, n_taps * H] bf16)
  // whose metadata is uploaded at `at`: their K/V and positions into the pool.
  void enqueue_context_rows(const ContextMeta& at, const TensorView& features);
  // The device work of draft() for the S (padded) blocks whose metadata is uploaded at `at`:
  // the blocks' forward and the read-out, the drafts left in drafts_ ([S * (B - 1)] i32).
  void enqueue_blocks(const DraftLayout& at, DFlash2Trace* trace);
  // Blocks [b0, b1)'s read-out and selector walk: draft_rows [S * (B - 1)] i32 (each draft
  // row's block row), all_anchors [S] i32; their drafts into drafts_, and the trace.
  void read_out(const TensorView& draft_rows, const TensorView& all_anchors, int64_t b0, int64_t b1,
                DFlash2Trace* trace);
  // Whether calls may replay graphs: CUDA with ctx.cuda_graphs and a windowed drafter (its page
  // tables, hence draft()'s metadata, have a fixed size).
  bool graphed() const;
  // What graphs over `buffers` and `meta` point into: those, the context's scratch and the pool.
  uint64_t graph_fingerprint_of(std::initializer_list<const ScratchBuffer*> buffers,
                                const MetadataBuffer& meta) const;
  // add_context / draft without the out-of-memory boundary (an op's DeviceOutOfMemory becomes
  // their error there).
  Status enqueue_context(const TensorView& features, std::span<const DFlash2ContextRows> items);
  Status run_draft(std::span<const DFlash2Block> blocks, std::span<int32_t> drafts,
                   DFlash2Trace* trace);
  static constexpr size_t kScratchBuffers = 21;
  // Each scratch buffer's bytes for reserve(tokens, blocks), in scratch_buffers()' order.
  static std::array<size_t, kScratchBuffers> scratch_sizes(const DFlash2Config& config,
                                                           int64_t tokens, int64_t blocks);
  std::array<ScratchBuffer*, kScratchBuffers> scratch_buffers();
  // Grows `meta` to nbytes (its addresses change then).
  Status reserve_meta(MetadataBuffer& meta, size_t nbytes);

  std::shared_ptr<const DFlash2Weights> weights_;
  TensorView embed_, lm_head_;
  KernelContext ctx_;
  std::shared_ptr<DFlash2ContextPool> pool_;
  int32_t trash_page_ = -1;  // the slot rows that have none are written to (never read)
  // add_context's: [T, n_taps * H] features (graphed calls'), [T, H] hidden, [T, Nkv * D] k, v.
  ScratchBuffer ctx_features_, ctx_hidden_, ctx_k_, ctx_v_;
  // draft's: [N, ...] activations of S blocks of B rows, the read-out's [chunk rows, ...].
  ScratchBuffer h_, a_, dyn_, q_, k_, v_, o_, m_, gate_up_, act_;
  ScratchBuffer g_, z_, u_, hp_, candidates_, scores_, drafts_;
  MetadataBuffer ctx_meta_, draft_meta_;
  DFlash2DraftGraphs graphs_{"DFlash2 draft graph", "blocks"};
  DFlash2DraftGraphs context_graphs_{"DFlash2 context graph", "rows"};
};

}  // namespace beam
