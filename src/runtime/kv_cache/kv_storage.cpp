// KvStorage: allocation of both KV pools and per-layer views into them.
#include "runtime/kv_cache/kv_storage.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

namespace beam {

Expected<void*> HostKvAllocator::allocate(size_t nbytes) {
  constexpr size_t kAlign = 256;
  void* p = std::aligned_alloc(kAlign, (nbytes + kAlign - 1) / kAlign * kAlign);
  if (!p) return make_error("KV storage: out of host memory allocating " + std::to_string(nbytes) + " bytes");
  return p;
}

void HostKvAllocator::deallocate(void* data, size_t) { std::free(data); }

void HostKvAllocator::copy(void* dst, const void* src, size_t nbytes) { std::memcpy(dst, src, nbytes); }

Expected<KvStorage> KvStorage::create(const KvGeometry& g, const KvPoolSizes& sizes,
                                      KvMemoryAllocator& allocator) {
  KvStorage s;
  s.allocator_ = &allocator;
  s.layer_pool_ = g.layer_types;
  s.block_bytes_per_layer_ = g.block_size_tokens * g.num_kv_heads * g.head_dim * 2;
  for (AttentionKind pool : kKvPools) {
    PoolMemory& m = s.pools_[index(pool)];
    m.num_blocks = pool == AttentionKind::kFull ? sizes.num_full_blocks : sizes.num_sliding_blocks;
    m.nbytes = static_cast<size_t>(g.num_layers(pool) * 2 * m.num_blocks * s.block_bytes_per_layer_);
    if (m.nbytes == 0) continue;
    Expected<void*> p = allocator.allocate(m.nbytes);
    if (!p.ok()) return p.error();
    m.data = *p;
  }
  const size_t layer_bytes_of[2] = {
      static_cast<size_t>(s.pools_[0].num_blocks * s.block_bytes_per_layer_),
      static_cast<size_t>(s.pools_[1].num_blocks * s.block_bytes_per_layer_)};
  int64_t next_layer_of[2] = {0, 0};
  for (AttentionKind pool : g.layer_types) {
    const int p = index(pool);
    char* base = static_cast<char*>(s.pools_[p].data) + 2 * next_layer_of[p]++ * layer_bytes_of[p];
    const Shape shape{s.pools_[p].num_blocks, g.block_size_tokens, g.num_kv_heads, g.head_dim};
    PagedKv kv;
    kv.k = TensorView{base, DType::kBF16, shape, allocator.device()};
    kv.v = TensorView{base + layer_bytes_of[p], DType::kBF16, shape, allocator.device()};
    kv.block_size = g.block_size_tokens;
    s.layers_.layers.push_back(kv);
  }
  return s;
}

KvStorage::KvStorage(KvStorage&& o) noexcept { *this = std::move(o); }

KvStorage& KvStorage::operator=(KvStorage&& o) noexcept {
  if (this == &o) return *this;
  release();
  allocator_ = std::exchange(o.allocator_, nullptr);
  for (int p = 0; p < 2; ++p) pools_[p] = std::exchange(o.pools_[p], PoolMemory{});
  layers_ = std::move(o.layers_);
  layer_pool_ = std::move(o.layer_pool_);
  block_bytes_per_layer_ = o.block_bytes_per_layer_;
  return *this;
}

KvStorage::~KvStorage() { release(); }

void KvStorage::release() {
  for (PoolMemory& m : pools_) {
    if (m.data) allocator_->deallocate(m.data, m.nbytes);
    m = PoolMemory{};
  }
}

int64_t KvStorage::num_blocks(AttentionKind pool) const { return pools_[index(pool)].num_blocks; }

PitchedRows KvStorage::block_rows(AttentionKind pool, BlockId block) const {
  const PoolMemory& m = pools_[index(pool)];
  BEAM_CHECK(block.value >= 0 && block.value < m.num_blocks)
      << "block " << block.value << " outside a pool of " << m.num_blocks;
  const auto bb = static_cast<size_t>(block_bytes_per_layer_);
  PitchedRows r;
  r.data = static_cast<char*>(m.data) + static_cast<size_t>(block.value) * bb;
  r.device = allocator_->device();
  r.pitch = static_cast<size_t>(m.num_blocks) * bb;
  r.row_bytes = bb;
  r.rows = static_cast<size_t>(std::count(layer_pool_.begin(), layer_pool_.end(), pool)) * 2;
  return r;
}

void KvStorage::copy_blocks(std::span<const BlockCopy> copies) {
  const size_t n = static_cast<size_t>(block_bytes_per_layer_);
  for (const BlockCopy& c : copies) {
    BEAM_CHECK(c.src.value >= 0 && c.src.value < num_blocks(c.pool) && c.dst.value >= 0 &&
               c.dst.value < num_blocks(c.pool))
        << "block copy " << c.src.value << " -> " << c.dst.value << " outside pool";
    for (size_t l = 0; l < layer_pool_.size(); ++l) {
      if (layer_pool_[l] != c.pool) continue;
      for (const TensorView* t : {&layers_.layers[l].k, &layers_.layers[l].v}) {
        char* base = static_cast<char*>(t->data);
        allocator_->copy(base + c.dst.value * n, base + c.src.value * n, n);
      }
    }
  }
}

}  // namespace beam
