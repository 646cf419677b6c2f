// Thread-block cluster primitives (Hopper): the block's rank, cluster-wide barriers, another
// block's shared memory (mapa; loads, stores, atomic adds), mbarrier arrivals and waits across
// the cluster, and TMA loads multicast to several blocks' shared memory.
#pragma once

#include <cstdint>

namespace beam::cuda::cluster {

// This block's rank in its cluster.
__device__ __forceinline__ uint32_t rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

// This thread arrives on the cluster barrier without publishing anything (relaxed): a block says it
// has started, so that others may later write its shared memory. Pairs with wait(). All threads of
// each warp must call it (.aligned).
__device__ __forceinline__ void arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}

// Waits for the cluster barrier's current phase (every thread of the cluster arrived), with
// acquire. All threads of each warp must call it (.aligned).
__device__ __forceinline__ void wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// Every thread of every block of the cluster arrives and waits (release / acquire): shared
// writes and mbarrier inits before it are visible to the whole cluster after it. All threads of
// each warp must call it (.aligned).
__device__ __forceinline__ void sync() {
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n"
      "barrier.cluster.wait.acquire.aligned;\n" ::
          : "memory");
}

// The shared::cluster address of block `cta`'s copy of this block's shared address `addr`.
__device__ __forceinline__ uint32_t map(uint32_t addr, uint32_t cta) {
  uint32_t out;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(out) : "r"(addr), "r"(cta));
  return out;
}

// Stores v at a shared::cluster address (map's result).
__device__ __forceinline__ void store(uint32_t cluster_addr, int32_t v) {
  asm volatile("st.shared::cluster.u32 [%0], %1;\n" ::"r"(cluster_addr), "r"(v) : "memory");
}

// Stores 2 or 4 floats at an 8- or 16-byte aligned shared::cluster address (map's result).
__device__ __forceinline__ void store(uint32_t cluster_addr, float2 v) {
  asm volatile("st.shared::cluster.v2.f32 [%0], {%1, %2};\n" ::"r"(cluster_addr), "f"(v.x), "f"(v.y)
               : "memory");
}
__device__ __forceinline__ void store(uint32_t cluster_addr, float4 v) {
  asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(cluster_addr), "f"(v.x),
               "f"(v.y), "f"(v.z), "f"(v.w)
               : "memory");
}

// Stores 8 bytes at an 8-byte aligned shared::cluster address (map's result).
__device__ __forceinline__ void store_u64(uint32_t cluster_addr, uint64_t v) {
  asm volatile("st.shared::cluster.u64 [%0], %1;\n" ::"r"(cluster_addr), "l"(v) : "memory");
}

// Adds v to the 32-bit word at a shared::cluster address (map's result); returns its old value.
__device__ __forceinline__ uint32_t atomic_add(uint32_t cluster_addr, uint32_t v) {
  uint32_t old;
  asm volatile("atom.shared::cluster.add.u32 %0, [%1], %2;\n"
               : "=r"(old)
               : "r"(cluster_addr), "r"(v)
               : "memory");
  return old;
}

// Loads 4 or 8 bytes from a shared::cluster address (map's result).
__device__ __forceinline__ uint32_t load_u32(uint32_t cluster_addr) {
  uint32_t v;
  asm volatile("ld.shared::cluster.u32 %0, [%1];\n" : "=r"(v) : "r"(cluster_addr) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t load_u64(uint32_t cluster_addr) {
  uint64_t v;
  asm volatile("ld.shared::cluster.u64 %0, [%1];\n" : "=l"(v) : "r"(cluster_addr) : "memory");
  return v;
}

// The shared::cluster address of block `cta`'s copy of the shared object at `p` (in this block).
__device__ __forceinline__ uint32_t map(const void* p, uint32_t cta) {
  return map(static_cast<uint32_t>(__cvta_generic_to_shared(p)), cta);
}

// One arrival on the mbarrier at a shared::cluster address, releasing this thread's earlier
// writes (shared::cluster stores included) at cluster scope.
__device__ __forceinline__ void mbar_arrive(uint32_t cluster_bar) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_bar)
               : "memory");
}

// One arrival on the mbarrier at a shared::cluster address that publishes nothing beyond this
// block (release at CTA scope: no cluster-wide fence), for a consumer's "done reading this
// buffer" whose reads already completed.
__device__ __forceinline__ void mbar_arrive_signal(uint32_t cluster_bar) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_bar) : "memory");
}

// Waits for phase `parity` of this block's mbarrier `bar` with acquire at cluster scope (for
// arrivals from other blocks); traps after about 2^26 timed-out tries, as wgmma::mbar_wait.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  for (uint32_t tries = 0;; ++tries) {
    uint32_t done;
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
    if (done != 0) return;
    if (tries == (1u << 26)) __trap();
  }
}

// TMA box of a 2-d tensor map at (c0 innermost, c1) into shared `dst` of every block in
// `cta_mask` (the same offset in each), counting its bytes on each one's mbarrier at `bar`'s
// offset.
__device__ __forceinline__ void tma_load_2d_multicast(uint32_t dst, const void* map, uint32_t bar,
                                                      int32_t c0, int32_t c1, uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar), "h"(cta_mask)
      : "memory");
}

}  // namespace beam::cuda::cluster
