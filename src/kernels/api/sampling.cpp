// sample_tokens, score_tokens: validate shapes, dtypes and per-row parameters, dispatch by device.
#include "kernels/api/sampling.h"

#include "core/check.h"
#include "kernels/api/checks.h"
#if BEAMSERVE_CUDA
#include "kernels/cuda/sampling.h"
#endif

namespace beam {
namespace {

void check_rows(std::span<const SamplingRowParams> rows, std::span<const LogitEdit> edits,
                std::span<const uint32_t> allowed, int64_t num_logit_rows, int64_t vocab) {
  constexpr const char* op = "sample_tokens";
  const int64_t words = allowed_mask_words(vocab);
  const auto allowed_words = static_cast<int64_t>(allowed.size());
  BEAM_CHECK(allowed_words % words == 0)
      << op << ": " << allowed_words << " allowed words, not whole masks of " << words;
  const int64_t num_allowed_rows = allowed_words / words;
  for (size_t r = 0; r < rows.size(); ++r) {
    const SamplingRowParams& p = rows[r];
    BEAM_CHECK(p.logits_row >= 0 && p.logits_row < num_logit_rows)
        << op << ": row " << r << " logits_row " << p.logits_row << " of " << num_logit_rows;
    BEAM_CHECK(p.num_top_logprobs >= -1 && p.num_top_logprobs <= kMaxSampledTopLogprobs &&
               p.num_top_logprobs <= vocab)
        << op << ": row " << r << " num_top_logprobs " << p.num_top_logprobs;
    BEAM_CHECK(p.edit_begin >= 0 && p.edit_count >= 0 &&
               int64_t{p.edit_begin} + p.edit_count <= static_cast<int64_t>(edits.size()))
        << op << ": row " << r << " edits [" << p.edit_begin << ", +" << p.edit_count << ") of "
        << edits.size();
    BEAM_CHECK(p.allowed_row >= -1 && p.allowed_row < num_allowed_rows)
        << op << ": row " << r << " allowed_row " << p.allowed_row << " of " << num_allowed_rows;
    BEAM_CHECK(p.uniform >= 0.0 && p.uniform < 1.0) << op << ": row " << r << " uniform " << p.uniform;
    BEAM_CHECK(p.top_p > 0.0 && p.top_p <= 1.0 && p.min_p >= 0.0 && p.min_p <= 1.0 &&
               p.top_k >= 0 && p.inv_temperature >= 0.0f && p.logprob_inv_temperature > 0.0f &&
               p.logprob_temperature > 0.0)
        << op << ": row " << r << " parameters out of range";
  }
  for (const LogitEdit& e : edits)
    BEAM_CHECK(e.token >= 0 && e.token < vocab) << op << ": edit token " << e.token;
}

}  // namespace

void sample_tokens(const KernelContext& ctx, const TensorView& logits,
                   std::span<const SamplingRowParams> rows, std::span<const LogitEdit> edits,
                   std::span<const uint32_t> allowed, const TensorView& scratch,
                   const TensorView& out) {
  constexpr const char* op = "sample_tokens";
  kernel_checks::expect_tensor(ctx, logits, DType::kF32, 2, op, "logits");
  kernel_checks::expect_tensor(ctx, scratch, DType::kF32, 2, op, "scratch");
  kernel_checks::expect_tensor(ctx, out, DType::kI32, 2, op, "out");
  const auto num_rows = static_cast<int64_t>(rows.size());
  const int64_t vocab = logits.dim(1);
  BEAM_CHECK(vocab > 0 && vocab < (int64_t{1} << 31) && scratch.dim(0) == num_rows &&
             scratch.dim(1) == vocab && out.dim(0) == num_rows && out.dim(1) == kSampledRowWords)
      << op << ": logits " << logits.shape.str() << ", " << num_rows << " rows, scratch "
      << scratch.shape.str() << ", out " << out.shape.str();
  check_rows(rows, edits, allowed, logits.dim(0), vocab);
  if (num_rows == 0) return;
  switch (ctx.device) {
    case Device::kCpu:
      BEAM_CHECK(false) << op << ": no CPU implementation; the CPU path is runtime/sampling's "
                        << "BatchSampler (docs/sampling.md)";
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::sample_tokens(*ctx.cuda, logits, rows, edits, allowed, scratch, out);
      return;
#else
      kernel_checks::cuda_backend_not_built(op);
#endif
  }
}

void score_tokens(const KernelContext& ctx, const TensorView& logits,
                  std::span<const ScoreRowParams> rows, const TensorView& out) {
  constexpr const char* op = "score_tokens";
  kernel_checks::expect_tensor(ctx, logits, DType::kF32, 2, op, "logits");
  kernel_checks::expect_tensor(ctx, out, DType::kI32, 2, op, "out");
  const auto num_rows = static_cast<int64_t>(rows.size());
  const int64_t vocab = logits.dim(1);
  BEAM_CHECK(vocab > 0 && vocab < (int64_t{1} << 31) && out.dim(0) == num_rows &&
             out.dim(1) == kSampledRowWords)
      << op << ": logits " << logits.shape.str() << ", " << num_rows << " rows, out "
      << out.shape.str();
  for (size_t r = 0; r < rows.size(); ++r) {
    const ScoreRowParams& p = rows[r];
    BEAM_CHECK(p.logits_row >= 0 && p.logits_row < logits.dim(0) && p.token >= 0 &&
               p.token < vocab && p.num_top >= 0 && p.num_top <= kMaxSampledTopLogprobs &&
               p.num_top <= vocab && p.temperature > 0.0 && p.inv_temperature > 0.0f)
        << op << ": row " << r << " (logits_row " << p.logits_row << ", token " << p.token
        << ", num_top " << p.num_top << ", temperature " << p.temperature << ") out of range";
  }
  if (num_rows == 0) return;
  switch (ctx.device) {
    case Device::kCpu:
      BEAM_CHECK(false) << op << ": no CPU implementation; the CPU path is runtime/sampling's "
                        << "compute_logprobs";
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::score_tokens(*ctx.cuda, logits, rows, out);
      return;
#else
      kernel_checks::cuda_backend_not_built(op);
#endif
  }
}

}  // namespace beam
