// The GPU draw (kernels/cuda/sampling_draw.cuh) against its exact host model: the processed row's
// top-k set weighted exp((v - max) / T) with the CPU's f32 exp, the weights as 2^-44 fixed point
// summed as integers in rank order, then top-p, min-p and the inverse-CDF draw by the same
// integer thresholds. The token must be the model's on every row, on peaked rows (drawn among
// rank 0's candidates) and flat ones (radix selects) alike; the model's plan says which way each
// row goes, and the test checks both ways were taken often. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../kernels_cuda/cuda_test_util.h"
#include "kernels/api/sampling.h"
#include "runtime/sampling/fast_exp.h"

namespace beam {
namespace {

constexpr int64_t kVocab = 151936;
constexpr int kCandidateCap = 1024;  // kDrawCandidates

uint32_t order_bits(float v) {
  if (v == 0.0f) v = 0.0f;
  const uint32_t b = std::bit_cast<uint32_t>(v);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

uint64_t need_for(double target, bool at_least, uint64_t total) {
  const double n = at_least ? std::ceil(target) : std::floor(target) + 1.0;
  if (!(n >= 1.0)) return 1;
  if (n >= static_cast<double>(total)) return total;
  return static_cast<uint64_t>(n);
}

// A processed row's top-k set as the draw sees it: weights in rank order (larger first, then
// lower id), their fixed-point prefix sums, and their fixed-point mass and count by top digit.
struct WeightedRow {
  std::vector<float> w;
  std::vector<int32_t> id;
  std::vector<uint64_t> through;
  std::vector<uint64_t> digit_mass = std::vector<uint64_t>(256, 0);
  std::vector<uint64_t> digit_count = std::vector<uint64_t>(256, 0);
};

WeightedRow weigh(const std::vector<float>& row, int64_t top_k, float inv_t) {
  const int n = static_cast<int>(row.size());
  float max = -INFINITY;
  for (float v : row)
    if (v > max) max = v;
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < n; ++i)
    if (!(top_k > 0 && top_k < n && std::isnan(row[i]))) ids.push_back(i);
  if (top_k > 0 && top_k < n) {
    std::partial_sort(ids.begin(), ids.begin() + top_k, ids.end(), [&](int32_t a, int32_t b) {
      const uint32_t x = order_bits(row[a]), y = order_bits(row[b]);
      return x != y ? x > y : a < b;
    });
    ids.resize(static_cast<size_t>(top_k));
  }
  std::vector<std::pair<float, int32_t>> weighted;
  for (int32_t i : ids) weighted.push_back({exp_nonpositive((row[i] - max) * inv_t), i});
  std::sort(weighted.begin(), weighted.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  WeightedRow out;
  uint64_t sum = 0;
  for (const auto& [w, id] : weighted) {
    const auto fixed = static_cast<uint64_t>(std::nearbyint(w * 17592186044416.0f));  // 2^44
    out.w.push_back(w);
    out.id.push_back(id);
    out.through.push_back(sum += fixed);
    const uint32_t digit = std::bit_cast<uint32_t>(w) >> 24;
    out.digit_mass[digit] += fixed;
    ++out.digit_count[digit];
  }
  return out;
}

// What the host model gives for a row: the token (-1: none) and whether the GPU's plan gathers
// candidates (the digit holding the first crossing and the ones above hold <= the cap).
struct ModelDraw {
  int32_t token;
  bool candidates;
};

ModelDraw model_draw(const WeightedRow& r, const SamplingRowParams& p) {
  const uint64_t sum = r.through.empty() ? 0 : r.through.back();
  const auto first_reaching = [&](uint64_t need) {
    return static_cast<size_t>(std::lower_bound(r.through.begin(), r.through.end(), need) -
                               r.through.begin());
  };
  // The plan (sampling_draw.cuh's plan_draw).
  int digit = -1;
  if (p.top_p >= 1.0 && p.min_p > 0.0) {
    float rz = static_cast<float>(p.min_p);
    if (static_cast<double>(rz) > p.min_p) rz = std::nextafter(rz, 0.0f);
    digit = static_cast<int>(std::bit_cast<uint32_t>(rz) >> 24);
  } else {
    const uint64_t need = p.top_p < 1.0
                              ? need_for(p.top_p * static_cast<double>(sum), true, sum)
                              : need_for(p.uniform * static_cast<double>(sum), false, sum);
    uint64_t above = 0;
    for (int d = 255; d >= 0 && digit < 0; --d)
      if ((above += r.digit_mass[static_cast<size_t>(d)]) >= need) digit = d;
  }
  uint64_t at_or_above = 0;
  for (int d = std::max(digit, 0); d < 256; ++d)
    at_or_above += r.digit_count[static_cast<size_t>(d)];
  const bool candidates = digit >= 0 && at_or_above <= kCandidateCap;
  // The selections.
  size_t end = r.w.size();
  uint64_t kept = sum;
  if (p.top_p < 1.0) {
    end = first_reaching(need_for(p.top_p * static_cast<double>(sum), true, sum)) + 1;
    kept = r.through[end - 1];
  }
  if (p.min_p > 0.0) {
    size_t allowed = 0;
    while (allowed < end && static_cast<double>(r.w[allowed]) >= p.min_p) ++allowed;
    end = allowed;
    kept = end > 0 ? r.through[end - 1] : 0;
  }
  if (kept == 0) return {-1, candidates};
  const size_t drawn = first_reaching(need_for(p.uniform * static_cast<double>(kept), false, kept));
  return {r.id[drawn], candidates};
}

std::vector<float> normal_row(uint32_t seed, double sd) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> normal(0.0, sd);
  std::vector<float> row(static_cast<size_t>(kVocab));
  for (float& v : row) v = static_cast<float>(normal(gen));
  return row;
}

class DrawTest : public test::CudaTest {};

TEST_F(DrawTest, DrawsAreTheFixedPointModelsTokenOnPeakedAndFlatRows) {
  struct Filter {
    int64_t top_k;
    double top_p, min_p;
  };
  const Filter filters[] = {{0, 1.0, 0.0}, {0, 0.9, 0.0},     {0, 1.0, 0.05},  {40, 0.95, 0.02},
                            {0, 0.5, 0.1}, {1000, 0.99, 0.0}, {0, 0.999, 0.0}, {0, 1.0, 1e-7},
                            {2, 1.0, 0.0}, {0, 0.9, 1.0}};
  const float inv_temperatures[] = {0.5f, 1.0f, 2.0f, 4.0f};
  const double uniforms[] = {0.0, 0.3, 0.77, 0.999999};
  // Rows: N(0, sd) logits, flat to peaked; one with a run of equal top values (rank keys break
  // the tie by id); one of a few tokens far above the rest.
  std::vector<std::vector<float>> rows;
  for (uint32_t r = 0; r < 6; ++r) rows.push_back(normal_row(40 + r, 0.5 + r));
  rows.push_back(normal_row(50, 2.0));
  for (int i = 0; i < 300; ++i) rows.back()[static_cast<size_t>(i * 397)] = 9.5f;
  rows.push_back(normal_row(51, 1.0));
  for (int i = 0; i < 5; ++i) rows.back()[static_cast<size_t>(1000 + i)] = 20.0f - i;

  std::vector<float> host;
  for (const auto& r : rows) host.insert(host.end(), r.begin(), r.end());
  const auto num_rows = static_cast<int64_t>(rows.size());
  const TensorView logits =
      upload(TensorView{host.data(), DType::kF32, {num_rows, kVocab}, Device::kCpu});

  std::vector<SamplingRowParams> params;
  std::vector<ModelDraw> want;
  for (const Filter& f : filters)
    for (float inv_t : inv_temperatures)
      for (int64_t r = 0; r < num_rows; ++r) {
        const WeightedRow weighted = weigh(rows[static_cast<size_t>(r)], f.top_k, inv_t);
        for (double u : uniforms) {
          SamplingRowParams p;
          p.logits_row = static_cast<int32_t>(r);
          p.top_k = f.top_k;
          p.top_p = f.top_p;
          p.min_p = f.min_p;
          p.inv_temperature = inv_t;
          p.uniform = u;
          params.push_back(p);
          want.push_back(model_draw(weighted, p));
        }
      }
  const auto n = static_cast<int64_t>(params.size());
  const TensorView scratch = device_tensor(DType::kF32, {n, kVocab});
  const TensorView out = device_tensor(DType::kI32, {n, kSampledRowWords});
  sample_tokens(gpu, logits, params, {}, {}, scratch, out);
  const HostTensor got = download(out);
  const auto* sampled = static_cast<const SampledRow*>(got.view.data);
  int64_t by_candidates = 0;
  for (int64_t i = 0; i < n; ++i) {
    const SamplingRowParams& p = params[static_cast<size_t>(i)];
    const ModelDraw& m = want[static_cast<size_t>(i)];
    by_candidates += m.candidates ? 1 : 0;
    EXPECT_EQ(sampled[i].token, m.token)
        << "row " << p.logits_row << " top_k " << p.top_k << " top_p " << p.top_p << " min_p "
        << p.min_p << " 1/T " << p.inv_temperature << " u " << p.uniform
        << (m.candidates ? " (candidates)" : " (selects)");
  }
  EXPECT_GE(by_candidates, n / 4) << "of " << n;
  EXPECT_GE(n - by_candidates, n / 4) << "of " << n;
}

}  // namespace
}  // namespace beam
