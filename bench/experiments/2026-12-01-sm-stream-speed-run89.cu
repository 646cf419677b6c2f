// Per-SM HBM streaming speed: one 512-thread block per SM, each streams an equal contiguous
// chunk (the small-batch experts' pattern: 128 KB in flight per SM); each block records its SM and
// elapsed time. Chunks rotate over blocks between iterations, so a consistently slow SM is the
// SM's, not its addresses'.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <cmath>
#include <algorithm>

__global__ void __launch_bounds__(512, 1) stream(const uint4* __restrict__ buf, size_t chunk16, int rot,
                                                 unsigned long long* t0, unsigned long long* t1,
                                                 int* smid, uint4* sink) {
  __syncthreads();
  unsigned long long start;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  const int nb = gridDim.x;
  const size_t c = (blockIdx.x + rot) % nb;
  const uint4* p = buf + c * chunk16;
  uint4 acc = make_uint4(0, 0, 0, 0);
  constexpr int U = 16;
  for (size_t i = threadIdx.x; i < chunk16; i += 512 * U) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      size_t j = i + u * 512;
      v[u] = j < chunk16 ? __ldcg(p + j) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) { acc.x ^= v[u].x; acc.y ^= v[u].y; acc.z ^= v[u].z; acc.w ^= v[u].w; }
  }
  __syncthreads();
  unsigned long long end;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(end));
  if (acc.x == 0x12345678u) sink[threadIdx.x] = acc;
  if (threadIdx.x == 0) {
    int s;
    asm("mov.u32 %0, %%smid;" : "=r"(s));
    t0[blockIdx.x] = start;
    t1[blockIdx.x] = end;
    smid[blockIdx.x] = s;
  }
}

int main() {
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  const int n = prop.multiProcessorCount;
  const size_t chunk = 3200 * 1024;  // bytes per block, ~ a T = 1 gate_up share
  const size_t chunk16 = chunk / 16;
  uint4* buf;
  cudaMalloc(&buf, chunk * n);
  cudaMemset(buf, 1, chunk * n);
  unsigned long long *t0, *t1;
  int* smid;
  uint4* sink;
  cudaMalloc(&t0, n * 8); cudaMalloc(&t1, n * 8); cudaMalloc(&smid, n * 4); cudaMalloc(&sink, 512 * 16);
  const int R = 40;
  std::vector<std::vector<double>> dur(R, std::vector<double>(1024, 0));
  std::vector<double> kernel_ns(R), mean_ns(R);
  std::vector<unsigned long long> h0(n), h1(n);
  std::vector<int> hs(n);
  for (int r = 0; r < R; ++r) {
    stream<<<n, 512>>>(buf, chunk16, r, t0, t1, smid, sink);
    cudaDeviceSynchronize();
    cudaMemcpy(h0.data(), t0, n * 8, cudaMemcpyDeviceToHost);
    cudaMemcpy(h1.data(), t1, n * 8, cudaMemcpyDeviceToHost);
    cudaMemcpy(hs.data(), smid, n * 4, cudaMemcpyDeviceToHost);
    unsigned long long first = *std::min_element(h0.begin(), h0.end()), last = *std::max_element(h1.begin(), h1.end());
    double sum = 0;
    for (int b = 0; b < n; ++b) { dur[r][hs[b]] = double(h1[b] - h0[b]); sum += double(h1[b] - first); }
    kernel_ns[r] = double(last - first);
    mean_ns[r] = sum / n;
  }
  // per SM mean over iterations 1..R-1 (skip the first), and consistency (odd vs even)
  std::vector<double> m(n), odd(n), even(n);
  for (int s = 0; s < n; ++s) {
    for (int r = 1; r < R; ++r) { m[s] += dur[r][s]; (r % 2 ? odd[s] : even[s]) += dur[r][s]; }
    m[s] /= (R - 1);
  }
  auto corr = [&](const std::vector<double>& a, const std::vector<double>& b) {
    double ma = 0, mb = 0; for (int i = 0; i < n; ++i) { ma += a[i]; mb += b[i]; } ma /= n; mb /= n;
    double sab = 0, saa = 0, sbb = 0; for (int i = 0; i < n; ++i) { sab += (a[i]-ma)*(b[i]-mb); saa += (a[i]-ma)*(a[i]-ma); sbb += (b[i]-mb)*(b[i]-mb); }
    return sab / std::sqrt(saa * sbb);
  };
  double lo = *std::min_element(m.begin(), m.end()), hi = *std::max_element(m.begin(), m.end()), avg = 0;
  for (double v : m) avg += v; avg /= n;
  double ks = 0, ms = 0; for (int r = 1; r < R; ++r) { ks += kernel_ns[r]; ms += mean_ns[r]; } ks /= R - 1; ms /= R - 1;
  printf("{\"sms\": %d, \"bytes_per_block\": %zu, \"kernel_us\": %.2f, \"GBps\": %.1f, \"sm_mean_us\": {\"min\": %.2f, \"avg\": %.2f, \"max\": %.2f}, \"odd_even_corr\": %.3f,\n",
         n, chunk, ks / 1e3, chunk * double(n) / ks, lo / 1e3, avg / 1e3, hi / 1e3, corr(odd, even));
  printf(" \"per_sm_us\": [");
  for (int s = 0; s < n; ++s) printf("%s%.2f", s ? ", " : "", m[s] / 1e3);
  printf("],\n \"iter_spread\": [");
  for (int r = 1; r < 6; ++r) {
    double a = *std::min_element(dur[r].begin(), dur[r].begin() + n), b = *std::max_element(dur[r].begin(), dur[r].begin() + n);
    printf("%s[%.2f, %.2f]", r > 1 ? ", " : "", a / 1e3, b / 1e3);
  }
  printf("]}\n");
  return 0;
}
