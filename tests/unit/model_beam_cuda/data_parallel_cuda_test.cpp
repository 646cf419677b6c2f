// Data parallelism on GPUs (EngineOptions::data_parallel_size): on a machine of one GPU two
// replicas are refused, naming the GPUs they need; with two GPUs (skipped otherwise) replica 1
// runs on GPU 1 and, under --enable-deterministic-inference, every request gets the tokens and
// logprobs of a one-GPU engine bit for bit wherever the balancer or its data_parallel_rank puts
// it; a weight update reaches both GPUs.
#include <gtest/gtest.h>

#include "cuda_model_fixture.h"

namespace beam::testing {
namespace {

EngineOptions replicas_options(int dp) {
  EngineOptions o = engine_options(Device::kCuda);
  o.batch_invariance = BatchInvariance::kAlways;
  o.max_tokens_per_step = 48;
  o.data_parallel_size = dp;
  o.load_balance = LoadBalance::kRoundRobin;
  return o;
}

std::vector<RunRequest> sampled_requests(int64_t vocab) {
  std::vector<RunRequest> reqs;
  for (int i = 0; i < 6; ++i) {
    RunRequest r{tokens_of(18 + 11 * i, 500 + i, vocab), greedy(10)};
    r.params.logprobs = true;
    r.params.top_logprobs = 2;
    if (i % 2 == 1) {
      r.params.temperature = 0.7f;
      r.params.seed = 40 + i;
    }
    reqs.push_back(r);
  }
  return reqs;
}

TEST(DataParallelCuda, OneGpuRefusesTwoReplicasNamingTheGpusTheyNeed) {
  const int gpus = cuda_device_count();
  if (gpus != 1) GTEST_SKIP() << gpus << " GPUs visible (this checks a machine of one)";
  auto weights = engine_test_model("tiny-beam");
  ASSERT_NE(weights, nullptr);
  auto e = Engine::create(weights, replicas_options(2));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("needs 2 GPUs; 1 visible"), std::string::npos)
      << e.error().message;
}

TEST(DataParallelCuda, TwoGpusServeOneGpusTokensBitForBit) {
  const int gpus = cuda_device_count();
  if (gpus < 2) GTEST_SKIP() << gpus << " GPU(s) visible; two replicas need two";
  auto weights = engine_test_model("tiny-beam");
  ASSERT_NE(weights, nullptr);
  const std::vector<RunRequest> reqs = sampled_requests(weights->config.vocab_size);
  auto one = Engine::create(weights, replicas_options(1));
  auto two = Engine::create(weights, replicas_options(2));
  ASSERT_TRUE(one.ok()) << one.error().message;
  ASSERT_TRUE(two.ok()) << two.error().message;
  const auto want = run_all(**one, reqs);
  expect_same_results(want, run_all(**two, reqs));
  const std::vector<EngineStats> replicas = (*two)->replica_stats();
  ASSERT_EQ(replicas.size(), 2u);
  EXPECT_GT(replicas[0].prompt_tokens, 0);
  EXPECT_GT(replicas[1].prompt_tokens, 0);
  // Pinned to GPU 1, each request's tokens equal as well (bit for bit: the same kernels).
  for (size_t i = 0; i < reqs.size(); ++i) {
    Collector c;
    GenerateRequest g = generate_request(reqs[i], c.sink());
    g.data_parallel_rank = 1;
    ASSERT_TRUE((*two)->submit(std::move(g)).ok());
    (*two)->wait_idle();
    ASSERT_EQ(c.results().size(), 1u);
    EXPECT_EQ(c.results()[0].tokens, want[i][0].tokens) << "request " << i;
  }
  // New weights on both GPUs.
  std::shared_ptr<const BeamWeights> next = other_synthetic_weights(weights->config);
  auto fresh = Engine::create(next, replicas_options(1));
  ASSERT_TRUE(fresh.ok()) << fresh.error().message;
  ASSERT_TRUE((*two)->update_weights(next, /*abort_in_flight=*/false).ok());
  expect_same_results(run_all(**fresh, reqs), run_all(**two, reqs));
}

}  // namespace
}  // namespace beam::testing
