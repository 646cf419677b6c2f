// Can a prefetch into L2 survive a layer's expert stream? (batch-1 decode: HBM idles ~9 us between
// the norm and the experts' first weight load while the token is routed; if the next layer's
// q/k/v/gate weights could be prefetched then and still sit in L2 ~150 us and ~700 MB of expert
// weights later, its GEMV would read that part from L2.)
//
// Per iteration, on one stream: stream F (700 MB, normal loads: flushes L2), prefetch the first P
// bytes of W[i % 6] (146 MB each, like a layer's q/k/v/gate), wait 9 us (the routing gap), stream
// E (700 MB, the experts; loads normal or evict_first), then time a read of W[i % 6] whole (events
// around it). Configurations vary the set-aside (cudaLimitPersistingL2CacheSize), the prefetch's
// policy, E's policy and the read's policy (a read that demotes what it hit leaves room for the
// next layer's prefetch). Result (run 157): nothing prefetched survives E, and a set-aside slows
// the stream by 12%.
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -o l2_persist 2026-12-02-l2-persist-prefetch.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#define CK(x)                                                                          \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      std::printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));   \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

enum Policy : int { kNone = 0, kEvictFirst = 1, kEvictLast = 2, kEvictNormal = 3 };

__device__ __forceinline__ uint64_t make_policy(int policy) {
  uint64_t p = 0;
  if (policy == kEvictFirst)
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  else if (policy == kEvictLast)
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
  else
    asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(p));
  return p;
}

__device__ __forceinline__ uint4 load(const char* a, int policy, uint64_t pol) {
  uint4 v;
  if (policy == kNone)
    asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(a));
  else
    asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(a), "l"(pol));
  return v;
}

// Reads [p, p + bytes) in 16-byte loads, 8 in flight per thread; grid-stride over 8 KB chunks.
__global__ void __launch_bounds__(512) stream(const char* __restrict__ p, size_t bytes, int policy,
                                              uint4* sink) {
  const uint64_t pol = make_policy(policy);
  uint4 acc = make_uint4(0, 0, 0, 0);
  const size_t chunk = 512 * 16;
  for (size_t off = size_t(blockIdx.x) * chunk * 8; off < bytes; off += size_t(gridDim.x) * chunk * 8) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const size_t a = off + u * chunk + threadIdx.x * 16;
      v[u] = a < bytes ? load(p + a, policy, pol) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      acc.x ^= v[u].x;
      acc.y ^= v[u].y;
      acc.z ^= v[u].z;
      acc.w ^= v[u].w;
    }
  }
  if (acc.x == 0x12345678 && acc.y == 0x9abcdef0) sink[threadIdx.x] = acc;
}

// Prefetches [p, p + bytes) into L2 with bulk (TMA) prefetches of 16 KB, one lane a block.
__global__ void prefetch(const char* __restrict__ p, size_t bytes, int policy) {
  const uint64_t pol = make_policy(policy);
  const size_t piece = 16384;
  for (size_t off = (size_t(blockIdx.x) * blockDim.x + threadIdx.x) * piece; off < bytes;
       off += size_t(gridDim.x) * blockDim.x * piece) {
    const uint32_t n = uint32_t(bytes - off < piece ? bytes - off : piece);
    if (policy == kNone)
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + off), "r"(n) : "memory");
    else
      asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;" ::"l"(p + off),
                   "r"(n), "l"(pol)
                   : "memory");
  }
}

