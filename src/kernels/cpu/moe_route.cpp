// CPU grouped "noaux_tc" routing, all in fp32. Ordering rule everywhere (groups and experts):
// higher value first, equal values by lower index. Experts of excluded groups are never chosen.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/cpu/moe.h"
#include "kernels/cpu/torch_math.h"

namespace beam::cpu {
namespace {

struct RouteShape {
  int64_t num_experts, group_size;
};

// Descending value, ties to the lower index.
struct ByValueThenIndex {
  const float* values;
  bool operator()(int32_t a, int32_t b) const {
    return values[a] > values[b] || (values[a] == values[b] && a < b);
  }
};

// Group score = sum of the two largest choices of the group (the only one if the group has one).
float group_score(const float* choice, int64_t size) {
  float first = -INFINITY, second = -INFINITY;
  for (int64_t i = 0; i < size; ++i) {
    if (choice[i] > first) {
      second = first;
      first = choice[i];
    } else if (choice[i] > second) {
      second = choice[i];
    }
  }
  return size >= 2 ? first + second : first;
}

// Routes one token: ids/weights receive top_k entries in descending choice order.
void route_token(const float* logits, const float* bias, const RouterParams& p, const RouteShape& s,
                 std::vector<float>& score, std::vector<float>& choice, int32_t* ids,
                 float* weights) {
  const int64_t E = s.num_experts;
  for (int64_t e = 0; e < E; ++e) {
    score[e] = torch_sigmoidf(logits[e]);
    choice[e] = score[e] + bias[e];
    BEAM_CHECK(!std::isnan(choice[e])) << "moe_route: NaN router choice for expert " << e;
  }
  std::vector<float> gscore(static_cast<size_t>(p.num_groups));
  for (int64_t g = 0; g < p.num_groups; ++g)
    gscore[g] = group_score(&choice[g * s.group_size], s.group_size);
  std::vector<int32_t> groups(static_cast<size_t>(p.num_groups));
  std::iota(groups.begin(), groups.end(), 0);
  std::partial_sort(groups.begin(), groups.begin() + p.topk_groups, groups.end(),
                    ByValueThenIndex{gscore.data()});

  std::vector<int32_t> candidates;
  candidates.reserve(static_cast<size_t>(p.topk_groups * s.group_size));
  for (int64_t i = 0; i < p.topk_groups; ++i)
    for (int64_t e = groups[i] * s.group_size; e < (groups[i] + 1) * s.group_size; ++e)
      candidates.push_back(static_cast<int32_t>(e));
  std::partial_sort(candidates.begin(), candidates.begin() + p.top_k, candidates.end(),
                    ByValueThenIndex{choice.data()});

  float total = 0.0f;
  for (int64_t k = 0; k < p.top_k; ++k) {
    ids[k] = candidates[k];
    weights[k] = score[candidates[k]];
    total += weights[k];
  }
  const float denom = total + 1e-20f;
  for (int64_t k = 0; k < p.top_k; ++k) {
    if (p.norm_topk_prob) weights[k] = weights[k] / denom;
    weights[k] = weights[k] * p.routed_scaling_factor;
  }
}

}  // namespace

void moe_route(ThreadPool& pool, const TensorView& router_logits, const TensorView& bias,
               const RouterParams& params, const TensorView& ids, const TensorView& weights) {
  const int64_t T = router_logits.dim(0), E = router_logits.dim(1);
  const RouteShape shape{E, E / params.num_groups};
  pool.parallel_for(T, 8, [&](int64_t t0, int64_t t1) {
    std::vector<float> score(static_cast<size_t>(E)), choice(static_cast<size_t>(E));
    for (int64_t t = t0; t < t1; ++t) {
      route_token(router_logits.as<float>() + t * E, bias.as<float>(), params, shape, score, choice,
                  ids.as<int32_t>() + t * params.top_k, weights.as<float>() + t * params.top_k);
    }
  });
}

void mark_padding(int64_t active, const TensorView& ids, const TensorView& weights) {
  const int64_t begin = std::clamp<int64_t>(active, 0, ids.dim(0)) * ids.dim(1);
  std::fill(ids.as<int32_t>() + begin, ids.as<int32_t>() + ids.numel(), kNoExpert);
  std::fill(weights.as<float>() + begin, weights.as<float>() + weights.numel(), 0.0f);
}

}  // namespace beam::cpu
