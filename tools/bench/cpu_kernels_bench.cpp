// CPU kernel benchmarks. Memory-bound kernels (decode GEMMs, MoE experts, attention decode) report
// GB/s of bytes they must stream, to compare with BM_ReadBandwidth / BM_CopyBandwidth measured in
// the same binary; compute-bound ones (prefill) report GFLOP/s. Every benchmark takes the number
// of threads of its pool as its last argument. Rates use wall-clock time; on a busy machine the
// one-thread cases can be read from CPU time instead (rate * real_time / cpu_time).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/bf16.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/api/attention.h"
#include "kernels/api/lora.h"
#include "kernels/api/moe.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cuda/decode_item_sizes.h"

namespace beam {
namespace {

void fill(const TensorView& t, uint32_t seed, float scale) {
  uint32_t s = seed * 2654435761u + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    s = s * 1664525u + 1013904223u;
    const float v = (static_cast<float>(s >> 8) / 16777216.0f * 2.0f - 1.0f) * scale;
    if (t.dtype == DType::kBF16) {
      t.as<bf16>()[i] = to_bf16(v);
    } else if (t.dtype == DType::kF32) {
      t.as<float>()[i] = v;
    }
  }
}

benchmark::Counter rate(double per_iteration) {
  return benchmark::Counter(per_iteration, benchmark::Counter::kIsIterationInvariantRate,
                            benchmark::Counter::kIs1000);
}

// ---- memory bandwidth -------------------------------------------------------------------------

constexpr int64_t kBandwidthBytes = int64_t{512} << 20;

// Streaming read: the pattern of a decode GEMM over bf16 weights.
void BM_ReadBandwidth(benchmark::State& state) {
  ThreadPool pool(static_cast<int>(state.range(0)));
  const int64_t n = kBandwidthBytes / sizeof(float);
  std::vector<float> data(static_cast<size_t>(n), 1.0f);
  std::vector<double> partial(64, 0.0);
  for (auto _ : state) {
    pool.parallel_for(64, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        const float* p = data.data() + n / 64 * c;
        float acc[16] = {};
        for (int64_t i = 0; i < n / 64; i += 16)
          for (int l = 0; l < 16; ++l) acc[l] += p[i + l];
        partial[c] = std::accumulate(acc, acc + 16, 0.0);
      }
    });
    benchmark::DoNotOptimize(partial.data());
  }
  state.counters["GB"] = rate(kBandwidthBytes / 1e9);
}
BENCHMARK(BM_ReadBandwidth)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// memcpy, counted as bytes read + bytes written (STREAM convention).
void BM_CopyBandwidth(benchmark::State& state) {
  ThreadPool pool(static_cast<int>(state.range(0)));
  const int64_t n = kBandwidthBytes / 2;
  std::vector<char> src(static_cast<size_t>(n), 1), dst(static_cast<size_t>(n), 0);
  for (auto _ : state) {
    pool.parallel_for(64, 1, [&](int64_t c0, int64_t c1) {
      std::memcpy(dst.data() + n / 64 * c0, src.data() + n / 64 * c0,
                  static_cast<size_t>(n / 64 * (c1 - c0)));
    });
    benchmark::DoNotOptimize(dst.data());
  }
  state.counters["GB"] = rate(2.0 * n / 1e9);
}
BENCHMARK(BM_CopyBandwidth)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- LoRA -------------------------------------------------------------------------------------

