// Per-context state of the CUDA linear() (kernels/cuda/gemm.cu): cuBLASLt matmul plans cached per
// shape, dtypes and operand alignment, the fp32 copy of a bf16 x for the fp32 router GEMM,
// linear_split's packed output, and the occupancy of the skinny kernel's instances
// (gemm_skinny.cu sizes its grid to one wave).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>

#include <cublasLt.h>

#include "kernels/cuda/op_scratch.h"

namespace beam {

// What a cuBLASLt plan depends on: the problem, the operand types, and each pointer's alignment
// (the heuristic may pick kernels that need 16-byte or wider alignment).
// invariant: the algorithm is the one every M of this (n, k, types, alignments) shares (gemm.cu's
// invariant_algo), not the heuristic's pick for this m.
struct LinearPlanKey {
  int64_t m = 0, n = 0, k = 0;
  int32_t ab_type = 0, out_type = 0;  // cudaDataType of A/B (x and w) and of C/D (out)
  int32_t align_x = 0, align_w = 0, align_out = 0;  // bytes, a power of two <= 256
  bool invariant = false;
  bool operator==(const LinearPlanKey&) const = default;
};

struct LinearPlanKeyHash {
  size_t operator()(const LinearPlanKey& k) const {
    size_t h = 0;
    for (int64_t v : {k.m, k.n, k.k, int64_t{k.ab_type}, int64_t{k.out_type}, int64_t{k.align_x},
                      int64_t{k.align_w}, int64_t{k.align_out}, int64_t{k.invariant}})
      h = h * 1000003u ^ std::hash<int64_t>{}(v);
    return h;
  }
};

// One cached cuBLASLt matmul: descriptors and the heuristic's algorithm. Owns the descriptors.
struct LinearPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};

  LinearPlan() = default;
  LinearPlan(const LinearPlan&) = delete;
  LinearPlan& operator=(const LinearPlan&) = delete;
  ~LinearPlan();
};

struct LinearCache {
  std::unordered_map<LinearPlanKey, std::unique_ptr<LinearPlan>, LinearPlanKeyHash> plans;
  // The algorithm of batch-invariant plans per (n, k, types, alignments) (keys with m = 0).
  std::unordered_map<LinearPlanKey, cublasLtMatmulAlgo_t, LinearPlanKeyHash> invariant_algos;
  // Resident CTAs per SM of each skinny-kernel instance (cudaOccupancy..., asked once per instance).
  std::unordered_map<const void*, int> skinny_ctas_per_sm;
  OpScratch x_f32;  // the fp32 copy of a bf16 x (the router GEMM)
  // linear_split's whole output [M, N] before its columns are scattered (gemm.cu); reserved for
  // kSplitGemmMaxRows rows of the widest w seen, so decode graphs never grow it.
  OpScratch split_out;

  LinearCache() = default;
  LinearCache(const LinearCache&) = delete;
  LinearCache& operator=(const LinearCache&) = delete;
};

}  // namespace beam
