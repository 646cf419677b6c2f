// DeviceBatchSampler: BatchSampler's counterpart for logits that stay on the device
// (Device::kCuda). It turns each row's SequenceSamplingState into the kernels' plain per-row
// parameters and sparse logit edits, packs the rows' allowed-token masks, runs
// kernels/api/sampling.h's sample_tokens, and copies back only the tokens and requested logprobs.
// Same semantics and the same Philox uniforms as the CPU Sampler (docs/sampling.md, "GPU
// sampling").
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "kernels/api/device_memory.h"
#include "kernels/api/sampling.h"
#include "runtime/sampling/sampler.h"

namespace beam {

// One row to sample from device logits: row `logits_row` of the [rows, vocab] f32 tensor.
struct DeviceSampleRow {
  int64_t logits_row = 0;
  const SequenceSamplingState* seq = nullptr;    // read only
  std::span<const int32_t> pending_tokens = {};  // as SampleRow::pending_tokens
  std::span<const uint32_t> allowed_tokens = {};  // as SampleRow::allowed_tokens; without one,
                                                  // bad_words' bans are edits (needs_mask(true))
};

// The edits apply_logit_processors would make to this row, one LogitEdit per touched token in
// increasing token order, appended to `out`; with bans, also bad_words' bans (kEditMask on
// seq.banned_next(pending_tokens)), for a row without a mask (seq.needs_mask(true) false).
void append_logit_edits(const SequenceSamplingState& seq, std::span<const int32_t> pending_tokens,
                        std::vector<LogitEdit>& out, bool bans = false);

// The row's kernel parameters (edit_begin / edit_count left 0 for the caller to set).
SamplingRowParams sampling_row_params(const SequenceSamplingState& seq,
                                      std::span<const int32_t> pending_tokens, int64_t logits_row);

// Owner: the engine thread. Keeps device scratch and output buffers, grown to the largest batch.
class DeviceBatchSampler {
 public:
  // ctx: a device context (not Device::kCpu); its CudaContext must outlive the sampler.
  DeviceBatchSampler(KernelContext ctx, int64_t vocab_size);

  // out[i] = the token (and logprobs, entropy, token_ids_logprob's logprobs) for rows[i], as
  // BatchSampler::sample would give.
  // logits: [num_logit_rows, vocab] f32 on ctx's device. Synchronizes (copies the results back).
  // An error only when device memory for the scratch rows cannot be allocated.
  Status sample(const TensorView& logits, std::span<const DeviceSampleRow> rows,
                std::span<SampledToken> out);
  // out[i] = the logprobs of rows[i]'s token, as BatchSampler::score would give (score_tokens).
  // Synchronizes. An error only when device memory for the results cannot be allocated.
  Status score(const TensorView& logits, std::span<const ScoreRow> rows,
               std::span<TokenLogprobs> out);

 private:
  // out[i].token_ids_logprobs: rows[i]'s SamplingParams::token_ids_logprob scored on its row
  // (score_tokens, one scored row an id).
  Status score_token_ids(const TensorView& logits, std::span<const DeviceSampleRow> rows,
                         std::span<SampledToken> out);
  Status reserve(int64_t num_rows);
  Status reserve_results(int64_t num_rows);

  KernelContext ctx_;
  int64_t vocab_size_;
  int64_t capacity_rows_ = 0;
  DeviceBuffer scratch_;  // [capacity_rows_, vocab] f32
  DeviceBuffer results_;  // [capacity_results_, kSampledRowWords] i32
  int64_t capacity_results_ = 0;
  std::vector<SamplingRowParams> params_;
  std::vector<ScoreRowParams> score_params_;
  std::vector<LogitEdit> edits_;
  std::vector<uint32_t> allowed_;  // the rows' non-empty masks, one after another
  std::vector<SampledRow> host_results_;
};

}  // namespace beam
