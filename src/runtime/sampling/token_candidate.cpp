// Selection steps over TokenCandidate spans. Every reorder is a deterministic function of the
// input (fixed pivots, fixed summation order), so the same row always gives the same token.
#include "runtime/sampling/token_candidate.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <utility>

#include "core/check.h"
#include "runtime/sampling/vocab_passes.h"

namespace beam {
namespace {

constexpr int64_t kSortedSelectionSize = 32;  // below this, select_by_mass sorts and walks
constexpr float kHeavyWeight = 1.0f / 1024;    // select_by_mass's first split (see there)
constexpr int64_t kHeapTopKRatio = 64;         // keep_top_k uses a heap when k <= size / 64
constexpr int kMaxPartitionRounds = 64;        // then sort what is left (bounds bad pivots)

bool mass_reached(MassBound bound, double mass, double target) {
  switch (bound) {
    case MassBound::kAtLeast:
      return mass >= target;
    case MassBound::kAbove:
      return mass > target;
  }
  return false;
}

// Median (in rank order) of the first, middle and last candidates of [lo, hi).
int64_t median_of_three(std::span<const TokenCandidate> c, int64_t lo, int64_t hi) {
  int64_t a = lo, b = lo + (hi - lo) / 2, d = hi - 1;
  if (ranks_before(c[b], c[a])) std::swap(a, b);
  if (ranks_before(c[d], c[b])) std::swap(b, d);
  if (ranks_before(c[b], c[a])) std::swap(a, b);
  return b;
}

// Partitions [lo, hi) around the candidate at `pivot`: those ranking before it first, then the
// pivot (its new index is returned), then the rest. `before_mass` receives the first part's mass.
int64_t partition_around(std::span<TokenCandidate> c, int64_t lo, int64_t hi, int64_t pivot,
                         double* before_mass) {
  std::swap(c[pivot], c[hi - 1]);
  const TokenCandidate p = c[hi - 1];
  int64_t store = lo;
  double mass = 0.0;
  for (int64_t i = lo; i < hi - 1; ++i) {  // branchless Lomuto
    const TokenCandidate x = c[i];
    bool before = ranks_before(x, p);
    c[i] = c[store];
    c[store] = x;
    store += before ? 1 : 0;
    mass += before ? x.value : 0.0f;
  }
  std::swap(c[store], c[hi - 1]);
  *before_mass = mass;
  return store;
}

// Partitions [lo, hi) into the candidates with weight >= threshold, then the rest (which all
// rank after them); returns the split index. `heavy_mass` receives the first part's mass.
int64_t partition_by_weight(std::span<TokenCandidate> c, int64_t lo, int64_t hi, float threshold,
                            double* heavy_mass) {
  int64_t store = lo;
  double mass = 0.0;
  for (int64_t i = lo; i < hi; ++i) {  // branchless Lomuto
    const TokenCandidate x = c[i];
    bool heavy = x.value >= threshold;
    c[i] = c[store];
    c[store] = x;
    store += heavy ? 1 : 0;
    mass += heavy ? x.value : 0.0f;
  }
  *heavy_mass = mass;
  return store;
}

}  // namespace

int64_t keep_top_k(std::span<TokenCandidate> candidates, int64_t k) {
  BEAM_CHECK(k >= 1) << "k " << k;
  auto size = static_cast<int64_t>(candidates.size());
  if (k >= size) return size;
  auto begin = candidates.begin(), heap_end = begin + k;
  if (k * kHeapTopKRatio > size) {
    std::nth_element(begin, heap_end, candidates.end(), ranks_before);
    return k;
  }
  // Small k: [0, k) becomes a heap whose top is its last-ranked token; one comparison rejects
  // almost every other token, so the pass costs little more than reading the row.
  std::make_heap(begin, heap_end, ranks_before);
  for (auto it = heap_end; it != candidates.end(); ++it) {
    if (!ranks_before(*it, *begin)) continue;
    std::pop_heap(begin, heap_end, ranks_before);
    std::iter_swap(heap_end - 1, it);
    std::push_heap(begin, heap_end, ranks_before);
  }
  return k;
}

double to_weights(std::span<TokenCandidate> candidates, double temperature) {
  BEAM_CHECK(temperature > 0) << "temperature " << temperature;
  BEAM_CHECK(!candidates.empty());
  const float max_logit = max_value(std::span<const TokenCandidate>(candidates));
  BEAM_CHECK(std::isfinite(max_logit)) << "logits row has no finite maximum: " << max_logit;
  // 1/T capped at FLT_MAX: for tiny T every token but the best then underflows to weight 0
  // (as it would exactly), and (max - max) * inv_t stays 0 instead of 0 * inf.
  auto inv_t = static_cast<float>(std::min(1.0 / temperature, static_cast<double>(FLT_MAX)));
  return exp_weights_in_place(candidates, max_logit, inv_t);
}

RankedPrefix select_by_mass(std::span<TokenCandidate> candidates, double target,
                            MassBound bound) {
  BEAM_CHECK(!candidates.empty());
  BEAM_CHECK(!mass_reached(bound, 0.0, target)) << "an empty prefix already meets " << target;
  // Invariant: [0, lo) ranks before [lo, hi), which ranks before [hi, size); mass of [0, lo) is
  // `below`, and the crossing token lies in [lo, hi).
  const int64_t size = static_cast<int64_t>(candidates.size());
  int64_t lo = 0, hi = size;
  double below = 0.0;
  // First split at a fixed weight rather than at a pivot token: in the peaked rows of real
  // models nearly all the mass sits in the few tokens within a factor 1024 of the best, so the
  // selection usually goes on with those alone.
  double heavy_mass = 0.0;
  int64_t split = partition_by_weight(candidates, 0, size, kHeavyWeight, &heavy_mass);
  if (mass_reached(bound, heavy_mass, target)) {
    hi = split;
  } else {
    below = heavy_mass;
    lo = split;
  }
  for (int round = 0; hi - lo > kSortedSelectionSize && round < kMaxPartitionRounds; ++round) {
    double before_mass = 0.0;
    int64_t p = partition_around(candidates, lo, hi, median_of_three(candidates, lo, hi),
                                 &before_mass);
    if (mass_reached(bound, below + before_mass, target)) {
      hi = p;
    } else {
      below += before_mass + candidates[p].value;
      if (mass_reached(bound, below, target)) return {p + 1, below};
      lo = p + 1;
    }
  }
  std::sort(candidates.begin() + lo, candidates.begin() + hi, ranks_before);
  for (int64_t i = lo; i < hi; ++i) {
    below += candidates[i].value;
    if (mass_reached(bound, below, target)) return {i + 1, below};
  }
  // Rounding kept the target out of reach: take all of [0, hi) and end it with its last-ranked
  // token of non-zero weight.
  int64_t last = -1;
  for (int64_t i = 0; i < hi; ++i)
    if (candidates[i].value > 0.0f && (last < 0 || ranks_before(candidates[last], candidates[i])))
      last = i;
  BEAM_CHECK(last >= 0) << "no candidate with a non-zero weight";
  std::swap(candidates[last], candidates[hi - 1]);
  return {hi, below};
}

}  // namespace beam
