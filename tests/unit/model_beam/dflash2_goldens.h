// The PyTorch reference's DFlash2 goldens (tools/reference/make_tiny_drafter.py,
// models/tiny-beam-dflash2/golden): reading them, and the check of one drafted block against them
// that the CPU and the GPU drafter tests share.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/npy.h"
#include "kernels/api/device_memory.h"
#include "model/dflash2/dflash2_drafter.h"

namespace beam::testing {

inline constexpr const char* kDFlash2Cases[] = {"ctx20", "gaps", "prefix16", "holes", "ctx3"};

// DIR/golden/CASE.KEY.npy (an empty array, with a test failure, when unreadable).
inline NpyArray dflash2_golden(const std::string& dir, const std::string& c,
                               const std::string& key) {
  auto a = read_npy(dir + "/golden/" + c + "." + key + ".npy");
  EXPECT_TRUE(a.ok()) << a.error().message;
  return a.ok() ? std::move(*a) : NpyArray{};
}

inline std::vector<int32_t> golden_ints(const NpyArray& a) {
  return {a.as<int32_t>(), a.as<int32_t>() + a.numel()};
}

// The case's captured features as bf16 [T, n_taps * H] on the host.
inline HostTensor golden_features(const std::string& dir, const std::string& c) {
  const NpyArray f = dflash2_golden(dir, c, "features");
  HostTensor bits(DType::kBF16, {f.shape[0], f.shape[1]});
  for (int64_t i = 0; i < f.numel(); ++i) bits.as<bf16>()[i] = to_bf16(f.as<float>()[i]);
  return bits;
}

// The case's context K/V in `pool` (read back through ctx) against the reference's: every
// position of the last sliding_window + block_size held, each value within relative * |ref| +
// absolute of the reference's (0, 0: equal).
inline void expect_golden_context(const KernelContext& ctx, const DFlash2ContextPool& pool,
                                  const DFlash2Context& context, const std::string& dir,
                                  const std::string& name, float relative, float absolute) {
  const DFlash2Config& c = pool.config();
  const int64_t width = c.num_kv_heads * c.head_dim;
  const std::vector<int32_t> positions = golden_ints(dflash2_golden(dir, name, "positions"));
  const NpyArray kc = dflash2_golden(dir, name, "kc"), vc = dflash2_golden(dir, name, "vc");
  const auto S = static_cast<int64_t>(positions.size());  // kc, vc: [L, S, Nkv, D]
  // The ring holds at least the last sliding_window + block_size positions (whole pages).
  const int64_t oldest = positions.back() + 1 - (c.sliding_window + c.block_size);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    HostTensor keys(DType::kBF16, pool.keys(l).shape), values(DType::kBF16, pool.keys(l).shape);
    copy_tensor(ctx, keys.view, pool.keys(l));
    copy_tensor(ctx, values.view, pool.values(l));
    for (int64_t i = 0; i < S; ++i) {
      const int64_t slot = context.find(positions[i]);
      if (positions[i] >= oldest) {
        ASSERT_GE(slot, 0) << "position " << positions[i];
      }
      if (slot < 0) continue;
      for (int64_t e = 0; e < width; ++e) {
        const int64_t at = (l * S + i) * width + e;
        const float k = kc.as<float>()[at], v = vc.as<float>()[at];
        ASSERT_NEAR(to_float(keys.as<bf16>()[slot * width + e]), k,
                    relative * std::abs(k) + absolute)
            << "layer " << l << " pos " << i;
        ASSERT_NEAR(to_float(values.as<bf16>()[slot * width + e]), v,
                    relative * std::abs(v) + absolute)
            << "layer " << l << " pos " << i;
      }
    }
  }
}

// The case's block drafted from `context`: the reference's drafts and candidates, g within
// g_relative * |g| + g_absolute of the reference's and u within 0.15 (the attention's and the
// selector's fp32 sums run in another order there; the reference picked prompts whose decisions
// have margins of >= 0.16). The CPU drafter's g is within 2% + 1e-3; the GPU's (cuBLASLt's sums,
// P·V on tensor cores) within 6% + 4e-3 (run 338, H200: at most 0.0117 at |g| 0.51).
inline void expect_golden_block(DFlash2Drafter& drafter, const DFlash2Context& context,
                                const std::string& dir, const std::string& name,
                                float g_relative = 0.02f, float g_absolute = 1e-3f) {
  const DFlash2Config& c = drafter.config();
  const int64_t rows = c.block_size - 1, K = c.selector_top_k;
  const std::vector<int32_t> ids = golden_ints(dflash2_golden(dir, name, "block_ids"));
  const std::vector<int32_t> pos = golden_ints(dflash2_golden(dir, name, "block_positions"));
  const DFlash2Block block{ids[0], pos[0], &context};
  std::vector<int32_t> drafts(static_cast<size_t>(rows));
  DFlash2Trace trace;
  ASSERT_TRUE(drafter.draft({&block, 1}, drafts, &trace).ok());
  EXPECT_EQ(drafts, golden_ints(dflash2_golden(dir, name, "drafts")));
  const NpyArray g = dflash2_golden(dir, name, "g"), u = dflash2_golden(dir, name, "u");
  ASSERT_EQ(static_cast<int64_t>(trace.hidden.size()), g.numel());
  ASSERT_EQ(static_cast<int64_t>(trace.logits.size()), u.numel());
  for (int64_t i = 0; i < g.numel(); ++i)
    EXPECT_NEAR(trace.hidden[i], g.as<float>()[i],
                g_relative * std::abs(g.as<float>()[i]) + g_absolute);
  for (int64_t i = 0; i < u.numel(); ++i)
    EXPECT_NEAR(trace.logits[i], u.as<float>()[i], 0.15f) << "logit " << i;
  const std::vector<int32_t> cand = golden_ints(dflash2_golden(dir, name, "candidates"));
  for (int64_t r = 0; r < rows; ++r) {
    const std::set<int32_t> mine(trace.candidates.begin() + r * K,
                                 trace.candidates.begin() + (r + 1) * K);
    const std::set<int32_t> ref(cand.begin() + r * K, cand.begin() + (r + 1) * K);
    EXPECT_EQ(mine, ref) << "row " << r;
  }
}

}  // namespace beam::testing
