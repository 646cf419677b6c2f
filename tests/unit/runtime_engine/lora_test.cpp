// Per-request LoRA adapters in the engine (Engine::load_lora_adapter, GenerateRequest::lora_name)
// on the CPU: a request's tokens depend only on its own adapter (alone, beside base requests and
// beside other adapters' requests, bit for bit), base requests get the tokens of an engine without
// LoRA, more adapters than slots are all served (requests wait for a slot), the prefix cache never
// crosses adapters, unloading stops new requests while one in flight finishes, and two
// tensor-parallel ranks serve what one rank serves.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "../model/test_checkpoint_writer.h"
#include "engine_test_util.h"

namespace beam::testing {
namespace {

class LoraEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    weights_ = engine_test_model("tiny-beam");
    ASSERT_NE(weights_, nullptr);
    const std::vector<test::AdapterModule> modules = test::servable_lora_modules(weights_->config);
    for (int i = 0; i < 3; ++i)
      adapters_.push_back(test::write_lora_adapter("engine_lora_" + std::to_string(i), modules,
                                                   4 + 2 * i, 50 + 100 * i, 8));
  }

  std::unique_ptr<Engine> make(int max_loras, int64_t max_running = 256, bool experts = false,
                               int max_loaded = 0, int64_t draft_tokens = 0, int ranks = 1) {
    EngineOptions o;
    o.tensor_parallel_size = ranks;
    o.speculative.num_draft_tokens = draft_tokens;
    o.max_loaded_loras = max_loaded;
    o.lora_experts = experts;
    o.max_running = max_running;
    o.num_threads = 2;
    o.block_size_tokens = 16;
    o.max_tokens_per_step = 64;
    o.kv_budget_bytes = 64 << 20;
    o.max_loras = max_loras;
    o.max_lora_rank = 8;
    auto e = Engine::create(weights_, o);
    EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
    return e.ok() ? std::move(*e) : nullptr;
  }

  // Loads adapters_[i] as "a<i>" for each i < count.
  void load(Engine& engine, int count) {
    for (int i = 0; i < count; ++i) {
      const Status st = engine.load_lora_adapter("a" + std::to_string(i), adapters_[i]);
      ASSERT_TRUE(st.ok()) << st.error().message;
    }
  }

  // A fresh engine of max_loras slots with the first `count` adapters loaded.
  std::unique_ptr<Engine> loaded(int max_loras, int count) {
    auto engine = make(max_loras);
    if (engine) load(*engine, count);
    return engine;
  }

  RunRequest request(uint64_t prompt_seed, const std::string& lora, int64_t max_tokens = 10) {
    return RunRequest{tokens_of(30, prompt_seed, weights_->config.vocab_size), greedy(max_tokens),
                      lora};
  }

  // Engine::submit's error for a request naming adapter `lora` ("ok" when it is accepted).
  static std::string submit_error(Engine& engine, const std::string& lora) {
    GenerateRequest g;
    g.prompt = {1, 2, 3};
    g.sampling = greedy(2);
    g.lora_name = lora;
    const auto id = engine.submit(std::move(g));
    return id.ok() ? std::string("ok") : id.error().message;
  }

  std::vector<int32_t> alone(Engine& engine, const RunRequest& r) {
    const auto out = run_all(engine, {r})[0];
    EXPECT_EQ(out[0].finish, FinishReason::kLength);
    return out[0].tokens;
  }

  std::shared_ptr<const BeamWeights> weights_;
  std::vector<std::string> adapters_;
};

