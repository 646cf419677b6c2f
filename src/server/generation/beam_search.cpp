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

double BeamSearch::score_of(size_t tokens, double cum_logprob, bool stopped) const {
  auto length = static_cast<double>(options_.prompt_tokens + static_cast<int64_t>(tokens));
  if (stopped) length -= 1;
  return cum_logprob / std::pow(std::max(length, 1.0), options_.length_penalty);
}

double BeamSearch::score(const Beam& beam) const {
  return score_of(beam.tokens.size(), beam.cum_logprob, beam.stopped);
}

void BeamSearch::advance(const std::vector<TokenLogprobs>& next) {
  BEAM_CHECK(!done() && next.size() == live_.size())
      << "beam search: a step needs one set of alternatives per live beam (" << live_.size()
      << "), got " << next.size();
  // Extensions are ranked before any is built: only the kept ones copy their beam's history.
  struct Extension {
    size_t beam, rank;  // live_[beam] grown by next[beam].top[rank]
    double cum_logprob, score;
    bool stopped;
  };
  std::vector<Extension> grown, stopped;
  for (size_t i = 0; i < live_.size(); ++i) {
    const size_t k = std::min(next[i].top.size(), static_cast<size_t>(candidates_per_beam()));
    for (size_t c = 0; c < k; ++c) {
      const TokenLogprob& alt = next[i].top[c];
      Extension e{i, c, live_[i].cum_logprob + alt.logprob, 0.0, is_stop(alt.token)};
      e.score = score_of(live_[i].tokens.size() + 1, e.cum_logprob, e.stopped);
      (e.stopped ? stopped : grown).push_back(e);
    }
  }
  const auto better = [](const Extension& a, const Extension& b) { return a.score > b.score; };
  std::stable_sort(grown.begin(), grown.end(), better);
  if (static_cast<int64_t>(grown.size()) > options_.width)
    grown.resize(static_cast<size_t>(options_.width));
  auto build = [&](const Extension& e) {
    Beam b = live_[e.beam];
    const TokenLogprob& alt = next[e.beam].top[e.rank];
    b.tokens.push_back(alt.token);
    TokenLogprobs lp;
    lp.chosen = alt;
    lp.chosen_rank = static_cast<int64_t>(e.rank) + 1;
    lp.top = next[e.beam].top;
    b.logprobs.push_back(std::move(lp));
    b.cum_logprob = e.cum_logprob;
    b.stopped = e.stopped;
    return b;
  };
  // Complete beams never change score: only the W best can be in the answer. Each joins after
  // those of equal score found before it.
  for (const Extension& e : stopped) {
    auto at = std::find_if(complete_.begin(), complete_.end(),
                           [&](const Beam& c) { return score(c) < e.score; });
    if (at - complete_.begin() >= options_.width) continue;
    complete_.insert(at, build(e));
    if (static_cast<int64_t>(complete_.size()) > options_.width) complete_.pop_back();
  }
  std::vector<Beam> kept;
  for (const Extension& e : grown) kept.push_back(build(e));
  live_ = std::move(kept);
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
