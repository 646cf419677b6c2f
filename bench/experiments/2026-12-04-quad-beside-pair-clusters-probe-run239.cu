// Probe: can a clusters-of-two kernel run on the SMs that a clusters-of-four kernel leaves free?
// K4: clusters of 4, as many as fit (one 200 KB block an SM); K2: clusters of 2 on a second
// stream, launched right after. Each block records its SM and its start / end (globaltimer).
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
__device__ unsigned long long now() { unsigned long long t; asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t)); return t; }
__global__ void spin(int* sm, unsigned long long* t, unsigned long long ns) {
  extern __shared__ char s[];
  if (threadIdx.x == 0) {
    unsigned id; asm volatile("mov.u32 %0, %smid;" : "=r"(id));
    const unsigned long long t0 = now();
    while (now() - t0 < ns) {}
    sm[blockIdx.x] = id; t[2 * blockIdx.x] = t0; t[2 * blockIdx.x + 1] = now();
    s[0] = 1;
  }
}
int max_clusters(int c, int smem) {
  cudaLaunchConfig_t cfg = {}; cudaLaunchAttribute a; a.id = cudaLaunchAttributeClusterDimension;
  a.val.clusterDim = {static_cast<unsigned>(c), 1, 1};
  cfg.gridDim = dim3(c * 64); cfg.blockDim = dim3(288); cfg.dynamicSmemBytes = smem; cfg.attrs = &a; cfg.numAttrs = 1;
  int n = 0; cudaOccupancyMaxActiveClusters(&n, spin, &cfg); return n;
}
void launch(cudaStream_t st, int c, int blocks, int smem, int* sm, unsigned long long* t) {
  cudaLaunchConfig_t cfg = {}; cudaLaunchAttribute a; a.id = cudaLaunchAttributeClusterDimension;
  a.val.clusterDim = {static_cast<unsigned>(c), 1, 1};
  cfg.gridDim = dim3(blocks); cfg.blockDim = dim3(288); cfg.dynamicSmemBytes = smem; cfg.stream = st;
  cfg.attrs = &a; cfg.numAttrs = 1;
  cudaError_t e = cudaLaunchKernelEx(&cfg, spin, sm, t, 2000000ull);
  if (e != cudaSuccess) printf("launch c=%d: %s\n", c, cudaGetErrorString(e));
}
int main() {
  const int smem = 200 * 1024;
  cudaFuncSetAttribute(spin, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  const int n4 = max_clusters(4, smem) * 4, n2 = 132 - n4;
  int *sm; unsigned long long* t; cudaMalloc(&sm, 4 * 264); cudaMalloc(&t, 16 * 264);
  cudaStream_t s1, s2; cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking); cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
  for (int order = 0; order < 2; ++order) {
    cudaMemset(sm, 0xff, 4 * 264);
    if (order == 0) { launch(s1, 4, n4, smem, sm, t); launch(s2, 2, n2, smem, sm + n4, t + 2 * n4); }
    else { launch(s2, 2, n2, smem, sm + n4, t + 2 * n4); launch(s1, 4, n4, smem, sm, t); }
    cudaDeviceSynchronize();
    std::vector<int> h(n4 + n2); std::vector<unsigned long long> ht(2 * (n4 + n2));
    cudaMemcpy(h.data(), sm, 4 * h.size(), cudaMemcpyDeviceToHost);
    cudaMemcpy(ht.data(), t, 8 * ht.size(), cudaMemcpyDeviceToHost);
    unsigned long long t0 = ~0ull; for (size_t i = 0; i < h.size(); ++i) t0 = std::min(t0, ht[2 * i]);
    double e4 = 0, s2max = 0, e2 = 0;
    for (int i = 0; i < n4; ++i) e4 = std::max(e4, (ht[2 * i + 1] - t0) / 1e3);
    for (int i = n4; i < n4 + n2; ++i) { s2max = std::max(s2max, (ht[2 * i] - t0) / 1e3); e2 = std::max(e2, (ht[2 * i + 1] - t0) / 1e3); }
    std::vector<int> all(h); std::sort(all.begin(), all.end());
    const int distinct = std::unique(all.begin(), all.end()) - all.begin();
    printf("order %s: K4 %d blocks end %.0f us; K2 %d blocks latest start %.0f us end %.0f us; %d distinct SMs\n",
           order == 0 ? "K4 first" : "K2 first", n4, e4, n2, s2max, e2, distinct);
    printf("  K2 SMs:"); for (int i = n4; i < n4 + n2; ++i) printf(" %d", h[i]); printf("\n");
  }
}
