// Beam search bookkeeping (see beam_search.h).
#include "server/generation/beam_search.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace beam::server {

BeamSearch::BeamSearch(BeamSearchOptions options) : options_(std::move(options)) {
  live_.emplace_back();
}

bool BeamSearch::is_stop(int32_t id) const {
  return std::find(options_.stop_ids.begin(), options_.stop_ids.end(), id) !=
         options_.stop_ids.end();
}

double BeamSearch::score(const Beam& beam) const {
  auto length =
      static_cast<double>(options_.prompt_tokens + static_cast<int64_t>(beam.tokens.size()));
  if (beam.stopped) length -= 1;
  return beam.cum_logprob / std::pow(std::max(length, 1.0), options_.length_penalty);
}

void BeamSearch::advance(const std::vector<TokenLogprobs>& next) {
  BEAM_CHECK(!done() && next.size() == live_.size())
      << "beam search: a step needs one set of alternatives per live beam (" << live_.size()
      << "), got " << next.size();
  std::vector<Beam> grown;
  for (size_t i = 0; i < live_.size(); ++i) {
    const size_t k = std::min(next[i].top.size(), static_cast<size_t>(candidates_per_beam()));
    for (size_t c = 0; c < k; ++c) {
      const TokenLogprob& alt = next[i].top[c];
      Beam b = live_[i];
      b.tokens.push_back(alt.token);
      TokenLogprobs lp;
      lp.chosen = alt;
      lp.chosen_rank = static_cast<int64_t>(c) + 1;
      lp.top = next[i].top;
      b.logprobs.push_back(std::move(lp));
      b.cum_logprob += alt.logprob;
      b.stopped = is_stop(alt.token);
      (b.stopped ? complete_ : grown).push_back(std::move(b));
    }
  }
  std::stable_sort(grown.begin(), grown.end(),
                   [&](const Beam& a, const Beam& b) { return score(a) > score(b); });
  if (static_cast<int64_t>(grown.size()) > options_.width)
    grown.resize(static_cast<size_t>(options_.width));
  live_ = std::move(grown);
  ++steps_;
}

std::vector<Beam> BeamSearch::best() const {
  std::vector<Beam> all = complete_;
  all.insert(all.end(), live_.begin(), live_.end());
  std::stable_sort(all.begin(), all.end(),
                   [&](const Beam& a, const Beam& b) { return score(a) > score(b); });
  if (static_cast<int64_t>(all.size()) > options_.width)
    all.resize(static_cast<size_t>(options_.width));
  return all;
}

}  // namespace beam::server