TEST_F(LoraEngineTest, EachRequestGetsItsOwnAdaptersTokensWhateverTheBatch) {
  auto engine = loaded(2, 2);
  const RunRequest base = request(1, ""), a0 = request(1, "a0"), a1 = request(1, "a1"),
                   other = request(2, "a0");
  const std::vector<int32_t> want_base = alone(*make(0), base);
  EXPECT_EQ(alone(*engine, base), want_base) << "base requests: an engine without LoRA's tokens";
  const std::vector<int32_t> want_a0 = alone(*loaded(2, 2), a0);
  const std::vector<int32_t> want_a1 = alone(*loaded(2, 2), a1);
  EXPECT_NE(want_a0, want_base);
  EXPECT_NE(want_a1, want_a0);

  // All at once (one batch; shared prompt prefixes only within an adapter).
  const auto mixed = run_all(*engine, {a1, base, a0, other, a0});
  EXPECT_EQ(mixed[0][0].tokens, want_a1);
  EXPECT_EQ(mixed[1][0].tokens, want_base);
  EXPECT_EQ(mixed[2][0].tokens, want_a0);
  EXPECT_EQ(mixed[4][0].tokens, want_a0);
  EXPECT_EQ(mixed[3][0].tokens, alone(*engine, other));
}

// Speculative decodes feed each request's drafts through its own adapter: the tokens equal plain
// decoding's for every adapter and the base model in one batch.
TEST_F(LoraEngineTest, SpeculativeDecodesKeepEachAdaptersTokens) {
  std::vector<RunRequest> reqs;
  for (const std::string lora : {"a0", "", "a1", "a0"}) {
    RunRequest r = request(reqs.size() + 7, lora, 40);
    const std::vector<int32_t> once = r.prompt;  // said twice: drafts have something to copy
    r.prompt.insert(r.prompt.end(), once.begin(), once.end());
    reqs.push_back(r);
  }
  auto plain = loaded(2, 2);
  auto spec = make(2, 256, false, 0, /*draft_tokens=*/4);
  ASSERT_NE(spec, nullptr);
  load(*spec, 2);
  const auto want = run_all(*plain, reqs);
  const auto got = run_all(*spec, reqs);
  for (size_t i = 0; i < reqs.size(); ++i)
    EXPECT_EQ(got[i][0].tokens, want[i][0].tokens) << "request " << i;
  EXPECT_GT(spec->stats().spec_accepted_tokens, 0);
}

// An adapter with routed-expert modules needs slots that serve the experts (--lora-experts); there,
// its requests get the expert deltas (other tokens than the same adapter without them) whatever
// the batch.
TEST_F(LoraEngineTest, ExpertAdaptersAreServedBySlotsThatServeExperts) {
  std::vector<test::AdapterModule> modules = test::servable_lora_modules(weights_->config);
  const std::vector<test::AdapterModule> experts = test::expert_lora_modules(weights_->config);
  modules.insert(modules.end(), experts.begin(), experts.end());
  const std::string dir = test::write_lora_adapter("engine_lora_experts", modules, 4, 50, 8);
  const std::string refused = make(1)->load_lora_adapter("x", dir).error().message;
  EXPECT_NE(refused.find("is a routed expert's weight: serve expert LoRA per request with "
                         "--lora-experts"),
            std::string::npos)
      << refused;

  auto engine = make(2, 256, true);
  ASSERT_TRUE(engine->load_lora_adapter("x", dir).ok());
  ASSERT_TRUE(engine->load_lora_adapter("a0", adapters_[0]).ok());  // adapters_[0] without experts
  const RunRequest x = request(1, "x"), a0 = request(1, "a0"), base = request(1, "");
  const std::vector<int32_t> want_x = alone(*engine, x);
  EXPECT_NE(want_x, alone(*engine, a0));
  const auto mixed = run_all(*engine, {a0, x, base, x});
  EXPECT_EQ(mixed[1][0].tokens, want_x);
  EXPECT_EQ(mixed[3][0].tokens, want_x);
  EXPECT_EQ(mixed[2][0].tokens, alone(*make(0), base));
}

