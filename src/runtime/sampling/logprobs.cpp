// compute_logprobs: pass 1 finds the max and the top-n (a small sorted array, partial
// selection); pass 2 sums exp in double and counts the tokens ranking before the chosen one.
#include "runtime/sampling/logprobs.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "runtime/sampling/token_candidate.h"

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

  float max_logit = -INFINITY;
  TopCandidates top(num_top);
  for (int64_t i = 0; i < vocab; ++i) {
    float v = logits[i];
    BEAM_CHECK(!std::isnan(v)) << "NaN logit at token " << i;
    max_logit = std::max(max_logit, v);
    top.offer({v, static_cast<int32_t>(i)});
  }
  BEAM_CHECK(std::isfinite(max_logit)) << "logits row has no finite maximum: " << max_logit;

  const TokenCandidate chosen{logits[token], token};
  double sum = 0.0;
  int64_t num_before = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    float v = logits[i];
    sum += std::exp(static_cast<float>((static_cast<double>(v) - max_logit) / t));
    num_before += ranks_before({v, static_cast<int32_t>(i)}, chosen) ? 1 : 0;
  }
  double log_sum = std::log(sum);  // sum >= 1: the max term is exp(0)
  auto logprob_of = [&](float v) {
    return static_cast<float>((static_cast<double>(v) - max_logit) / t - log_sum);
  };

  TokenLogprobs out;
  out.chosen = {token, logprob_of(chosen.value)};
  out.chosen_rank = num_before + 1;
  out.top.reserve(top.best().size());
  for (const TokenCandidate& c : top.best()) out.top.push_back({c.id, logprob_of(c.value)});
  return out;
}

}  // namespace beam
