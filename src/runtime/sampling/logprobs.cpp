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

}  // namespace

TokenLogprobs compute_logprobs(std::span<const float> logits, int32_t token, double temperature,
                               int64_t num_top) {
  auto vocab = static_cast<int64_t>(logits.size());
  BEAM_CHECK(token >= 0 && token < vocab) << "token " << token << " vocab " << vocab;
  BEAM_CHECK(num_top >= 0 && num_top <= vocab) << "num_top " << num_top;
  BEAM_CHECK(temperature >= 0) << "temperature " << temperature;
  double t = temperature > 0 ? temperature : 1.0;

  const float max_logit = max_value(logits);
  BEAM_CHECK(std::isfinite(max_logit)) << "logits row has no finite maximum: " << max_logit;
  TopCandidates top(num_top);
  if (num_top > 0)
    for (int64_t i = 0; i < vocab; ++i) top.offer({logits[i], static_cast<int32_t>(i)});

  // The rank of the chosen token: larger logits, plus equal logits at lower ids.
  const float chosen_logit = logits[token];
  int64_t num_larger = 0;
  for (float v : logits) num_larger += v > chosen_logit ? 1 : 0;
  int64_t num_tied_lower = std::count(logits.begin(), logits.begin() + token, chosen_logit);

  auto inv_t = static_cast<float>(std::min(1.0 / t, static_cast<double>(FLT_MAX)));
  double log_sum = std::log(sum_exp(logits, max_logit, inv_t));  // >= 0: the max term is 1
  auto logprob_of = [&](float v) {
    return static_cast<float>((static_cast<double>(v) - max_logit) / t - log_sum);
  };

  TokenLogprobs out;
  out.chosen = {token, logprob_of(chosen_logit)};
  out.chosen_rank = num_larger + num_tied_lower + 1;
  out.top.reserve(top.best().size());
  for (const TokenCandidate& c : top.best()) out.top.push_back({c.id, logprob_of(c.value)});
  return out;
}

std::vector<TokenLogprob> logprobs_of(std::span<const float> logits,
                                      std::span<const int32_t> ids, double temperature) {
  BEAM_CHECK(temperature >= 0) << "temperature " << temperature;
  const double t = temperature > 0 ? temperature : 1.0;
  const float max_logit = max_value(logits);
  BEAM_CHECK(std::isfinite(max_logit)) << "logits row has no finite maximum: " << max_logit;
  const auto inv_t = static_cast<float>(std::min(1.0 / t, static_cast<double>(FLT_MAX)));
  const double log_sum = std::log(sum_exp(logits, max_logit, inv_t));
  std::vector<TokenLogprob> out;
  out.reserve(ids.size());
  for (int32_t id : ids) {
    BEAM_CHECK(id >= 0 && static_cast<size_t>(id) < logits.size()) << "token " << id;
    out.push_back({id, static_cast<float>((static_cast<double>(logits[static_cast<size_t>(id)]) -
                                           max_logit) / t - log_sum)});
  }
  return out;
}

double distribution_entropy(std::span<const float> logits, double temperature) {
  BEAM_CHECK(temperature >= 0) << "temperature " << temperature;
  const double t = temperature > 0 ? temperature : 1.0;
  const float max_logit = max_value(logits);
  BEAM_CHECK(std::isfinite(max_logit)) << "logits row has no finite maximum: " << max_logit;
  const auto inv_t = static_cast<float>(std::min(1.0 / t, static_cast<double>(FLT_MAX)));
  double sum = 0.0, weighted = 0.0;
  for (float v : logits) {
    const float x = (v - max_logit) * inv_t;
    const float w = exp_nonpositive(x);
    if (w == 0.0f) continue;  // also -inf logits, whose x · w would be NaN
    sum += w;
    weighted += static_cast<double>(w) * static_cast<double>(x);
  }
  return std::max(0.0, std::log(sum) - weighted / sum);
}

}  // namespace beam
