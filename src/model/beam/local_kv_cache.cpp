// LocalKvCache: per layer one [num_seqs * blocks_per_seq, block_size, Nkv, D] bf16 tensor for K and
// one for V on the context's device; sequence s owns blocks [s * blocks_per_seq, (s + 1) * blocks_per_seq).
#include "model/beam/local_kv_cache.h"

#include <cstring>

namespace beam {

LocalKvCache::LocalKvCache(int64_t num_seqs, int64_t max_tokens, int64_t block_size)
    : block_size_(block_size), blocks_per_seq_((max_tokens + block_size - 1) / block_size) {
  BEAM_CHECK(num_seqs > 0 && max_tokens > 0 && block_size > 0);
  int64_t num_blocks = num_seqs * blocks_per_seq_;
  for (int64_t b = 0; b < num_blocks; ++b) tables_.push_back(static_cast<int32_t>(b));
}

LocalKvCache::LocalKvCache(const BeamConfig& config, int64_t num_seqs, int64_t max_tokens,
                           int64_t block_size, TensorParallel tp)
    : LocalKvCache(num_seqs, max_tokens, block_size) {
  Status st = allocate(KernelContext{}, config, tp);  // host memory needs no thread pool
  BEAM_CHECK(st.ok()) << "LocalKvCache: " << st.error().message;
}

Expected<LocalKvCache> LocalKvCache::create(const KernelContext& ctx, const BeamConfig& config,
                                            int64_t num_seqs, int64_t max_tokens,
                                            int64_t block_size, TensorParallel tp) {
  LocalKvCache cache(num_seqs, max_tokens, block_size);
  BEAM_RETURN_IF_ERROR(cache.allocate(ctx, config, tp));
  return cache;
}

Status LocalKvCache::allocate(const KernelContext& ctx, const BeamConfig& config,
                              TensorParallel tp) {
  const int64_t num_blocks = static_cast<int64_t>(tables_.size());
  const Shape shape{num_blocks, block_size_, shard_shape(config, tp).num_kv_heads, config.head_dim};
  const size_t nbytes = static_cast<size_t>(shape.numel()) * dtype_size(DType::kBF16);
  // Poison the cache so a read of a slot nobody wrote shows up as NaN, not as a plausible zero.
  HostTensor poison(DType::kBF16, shape);
  std::memset(poison.view.data, 0xff, nbytes);
  for (int64_t l = 0; l < 2 * config.num_layers; ++l) {
    Expected<DeviceBuffer> b = allocate_buffer(ctx, nbytes);
    if (!b.ok()) return make_error("KV cache: " + b.error().message);
    copy_tensor(ctx, b->view(DType::kBF16, shape), poison.view);
    storage_.push_back(std::move(*b));
  }
  for (int64_t l = 0; l < config.num_layers; ++l) {
    layers_.layers.push_back(PagedKv{storage_[2 * l].view(DType::kBF16, shape),
                                     storage_[2 * l + 1].view(DType::kBF16, shape), block_size_});
  }
  return ok_status();
}

std::span<const int32_t> LocalKvCache::block_table(int64_t s) const {
  return {tables_.data() + s * blocks_per_seq_, static_cast<size_t>(blocks_per_seq_)};
}

}  // namespace beam