// Two tensor-parallel ranks (CPU threads) serve per-request LoRA as one rank does: each holds
// its rows of the column-parallel modules' lora_B, o_proj's and the dense down's factors whole
// (their inputs gathered from both ranks) and its routed experts' factors. The split sums partials
// in another fp32 order (TensorParallelEngine's tolerance): the tokens agree and the logprobs
// stay within a few hundredths, nearly all within 1e-3.
TEST_F(LoraEngineTest, TwoTensorParallelRanksServeEachAdapterAsOneRankDoes) {
  std::vector<test::AdapterModule> modules = test::servable_lora_modules(weights_->config);
  const std::vector<test::AdapterModule> experts = test::expert_lora_modules(weights_->config);
  modules.insert(modules.end(), experts.begin(), experts.end());
  const std::string dir = test::write_lora_adapter("engine_lora_tp", modules, 4, 70, 8);
  std::vector<RunRequest> reqs = {request(1, "x"), request(2, "a0"), request(3, ""), request(4, "x")};
  for (RunRequest& r : reqs) r.params.logprobs = true;
  std::vector<std::vector<std::vector<SiblingResult>>> out;
  for (int ranks : {1, 2}) {
    auto engine = make(2, 256, /*experts=*/true, 0, 0, ranks);
    ASSERT_NE(engine, nullptr);
    ASSERT_TRUE(engine->load_lora_adapter("x", dir).ok());
    ASSERT_TRUE(engine->load_lora_adapter("a0", adapters_[0]).ok());
    out.push_back(run_all(*engine, reqs));
  }
  const auto& want = out[0];
  const auto& got = out[1];
  EXPECT_NE(want[0][0].tokens, want[2][0].tokens);  // the adapter changes the tokens
  int64_t close = 0, total = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "request " << i);
    EXPECT_EQ(got[i][0].tokens, want[i][0].tokens);
    ASSERT_EQ(got[i][0].logprobs.size(), want[i][0].logprobs.size());
    for (size_t t = 0; t < got[i][0].logprobs.size(); ++t) {
      const float a = got[i][0].logprobs[t].chosen.logprob, b = want[i][0].logprobs[t].chosen.logprob;
      EXPECT_NEAR(a, b, 0.1) << t;
      close += std::fabs(a - b) <= 1e-3f;
      ++total;
    }
  }
  EXPECT_GE(close, total * 9 / 10) << close << " of " << total << " logprobs within 1e-3";
}

TEST_F(LoraEngineTest, MoreAdaptersThanSlotsAreAllServed) {
  auto engine = loaded(1, 3);
  std::vector<RunRequest> reqs;
  for (int round = 0; round < 2; ++round)
    for (int i = 0; i < 3; ++i) reqs.push_back(request(10 + i, "a" + std::to_string(i), 6));
  const auto out = run_all(*engine, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(out[i][0].finish, FinishReason::kLength);
    EXPECT_EQ(out[i][0].tokens, alone(*loaded(1, 3), reqs[i]));
  }
}

// One slot, six sequences running at a time, a stream of adapter a0's requests and one of a1's
// behind the first two: once a1's request has waited its anti-starvation steps, a0's newer
// requests are held back until a0's slot frees, so it finishes long before the stream ends.
TEST_F(LoraEngineTest, AnAdapterWaitingForASlotIsNotStarvedByABusyOne) {
  auto engine = make(1, /*max_running=*/6);
  load(*engine, 2);
  // Every request queued before the first step (paused), so the order does not depend on timing.
  ASSERT_TRUE(engine->pause(PauseMode::kKeep, /*clear_cache=*/false).ok());
  std::mutex mu;
  std::vector<int> finish_order;  // request indices, in the order they finished
  std::vector<std::unique_ptr<Collector>> collectors;
  constexpr int kRequests = 80, kStarved = 6;
  for (int i = 0; i < kRequests; ++i) {
    // Lengths staggered so that a0's running sequences do not all finish in one step.
    const RunRequest r =
        request(100 + i, i == kStarved ? "a1" : "a0", i == kStarved ? 3 : 5 + (7 * i) % 16);
    collectors.push_back(std::make_unique<Collector>());
    GenerateRequest g;
    g.prompt = r.prompt;
    g.sampling = r.params;
    g.lora_name = r.lora_name;
    g.sink = [inner = collectors.back()->sink(), &mu, &finish_order, i](TokenEvent&& ev) {
      if (ev.finish) {
        std::lock_guard<std::mutex> lock(mu);
        finish_order.push_back(i);
      }
      inner(std::move(ev));
    };
    ASSERT_TRUE(engine->submit(std::move(g)).ok());
  }
  ASSERT_TRUE(engine->resume().ok());
  engine->wait_idle();
  ASSERT_EQ(finish_order.size(), static_cast<size_t>(kRequests));
  for (const auto& c : collectors) EXPECT_EQ(c->results()[0].finish, FinishReason::kLength);
  const auto at =
      std::find(finish_order.begin(), finish_order.end(), kStarved) - finish_order.begin();
  EXPECT_LT(at, kRequests / 2) << "a1's request finished " << at + 1 << "th of " << kRequests;
  std::printf("a1's request finished %lldth of %d\n", static_cast<long long>(at + 1), kRequests);
}

