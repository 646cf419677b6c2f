// CUDA kernel benchmarks (Google Benchmark, timed with CUDA events on the op's stream) at Beam's
// decode and prefill shapes (the fused decode-layer ops next to the unfused ops they replace). Each op reports bytes/s, the fraction of the 4.3 TB/s HBM roofline
// (GPU.md) and the floor in microseconds. One function per op; add new ops the same way.
// Run on the GPU machine: build/<dir>/tools/bench/cuda_kernels_bench
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "kernels/api/activation.h"
#include "kernels/api/attention.h"
#include "kernels/api/device_memory.h"
#include "kernels/api/dflash2.h"
#include "kernels/api/gemm.h"
#include "kernels/api/lora.h"
#include "kernels/api/moe.h"
#include "kernels/api/norm.h"
#include "kernels/api/rope.h"
#include "kernels/api/sampling.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/moe.h"

namespace beam {
namespace {

constexpr double kHbmBytesPerSecond = 4.3e12;  // device-to-device copy, read + write (GPU.md)
constexpr int kLaunchesPerTiming = 20;          // amortises event overhead on microsecond kernels
constexpr int64_t kHidden = 5120, kHeadDim = 128, kQHeads = 48, kKvHeads = 8, kVocab = 151936;
constexpr int64_t kDenseInter = 17408, kExpertInter = 2560;

// A CUDA context and the device tensors of one benchmark (freed when it goes out of scope).
class Gpu {
 public:
  // False (with the reason as the skip message) when there is no usable GPU.
  bool start(benchmark::State& state) {
    auto created = create_cuda_context(0);
    if (!created.ok()) {
      state.SkipWithError(created.error().message.c_str());
      return false;
    }
    cuda_ = std::move(created.value());
    ctx.device = Device::kCuda;
    ctx.cuda = cuda_.get();
    return true;
  }

  // A device tensor filled with xorshift values in [-scale, scale) (never zeros), bf16 or f32.
  TensorView uniform(DType dtype, Shape shape, uint64_t seed, float scale) {
    TensorView t = allocate(dtype, shape);
    const int64_t n = t.numel(), chunk = std::min<int64_t>(n, int64_t{1} << 20);
    HostTensor host(dtype, {chunk});
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < chunk; ++i) {
      s ^= s << 13;
      s ^= s >> 7;
      s ^= s << 17;
      const float v = (2.0f * static_cast<float>(s >> 40) / 16777216.0f - 1.0f) * scale;
      if (dtype == DType::kBF16) {
        host.as<bf16>()[i] = to_bf16(v);
      } else {
        host.as<float>()[i] = v;
      }
    }
    const TensorView flat = t.reshape({n});
    for (int64_t i = 0; i < n; i += chunk) {
      const int64_t count = std::min(chunk, n - i);
      copy_tensor(ctx, flat.rows(i, count), host.view.rows(0, count));
    }
    return t;
  }

  // A device copy of host integers (positions, token ids).
  template <typename T>
  TensorView from_host(DType dtype, const std::vector<T>& values) {
    HostTensor host(dtype, {static_cast<int64_t>(values.size())});
    std::copy(values.begin(), values.end(), host.as<T>());
    TensorView t = allocate(dtype, host.view.shape);
    copy_tensor(ctx, t, host.view);
    return t;
  }

  KernelContext ctx;

 private:
  TensorView allocate(DType dtype, Shape shape) {
    Expected<DeviceBuffer> b = allocate_buffer(ctx, shape.numel() * dtype_size(dtype));
    BEAM_CHECK(b.ok()) << b.error().message;
    buffers_.push_back(std::move(b.value()));
    return buffers_.back().view(dtype, shape);
  }

