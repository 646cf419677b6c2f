// Engines built from deferred loads (ExpertCopy::kDeferred, what a GPU engine loads with) and
// from synthetic layouts (--load-format dummy) on the CPU: every rank materializes what it holds
// (rank 0 in open_engine_device, the workers in their build), so one rank and two give a host
// load's tokens, and a dummy engine answers on one rank and two.
#include <gtest/gtest.h>

#include "engine_test_util.h"
#include "model/synthetic_weights.h"

namespace beam::testing {
namespace {

const std::string kTinyBeamDir = std::string(BEAMSERVE_SOURCE_DIR) + "/models/tiny-beam";

std::vector<std::vector<SiblingResult>> run_source(const RankWeights& source, int tp,
                                                   const std::vector<RunRequest>& reqs) {
  EngineOptions o;
  o.num_threads = 2;
  o.tensor_parallel_size = tp;
  auto engine = Engine::create(source, o);
  EXPECT_TRUE(engine.ok()) << engine.error().message;
  if (!engine.ok()) return {};
  return run_all(**engine, reqs);
}

TEST(DeferredLoadEngine, ServesTheHostLoadsTokensOnOneRankAndTwo) {
  auto config = load_beam_config(kTinyBeamDir);
  ASSERT_TRUE(config.ok());
  const std::vector<RunRequest> reqs = {{tokens_of(30, 1, config->vocab_size), greedy(10)},
                                        {tokens_of(7, 2, config->vocab_size), greedy(10)}};
  for (int tp : {1, 2}) {
    SCOPED_TRACE(std::to_string(tp) + " rank(s)");
    const auto host = run_source(load_rank_weights(kTinyBeamDir, "", ExpertCopy::kHost), tp, reqs);
    const auto deferred =
        run_source(load_rank_weights(kTinyBeamDir, "", ExpertCopy::kDeferred), tp, reqs);
    ASSERT_EQ(host.size(), reqs.size());
    ASSERT_EQ(deferred.size(), reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(deferred[i][0].tokens, host[i][0].tokens) << "request " << i;
      EXPECT_EQ(deferred[i][0].tokens.size(), 10u);
    }
    const auto dummy = run_source(synthetic_rank_weights(*config, {}), tp, reqs);
    ASSERT_EQ(dummy.size(), reqs.size());
    EXPECT_EQ(dummy[0][0].tokens.size(), 10u);
  }
}

}  // namespace
}  // namespace beam::testing
