// BatchSampler: rows are cut into one contiguous chunk per Sampler; parallel_for hands out chunk
// indices, so a Sampler's scratch row is only ever used by the one thread running its chunk.
#include "runtime/sampling/batch_sampler.h"

#include <algorithm>

#include "core/check.h"

namespace beam {
namespace {

// Below this many logits in a batch, thread hand-off costs more than it saves.
constexpr int64_t kMinParallelLogits = int64_t{1} << 17;

}  // namespace

BatchSampler::BatchSampler(int64_t vocab_size, ThreadPool* pool)
    : vocab_size_(vocab_size), pool_(pool) {
  int num_samplers = pool != nullptr ? pool->num_threads() : 1;
  samplers_.reserve(static_cast<size_t>(num_samplers));
  for (int i = 0; i < num_samplers; ++i) samplers_.emplace_back(vocab_size);
}

void BatchSampler::sample(std::span<const SampleRow> rows, std::span<SampledToken> out) {
  BEAM_CHECK_EQ(rows.size(), out.size());
  auto num_rows = static_cast<int64_t>(rows.size());
  if (num_rows == 0) return;
  bool parallel = pool_ != nullptr && num_rows > 1 && num_rows * vocab_size_ >= kMinParallelLogits;
  int64_t num_chunks =
      parallel ? std::min<int64_t>(num_rows, static_cast<int64_t>(samplers_.size())) : 1;
  auto run_chunks = [&](int64_t chunk_begin, int64_t chunk_end) {
    for (int64_t chunk = chunk_begin; chunk < chunk_end; ++chunk) {
      Sampler& sampler = samplers_[static_cast<size_t>(chunk)];
      int64_t begin = num_rows * chunk / num_chunks, end = num_rows * (chunk + 1) / num_chunks;
      for (int64_t r = begin; r < end; ++r) out[r] = sampler.sample(rows[r]);
    }
  };
  if (num_chunks == 1) {
    run_chunks(0, 1);
  } else {
    pool_->parallel_for(num_chunks, 1, run_chunks);
  }
}

void BatchSampler::score(std::span<const float> logits, std::span<const ScoreRow> rows,
                         std::span<TokenLogprobs> out) {
  BEAM_CHECK_EQ(rows.size(), out.size());
  const auto v = static_cast<size_t>(vocab_size_);
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const ScoreRow& row = rows[static_cast<size_t>(r)];
      BEAM_CHECK(row.logits_row >= 0 &&
                 (static_cast<size_t>(row.logits_row) + 1) * v <= logits.size())
          << "score: logits row " << row.logits_row;
      out[static_cast<size_t>(r)] =
          compute_logprobs(logits.subspan(static_cast<size_t>(row.logits_row) * v, v), row.token,
                           row.temperature, row.num_top);
    }
  };
  const auto num_rows = static_cast<int64_t>(rows.size());
  if (pool_ != nullptr && num_rows > 1 && num_rows * vocab_size_ >= kMinParallelLogits) {
    pool_->parallel_for(num_rows, 1, run);
  } else {
    run(0, num_rows);
  }
}

}  // namespace beam
