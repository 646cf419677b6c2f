// Fixture for the GPU forward-pass tests: a CUDA context on GPU 0 (the test skips, saying why, on
// machines without a GPU or builds without the CUDA backend) and models uploaded to it.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>

#include "../model_beam/beam_goldens.h"
#include "../model_beam/beam_test_util.h"
#include "../runtime_engine/engine_test_util.h"
#include "kernels/api/device_memory.h"
#include "model/device_weights.h"
#include "runtime/engine.h"

namespace beam::testing {

// Greedy engine requests for the golden prompts (the reference's max tokens and stop ids).
inline std::vector<RunRequest> greedy_requests(const GreedyGoldens& golden) {
  std::vector<RunRequest> reqs;
  for (const GreedyCase& c : golden.cases) {
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = golden.max_new_tokens;
    p.stop_token_ids = golden.stop_token_ids;
    reqs.push_back(RunRequest{c.prompt_ids, p});
  }
  return reqs;
}

// The engine options of the GPU engine tests: 16-token blocks, a 64 MiB KV budget, 16 sequences.
inline EngineOptions engine_options(Device device) {
  EngineOptions o;
  o.device = device;
  o.num_threads = 2;
  o.block_size_tokens = 16;
  o.kv_budget_bytes = 64 << 20;
  o.max_running = 16;
  return o;
}

class CudaModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto created = create_cuda_context(0);
    if (!created.ok()) GTEST_SKIP() << "no CUDA: " << created.error().message;
    cuda_ = std::move(*created);
    gpu_ = KernelContext{Device::kCuda, &pool_, cuda_.get()};
    cpu_ = KernelContext{Device::kCpu, &pool_};
  }

  // A BeamModel of models/<name> on the GPU (weights uploaded once per test).
  std::unique_ptr<BeamModel> gpu_model(const std::string& name) {
    auto host = load_model(name);
    if (host == nullptr) return nullptr;
    auto uploaded = upload_weights(gpu_, host);
    EXPECT_TRUE(uploaded.ok()) << uploaded.error().message;
    if (!uploaded.ok()) return nullptr;
    EXPECT_GT(uploaded->device_bytes, 0);
    return std::make_unique<BeamModel>(uploaded->weights, gpu_);
  }
  std::unique_ptr<BeamModel> cpu_model(const std::string& name) {
    auto host = load_model(name);
    return host ? std::make_unique<BeamModel>(host, cpu_) : nullptr;
  }

  // The first `n` tokens of t (all of t when shorter).
  static std::vector<int32_t> first(const std::vector<int32_t>& t, int64_t n) {
    return {t.begin(), t.begin() + std::min<int64_t>(n, static_cast<int64_t>(t.size()))};
  }

  ThreadPool pool_{2};
  std::shared_ptr<CudaContext> cuda_;
  KernelContext gpu_, cpu_;
};

}  // namespace beam::testing