// One thread waits ns nanoseconds (the routing gap: the GPU busy, HBM idle).
__global__ void spin(uint64_t ns) {
  uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    __nanosleep(200);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

struct Config {
  const char* name;
  bool set_aside;
  double prefetch_mb;  // 0: none
  int prefetch_policy, experts_policy, read_policy;
};

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  std::printf("{\"gpu\": \"%s\", \"l2_bytes\": %d, \"persisting_l2_max_bytes\": %d, \"sms\": %d,\n",
              prop.name, prop.l2CacheSize, prop.persistingL2CacheMaxSize, sms);
  const size_t kW = 146ull << 20, kE = 700ull << 20, kLayers = 6;
  char *w, *e, *f;
  uint4* sink;
  CK(cudaMalloc(&w, kW * kLayers));
  CK(cudaMalloc(&e, kE));
  CK(cudaMalloc(&f, kE));
  CK(cudaMalloc(&sink, 512 * sizeof(uint4)));
  CK(cudaMemset(w, 1, kW * kLayers));
  CK(cudaMemset(e, 2, kE));
  CK(cudaMemset(f, 3, kE));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  cudaEvent_t ev[6];
  for (auto& x : ev) CK(cudaEventCreate(&x));

  const double set_aside_mb = prop.persistingL2CacheMaxSize / 1048576.0;
  const std::vector<Config> configs = {
      {"no prefetch", false, 0, kNone, kNone, kNone},
      {"prefetch 36 MB, no hints, no set-aside", false, 36, kNone, kNone, kNone},
      {"prefetch 36 MB evict_last, no set-aside", false, 36, kEvictLast, kNone, kNone},
      {"prefetch 36 MB evict_last, set-aside, experts normal", true, 36, kEvictLast, kNone, kNone},
      {"prefetch 36 MB evict_last, set-aside, experts evict_first", true, 36, kEvictLast,
       kEvictFirst, kNone},
      {"prefetch set-aside MB evict_last, set-aside, experts evict_first", true, set_aside_mb,
       kEvictLast, kEvictFirst, kNone},
      {"prefetch set-aside MB evict_last, set-aside, experts evict_first, read evict_first", true,
       set_aside_mb, kEvictLast, kEvictFirst, kEvictFirst},
      {"prefetch 24 MB evict_last, set-aside, experts evict_first, read evict_first", true, 24,
       kEvictLast, kEvictFirst, kEvictFirst},
      {"prefetch set-aside MB evict_last, set-aside, experts normal, read evict_first", true,
       set_aside_mb, kEvictLast, kNone, kEvictFirst},
      {"no prefetch, set-aside, experts evict_first", true, 0, kNone, kEvictFirst, kNone},
  };
  std::printf("\"configs\": [\n");
  for (size_t c = 0; c < configs.size(); ++c) {
    const Config& cf = configs[c];
    CK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize,
                          cf.set_aside ? size_t(prop.persistingL2CacheMaxSize) : 0));
    CK(cudaCtxResetPersistingL2Cache());
    const size_t pbytes = std::min(size_t(cf.prefetch_mb * 1048576.0) / 16384 * 16384, kW);
    std::vector<float> read_us, experts_us, prefetch_us;
    for (int it = 0; it < 30; ++it) {
      const char* wl = w + (it % kLayers) * kW;
      stream<<<sms * 2, 512, 0, s>>>(f, kE, kNone, sink);
      CK(cudaEventRecord(ev[0], s));
      if (pbytes) prefetch<<<sms, 32, 0, s>>>(wl, pbytes, cf.prefetch_policy);
      spin<<<1, 1, 0, s>>>(9000);
      CK(cudaEventRecord(ev[1], s));
      stream<<<sms * 2, 512, 0, s>>>(e, kE, cf.experts_policy, sink);
      CK(cudaEventRecord(ev[2], s));
      stream<<<sms * 2, 512, 0, s>>>(wl, kW, cf.read_policy, sink);
      CK(cudaEventRecord(ev[3], s));
      CK(cudaStreamSynchronize(s));
      float a, b, d;
      CK(cudaEventElapsedTime(&a, ev[0], ev[1]));
      CK(cudaEventElapsedTime(&b, ev[1], ev[2]));
      CK(cudaEventElapsedTime(&d, ev[2], ev[3]));
      if (it >= 6) {
        prefetch_us.push_back(a * 1e3f);
        experts_us.push_back(b * 1e3f);
        read_us.push_back(d * 1e3f);
      }
    }
    auto med = [](std::vector<float> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    std::printf(
        "  {\"name\": \"%s\", \"prefetch_mb\": %.1f, \"prefetch_us\": %.1f, \"experts_us\": %.1f, "
        "\"read_w_us\": %.1f, \"read_w_min_us\": %.1f}%s\n",
        cf.name, pbytes / 1048576.0, med(prefetch_us), med(experts_us), med(read_us),
        *std::min_element(read_us.begin(), read_us.end()), c + 1 < configs.size() ? "," : "");
  }
  std::printf("]}\n");
  return 0;
}
