// BatchSampler: samples every row of an engine step in one call, spread over a ThreadPool when
// the batch is large. Each row's result depends only on its own logits and sequence state, so it
// is the same whatever the batch composition, order, chunking or thread count.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "runtime/sampling/sampler.h"

namespace beam {

// Owner: the engine thread. Holds one Sampler (one scratch row) per pool thread.
class BatchSampler {
 public:
  // pool may be null (serial); it must outlive the BatchSampler.
  BatchSampler(int64_t vocab_size, ThreadPool* pool);

  // out[i] = the token (and logprobs) for rows[i]; out.size() == rows.size().
  void sample(std::span<const SampleRow> rows, std::span<SampledToken> out);
  // out[i] = compute_logprobs of rows[i]'s token in its row of logits ([rows, vocab] f32).
  void score(std::span<const float> logits, std::span<const ScoreRow> rows,
             std::span<TokenLogprobs> out);

 private:
  int64_t vocab_size_;
  ThreadPool* pool_;
  std::vector<Sampler> samplers_;
};

}  // namespace beam
