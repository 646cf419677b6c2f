// compute_logprobs: a max pass, a top-n pass (a small sorted array: partial selection), a rank
// count and an exp-sum pass; the row is only read.
#include "runtime/sampling/logprobs.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "core/check.h"
#include "runtime/sampling/fast_exp.h"
#include "runtime/sampling/token_candidate.h"
#include "runtime/sampling/vocab_passes.h"

namespace beam {
namespace {

// Keeps the best `capacity` candidates seen so far in rank order (capacity is small: <= 20).
class TopCandidates {
 public:
  explicit TopCandidates(int64_t capacity) : capacity_(static_cast<size_t>(capacity)) {
    best_.reserve(capacity_ + 1);
  }
  void offer(TokenCandidate c) {
    if (capacity_ == 0) return;
    if (best_.size() == capacity_ && !ranks_before(c, best_.back())) return;
    best_.insert(std::upper_bound(best_.begin(), best_.end(), c, ranks_before), c);
    if (best_.size() > capacity_) best_.pop_back();
  }
  const std::vector<TokenCandidate>& best() const { return best_; }

 private:
  size_t capacity_;
  std::vector<TokenCandidate> best_;
};

// log_softmax(logits / T) of one row: its maximum, T (0 → 1), f32(1 / T) and, with_sum, the log
// of the weights' sum exp((v − max) · f32(1 / T)).
struct RowSoftmax {
  float max;
  double t;
  float inv_t;
  double log_sum = 0.0;
  float logprob(float v) const {
    return static_cast<float>((static_cast<double>(v) - max) / t - log_sum);
  }
};

RowSoftmax row_softmax(std::span<const float> logits, double temperature, bool with_sum) {
  BEAM_CHECK(temperature >= 0) << "temperature " << temperature;
  RowSoftmax r;
  r.t = temperature > 0 ? temperature : 1.0;
  r.max = max_value(logits);
  BEAM_CHECK(std::isfinite(r.max)) << "logits row has no finite maximum: " << r.max;
  r.inv_t = static_cast<float>(std::min(1.0 / r.t, static_cast<double>(FLT_MAX)));
  if (with_sum) r.log_sum = std::log(sum_exp(logits, r.max, r.inv_t));  // >= 0: the max term is 1
  return r;
}

}  // namespace

TokenLogprobs compute_logprobs(std::span<const float> logits, int32_t token, double temperature,
                               int64_t num_top) {
  auto vocab = static_cast<int64_t>(logits.size());
  BEAM_CHECK(token >= 0 && token < vocab) << "token " << token << " vocab " << vocab;
  BEAM_CHECK(num_top >= 0 && num_top <= vocab) << "num_top " << num_top;
  const RowSoftmax row = row_softmax(logits, temperature, true);
  TopCandidates top(num_top);
  if (num_top > 0)
    for (int64_t i = 0; i < vocab; ++i) top.offer({logits[i], static_cast<int32_t>(i)});

  // The rank of the chosen token: larger logits, plus equal logits at lower ids.
  const float chosen_logit = logits[token];
  int64_t num_larger = 0;
  for (float v : logits) num_larger += v > chosen_logit ? 1 : 0;
  int64_t num_tied_lower = std::count(logits.begin(), logits.begin() + token, chosen_logit);

  TokenLogprobs out;
  out.chosen = {token, row.logprob(chosen_logit)};
  out.chosen_rank = num_larger + num_tied_lower + 1;
  out.top.reserve(top.best().size());
  for (const TokenCandidate& c : top.best()) out.top.push_back({c.id, row.logprob(c.value)});
  return out;
}

std::vector<TokenLogprob> logprobs_of(std::span<const float> logits,
                                      std::span<const int32_t> ids, double temperature) {
  const RowSoftmax row = row_softmax(logits, temperature, true);
  std::vector<TokenLogprob> out;
  out.reserve(ids.size());
  for (int32_t id : ids) {
    BEAM_CHECK(id >= 0 && static_cast<size_t>(id) < logits.size()) << "token " << id;
    out.push_back({id, row.logprob(logits[static_cast<size_t>(id)])});
  }
  return out;
}

double distribution_entropy(std::span<const float> logits, double temperature) {
  const RowSoftmax row = row_softmax(logits, temperature, false);
  double sum = 0.0, weighted = 0.0;
  for (float v : logits) {
    const float x = (v - row.max) * row.inv_t;
    const float w = exp_nonpositive(x);
    if (w == 0.0f) continue;  // also -inf logits, whose x · w would be NaN
    sum += w;
    weighted += static_cast<double>(w) * static_cast<double>(x);
  }
  return std::max(0.0, std::log(sum) - weighted / sum);
}

}  // namespace beam