// Args: T, r, threads, mixed. Beam's q_proj (in 5120, out 6144), 4 slots, every token on slot 0
// or (mixed) token t on slot t % 4, a decode batch of several adapters (each slot's tokens are
// gathered: the bytes counted are one slot's factors and x / out).
void BM_LoraAdd(benchmark::State& state) {
  const int64_t T = state.range(0), r = state.range(1), in = 5120, n = 6144, S = 4;
  ThreadPool pool(static_cast<int>(state.range(2)));
  HostTensor x(DType::kBF16, {T, in}), a(DType::kBF16, {S, r, in}), b(DType::kBF16, {S, n, r}),
      scale(DType::kF32, {S}), slots(DType::kI32, {T}), out(DType::kBF16, {T, n});
  fill(x.view, 1, 1.0f);
  fill(a.view, 2, 0.05f);
  fill(b.view, 3, 0.05f);
  fill(out.view, 4, 1.0f);
  for (int64_t s = 0; s < S; ++s) scale.view.as<float>()[s] = 2.0f;
  for (int64_t t = 0; t < T; ++t)  // range(3) 0: every token on slot 0; 1: slots t % S
    slots.view.as<int32_t>()[t] = state.range(3) != 0 ? static_cast<int32_t>(t % S) : 0;
  KernelContext ctx;
  ctx.pool = &pool;
  for (auto _ : state)
    lora_add(ctx, x.view, LoraStack{a.view, b.view, scale.view}, slots.view, out.view, 0);
  state.counters["GB"] = rate(2.0 * (r * in + n * r + T * in + 2 * T * n) / 1e9);
  state.counters["GFLOP"] = rate(2.0 * T * r * (in + n) / 1e9);
}
BENCHMARK(BM_LoraAdd)
    ->ArgNames({"T", "r", "threads", "mixed"})
    ->Args({1, 16, 2, 0})
    ->Args({1, 64, 2, 0})
    ->Args({32, 16, 2, 0})
    ->Args({32, 16, 2, 1})
    ->Args({256, 16, 2, 0})
    ->Args({256, 16, 2, 1})
    ->Args({256, 64, 2, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// ---- GEMM -------------------------------------------------------------------------------------

// Args: M, N, K, path (0 auto, 1 tiles, 2 blas), threads. bf16 x, w, out.
void BM_Linear(benchmark::State& state) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  const auto path = static_cast<cpu::GemmPath>(state.range(3));
  ThreadPool pool(static_cast<int>(state.range(4)));
  HostTensor x(DType::kBF16, {M, K}), w(DType::kBF16, {N, K}), out(DType::kBF16, {M, N});
  fill(x.view, 1, 1.0f);
  fill(w.view, 2, 0.05f);
  for (auto _ : state) cpu::linear(pool, x.view, w.view, out.view, path);
  state.counters["w_GB"] = rate(2.0 * N * K / 1e9);
  state.counters["GFLOP"] = rate(2.0 * M * N * K / 1e9);
}

void gemm_args(benchmark::internal::Benchmark* b) {
  // tiny-beam (hidden 256, q/k/v/gate packed 1536), a mid shape, Beam's q/k/v/gate slice.
  for (auto [N, K] : {std::pair<int64_t, int64_t>{1536, 256}, {8192, 2048}, {6144, 5120}}) {
    for (int64_t M : {1, 4}) b->Args({M, N, K, 0, 2});
    for (int64_t path : {1, 2}) b->Args({256, N, K, path, 2});
  }
  // One thread: decode, and tiles vs OpenBLAS across M (where kBlasMinRows comes from).
  b->Args({1, 6144, 5120, 0, 1});
  b->Args({8, 6144, 5120, 0, 1});
  for (int64_t M : {16, 32, 64, 256})
    for (int64_t path : {1, 2}) b->Args({M, 6144, 5120, path, 1});
}
BENCHMARK(BM_Linear)->Apply(gemm_args)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- attention --------------------------------------------------------------------------------

struct AttentionSetup {
  HostTensor q, out, k, v;
  std::vector<std::vector<int32_t>> tables;
  std::vector<AttentionSeq> seqs;
  int64_t visible_keys = 0;  // summed over query rows
};

// Beam geometry: 48 query heads, 8 KV heads, D = 128, blocks of 64 slots.
AttentionSetup make_attention(int64_t num_seqs, int64_t q_per_seq, int64_t kv_len, int64_t window) {
  constexpr int64_t Nq = 48, Nkv = 8, D = 128, bs = 64;
  AttentionSetup s;
  const int64_t blocks_per_seq = (kv_len + bs - 1) / bs, T = num_seqs * q_per_seq;
  s.q = HostTensor(DType::kBF16, {T, Nq, D});
  s.out = HostTensor(DType::kBF16, {T, Nq, D});
  s.k = HostTensor(DType::kBF16, {num_seqs * blocks_per_seq, bs, Nkv, D});
  s.v = HostTensor(DType::kBF16, {num_seqs * blocks_per_seq, bs, Nkv, D});
  fill(s.q.view, 3, 1.0f);
  fill(s.k.view, 4, 1.0f);
  fill(s.v.view, 5, 1.0f);
  for (int64_t i = 0; i < num_seqs; ++i) {
    std::vector<int32_t> table(static_cast<size_t>(blocks_per_seq));
    std::iota(table.begin(), table.end(), static_cast<int32_t>(i * blocks_per_seq));
    s.tables.push_back(std::move(table));
  }
  for (int64_t i = 0; i < num_seqs; ++i) {
    s.seqs.push_back({i * q_per_seq, q_per_seq, kv_len - q_per_seq, 0, kv_len, s.tables[i]});
    for (int64_t r = 0; r < q_per_seq; ++r) {
      const int64_t p = kv_len - q_per_seq + r;
      s.visible_keys += window > 0 ? std::min(window, p + 1) : p + 1;
    }
  }
  return s;
}

// Args: sequences, queries per sequence, kv_len, window, threads.
void BM_PagedAttention(benchmark::State& state) {
  const int64_t window = state.range(3);
  ThreadPool pool(static_cast<int>(state.range(4)));
  KernelContext ctx{Device::kCpu, &pool};
  AttentionSetup s = make_attention(state.range(0), state.range(1), state.range(2), window);
  const PagedKv kv{s.k.view, s.v.view, 64};
  for (auto _ : state) paged_attention(ctx, s.q.view, kv, s.seqs, window, s.out.view);
  // q·k and p·v: 4 flops per (row, head, key, d); KV bytes if every visible key of every KV head
  // were read once per query row (what decode must stream).
  state.counters["GFLOP"] = rate(4.0 * s.visible_keys * 48 * 128 / 1e9);
  state.counters["kv_GB"] = rate(2.0 * 2 * s.visible_keys * 8 * 128 / 1e9);
}
BENCHMARK(BM_PagedAttention)
    ->Args({4, 1, 4096, 512, 1})   // decode, sliding, one thread
    ->Args({4, 1, 4096, 512, 2})   // decode, sliding
    ->Args({4, 1, 4096, 0, 2})     // decode, full
    ->Args({1, 256, 256, 512, 2})  // prefill
    ->Args({1, 256, 1024, 0, 2})   // prefill chunk after 768 cached, full
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// ---- MoE experts ------------------------------------------------------------------------------

// Args: T, H, E, I, top_k, threads. Tokens route to experts round-robin (distinct per token).
void BM_MoeExperts(benchmark::State& state) {
  const int64_t T = state.range(0), H = state.range(1), E = state.range(2), I = state.range(3);
  const int64_t top_k = state.range(4);
  ThreadPool pool(static_cast<int>(state.range(5)));
  KernelContext ctx{Device::kCpu, &pool};
  HostTensor x(DType::kBF16, {T, H}), gate_up(DType::kBF16, {E, 2 * I, H}),
      down(DType::kBF16, {E, H, I});
  HostTensor ids(DType::kI32, {T, top_k}), weights(DType::kF32, {T, top_k}),
      out(DType::kBF16, {T, H});
  fill(x.view, 6, 1.0f);
  fill(gate_up.view, 7, 0.05f);
  fill(down.view, 8, 0.05f);
  std::vector<bool> used(static_cast<size_t>(E), false);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t k = 0; k < top_k; ++k) {
      const int32_t e = static_cast<int32_t>((t * top_k + k) % E);
      ids.as<int32_t>()[t * top_k + k] = e;
      weights.as<float>()[t * top_k + k] = 1.0f / static_cast<float>(top_k);
      used[e] = true;
    }
  }
  const double experts_used = static_cast<double>(std::count(used.begin(), used.end(), true));
  for (auto _ : state)
    moe_experts(ctx, x.view, gate_up.view, down.view, ids.view, weights.view, out.view);
  state.counters["w_GB"] = rate(experts_used * 3 * H * I * 2 / 1e9);
  state.counters["GFLOP"] = rate(2.0 * T * top_k * 3 * H * I / 1e9);
}
BENCHMARK(BM_MoeExperts)
    ->Args({1, 256, 16, 128, 4, 2})     // tiny-beam decode
    ->Args({256, 256, 16, 128, 4, 2})   // tiny-beam prefill
    ->Args({1, 5120, 16, 2560, 8, 1})   // Beam widths, decode, one thread
    ->Args({1, 5120, 16, 2560, 8, 2})   // Beam widths, decode: 8 experts streamed
    ->Args({8, 5120, 16, 2560, 8, 2})   // Beam widths, 8 tokens: all 16 experts
    ->Args({64, 5120, 16, 2560, 8, 2})  // Beam widths, prefill chunk
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The CUDA decode planner's item sizing (host code, run per attention call on eager steps):
// args {rows, keys}; rows of keys - 37 to keys keys (partial last tiles), on an H200's slots per
// KV head for the layout the planner takes (two-warp from 64 rows).
void BM_DecodeItemSizes(benchmark::State& state) {
  namespace di = cuda::decode_items;
  const int64_t rows = state.range(0), keys = state.range(1);
  std::vector<di::SplitGrid> grids;
  for (int64_t r = 0; r < rows; ++r)
    grids.push_back(cuda::attention_detail::split_grid(0, keys - r % 38 - 1));
  const bool two_warps = rows >= 64;
  for (auto _ : state)
    benchmark::DoNotOptimize(di::choose(grids, two_warps ? 49 : 16, two_warps ? 2 : 4, 4,
                                        two_warps ? di::kHbmBoundWaves : di::kOneSpeed));
}
BENCHMARK(BM_DecodeItemSizes)
    ->ArgsProduct({{1, 32, 128, 512}, {512, 8192, 131072}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace beam

BENCHMARK_MAIN();