TEST_F(LoraEngineTest, PrefixCacheNeverCrossesAdapters) {
  auto engine = loaded(2, 2);
  const auto cached = [&](const std::string& lora) {
    return run_all(*engine, {request(5, lora, 2)})[0][0].usage.cached_prompt_tokens;
  };
  EXPECT_EQ(cached("a0"), 0);
  EXPECT_GT(cached("a0"), 0);  // the same adapter reuses its prompt
  EXPECT_EQ(cached(""), 0);
  EXPECT_EQ(cached("a1"), 0);
  // A name loaded again is another adapter: nothing cached under the old one is reused.
  ASSERT_TRUE(engine->unload_lora_adapter("a0").ok());
  ASSERT_TRUE(engine->load_lora_adapter("a0", adapters_[2]).ok());
  EXPECT_EQ(cached("a0"), 0);
  EXPECT_EQ(run_all(*engine, {request(5, "a0")})[0][0].tokens, [&] {
    auto fresh = make(1);
    EXPECT_TRUE(fresh->load_lora_adapter("a0", adapters_[2]).ok());
    return alone(*fresh, request(5, "a0"));
  }());
}

TEST_F(LoraEngineTest, UnloadStopsNewRequestsAndLetsOnesInFlightFinish) {
  auto engine = loaded(1, 1);
  const RunRequest long_one = request(7, "a0", 40);
  Collector in_flight;
  submit(*engine, long_one, &in_flight);
  wait_for_output(in_flight);
  ASSERT_TRUE(engine->unload_lora_adapter("a0").ok());
  EXPECT_EQ(submit_error(*engine, "a0"), "no LoRA adapter named 'a0' is loaded");
  engine->wait_idle();
  const auto done = in_flight.results();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].finish, FinishReason::kLength);
  EXPECT_EQ(done[0].tokens, alone(*loaded(1, 1), long_one));
  EXPECT_TRUE(engine->lora_adapters().empty());
  EXPECT_FALSE(engine->unload_lora_adapter("a0").ok());
}

// vLLM's load_inplace for RL loops: the name then serves the new adapter (as a fresh engine
// would, reusing nothing cached under the old one) while a request holding the old one finishes
// with it.
TEST_F(LoraEngineTest, ReplacingAnAdapterInPlaceServesTheNewOne) {
  auto engine = loaded(1, 1);
  const RunRequest long_one = request(7, "a0", 40), r = request(8, "a0");
  EXPECT_EQ(alone(*engine, r), alone(*loaded(1, 1), r));  // r's prompt is now cached under a0
  Collector in_flight;
  submit(*engine, long_one, &in_flight);
  wait_for_output(in_flight);
  ASSERT_TRUE(engine->load_lora_adapter("a0", adapters_[1], /*replace=*/true).ok());
  const auto replaced = run_all(*engine, {r})[0][0];
  auto fresh = make(1);
  ASSERT_TRUE(fresh->load_lora_adapter("a0", adapters_[1]).ok());
  EXPECT_EQ(replaced.tokens, alone(*fresh, r));
  EXPECT_EQ(replaced.usage.cached_prompt_tokens, 0);
  engine->wait_idle();
  EXPECT_EQ(in_flight.results()[0].tokens, alone(*loaded(1, 1), long_one));
  ASSERT_EQ(engine->lora_adapters().size(), 1u);
  EXPECT_EQ(engine->lora_adapters()[0].path, adapters_[1]);
}

