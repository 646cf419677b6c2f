// Beam search bookkeeping (vLLM's algorithm): width 1 is greedy, a wider beam keeps the
// extension that pays off later, stop ids complete beams, the score divides by the length
// (prompt included) to the length penalty, and the answer is the W best of complete and live.
#include "server/generation/beam_search.h"

#include <cmath>
#include <map>

#include <gtest/gtest.h>

namespace beam::server {
namespace {

// A toy model: the next-token logprobs after a given sequence (best first).
using Model = std::map<std::vector<int32_t>, std::vector<TokenLogprob>>;

// Runs the search against the model until done; unknown sequences end the search's input.
BeamSearch run(BeamSearchOptions options, const Model& model) {
  BeamSearch search(std::move(options));
  while (!search.done()) {
    std::vector<TokenLogprobs> next;
    for (const Beam& b : search.live()) {
      TokenLogprobs t;
      t.top = model.at(b.tokens);
      next.push_back(std::move(t));
    }
    search.advance(next);
  }
  return search;
}

BeamSearchOptions options(int64_t width, int64_t max_tokens, int64_t prompt_tokens = 0,
                          std::vector<int32_t> stop_ids = {}) {
  BeamSearchOptions o;
  o.width = width;
  o.max_tokens = max_tokens;
  o.prompt_tokens = prompt_tokens;
  o.stop_ids = std::move(stop_ids);
  return o;
}

// After the first token, A looks better (-0.4 against -0.6) but only B continues well.
const Model kTrap = {
    {{}, {{1, -0.4f}, {2, -0.6f}, {3, -3.0f}}},
    {{1}, {{5, -2.0f}, {6, -2.5f}}},
    {{2}, {{7, -0.1f}, {8, -4.0f}}},
    {{3}, {{9, -0.1f}}},
};

TEST(BeamSearch, WidthOneIsGreedy) {
  const BeamSearch s = run(options(1, 2), kTrap);
  const std::vector<Beam> best = s.best();
  ASSERT_EQ(best.size(), 1u);
  EXPECT_EQ(best[0].tokens, (std::vector<int32_t>{1, 5}));
  EXPECT_NEAR(best[0].cum_logprob, -2.4, 1e-6);
  EXPECT_FALSE(best[0].stopped);
}

TEST(BeamSearch, AWiderBeamKeepsTheExtensionThatPaysLater) {
  const BeamSearch s = run(options(2, 2, 3), kTrap);
  const std::vector<Beam> best = s.best();
  ASSERT_EQ(best.size(), 2u);
  EXPECT_EQ(best[0].tokens, (std::vector<int32_t>{2, 7}));
  EXPECT_NEAR(best[0].cum_logprob, -0.7, 1e-6);
  EXPECT_EQ(best[1].tokens, (std::vector<int32_t>{1, 5}));
  // Each token keeps its logprob, its rank among the step's alternatives and the alternatives.
  ASSERT_EQ(best[0].logprobs.size(), 2u);
  EXPECT_EQ(best[0].logprobs[0].chosen.token, 2);
  EXPECT_EQ(best[0].logprobs[0].chosen_rank, 2);
  EXPECT_EQ(best[0].logprobs[0].top.size(), 3u);
  EXPECT_NEAR(s.score(best[0]), -0.7 / 5.0, 1e-6);  // length 3 + 2
}

TEST(BeamSearch, StopIdsCompleteBeamsAndLengthPenaltyWeighsThem) {
  // After 1 the stop id 0 is likely; after 2 the beam goes on at -0.3 a token.
  const Model model = {
      {{}, {{1, -0.5f}, {2, -0.6f}}},
      {{1}, {{0, -0.2f}, {4, -3.0f}}},
      {{2}, {{4, -0.3f}, {0, -3.0f}}},
      {{1, 4}, {{4, -0.3f}, {0, -3.0f}}},
      {{2, 4}, {{4, -0.3f}, {0, -3.0f}}},
      {{2, 4, 4}, {{4, -0.3f}, {0, -3.0f}}},
      {{1, 4, 4}, {{4, -0.3f}, {0, -3.0f}}},
  };
  const BeamSearchOptions base = options(2, 3, 1, {0});
  // No length penalty: the complete [1, 0] (-0.7) beats the longer live beams (-1.2 and more).
  BeamSearchOptions flat = base;
  flat.length_penalty = 0.0;
  std::vector<Beam> best = run(flat, model).best();
  ASSERT_EQ(best.size(), 2u);
  EXPECT_EQ(best[0].tokens, (std::vector<int32_t>{1, 0}));
  EXPECT_TRUE(best[0].stopped);
  EXPECT_EQ(best[1].tokens, (std::vector<int32_t>{2, 4, 4}));
  // A length penalty of 2 favours the long beam: -1.2 / 16 against -0.7 / 4 (the stop id is not
  // counted: length 1 + 2 - 1).
  BeamSearchOptions longer = base;
  longer.length_penalty = 2.0;
  const BeamSearch s = run(longer, model);
  best = s.best();
  EXPECT_EQ(best[0].tokens, (std::vector<int32_t>{2, 4, 4}));
  EXPECT_NEAR(s.score(best[0]), -1.2 / 16.0, 1e-6);
  EXPECT_NEAR(s.score(best[1]), -0.7 / 4.0, 1e-6);
}

// Each step completes a beam (the stop id 0, likelier the later); only the best complete beams
// can be in the answer, whenever they were found.
TEST(BeamSearch, LaterCompleteBeamsDisplaceWorseEarlierOnes) {
  Model model;
  std::vector<int32_t> prefix;
  for (int d = 1; d <= 4; ++d) {
    model[prefix] = {{7, -0.05f}, {0, static_cast<float>(-(1.0 - 0.2 * d))}};
    prefix.push_back(7);
  }
  BeamSearchOptions o = options(2, 4, 0, {0});
  o.length_penalty = 0.0;
  const std::vector<Beam> best = run(o, model).best();
  ASSERT_EQ(best.size(), 2u);
  EXPECT_EQ(best[0].tokens, (std::vector<int32_t>{7, 7, 7, 7}));
  EXPECT_NEAR(best[0].cum_logprob, -0.2, 1e-6);
  EXPECT_EQ(best[1].tokens, (std::vector<int32_t>{7, 7, 7, 0}));
  EXPECT_NEAR(best[1].cum_logprob, -0.35, 1e-6);
  EXPECT_TRUE(best[1].stopped);
}

TEST(BeamSearch, EndsWhenEveryBeamStopped) {
  const Model model = {{{}, {{0, -0.1f}, {9, -0.2f}}}};
  BeamSearch s(options(1, 5, 0, {0, 9}));
  ASSERT_FALSE(s.done());
  TokenLogprobs t;
  t.top = model.at({});
  s.advance({t});
  EXPECT_TRUE(s.done());  // both extensions stopped: nothing live
  const std::vector<Beam> best = s.best();
  ASSERT_EQ(best.size(), 1u);
  EXPECT_EQ(best[0].tokens, std::vector<int32_t>{0});
  EXPECT_EQ(s.candidates_per_beam(), 2);
}

TEST(BeamSearch, NoStepsAnswersTheEmptyBeam) {
  const BeamSearch s(options(3, 0));
  EXPECT_TRUE(s.done());
  const std::vector<Beam> best = s.best();
  ASSERT_EQ(best.size(), 1u);
  EXPECT_TRUE(best[0].tokens.empty());
}

}  // namespace
}  // namespace beam::server