  std::shared_ptr<CudaContext> cuda_;
  std::vector<DeviceBuffer> buffers_;
};

// Times `launch` (one op launch) with CUDA events around kLaunchesPerTiming back-to-back launches
// after a warm-up, and reports the per-launch time and bandwidth for `bytes` moved per launch.
template <typename Launch>
void time_op(benchmark::State& state, Gpu& gpu, double bytes, Launch launch) {
  cudaStream_t stream = gpu.ctx.cuda->stream;
  launch();
  synchronize(gpu.ctx);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  double total_s = 0;
  for (auto _ : state) {
    cudaEventRecord(start, stream);
    for (int i = 0; i < kLaunchesPerTiming; ++i) launch();
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    const double per_launch_s = ms * 1e-3 / kLaunchesPerTiming;
    state.SetIterationTime(per_launch_s);
    total_s += per_launch_s;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  const double bytes_per_s = bytes * static_cast<double>(state.iterations()) / total_s;
  state.counters["bytes/s"] = benchmark::Counter(bytes_per_s, benchmark::Counter::kDefaults,
                                                 benchmark::Counter::kIs1000);
  state.counters["roofline"] = bytes_per_s / kHbmBytesPerSecond;
  state.counters["floor_us"] = bytes / kHbmBytesPerSecond * 1e6;
}

std::vector<int64_t> positions_near_one_million(int64_t T) {
  std::vector<int64_t> p(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) p[t] = 1000000 - T + t;
  return p;
}

// rms_norm over hidden states [T, 5120] (pre-norms, final norm).
void BM_rms_norm_hidden(benchmark::State& state) {
  Gpu gpu;
  if (!gpu.start(state)) return;
  const int64_t T = state.range(0);
  const TensorView x = gpu.uniform(DType::kBF16, {T, kHidden}, 1, 3.0f);
  const TensorView w = gpu.uniform(DType::kBF16, {kHidden}, 2, 1.0f);
  const TensorView out = gpu.uniform(DType::kBF16, {T, kHidden}, 3, 1.0f);
  time_op(state, gpu, 2.0 * (2 * T * kHidden + kHidden),
          [&] { rms_norm(gpu.ctx, x, w, 1e-6f, out); });
}

// Per-head q_norm: [T * 48, 128] in place.
void BM_rms_norm_q_heads(benchmark::State& state) {
  Gpu gpu;
  if (!gpu.start(state)) return;
  const int64_t T = state.range(0), rows = T * kQHeads;
  const TensorView q = gpu.uniform(DType::kBF16, {rows, kHeadDim}, 4, 3.0f);
  const TensorView w = gpu.uniform(DType::kBF16, {kHeadDim}, 5, 1.0f);
  time_op(state, gpu, 2.0 * (2 * rows * kHeadDim + kHeadDim),
          [&] { rms_norm(gpu.ctx, q, w, 1e-6f, q); });
}

// Post-norm + depth-scaled residual on [T, 5120] (reads branch and residual, writes residual).
void BM_post_norm_residual(benchmark::State& state) {
  Gpu gpu;
  if (!gpu.start(state)) return;
  const int64_t T = state.range(0);
  const TensorView branch = gpu.uniform(DType::kBF16, {T, kHidden}, 6, 3.0f);
  const TensorView w = gpu.uniform(DType::kBF16, {kHidden}, 7, 1.0f);
  const TensorView residual = gpu.uniform(DType::kBF16, {T, kHidden}, 8, 1.0f);
  time_op(state, gpu, 2.0 * (3 * T * kHidden + kHidden), [&] {
    post_norm_residual(gpu.ctx, branch, w, 1e-6f, 0.995227f, 0.097590f, residual);
  });
}

// RoPE on q [T, 48, 128] and k [T, 8, 128] in place, positions near 10^6.
void BM_apply_rope(benchmark::State& state) {
  Gpu gpu;
  if (!gpu.start(state)) return;
  const int64_t T = state.range(0);
  const TensorView q = gpu.uniform(DType::kBF16, {T, kQHeads, kHeadDim}, 9, 1.0f);
  const TensorView k = gpu.uniform(DType::kBF16, {T, kKvHeads, kHeadDim}, 10, 1.0f);
  const TensorView pos = gpu.from_host(DType::kI64, positions_near_one_million(T));
  time_op(state, gpu, 2.0 * 2 * T * (kQHeads + kKvHeads) * kHeadDim + 8.0 * T,
          [&] { apply_rope(gpu.ctx, q, k, pos, 1000000.0f); });
}

// SSMax on q [T, 48, 128] in place (values grow by s(p) per launch; a multiply's cost does not
// depend on them).
void BM_apply_ssmax(benchmark::State& state) {
  Gpu gpu;
  if (!gpu.start(state)) return;
  const int64_t T = state.range(0);
  const TensorView q = gpu.uniform(DType::kBF16, {T, kQHeads, kHeadDim}, 11, 1.0f);
  const TensorView pos = gpu.from_host(DType::kI64, positions_near_one_million(T));
  time_op(state, gpu, 2.0 * 2 * T * kQHeads * kHeadDim + 8.0 * T,
          [&] { apply_ssmax(gpu.ctx, q, pos); });
}

// ---- Fused decode-layer ops: range(1) = 1 the fused op, 0 the unfused ops it replaces ----------

// Post-norm + depth-scaled residual + the next block's pre-norm on [T, 5120]: reads branch and
// residual, writes residual and x (plus both norm weights).
void BM_post_norm_residual_norm(benchmark::State& state) {
  Gpu gpu;
  if (!gpu.start(state)) return;
  const int64_t T = state.range(0);
  const bool fused = state.range(1) != 0;
  state.SetLabel(fused ? "fused" : "post_norm_residual + rms_norm");
  const TensorView branch = gpu.uniform(DType::kBF16, {T, kHidden}, 51, 3.0f);
  const TensorView w_post = gpu.uniform(DType::kBF16, {kHidden}, 52, 1.0f);
  const TensorView w_next = gpu.uniform(DType::kBF16, {kHidden}, 53, 1.0f);
  const TensorView residual = gpu.uniform(DType::kBF16, {T, kHidden}, 54, 1.0f);
  const TensorView x = gpu.uniform(DType::kBF16, {T, kHidden}, 55, 1.0f);
  time_op(state, gpu, 2.0 * (4 * T * kHidden + 2 * kHidden), [&] {
    if (fused) {
      return post_norm_residual_norm(gpu.ctx, branch, w_post, 1e-6f, 0.995227f, 0.097590f,
                                     residual, w_next, x);
    }
    post_norm_residual(gpu.ctx, branch, w_post, 1e-6f, 0.995227f, 0.097590f, residual);
    rms_norm(gpu.ctx, residual, w_next, 1e-6f, x);
  });
}

// Per-head q/k norms + RoPE (range(2) = 1) or SSMax (0) on q [T, 48, 128], k [T, 8, 128] in place
// with positions near 10^6: reads and writes q and k (norm outputs grow nothing: each launch
// re-normalises).
void BM_qk_norm_position(benchmark::State& state) {
  Gpu gpu;
  if (!gpu.start(state)) return;
  const int64_t T = state.range(0);
  const bool fused = state.range(1) != 0, rope = state.range(2) != 0;
  state.SetLabel(std::string(rope ? "rope" : "ssmax") + (fused ? " fused" : " 2 x rms_norm + op"));
  const TensorView q = gpu.uniform(DType::kBF16, {T, kQHeads, kHeadDim}, 56, 1.0f);
  const TensorView k = gpu.uniform(DType::kBF16, {T, kKvHeads, kHeadDim}, 57, 1.0f);
  const TensorView q_norm = gpu.uniform(DType::kBF16, {kHeadDim}, 58, 1.0f);
  const TensorView k_norm = gpu.uniform(DType::kBF16, {kHeadDim}, 59, 1.0f);
  const TensorView pos = gpu.from_host(DType::kI64, positions_near_one_million(T));
  const QkTensors qk{q, k, q_norm, k_norm, pos};
  const TensorView q2 = q.reshape({T * kQHeads, kHeadDim}), k2 = k.reshape({T * kKvHeads, kHeadDim});
  time_op(state, gpu, 2.0 * 2 * T * (kQHeads + kKvHeads) * kHeadDim + 4.0 * kHeadDim + 8.0 * T,
          [&] {
            if (fused && rope) return qk_norm_rope(gpu.ctx, qk, 1e-6f, 1000000.0f);
            if (fused) return qk_norm_ssmax(gpu.ctx, qk, 1e-6f);
            rms_norm(gpu.ctx, q2, q_norm, 1e-6f, q2);
            rms_norm(gpu.ctx, k2, k_norm, 1e-6f, k2);
            if (rope) return apply_rope(gpu.ctx, q, k, pos, 1000000.0f);
            apply_ssmax(gpu.ctx, q, pos);
          });
}

// The packed q/k/v/gate projection (w [14336, 5120]) into its four outputs: linear_split (one
// skinny launch at M <= 8, one GEMM + column scatter up to 256 rows) or four linear() calls.
// bytes/s counts w, x and the outputs.
void BM_linear_split_qkvg(benchmark::State& state) {
  Gpu gpu;
  if (!gpu.start(state)) return;
  const int64_t M = state.range(0);
  const bool fused = state.range(1) != 0;
  state.SetLabel(fused ? "linear_split" : "4 x linear");
  constexpr int64_t kQ = kQHeads * kHeadDim, kKv = kKvHeads * kHeadDim, kN = 2 * kQ + 2 * kKv;
  const TensorView x = gpu.uniform(DType::kBF16, {M, kHidden}, 60, 2.0f);
  const TensorView w = gpu.uniform(DType::kBF16, {kN, kHidden}, 61, 0.02f);
  const std::vector<TensorView> outs = {gpu.uniform(DType::kBF16, {M, kQ}, 62, 1.0f),
                                        gpu.uniform(DType::kBF16, {M, kKv}, 63, 1.0f),
                                        gpu.uniform(DType::kBF16, {M, kKv}, 64, 1.0f),
                                        gpu.uniform(DType::kBF16, {M, kQ}, 65, 1.0f)};
  const double flops = 2.0 * M * kN * kHidden;
  time_op(state, gpu, 2.0 * (kN * kHidden + M * kHidden + M * kN), [&] {
    if (fused) return linear_split(gpu.ctx, x, w, outs);
    int64_t row0 = 0;
    for (const TensorView& out : outs) {
      linear(gpu.ctx, x, w.rows(row0, out.dim(1)), out);
      row0 += out.dim(1);
    }
  });
  state.counters["flop/s"] = benchmark::Counter(
      flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

// Output gate on o, g [T, 48 * 128] (reads o and g, writes o).
void BM_output_gate(benchmark::State& state) {
  Gpu gpu;
  if (!gpu.start(state)) return;
  const int64_t T = state.range(0), width = kQHeads * kHeadDim;
  const TensorView o = gpu.uniform(DType::kBF16, {T, width}, 12, 1.0f);
  const TensorView g = gpu.uniform(DType::kBF16, {T, width}, 13, 3.0f);
  const TensorView bias = gpu.uniform(DType::kBF16, {kQHeads}, 14, 1.0f);
  time_op(state, gpu, 2.0 * 3 * T * width, [&] { output_gate(gpu.ctx, o, g, bias); });
}

// SwiGLU [T, 2I] -> [T, I]; range(1) is I (dense 17408 or one expert's 2560).
void BM_swiglu(benchmark::State& state) {
  Gpu gpu;
  if (!gpu.start(state)) return;
  const int64_t T = state.range(0), inter = state.range(1);
  const TensorView gate_up = gpu.uniform(DType::kBF16, {T, 2 * inter}, 15, 3.0f);
  const TensorView act = gpu.uniform(DType::kBF16, {T, inter}, 16, 1.0f);
  time_op(state, gpu, 2.0 * 3 * T * inter, [&] { swiglu(gpu.ctx, gate_up, act); });
}

// Softcap of LM-head outputs [T, 151936] bf16 -> fp32.
void BM_softcap(benchmark::State& state) {
  Gpu gpu;
  if (!gpu.start(state)) return;
  const int64_t T = state.range(0);
  const TensorView z = gpu.uniform(DType::kBF16, {T, kVocab}, 17, 40.0f);
  const TensorView logits = gpu.uniform(DType::kF32, {T, kVocab}, 18, 1.0f);
  time_op(state, gpu, 6.0 * T * kVocab, [&] { softcap(gpu.ctx, z, 30.0f, 1.0f, logits); });
}

// Embedding gather of T rows from the [151936, 5120] table (1.56 GB).
void BM_embedding(benchmark::State& state) {
  Gpu gpu;
  if (!gpu.start(state)) return;
  const int64_t T = state.range(0);
  const TensorView table = gpu.uniform(DType::kBF16, {kVocab, kHidden}, 19, 1.0f);
  std::vector<int32_t> ids(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) ids[t] = static_cast<int32_t>((t * 7919 + 13) % kVocab);
  const TensorView dids = gpu.from_host(DType::kI32, ids);
  const TensorView out = gpu.uniform(DType::kBF16, {T, kHidden}, 20, 1.0f);
  time_op(state, gpu, 2.0 * 2 * T * kHidden + 4.0 * T,
          [&] { embedding(gpu.ctx, table, dids, out); });
}

// Decode batches of 1 and 64 tokens, a 4096-token prefill chunk.
void decode_and_prefill(benchmark::internal::Benchmark* b) {
  b->Arg(1)->Arg(64)->Arg(4096)->UseManualTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_rms_norm_hidden)->Apply(decode_and_prefill);
BENCHMARK(BM_rms_norm_q_heads)->Apply(decode_and_prefill);
BENCHMARK(BM_post_norm_residual)->Apply(decode_and_prefill);
BENCHMARK(BM_apply_rope)->Apply(decode_and_prefill);
BENCHMARK(BM_apply_ssmax)->Apply(decode_and_prefill);
BENCHMARK(BM_output_gate)->Apply(decode_and_prefill);
// The fused decode-layer ops next to the unfused ops they replace, at decode batches 1 and 32.
BENCHMARK(BM_post_norm_residual_norm)
    ->ArgNames({"T", "fused"})
    ->ArgsProduct({{1, 32}, {1, 0}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_qk_norm_position)
    ->ArgNames({"T", "fused", "rope"})
    ->ArgsProduct({{1, 32}, {1, 0}, {1, 0}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_swiglu)
    ->ArgsProduct({{1, 64, 4096}, {kDenseInter, kExpertInter}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
// Logits are computed for the last token of each sequence: decode batches, not prefill chunks.
BENCHMARK(BM_softcap)->Arg(1)->Arg(64)->Arg(256)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_embedding)->Apply(decode_and_prefill);

// LoRA deltas on q_proj's output (in 5120, n 6144) from a stack of 4 adapter slots of rank
// range(1): all T tokens on slot 0 (range(2) = 0) or on slots t % 4 (1); T 2,048 runs on tensor
// cores (kernels/cuda/lora.cu). bytes/s counts x, each
// used slot's A and B once, out read and written; flop/s 2·T·r·(in + n).
void BM_lora_add(benchmark::State& state) {
  Gpu gpu;
  if (!gpu.start(state)) return;
  constexpr int64_t kSlots = 4, kOut = kQHeads * kHeadDim;
  const int64_t T = state.range(0), r = state.range(1);
  const bool mixed = state.range(2) != 0;
  const TensorView x = gpu.uniform(DType::kBF16, {T, kHidden}, 51, 2.0f);
  const LoraStack stack{gpu.uniform(DType::kBF16, {kSlots, r, kHidden}, 52, 0.02f),
                        gpu.uniform(DType::kBF16, {kSlots, kOut, r}, 53, 0.02f),
                        gpu.uniform(DType::kF32, {kSlots}, 54, 1.0f)};
  std::vector<int32_t> slot_of(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) slot_of[t] = mixed ? static_cast<int32_t>(t % kSlots) : 0;
  const TensorView slots = gpu.from_host(DType::kI32, slot_of);
  const TensorView out = gpu.uniform(DType::kBF16, {T, kOut}, 55, 1.0f);
  const int64_t used = mixed ? std::min(T, kSlots) : 1;
  const double flops = 2.0 * T * r * (kHidden + kOut);
  time_op(state, gpu, 2.0 * (used * r * (kHidden + kOut) + T * kHidden + 2 * T * kOut) + 4.0 * T,
          [&] { lora_add(gpu.ctx, x, stack, slots, out, 0); });
  state.counters["flop/s"] = benchmark::Counter(
      flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

// (a fixed count: google benchmark's 0.5 s of per-launch time is 10 s of launches a case)
BENCHMARK(BM_lora_add)
    ->ArgNames({"T", "r", "mixed"})
    ->ArgsProduct({{1, 32, 128, 2048}, {16, 64}, {0, 1}})
    ->Iterations(50)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// ---- MoE (kernels/cuda/moe_route.cu, moe_experts.cu): 256 experts, top-8 of 4/8 groups --------
constexpr int64_t kExperts = 256, kTopK = 8;
constexpr double kBf16FlopsPerSecond = 798e12;  // cuBLAS bf16 GEMM 8192^3 (GPU.md)

// Grouped routing of T tokens from fp32 logits [T, 256] (reads logits and bias, writes ids and
// weights).
void BM_moe_route(benchmark::State& state) {
  Gpu gpu;
  if (!gpu.start(state)) return;
  const int64_t T = state.range(0);
  const TensorView logits = gpu.uniform(DType::kF32, {T, kExperts}, 21, 4.0f);
  const TensorView bias = gpu.uniform(DType::kF32, {kExperts}, 22, 0.1f);
  const TensorView ids = gpu.from_host(DType::kI32, std::vector<int32_t>(T * kTopK, 0));
  const TensorView weights = gpu.uniform(DType::kF32, {T, kTopK}, 23, 1.0f);
  const RouterParams params{8, 4, kTopK, true, 2.5f};
  time_op(state, gpu, 4.0 * (T * kExperts + kExperts + 2 * T * kTopK), [&] {
    moe_route(gpu.ctx, logits, bias, params, ids.reshape({T, kTopK}), weights);
  });
}

// Router GEMM (fp32 weights [256, 5120], bf16 x) and routing of T tokens in one op: the split-K
// logits kernel up to cuda::kMoeRouterFusedMaxTokens, three split bf16 cuBLASLt GEMMs and the
// routing kernel beyond. bytes/s counts the router weights, x, bias, ids and weights (the floor:
// ~5.3 MB, ~1.2 us).
void BM_moe_router_route(benchmark::State& state) {
  Gpu gpu;
  if (!gpu.start(state)) return;
  const int64_t T = state.range(0);
  const TensorView x = gpu.uniform(DType::kBF16, {T, kHidden}, 31, 2.0f);
  const TensorView router_w = gpu.uniform(DType::kF32, {kExperts, kHidden}, 32, 0.02f);
  const TensorView bias = gpu.uniform(DType::kF32, {kExperts}, 33, 0.1f);
  const TensorView ids = gpu.from_host(DType::kI32, std::vector<int32_t>(T * kTopK, 0));
  const TensorView weights = gpu.uniform(DType::kF32, {T, kTopK}, 34, 1.0f);
  const RouterParams params{8, 4, kTopK, true, 2.5f};
  time_op(state, gpu,
          4.0 * kExperts * kHidden + 2.0 * T * kHidden + 4.0 * (kExperts + 2 * T * kTopK), [&] {
            moe_router_route(gpu.ctx, x, router_w, bias, params, ids.reshape({T, kTopK}),
                             weights);
          });
}

// T tokens of x, each routed to 8 distinct uniformly drawn experts (about 163 of 256 touched at
// T = 32), with random routing weights, and Beam's expert weights.
struct RoutedBatch {
  TensorView x, ids, weights, gate_up, down;
  double distinct = 0;  // experts touched
};

RoutedBatch routed_batch(Gpu& gpu, int64_t T) {
  std::mt19937 rng(24);
  std::vector<int32_t> ids(static_cast<size_t>(T * kTopK)), experts(kExperts);
  std::vector<float> weights(ids.size());
  std::vector<bool> touched(kExperts, false);
  for (int64_t t = 0; t < T; ++t) {
    std::iota(experts.begin(), experts.end(), 0);
    std::shuffle(experts.begin(), experts.end(), rng);
    for (int64_t k = 0; k < kTopK; ++k) {
      ids[t * kTopK + k] = experts[k];
      weights[t * kTopK + k] = std::uniform_real_distribution<float>(0.05f, 0.6f)(rng);
      touched[experts[k]] = true;
    }
  }
  RoutedBatch b;
  b.distinct = static_cast<double>(std::count(touched.begin(), touched.end(), true));
  b.x = gpu.uniform(DType::kBF16, {T, kHidden}, 25, 2.0f);
  b.gate_up = gpu.uniform(DType::kBF16, {kExperts, 2 * kExpertInter, kHidden}, 26, 0.035f);
  b.down = gpu.uniform(DType::kBF16, {kExperts, kHidden, kExpertInter}, 27, 0.035f);
  b.ids = gpu.from_host(DType::kI32, ids).reshape({T, kTopK});
  b.weights = gpu.from_host(DType::kF32, weights).reshape({T, kTopK});
  return b;
}

// Routed experts for T tokens (routed_batch). bytes/s counts the distinct experts' weights plus x
// and out: the HBM floor of decode (batch 1: 8 x 78.6 MB = 629 MB, 146 us). Prefill is FLOP-bound:
// flop/s and floor_flop_us use the 798 TFLOP/s ceiling. range(1) = cuda::MoeExpertsPath: 0 kAuto
// (the small-batch path up to T = 256), 1 grouped, 2 small-batch (forced, to compare at one T), 5
// the grouped path's 256-row tiles, 6 its two-band 128-row tiles (kAuto's at 33-192 rows an
// expert).
void BM_moe_experts(benchmark::State& state) {
  Gpu gpu;
  if (!gpu.start(state)) return;
  const int64_t T = state.range(0);
  const auto path = static_cast<cuda::MoeExpertsPath>(state.range(1));
  const RoutedBatch b = routed_batch(gpu, T);
  const TensorView out = gpu.uniform(DType::kBF16, {T, kHidden}, 28, 1.0f);
  const double weight_bytes = b.distinct * 3.0 * kHidden * kExpertInter * 2.0;
  const double flops = 2.0 * T * kTopK * 3.0 * kHidden * kExpertInter;
  time_op(state, gpu, weight_bytes + 2.0 * 2 * T * kHidden, [&] {
    cuda::moe_experts(*gpu.ctx.cuda, b.x, b.gate_up, b.down, b.ids, b.weights, out, path);
  });
  state.counters["experts"] = b.distinct;
  state.counters["flop/s"] = benchmark::Counter(
      flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  state.counters["floor_flop_us"] = flops / kBf16FlopsPerSecond * 1e6;
}

// The same on kAuto with per-request expert LoRA: 4 slots of rank range(1), token t on slot
// t % 4 (kernels/cuda/moe_lora.cuh: the shrinks and the LoRA epilogues). bytes/s counts what
// BM_moe_experts does plus the touched experts' factors of the slots in use.
void BM_moe_experts_lora(benchmark::State& state) {
  Gpu gpu;
  if (!gpu.start(state)) return;
  const int64_t T = state.range(0), r = state.range(1), S = 4;
  const RoutedBatch b = routed_batch(gpu, T);
  const TensorView out = gpu.uniform(DType::kBF16, {T, kHidden}, 28, 1.0f);
  const auto stack = [&](int64_t in, int64_t n, uint64_t seed) {
    return ExpertLoraStack{gpu.uniform(DType::kBF16, {kExperts, S, r, in}, seed, 0.05f),
                           gpu.uniform(DType::kBF16, {kExperts, S, n, r}, seed + 1, 0.05f),
                           gpu.uniform(DType::kF32, {S}, seed + 2, 1.0f)};
  };
  // range(2) 0: token t on slot t % S (a decode batch's sequences, interleaved); 1: on slot
  // t * S / T (a prefill chunk's sequences, in runs).
  const bool runs = state.range(2) != 0;
  std::vector<int32_t> slots(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t)
    slots[static_cast<size_t>(t)] = static_cast<int32_t>(runs ? t * S / T : t % S);
  const MoeLora lora{stack(kHidden, kExpertInter, 41), stack(kHidden, kExpertInter, 44),
                     stack(kExpertInter, kHidden, 47), gpu.from_host(DType::kI32, slots)};
  const double slots_used = static_cast<double>(std::min(T, S));
  const double bytes = b.distinct * 3.0 * kHidden * kExpertInter * 2.0 + 2.0 * 2 * T * kHidden +
                       b.distinct * slots_used * 3.0 * r * (kHidden + kExpertInter) * 2.0;
  time_op(state, gpu, bytes, [&] {
    cuda::moe_experts(*gpu.ctx.cuda, b.x, b.gate_up, b.down, b.ids, b.weights, out,
                      cuda::MoeExpertsPath::kAuto, &lora);
  });
  state.counters["experts"] = b.distinct;
}

BENCHMARK(BM_moe_route)
    ->Arg(1)
    ->Arg(32)
    ->Arg(128)
    ->Arg(8192)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_moe_router_route)
    ->Arg(1)
    ->Arg(32)
    ->Arg(64)
    ->Arg(128)
    ->Arg(129)
    ->Arg(256)
    ->Arg(257)
    ->Arg(8192)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
// Fixed iteration counts: each run uploads 20 GB of expert weights once. Decode sizes on kAuto
// (the small-batch path up to T = 256, 2,048 routed rows), the grouped path forced at T = 1, 8,
// 32, 64 and 128 to compare, and kAuto's grouped path just past the threshold (T = 257).
BENCHMARK(BM_moe_experts)
    ->ArgNames({"T", "path"})
    ->Args({1, 0})
    ->Args({8, 0})
    ->Args({16, 0})
    ->Args({32, 0})
    ->Args({64, 0})
    ->Args({128, 0})
    ->Args({256, 0})
    ->Args({257, 0})
    ->Args({1, 1})
    ->Args({8, 1})
    ->Args({32, 1})
    ->Args({64, 1})
    ->Args({128, 1})
    ->Iterations(50)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
// Prefill: chunks of 1,536-4,096 tokens (kAuto: two-band tiles; the serving engine's default
// chunk is 2,048) against the 256-row tiles, and a whole 8K prompt.
BENCHMARK(BM_moe_experts)
    ->ArgNames({"T", "path"})
    ->Args({1536, 0})
    ->Args({2048, 0})
    ->Args({2048, 5})
    ->Args({4096, 0})
    ->Args({4096, 5})
    ->Args({8192, 0})
    ->Iterations(3)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// Expert LoRA at decode sizes and on a 2,048-token prefill chunk, ranks 16 and 64, slots
// interleaved (runs 0) or in runs of tokens (runs 1) (compare with BM_moe_experts at the same T).
BENCHMARK(BM_moe_experts_lora)
    ->ArgNames({"T", "r", "runs"})
    ->Args({1, 16, 0})
    ->Args({32, 16, 0})
    ->Args({128, 16, 0})
    ->Args({2048, 16, 0})
    ->Args({2048, 16, 1})
    ->Args({32, 64, 0})
    ->Args({2048, 64, 1})
    ->Iterations(20)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// ---- linear (kernels/cuda/gemm.cu) and paged attention (kernels/cuda/attention.cu) -------------

// Beam's linear layers: range(0) = M, range(1) = shape index of kLinearShapes.
struct LinearShape {
  const char* name;
  int64_t n, k;
};
constexpr LinearShape kLinearShapes[] = {{"qkvg", 12288 + 2048, kHidden},
                                         {"o_proj", kHidden, kQHeads * kHeadDim},
                                         {"dense_gate_up", 2 * kDenseInter, kHidden},
                                         {"lm_head", kVocab, kHidden},
                                         {"dense_down", kHidden, kDenseInter}};

// bytes/s counts w, x and out; flop/s 2·M·N·K against the 798 TFLOP/s ceiling. range(2) = path:
// 0 linear()'s dispatch, 1 cuBLASLt forced, 2 the skinny small-M kernel forced (M <= 16).
void BM_linear(benchmark::State& state) {
  Gpu gpu;
  if (!gpu.start(state)) return;
  const int64_t M = state.range(0);
  const LinearShape& shape = kLinearShapes[state.range(1)];
  const int64_t path = state.range(2);
  state.SetLabel(std::string(shape.name) + (path == 0 ? "" : path == 1 ? " cublaslt" : " skinny"));
  const TensorView x = gpu.uniform(DType::kBF16, {M, shape.k}, 31, 2.0f);
  const TensorView w = gpu.uniform(DType::kBF16, {shape.n, shape.k}, 32, 0.02f);
  const TensorView out = gpu.uniform(DType::kBF16, {M, shape.n}, 33, 1.0f);
  const double flops = 2.0 * M * shape.n * shape.k;
  time_op(state, gpu, 2.0 * (shape.n * shape.k + M * shape.k + M * shape.n), [&] {
    if (path == 1) return cuda::linear_cublaslt(*gpu.ctx.cuda, x, w, out);
    if (path == 2) return cuda::linear_skinny(*gpu.ctx.cuda, x, w, out);
    linear(gpu.ctx, x, w, out);
  });
  state.counters["flop/s"] = benchmark::Counter(
      flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  state.counters["floor_flop_us"] = flops / kBf16FlopsPerSecond * 1e6;
}

BENCHMARK(BM_linear)
    ->ArgNames({"M", "shape", "path"})
    ->ArgsProduct({{1, 32}, {0, 1, 2, 3, 4}, {0}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_linear_split_qkvg)
    ->ArgNames({"M", "fused"})
    ->ArgsProduct({{1, 8, 32, 128}, {1, 0}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
// The small-M paths side by side around the dispatch threshold (kSkinnyDispatchRows).
BENCHMARK(BM_linear)
    ->ArgNames({"M", "shape", "path"})
    ->ArgsProduct({{1, 2, 4, 8, 16}, {0, 1, 2, 4}, {1, 2}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// Paged attention at Beam heads (48/8 x 128, block 64) for `batch` sequences of `context` keys
// each with the last `q_count` of them as queries (window 0 = full attention). bytes/s counts
// the K/V bytes the queries see (each read once) plus q and out; flop/s 4·Nq·D per visible key.
void attention_bench(benchmark::State& state, int64_t batch, int64_t context, int64_t q_count,
                     int64_t window) {
  Gpu gpu;
  if (!gpu.start(state)) return;
  constexpr int64_t kBlock = 64;
  const int64_t blocks_per_seq = (context + kBlock - 1) / kBlock;
  const TensorView k =
      gpu.uniform(DType::kBF16, {batch * blocks_per_seq, kBlock, kKvHeads, kHeadDim}, 41, 1.5f);
  const TensorView v =
      gpu.uniform(DType::kBF16, {batch * blocks_per_seq, kBlock, kKvHeads, kHeadDim}, 42, 1.0f);
  const TensorView q = gpu.uniform(DType::kBF16, {batch * q_count, kQHeads, kHeadDim}, 43, 1.5f);
  const TensorView out = gpu.uniform(DType::kBF16, {batch * q_count, kQHeads, kHeadDim}, 44, 1.0f);
  std::vector<std::vector<int32_t>> tables(static_cast<size_t>(batch));
  std::vector<AttentionSeq> seqs;
  double visible_keys = 0, kv_keys = 0;
  for (int64_t b = 0; b < batch; ++b) {
    tables[b].resize(static_cast<size_t>(blocks_per_seq));
    std::iota(tables[b].begin(), tables[b].end(), static_cast<int32_t>(b * blocks_per_seq));
    seqs.push_back({b * q_count, q_count, context - q_count, 0, context, tables[b]});
    for (int64_t p = context - q_count; p < context; ++p)
      visible_keys += window > 0 ? std::min(window, p + 1) : p + 1;
    kv_keys += window > 0 ? std::min(window + q_count - 1, context) : context;
  }
  const double qo_bytes = 2.0 * 2 * batch * q_count * kQHeads * kHeadDim;
  const double flops = 4.0 * kQHeads * kHeadDim * visible_keys;
  // Every launch stages the same block tables, so restarting the staging arena without a
  // synchronization rewrites pinned bytes with their own values (and keeps it from growing).
  time_op(state, gpu, kv_keys * kKvHeads * kHeadDim * 2 * 2 + qo_bytes, [&] {
    begin_step(gpu.ctx);
    paged_attention(gpu.ctx, q, {k, v, kBlock}, seqs, window, out);
  });
  state.counters["flop/s"] = benchmark::Counter(
      flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

// Decode: range(0) = batch, range(1) = context; 512 is a sliding layer (window 512), longer
// contexts are full-attention layers.
void BM_attention_decode(benchmark::State& state) {
  const int64_t context = state.range(1);
  attention_bench(state, state.range(0), context, 1, context == 512 ? 512 : 0);
}
// Prefill of one sequence of range(0) tokens; range(1) = window (0 = full attention).
void BM_attention_prefill(benchmark::State& state) {
  attention_bench(state, 1, state.range(0), state.range(0), state.range(1));
}

BENCHMARK(BM_attention_decode)
    ->ArgsProduct({{1, 32}, {512, 8192, 65536}})
    ->Args({128, 512})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_attention_prefill)
    ->Args({2048, 0})
    ->Args({2048, 512})
    ->Args({8192, 0})
    ->Args({8192, 512})
    ->Iterations(5)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// score_tokens (prompt logprobs) of `rows` rows of Beam's vocabulary, with `top` alternatives
// each (0: the plain rows' kernel); bytes count one read of the f32 logits. Fixed iterations: each
// launch stages its rows anew.
void BM_score_tokens(benchmark::State& state) {
  Gpu gpu;
  if (!gpu.start(state)) return;
  const int64_t rows = state.range(0);
  const TensorView logits = gpu.uniform(DType::kF32, {rows, kVocab}, 41, 8.0f);
  const TensorView out =
      gpu.from_host(DType::kI32, std::vector<int32_t>(static_cast<size_t>(rows * kSampledRowWords)))
          .reshape({rows, kSampledRowWords});
  std::vector<ScoreRowParams> params(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    ScoreRowParams& p = params[static_cast<size_t>(r)];
    p.logits_row = static_cast<int32_t>(r);
    p.token = static_cast<int32_t>((r * 7919) % kVocab);
    p.num_top = static_cast<int32_t>(state.range(1));
  }
  time_op(state, gpu, 4.0 * static_cast<double>(rows * kVocab),
          [&] { score_tokens(gpu.ctx, logits, params, out); });
}

BENCHMARK(BM_score_tokens)
    ->ArgNames({"rows", "top"})
    ->ArgsProduct({{1, 32, 132, 512, 2048}, {0, 20}})
    ->Iterations(10)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// ---- DFlash2 drafter ops at Beam's drafter shapes (docs/dflash2.md): hidden 5120, conv groups of
// 16, 40 / 8 heads x 128, blocks of 8, window 4096 over a ring of pages of 16, the selector's top
// 16 of the vocabulary and rank 256; range(0) = S blocks (decode batches of 1, 16 and 64).

constexpr int64_t kDraftBlock = 8, kDraftQHeads = 40, kDraftWindow = 4096, kDraftPage = 16;
constexpr int64_t kDraftConvGroup = 16, kSelectorRank = 256, kSelectorTopK = 16;
constexpr int64_t kDraftRingPages = (kDraftWindow + kDraftBlock + kDraftPage - 1) / kDraftPage + 1;

// One side of the convolution on [S * 8, 5120]: reads x, base and d, writes out.
void BM_dflash2_conv(benchmark::State& state) {
  Gpu gpu;
  if (!gpu.start(state)) return;
  const int64_t N = state.range(0) * kDraftBlock, groups = kHidden / kDraftConvGroup;
  const TensorView base = gpu.uniform(DType::kBF16, {2, 2, kHidden}, 71, 0.5f);
  const TensorView d = gpu.uniform(DType::kBF16, {N, 4 * groups}, 72, 0.1f);
  const TensorView x = gpu.uniform(DType::kBF16, {N, kHidden}, 73, 1.0f);
  const TensorView out = gpu.uniform(DType::kBF16, {N, kHidden}, 74, 1.0f);
  time_op(state, gpu, 2.0 * (2 * N * kHidden + 4 * kHidden + N * 4 * groups),
          [&] { dflash2_conv(gpu.ctx, base, d, 1, kDraftConvGroup, kDraftBlock, x, out); });
}

// One layer's context store of S * 8 rows of K and V (8 x 128) into distinct slots of a pool of
// S rings, with their positions: reads k, v, slots and positions, writes keys, values and
// slot_positions.
void BM_dflash2_store_context(benchmark::State& state) {
  Gpu gpu;
  if (!gpu.start(state)) return;
  const int64_t T = state.range(0) * kDraftBlock, width = kKvHeads * kHeadDim;
  const int64_t num_slots = state.range(0) * kDraftRingPages * kDraftPage;
  const TensorView k = gpu.uniform(DType::kBF16, {T, width}, 75, 1.0f);
  const TensorView v = gpu.uniform(DType::kBF16, {T, width}, 76, 1.0f);
  const TensorView keys = gpu.uniform(DType::kBF16, {num_slots, width}, 77, 1.0f);
  const TensorView values = gpu.uniform(DType::kBF16, {num_slots, width}, 78, 1.0f);
  const TensorView slot_positions =
      gpu.from_host(DType::kI64, std::vector<int64_t>(static_cast<size_t>(num_slots), -1));
  std::vector<int64_t> slots, positions;
  for (int64_t t = 0; t < T; ++t) {
    slots.push_back(t * (num_slots / T));
    positions.push_back(10000 + t);
  }
  const TensorView dslots = gpu.from_host(DType::kI64, slots);
  const TensorView dpositions = gpu.from_host(DType::kI64, positions);
  time_op(state, gpu, 2.0 * 4 * T * width + 8.0 * 3 * T, [&] {
    dflash2_store_context(gpu.ctx, k, v, dslots, dpositions, keys, values, slot_positions);
  });
}

// The block attention of S blocks at positions near 10^4, each over a full window of 4095 held
// context keys plus its 8 rows. bytes/s counts the K/V the blocks read (each once), the slot
// positions, q and out; flop/s 4·D per (query head, visible key).
void BM_dflash2_block_attention(benchmark::State& state) {
  Gpu gpu;
  if (!gpu.start(state)) return;
  const int64_t S = state.range(0), N = S * kDraftBlock, ring = kDraftRingPages;
  const int64_t num_slots = S * ring * kDraftPage;
  const TensorView keys = gpu.uniform(DType::kBF16, {num_slots, kKvHeads, kHeadDim}, 79, 1.5f);
  const TensorView values = gpu.uniform(DType::kBF16, {num_slots, kKvHeads, kHeadDim}, 80, 1.0f);
  std::vector<int64_t> slot_positions(static_cast<size_t>(num_slots), -1), block_positions;
  std::vector<int32_t> pages, offsets, lengths;
  double visible_keys = 0;
  for (int64_t b = 0; b < S; ++b) {
    const int64_t p = 10000 + 37 * b, lo = p - kDraftWindow + 1;
    block_positions.push_back(p);
    offsets.push_back(static_cast<int32_t>(pages.size()));
    lengths.push_back(static_cast<int32_t>(ring));
    for (int64_t e = 0; e < ring; ++e) pages.push_back(static_cast<int32_t>(b * ring + e));
    for (int64_t pos = lo; pos < p; ++pos) {
      const int64_t page = b * ring + (pos / kDraftPage) % ring;
      slot_positions[static_cast<size_t>(page * kDraftPage + pos % kDraftPage)] = pos;
    }
    for (int64_t t = 0; t < kDraftBlock; ++t) visible_keys += kDraftWindow - 1 - t + kDraftBlock;
  }
  DFlash2ContextView context{keys,
                             values,
                             gpu.from_host(DType::kI64, slot_positions),
                             gpu.from_host(DType::kI32, pages),
                             gpu.from_host(DType::kI32, offsets),
                             gpu.from_host(DType::kI32, lengths),
                             gpu.from_host(DType::kI64, block_positions),
                             kDraftPage,
                             ring,
                             kDraftWindow};
  const TensorView q = gpu.uniform(DType::kBF16, {N, kDraftQHeads, kHeadDim}, 81, 1.5f);
  const TensorView k = gpu.uniform(DType::kBF16, {N, kKvHeads, kHeadDim}, 82, 1.5f);
  const TensorView v = gpu.uniform(DType::kBF16, {N, kKvHeads, kHeadDim}, 83, 1.0f);
  const TensorView out = gpu.uniform(DType::kBF16, {N, kDraftQHeads, kHeadDim}, 84, 1.0f);
  const double kv_keys = static_cast<double>(S) * (kDraftWindow - 1 + kDraftBlock);
  const double bytes = kv_keys * kKvHeads * kHeadDim * 2 * 2 + 8.0 * S * (kDraftWindow - 1) +
                       2.0 * 2 * N * kDraftQHeads * kHeadDim;
  time_op(state, gpu, bytes, [&] { dflash2_block_attention(gpu.ctx, q, k, v, context, out); });
  state.counters["flop/s"] = benchmark::Counter(4.0 * kHeadDim * kDraftQHeads * visible_keys,
                                                benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::kIs1000);
}

// The selector of S blocks of 7 draft rows over Beam's vocabulary: top 16 of each row's fp32
// logits, then the walk (rank 256). bytes/s counts one read of u, hp, and the codebook rows the
// walk reads (a predecessor row and 16 successor rows per draft row).
void BM_dflash2_select(benchmark::State& state) {
  Gpu gpu;
  if (!gpu.start(state)) return;
  const int64_t S = state.range(0), J = kDraftBlock - 1, R = S * J;
  const TensorView u = gpu.uniform(DType::kF32, {R, kVocab}, 85, 8.0f);
  const TensorView hp = gpu.uniform(DType::kBF16, {R, kSelectorRank}, 86, 1.0f);
  const TensorView predecessor = gpu.uniform(DType::kBF16, {kVocab, kSelectorRank}, 87, 1.0f);
  const TensorView successor = gpu.uniform(DType::kBF16, {kVocab, kSelectorRank}, 88, 1.0f);
  std::vector<int32_t> anchors;
  for (int64_t b = 0; b < S; ++b) anchors.push_back(static_cast<int32_t>((b * 7919 + 13) % kVocab));
  const TensorView danchors = gpu.from_host(DType::kI32, anchors);
  const TensorView candidates =
      gpu.from_host(DType::kI32, std::vector<int32_t>(static_cast<size_t>(R * kSelectorTopK)))
          .reshape({R, kSelectorTopK});
  const TensorView scores = gpu.uniform(DType::kF32, {R, kSelectorTopK}, 89, 1.0f);
  const TensorView drafts =
      gpu.from_host(DType::kI32, std::vector<int32_t>(static_cast<size_t>(R)));
  time_op(state, gpu, 4.0 * R * kVocab + 2.0 * R * (kSelectorTopK + 2) * kSelectorRank, [&] {
    dflash2_select(gpu.ctx, u, hp, predecessor, successor, danchors, candidates, scores, drafts);
  });
}

// Fixed iterations: each one's setup (time_op's L2 flush) costs far more than these microsecond
// ops, so a minimum time would take minutes (run 338).
void dflash2_blocks(benchmark::internal::Benchmark* b) {
  b->ArgName("S")->Arg(1)->Arg(16)->Arg(64)->Iterations(50)->UseManualTime()->Unit(
      benchmark::kMicrosecond);
}

BENCHMARK(BM_dflash2_conv)->Apply(dflash2_blocks);
BENCHMARK(BM_dflash2_store_context)->Apply(dflash2_blocks);
BENCHMARK(BM_dflash2_block_attention)->Apply(dflash2_blocks);
BENCHMARK(BM_dflash2_select)->Apply(dflash2_blocks);

}  // namespace
}  // namespace beam

BENCHMARK_MAIN();