TEST_F(LoraEngineTest, LoadErrorsNameTheProblem) {
  auto engine = loaded(1, 1);
  const auto message = [&](const std::string& name, const std::string& dir) {
    const Status st = engine->load_lora_adapter(name, dir);
    return st.ok() ? std::string("ok") : st.error().message;
  };
  EXPECT_EQ(message("a0", adapters_[1]),
            "a LoRA adapter named 'a0' is already loaded (load_inplace replaces it)");
  EXPECT_EQ(message("", adapters_[1]), "lora_name: must not be empty");
  EXPECT_NE(message("x", "/nonexistent").find("/nonexistent/adapter_config.json"),
            std::string::npos);
  const BeamConfig& c = weights_->config;
  const std::string big =
      test::write_lora_adapter("engine_lora_big", {test::servable_lora_modules(c)[0]}, 16, 9);
  EXPECT_NE(message("big", big).find("has rank 16, above the server's max LoRA rank 8"),
            std::string::npos);
  ASSERT_EQ(engine->lora_adapters().size(), 1u);
  EXPECT_EQ(engine->lora_adapters()[0].name, "a0");
  EXPECT_EQ(engine->lora_adapters()[0].path, adapters_[0]);

  // Without slots, adapters are refused at load and by name in requests.
  auto plain = make(0);
  EXPECT_EQ(plain->load_lora_adapter("a0", adapters_[0]).error().message,
            "the engine serves no LoRA adapters (start it with max_loras >= 1)");
  EXPECT_EQ(
      submit_error(*plain, "a0"),
      "lora: the engine serves no LoRA adapters (its max_loras is 0), so 'a0' cannot be used");
}

// With max_loaded_loras (SGLang's --max-loaded-loras) a new name past the cap is refused, naming
// it, while replacing a loaded adapter in place is not; an unload makes room. A cap below
// max_loras is refused at start.
TEST_F(LoraEngineTest, LoadsPastMaxLoadedLorasAreRefusedUntilOneIsUnloaded) {
  auto engine = make(1, 256, false, 2);
  ASSERT_NE(engine, nullptr);
  load(*engine, 2);
  const Status full = engine->load_lora_adapter("a2", adapters_[2]);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().message,
            "cannot load LoRA adapter 'a2': 2 adapters are loaded, the most max_loaded_loras "
            "(--max-loaded-loras) allows; unload one first");
  EXPECT_EQ(submit_error(*engine, "a2"), "no LoRA adapter named 'a2' is loaded");
  EXPECT_TRUE(engine->load_lora_adapter("a0", adapters_[2], /*replace=*/true).ok());
  ASSERT_TRUE(engine->unload_lora_adapter("a1").ok());
  ASSERT_TRUE(engine->load_lora_adapter("a2", adapters_[2]).ok());
  EXPECT_EQ(engine->lora_adapters().size(), 2u);
  // Both loaded adapters serve tokens: a0 (now adapters_[2]'s factors) as a2 does.
  EXPECT_EQ(alone(*engine, request(7, "a0")), alone(*engine, request(7, "a2")));

  EngineOptions o;
  o.max_loras = 2;
  o.max_loaded_loras = 1;
  o.kv_budget_bytes = 64 << 20;
  const auto below = Engine::create(weights_, o);
  ASSERT_FALSE(below.ok());
  EXPECT_EQ(below.error().message,
            "engine: max_loaded_loras 1 must be 0 (any number) or at least max_loras 2");
}

}  // namespace
}  // namespace beam::testing
