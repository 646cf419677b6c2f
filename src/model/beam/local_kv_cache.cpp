// LocalKvCache: per layer one [num_seqs * blocks_per_seq, block_size, Nkv, D] bf16 tensor for K and
// one for V; sequence s owns blocks [s * blocks_per_seq, (s + 1) * blocks_per_seq).
#include "model/beam/local_kv_cache.h"

#include <cstring>

namespace beam {

LocalKvCache::LocalKvCache(const BeamConfig& config, int64_t num_seqs, int64_t max_tokens,
                           int64_t block_size)
    : block_size_(block_size), blocks_per_seq_((max_tokens + block_size - 1) / block_size) {
  BEAM_CHECK(num_seqs > 0 && max_tokens > 0 && block_size > 0);
  int64_t num_blocks = num_seqs * blocks_per_seq_;
  for (int64_t b = 0; b < num_blocks; ++b) tables_.push_back(static_cast<int32_t>(b));
  Shape shape{num_blocks, block_size, config.num_kv_heads, config.head_dim};
  for (int64_t l = 0; l < config.num_layers; ++l) {
    storage_.emplace_back(DType::kBF16, shape);
    storage_.emplace_back(DType::kBF16, shape);
  }
  for (int64_t l = 0; l < config.num_layers; ++l) {
    // Poison the cache so a read of a slot nobody wrote shows up as NaN, not as a plausible zero.
    for (int i = 0; i < 2; ++i) std::memset(storage_[2 * l + i].view.data, 0xff, storage_[2 * l + i].view.nbytes());
    layers_.layers.push_back(PagedKv{storage_[2 * l].view, storage_[2 * l + 1].view, block_size});
  }
}

std::span<const int32_t> LocalKvCache::block_table(int64_t s) const {
  return {tables_.data() + s * blocks_per_seq_, static_cast<size_t>(blocks_per_seq_)};
}

}  // namespace beam
