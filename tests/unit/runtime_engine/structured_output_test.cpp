// Constrained decoding in the engine on beam-nano: greedy and sampled outputs (n > 1) are JSON of
// the schema and end with an end token; constrained requests batched give the tokens they give
// alone, also through preemption; the constraint's incompatible options are refused at submit.
#include <gtest/gtest.h>

#include "engine_test_util.h"
#include "runtime/kv_cache/kv_geometry.h"
#include "structured_person.h"

namespace beam::testing {
namespace {

class StructuredOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tok = text::Tokenizer::load(std::string(BEAMSERVE_SOURCE_DIR) + "/models/beam-nano");
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    tok_.emplace(std::move(*tok));
    weights_ = engine_test_model("beam-nano");
    ASSERT_NE(weights_, nullptr);
    constraint_ = person_constraint(*tok_, weights_->config.vocab_size);
  }
  std::unique_ptr<Engine> make(int64_t max_running = 16,
                               std::optional<int64_t> kv_bytes = 64 << 20) {
    EngineOptions o;
    o.num_threads = 2;
    o.max_tokens_per_step = 64;
    o.block_size_tokens = 16;
    o.kv_budget_bytes = kv_bytes;
    o.max_running = max_running;
    auto e = Engine::create(weights_, o);
    EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
    return e.ok() ? std::move(*e) : nullptr;
  }
  RunRequest request(const std::string& prompt, double temperature, int64_t n = 1) {
    auto ids = tok_->encode(prompt, /*allow_special=*/false);
    EXPECT_TRUE(ids.ok());
    RunRequest r;
    r.prompt.assign(ids->begin(), ids->end());
    r.params.temperature = temperature;
    r.params.seed = 7;
    r.params.n = n;
    r.params.max_tokens = 400;
    r.params.constraint = constraint_;
    return r;
  }
  std::optional<text::Tokenizer> tok_;
  std::shared_ptr<const BeamWeights> weights_;
  std::shared_ptr<const OutputConstraint> constraint_;
};

TEST_F(StructuredOutputTest, GreedyAndSampledOutputsAreJsonOfTheSchema) {
  auto e = make();
  auto results = run_all(*e, {request("# a person as JSON\nperson = ", 0),
                              request("def to_json(self):\n    return ", 1.0, 3)});
  ASSERT_EQ(results[0].size(), 1u);
  ASSERT_EQ(results[1].size(), 3u);
  for (const auto& siblings : results)
    for (const SiblingResult& s : siblings) expect_person(*tok_, s.tokens, s.finish);
  EXPECT_NE(results[1][0].tokens, results[1][1].tokens);
  expect_pools_full(*e);
}

TEST_F(StructuredOutputTest, BatchedAndPreemptedRequestsGiveTheirTokensAlone) {
  std::vector<RunRequest> reqs;
  for (int i = 0; i < 6; ++i)
    reqs.push_back(request("x = " + std::to_string(i) + "  # json: ", i % 2 ? 0.8 : 0));
  std::vector<std::vector<int32_t>> alone;
  {
    auto e = make();
    for (const RunRequest& r : reqs) alone.push_back(run_all(*e, {r})[0][0].tokens);
  }
  auto batched = make();
  auto together = run_all(*batched, reqs);
  // A pool too small for all six at once forces preemption and recompute mid-JSON.
  KvGeometry g = *kv_geometry_from_config(weights_->config, 16);
  // (4 sequences x 10 window blocks + a 64-token step's 4 blocks: the sliding pool's live floor.)
  auto small = make(4, 8 * g.bytes_per_block(AttentionKind::kFull) +
                           44 * g.bytes_per_block(AttentionKind::kSliding));
  auto squeezed = run_all(*small, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    expect_person(*tok_, alone[i], FinishReason::kStop);
    EXPECT_EQ(together[i][0].tokens, alone[i]) << "request " << i;
    EXPECT_EQ(squeezed[i][0].tokens, alone[i]) << "request " << i;
  }
  EXPECT_GT(small->stats().preemptions, 0) << "the small pool should have forced preemption";
  expect_pools_full(*batched);
  expect_pools_full(*small);
}

// A GBNF grammar with recursion (nested lists) constrains greedy and sampled outputs the same way:
// each ends with an end token on a whole match of the grammar.
TEST_F(StructuredOutputTest, GreedyAndSampledOutputsMatchAGrammar) {
  const auto c = nested_lists_constraint(*tok_, weights_->config.vocab_size);
  auto e = make();
  RunRequest greedy = request("The answer, as a list: ", 0);
  RunRequest sampled = request("Nested lists of numbers: ", 1.0, 3);
  greedy.params.constraint = sampled.params.constraint = c;
  auto results = run_all(*e, {greedy, sampled});
  ASSERT_EQ(results[1].size(), 3u);
  for (const auto& siblings : results)
    for (const SiblingResult& s : siblings) expect_nested_lists(*tok_, s.tokens, s.finish);
  expect_pools_full(*e);
}

TEST_F(StructuredOutputTest, ConstraintsRefuseIgnoreEosAndMinTokens) {
  auto e = make();
  RunRequest r = request("x", 0);
  r.params.ignore_eos = true;
  auto refused = e->submit(GenerateRequest{r.prompt, r.params, 0, [](TokenEvent&&) {}});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("ignore_eos"), std::string::npos);
  r.params.ignore_eos = false;
  r.params.min_tokens = 3;
  refused = e->submit(GenerateRequest{r.prompt, r.params, 0, [](TokenEvent&&) {}});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("min_tokens"), std::string::npos);
}

}  // namespace
}  // namespace beam::testing
