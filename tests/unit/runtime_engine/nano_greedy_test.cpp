// beam-nano on the C++ engine reproduces the reference's greedy continuations of five held-out
// function headers (models/beam-nano/golden/greedy.json), from the prompt text through the
// tokenizer, alone and all five batched together.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine_test_util.h"
#include "text/tokenizer.h"

namespace beam::testing {
namespace {

struct GreedyCase {
  std::string prompt;
  std::vector<int32_t> prompt_ids, generated_ids;
  std::string generated_text;
};

std::vector<GreedyCase> load_cases(int64_t* max_new_tokens, std::vector<int32_t>* stop_ids) {
  std::ifstream f(std::string(BEAMSERVE_SOURCE_DIR) + "/models/beam-nano/golden/greedy.json");
  EXPECT_TRUE(f.good());
  if (!f.good()) return {};
  auto j = nlohmann::json::parse(f);
  *max_new_tokens = j.at("decoding").at("max_new_tokens");
  *stop_ids = j.at("decoding").at("stop_token_ids").get<std::vector<int32_t>>();
  std::vector<GreedyCase> out;
  for (const auto& c : j.at("cases"))
    out.push_back({c.at("prompt"), c.at("prompt_ids"), c.at("generated_ids"), c.at("generated_text")});
  return out;
}

TEST(NanoGreedy, EngineReproducesReferenceContinuations) {
  int64_t max_new = 0;
  std::vector<int32_t> stop_ids;
  auto cases = load_cases(&max_new, &stop_ids);
  ASSERT_EQ(cases.size(), 5u);
  auto tok = text::Tokenizer::load(std::string(BEAMSERVE_SOURCE_DIR) + "/models/beam-nano");
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  auto weights = engine_test_model("beam-nano");
  ASSERT_NE(weights, nullptr);
  EngineOptions o;
  o.num_threads = 2;
  o.block_size_tokens = 16;
  o.kv_budget_bytes = 64 << 20;
  o.max_running = 16;
  auto engine = Engine::create(weights, o);
  ASSERT_TRUE(engine.ok()) << engine.error().message;

  std::vector<RunRequest> reqs;
  for (const auto& c : cases) {
    auto ids = tok->encode(c.prompt, /*allow_special=*/false);
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(*ids, c.prompt_ids) << "tokenizer disagrees on " << c.prompt;
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = max_new;
    p.stop_token_ids = stop_ids;
    reqs.push_back(RunRequest{c.prompt_ids, p});
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    auto alone = run_all(**engine, {reqs[i]})[0][0];
    EXPECT_EQ(alone.tokens, cases[i].generated_ids) << "case " << i << ": " << cases[i].prompt;
    auto text = tok->decode(alone.tokens, /*skip_special=*/true);
    ASSERT_TRUE(text.ok());
    EXPECT_EQ(*text, cases[i].generated_text);
  }
  auto batched = run_all(**engine, reqs);
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_EQ(batched[i][0].tokens, cases[i].generated_ids) << "case " << i << " batched";
  expect_pools_full(**engine);
}

}  // namespace
}  // namespace beam::testing
