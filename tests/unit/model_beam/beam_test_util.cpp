// Test helpers for the forward pass (see beam_test_util.h).
#include "beam_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <random>

namespace beam::testing {

std::shared_ptr<const BeamWeights> load_model(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const BeamWeights>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  auto w = load_beam_weights(model_path(name));
  if (!w.ok()) {
    ADD_FAILURE() << "loading " << name << ": " << w.error().message;
    return nullptr;
  }
  cache[name] = *w;
  return *w;
}

std::vector<float> run_chunked(BeamModel& model, const std::vector<int32_t>& tokens,
                               int64_t start_pos, int64_t chunk_size,
                               std::vector<std::vector<int32_t>>* experts) {
  const int64_t T = static_cast<int64_t>(tokens.size());
  if (chunk_size <= 0) chunk_size = T;
  auto kv = LocalKvCache::create(model.context(), model.config(), 1, T);  // on the model's device
  EXPECT_TRUE(kv.ok()) << kv.error().message;
  if (!kv.ok()) return {};
  std::vector<float> logits;
  const int64_t K = model.config().num_experts_per_tok;
  if (experts) experts->assign(static_cast<size_t>(T), {});
  for (int64_t begin = 0; begin < T; begin += chunk_size) {
    int64_t n = std::min(chunk_size, T - begin);
    ForwardBatch batch;
    batch.capture_routing = experts != nullptr;
    batch.seqs.push_back(SeqChunk{std::span<const int32_t>(tokens.data() + begin, n), start_pos, begin,
                                  kv->block_table(0), kv->block_table(0), true});
    ForwardOutput out;
    auto st = model.forward(batch, kv->layers(), out);
    EXPECT_TRUE(st.ok()) << st.error().message;
    logits.insert(logits.end(), out.logits.begin(), out.logits.end());
    if (!experts || !st.ok()) continue;
    const auto sparse = static_cast<int64_t>(out.routed_experts.size()) / (n * K);  // [sparse, n, K]
    for (int64_t t = 0; t < n; ++t) {
      std::vector<int32_t>& mine = (*experts)[static_cast<size_t>(begin + t)];
      for (int64_t l = 0; l < sparse; ++l) {
        auto first = out.routed_experts.begin() + (l * n + t) * K;
        std::vector<int32_t> layer(first, first + K);
        std::sort(layer.begin(), layer.end());
        mine.insert(mine.end(), layer.begin(), layer.end());
      }
    }
  }
  return logits;
}

LogitsComparison compare_logits(const std::vector<float>& got, const std::vector<float>& ref,
                                int64_t vocab, float min_margin) {
  LogitsComparison c;
  EXPECT_EQ(got.size(), ref.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < std::min(got.size(), ref.size()); ++i) {
    double d = static_cast<double>(got[i]) - ref[i];
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  c.rel_error = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  int64_t rows = static_cast<int64_t>(std::min(got.size(), ref.size())) / vocab;
  for (int64_t r = 0; r < rows; ++r) {
    const float* rr = ref.data() + r * vocab;
    const float* gr = got.data() + r * vocab;
    int64_t best = std::max_element(rr, rr + vocab) - rr;
    float second = -INFINITY;
    for (int64_t v = 0; v < vocab; ++v)
      if (v != best) second = std::max(second, rr[v]);
    if (rr[best] - second < min_margin) continue;
    ++c.rows_checked;
    if (std::max_element(gr, gr + vocab) - gr != best) ++c.argmax_mismatches;
  }
  return c;
}

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> t(n);
  for (auto& x : t) x = dist(rng);
  return t;
}

int64_t confident_prefix(BeamModel& model, const std::vector<int32_t>& prompt,
                         const std::vector<int32_t>& generated, float min_margin) {
  if (generated.empty()) return 0;
  std::vector<int32_t> tokens = prompt;
  tokens.insert(tokens.end(), generated.begin(), generated.end() - 1);
  const std::vector<float> logits = run_chunked(model, tokens, 0, 0);
  const int64_t V = model.config().vocab_size;
  for (size_t j = 0; j < generated.size(); ++j) {
    const float* row = logits.data() + (prompt.size() - 1 + j) * V;
    float top1 = -INFINITY, top2 = -INFINITY;
    for (int64_t v = 0; v < V; ++v) {
      if (row[v] > top1) {
        top2 = top1;
        top1 = row[v];
      } else if (row[v] > top2) {
        top2 = row[v];
      }
    }
    if (top1 - top2 < min_margin) return static_cast<int64_t>(j);
  }
  return static_cast<int64_t>(generated.size());
}

}  // namespace beam::testing
