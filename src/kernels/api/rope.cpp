// RoPE / SSMax entry points: validate shapes and dtypes, dispatch by device; the fp32 scalar
// helpers are host functions shared by every backend.
#include "kernels/api/rope.h"

#include <vector>

#include "kernels/api/checks.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/rope.h"
#if BEAMSERVE_CUDA
#include "kernels/cuda/rope.h"
#endif

namespace beam {

using kernel_checks::cpu_pool;
using kernel_checks::cuda_backend_not_built;
using kernel_checks::expect_tensor;

void apply_rope(const KernelContext& ctx, const TensorView& q, const TensorView& k,
                const TensorView& positions, float theta) {
  constexpr const char* op = "apply_rope";
  expect_tensor(ctx, q, DType::kBF16, 3, op, "q");
  expect_tensor(ctx, k, DType::kBF16, 3, op, "k");
  expect_tensor(ctx, positions, DType::kI64, 1, op, "positions");
  BEAM_CHECK(k.dim(0) == q.dim(0) && positions.dim(0) == q.dim(0) && k.dim(2) == q.dim(2) &&
             q.dim(2) % 2 == 0)
      << op << ": q " << q.shape.str() << ", k " << k.shape.str() << ", positions "
      << positions.shape.str();
  BEAM_CHECK(theta > 0.0f) << op << ": theta " << theta;
  switch (ctx.device) {
    case Device::kCpu:
      cpu::apply_rope(cpu_pool(ctx, op), q, k, positions, theta);
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::apply_rope(*ctx.cuda, q, k, positions, theta);
      return;
#else
      cuda_backend_not_built(op);
#endif
  }
}

void apply_ssmax(const KernelContext& ctx, const TensorView& q, const TensorView& positions) {
  constexpr const char* op = "apply_ssmax";
  expect_tensor(ctx, q, DType::kBF16, 3, op, "q");
  expect_tensor(ctx, positions, DType::kI64, 1, op, "positions");
  BEAM_CHECK(positions.dim(0) == q.dim(0))
      << op << ": q " << q.shape.str() << ", positions " << positions.shape.str();
  switch (ctx.device) {
    case Device::kCpu:
      cpu::apply_ssmax(cpu_pool(ctx, op), q, positions);
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::apply_ssmax(*ctx.cuda, q, positions);
      return;
#else
      cuda_backend_not_built(op);
#endif
  }
}

namespace {

// The store of a q/k op: the same contract as store_kv's arguments.
void check_store(const KernelContext& ctx, const QkTensors& qk, const KvStore& store,
                 const char* op) {
  expect_tensor(ctx, store.v, DType::kBF16, 3, op, "v");
  expect_tensor(ctx, store.slots, DType::kI64, 1, op, "slots");
  expect_tensor(ctx, store.cache.k, DType::kBF16, 4, op, "cache.k");
  expect_tensor(ctx, store.cache.v, DType::kBF16, 4, op, "cache.v");
  const PagedKv& kv = store.cache;
  BEAM_CHECK(store.v.shape == qk.k.shape && store.slots.dim(0) == qk.k.dim(0) &&
             kv.v.shape == kv.k.shape && kv.block_size > 0 && kv.k.dim(1) == kv.block_size &&
             kv.k.dim(2) == qk.k.dim(1) && kv.k.dim(3) == qk.k.dim(2))
      << op << ": k " << qk.k.shape.str() << ", v " << store.v.shape.str() << ", slots "
      << store.slots.shape.str() << ", cache k " << kv.k.shape.str() << ", v "
      << kv.v.shape.str() << ", block_size " << kv.block_size;
}

// The q/k op's views, and its store when there is one.
void check_qk(const KernelContext& ctx, const QkTensors& qk, const KvStore* store, const char* op) {
  expect_tensor(ctx, qk.q, DType::kBF16, 3, op, "q");
  expect_tensor(ctx, qk.k, DType::kBF16, 3, op, "k");
  expect_tensor(ctx, qk.q_norm, DType::kBF16, 1, op, "q_norm");
  expect_tensor(ctx, qk.k_norm, DType::kBF16, 1, op, "k_norm");
  expect_tensor(ctx, qk.positions, DType::kI64, 1, op, "positions");
  const int64_t D = qk.q.dim(2);
  BEAM_CHECK(qk.k.dim(0) == qk.q.dim(0) && qk.positions.dim(0) == qk.q.dim(0) &&
             qk.k.dim(2) == D && D > 0 && qk.q_norm.dim(0) == D && qk.k_norm.dim(0) == D)
      << op << ": q " << qk.q.shape.str() << ", k " << qk.k.shape.str() << ", q_norm "
      << qk.q_norm.shape.str() << ", k_norm " << qk.k_norm.shape.str() << ", positions "
      << qk.positions.shape.str();
  if (store != nullptr) check_store(ctx, qk, *store, op);
}

// The per-head norms on the CPU: q and k viewed as [T * heads, D] rows, in place.
void cpu_norm_heads(ThreadPool& pool, const QkTensors& qk, float eps) {
  const int64_t T = qk.q.dim(0), D = qk.q.dim(2);
  const TensorView q2 = qk.q.reshape({T * qk.q.dim(1), D}), k2 = qk.k.reshape({T * qk.k.dim(1), D});
  cpu::rms_norm(pool, q2, qk.q_norm, eps, q2);
  cpu::rms_norm(pool, k2, qk.k_norm, eps, k2);
}


// The optional store of a q/k op on the CPU (after the norms and positions).
void cpu_store(ThreadPool& pool, const QkTensors& qk, const KvStore* store) {
  if (store != nullptr) cpu::store_kv(pool, qk.k, store->v, store->slots, store->cache);
}

}  // namespace

void qk_norm_rope(const KernelContext& ctx, const QkTensors& qk, float eps, float theta,
                  const KvStore* store) {
  constexpr const char* op = "qk_norm_rope";
  check_qk(ctx, qk, store, op);
  BEAM_CHECK(qk.q.dim(2) % 2 == 0 && theta > 0.0f)
      << op << ": head_dim " << qk.q.dim(2) << ", theta " << theta;
  switch (ctx.device) {
    case Device::kCpu:
      cpu_norm_heads(cpu_pool(ctx, op), qk, eps);
      cpu::apply_rope(cpu_pool(ctx, op), qk.q, qk.k, qk.positions, theta);
      cpu_store(cpu_pool(ctx, op), qk, store);
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::qk_norm_rope(*ctx.cuda, qk, eps, theta, store);
      return;
#else
      cuda_backend_not_built(op);
#endif
  }
}

void qk_norm_ssmax(const KernelContext& ctx, const QkTensors& qk, float eps, const KvStore* store) {
  constexpr const char* op = "qk_norm_ssmax";
  check_qk(ctx, qk, store, op);
  switch (ctx.device) {
    case Device::kCpu:
      cpu_norm_heads(cpu_pool(ctx, op), qk, eps);
      cpu::apply_ssmax(cpu_pool(ctx, op), qk.q, qk.positions);
      cpu_store(cpu_pool(ctx, op), qk, store);
      return;
    case Device::kCuda:
#if BEAMSERVE_CUDA
      cuda::qk_norm_ssmax(*ctx.cuda, qk, eps, store);
      return;
#else
      cuda_backend_not_built(op);
#endif
  }
}

float ssmax_scale(int64_t position) {
  return cpu::ssmax_scale(position);
}

float rope_inv_freq(float theta, int64_t i, int64_t head_dim) {
  BEAM_CHECK(head_dim > 0 && i >= 0 && 2 * i < head_dim)
      << "rope_inv_freq: i " << i << ", D " << head_dim;
  return cpu::rope_inv_freq(theta, i, head_dim);
}

float rope_angle(int64_t position, float inv_freq) {
  return cpu::rope_angle(position, inv_freq);
}

void rope_cos_sin(int64_t position, float theta, int64_t head_dim, std::span<float> cos_out,
                  std::span<float> sin_out) {
  BEAM_CHECK(head_dim > 0 && head_dim % 2 == 0 &&
             static_cast<int64_t>(cos_out.size()) == head_dim &&
             static_cast<int64_t>(sin_out.size()) == head_dim)
      << "rope_cos_sin: head_dim " << head_dim << ", outputs " << cos_out.size() << "/"
      << sin_out.size();
  std::vector<float> inv_freq(static_cast<size_t>(head_dim / 2));
  for (int64_t i = 0; i < head_dim / 2; ++i) inv_freq[i] = cpu::rope_inv_freq(theta, i, head_dim);
  cpu::rope_cos_sin(position, inv_freq.data(), head_dim, cos_out.data(), sin_out.data());
}

}  // namespace beam
