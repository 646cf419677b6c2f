// Selection steps over TokenCandidate spans; every reorder is deterministic for a given input.
#include "runtime/sampling/token_candidate.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace beam {
namespace {

constexpr int64_t kFirstWalkBlock = 64;
constexpr int64_t kWalkBlockGrowth = 4;

bool mass_reached(MassBound bound, double mass, double target) {
  switch (bound) {
    case MassBound::kAtLeast:
      return mass >= target;
    case MassBound::kAbove:
      return mass > target;
  }
  return false;
}

}  // namespace

int64_t keep_top_k(std::span<TokenCandidate> candidates, int64_t k) {
  BEAM_CHECK(k >= 1) << "k " << k;
  auto size = static_cast<int64_t>(candidates.size());
  if (k >= size) return size;
  std::nth_element(candidates.begin(), candidates.begin() + k, candidates.end(), ranks_before);
  return k;
}

WeightedCandidates to_weights(std::span<TokenCandidate> candidates, double temperature) {
  BEAM_CHECK(temperature > 0) << "temperature " << temperature;
  BEAM_CHECK(!candidates.empty());
  float max_logit = -INFINITY;
  for (const TokenCandidate& c : candidates) max_logit = std::max(max_logit, c.value);
  BEAM_CHECK(std::isfinite(max_logit)) << "logits row has no finite maximum: " << max_logit;
  WeightedCandidates out;
  for (const TokenCandidate& c : candidates) {
    // (logit - max) / T is <= 0; dividing in double keeps tiny temperatures free of inf * 0.
    double scaled = (static_cast<double>(c.value) - max_logit) / temperature;
    float weight = std::exp(static_cast<float>(scaled));
    if (weight > 0.0f) {
      candidates[out.size++] = {weight, c.id};
      out.total_weight += weight;
    }
  }
  return out;
}

RankedPrefix walk_ranked(std::span<TokenCandidate> candidates, int64_t sorted_prefix,
                         double target, MassBound bound) {
  auto size = static_cast<int64_t>(candidates.size());
  BEAM_CHECK(sorted_prefix >= 0 && sorted_prefix <= size) << "sorted_prefix " << sorted_prefix;
  RankedPrefix prefix;
  int64_t sorted_end = sorted_prefix;
  int64_t block = kFirstWalkBlock;
  auto begin = candidates.begin();
  while (prefix.count < size) {
    if (prefix.count == sorted_end) {
      int64_t block_end = std::min(size, sorted_end + block);
      if (block_end < size)
        std::nth_element(begin + sorted_end, begin + block_end, candidates.end(), ranks_before);
      std::sort(begin + sorted_end, begin + block_end, ranks_before);
      sorted_end = block_end;
      block *= kWalkBlockGrowth;
    }
    prefix.mass += candidates[prefix.count].value;
    ++prefix.count;
    if (mass_reached(bound, prefix.mass, target)) return prefix;
  }
  return prefix;
}

}  // namespace beam
