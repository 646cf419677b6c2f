// An engine of several data-parallel replicas (EngineOptions::data_parallel_size, CPU threads):
// every request gets the tokens and logprobs a one-replica engine gives it (the CPU's kernels are
// batch-invariant), the balancer spreads requests over the replicas and a named replica takes its
// own, ids route cancels, the stats add up, and the control calls (flush, weight updates, LoRA,
// pause / resume, sleep / wake) reach every replica; bad sizes and ranks are errors naming them;
// and a stress of requests from several threads with every control call, on one replica and
// several, leaves nothing behind.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <set>
#include <thread>

#include "../model/test_checkpoint_writer.h"
#include "engine_test_util.h"

namespace beam::testing {
namespace {

EngineOptions options_of(int dp, LoadBalance balance = LoadBalance::kRoundRobin) {
  EngineOptions o;
  o.num_threads = 2;
  o.block_size_tokens = 16;
  o.max_tokens_per_step = 64;
  o.kv_budget_bytes = 64 << 20;
  o.data_parallel_size = dp;
  o.load_balance = balance;
  return o;
}

std::unique_ptr<Engine> engine_of(std::shared_ptr<const BeamWeights> weights, EngineOptions o) {
  auto e = Engine::create(std::move(weights), o);
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
  return e.ok() ? std::move(*e) : nullptr;
}

// Greedy and seeded sampled requests with logprobs, two siblings, and a repeated prompt.
std::vector<RunRequest> mixed_requests(int64_t vocab) {
  std::vector<RunRequest> reqs;
  for (int i = 0; i < 5; ++i) {
    RunRequest r{tokens_of(20 + 13 * i, 70 + i, vocab), greedy(12)};
    r.params.logprobs = true;
    r.params.top_logprobs = 2;
    if (i % 2 == 1) {
      r.params.temperature = 0.9f;
      r.params.seed = 300 + i;
      r.params.n = 2;
    }
    reqs.push_back(r);
  }
  reqs.push_back(reqs[0]);
  return reqs;
}

class DataParallelEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    weights_ = engine_test_model("tiny-beam");
    ASSERT_NE(weights_, nullptr);
  }
  int64_t vocab() const { return weights_->config.vocab_size; }
  std::shared_ptr<const BeamWeights> weights_;
};

TEST_F(DataParallelEngine, ReplicasServeWhatOneEngineServes) {
  const std::vector<RunRequest> reqs = mixed_requests(vocab());
  auto one = engine_of(weights_, options_of(1));
  ASSERT_TRUE(one);
  const auto want = run_all(*one, reqs);
  for (LoadBalance balance :
       {LoadBalance::kCacheAware, LoadBalance::kRoundRobin, LoadBalance::kShortestQueue,
        LoadBalance::kMinimumTokens}) {
    SCOPED_TRACE(load_balance_name(balance));
    auto two = engine_of(weights_, options_of(2, balance));
    ASSERT_TRUE(two);
    EXPECT_EQ(two->data_parallel_size(), 2);
    expect_same_results(want, run_all(*two, reqs));
    // Both replicas took requests, and the balancer let go of every one.
    const std::vector<EngineStats> replicas = two->replica_stats();
    ASSERT_EQ(replicas.size(), 2u);
    EXPECT_GT(replicas[0].prompt_tokens, 0);
    EXPECT_GT(replicas[1].prompt_tokens, 0);
    EXPECT_EQ(two->stats().prompt_tokens, replicas[0].prompt_tokens + replicas[1].prompt_tokens);
    EXPECT_EQ(two->stats().generated_tokens,
              replicas[0].generated_tokens + replicas[1].generated_tokens);
    expect_pools_full(*two);
  }
}

// Cache-aware balancing (the default): a conversation's later turns go to the replica that served
// its first, so they hit that replica's prefix cache; other conversations spread over the others.
// Replicas compose with the other engine settings: two replicas of two tensor-parallel ranks each
// (four rank threads) give what one two-rank engine gives, and replicas with the host tier and
// n-gram speculation give what one such engine gives.
TEST_F(DataParallelEngine, ReplicasComposeWithRanksTheHostTierAndSpeculation) {
  const std::vector<RunRequest> reqs = mixed_requests(vocab());
  EngineOptions ranks = options_of(1);
  ranks.tensor_parallel_size = 2;
  EngineOptions extras = options_of(1);
  extras.enable_hierarchical_cache = true;
  extras.speculative.num_draft_tokens = 3;
  for (const EngineOptions& base : {ranks, extras}) {
    SCOPED_TRACE(base.tensor_parallel_size > 1 ? "tensor-parallel ranks" : "host tier + drafts");
    auto one = engine_of(weights_, base);
    EngineOptions two_options = base;
    two_options.data_parallel_size = 2;
    auto two = engine_of(weights_, two_options);
    ASSERT_TRUE(one && two);
    EXPECT_EQ(two->tensor_parallel_size(), base.tensor_parallel_size);
    expect_same_results(run_all(*one, reqs), run_all(*two, reqs));
    EXPECT_GT(two->replica_stats()[1].prompt_tokens, 0);
    expect_pools_full(*two);
  }
}

TEST_F(DataParallelEngine, CacheAwareTurnsFindTheirPrefixes) {
  auto engine = engine_of(weights_, options_of(2, LoadBalance::kCacheAware));
  ASSERT_TRUE(engine);
  std::vector<std::vector<int32_t>> conversations;
  // Three conversations over two replicas: taking turns (round robin, or the shortest queue's
  // rotating ties) would send each conversation's next turn to the other replica.
  for (int c = 0; c < 3; ++c) conversations.push_back(tokens_of(64, 900 + c, vocab()));
  int64_t prompt_tokens = 0;
  for (int turn = 0; turn < 3; ++turn) {
    std::vector<RunRequest> reqs;
    for (std::vector<int32_t>& history : conversations) {
      reqs.push_back(RunRequest{history, greedy(8)});
      prompt_tokens += static_cast<int64_t>(history.size());
    }
    const auto out = run_all(*engine, reqs);
    for (size_t c = 0; c < conversations.size(); ++c) {  // the answer and a new user message
      conversations[c].insert(conversations[c].end(), out[c][0].tokens.begin(),
                              out[c][0].tokens.end());
      const std::vector<int32_t> more = tokens_of(24, 50 * turn + c, vocab());
      conversations[c].insert(conversations[c].end(), more.begin(), more.end());
    }
  }
  const std::vector<EngineStats> replicas = engine->replica_stats();
  EXPECT_GT(replicas[0].prompt_tokens, 0);
  EXPECT_GT(replicas[1].prompt_tokens, 0);
  // Turns 2 and 3 find every full block of the turn before (its prompt and answer): 64, 96 of
  // the 96- and 128-token prompts (16-token blocks; the last token is always computed).
  const EngineStats total = engine->stats();
  EXPECT_EQ(total.prompt_tokens, prompt_tokens);
  EXPECT_EQ(total.cached_prompt_tokens, 3 * (64 + 96));
}

TEST_F(DataParallelEngine, ANamedReplicaTakesTheRequestAndItsCancel) {
  auto engine = engine_of(weights_, options_of(3));
  ASSERT_TRUE(engine);
  std::set<int64_t> ids;
  for (int round = 0; round < 2; ++round) {
    Collector c;
    RunRequest r{tokens_of(24, 5, vocab()), greedy(4)};
    GenerateRequest g = generate_request(r, c.sink());
    g.data_parallel_rank = 2;
    auto id = engine->submit(std::move(g));
    ASSERT_TRUE(id.ok()) << id.error().message;
    ids.insert(id->value);
    engine->wait_idle();
    ASSERT_EQ(c.results().size(), 1u);
    EXPECT_EQ(c.results()[0].tokens.size(), 4u);
  }
  const std::vector<EngineStats> replicas = engine->replica_stats();
  EXPECT_EQ(replicas[0].prompt_tokens, 0);
  EXPECT_EQ(replicas[1].prompt_tokens, 0);
  EXPECT_EQ(replicas[2].prompt_tokens, 48);
  EXPECT_EQ(replicas[2].cached_prompt_tokens, 16);  // the second found the first's full block
  // A long request on replica 1, cancelled through its id.
  Collector long_one;
  RunRequest r{tokens_of(16, 6, vocab()), greedy(100000)};
  r.params.max_tokens = 2000;
  GenerateRequest g = generate_request(r, long_one.sink());
  g.data_parallel_rank = 1;
  auto id = engine->submit(std::move(g));
  ASSERT_TRUE(id.ok());
  EXPECT_TRUE(ids.insert(id->value).second);
  wait_for_output(long_one);
  engine->cancel(*id);
  engine->wait_idle();
  ASSERT_EQ(long_one.results().size(), 1u);
  EXPECT_EQ(long_one.results()[0].finish, FinishReason::kCancelled);
  EXPECT_GT(engine->replica_stats()[1].prompt_tokens, 0);
  expect_pools_full(*engine);
}

TEST_F(DataParallelEngine, ARankThatNamesNoReplicaIsAnError) {
  auto two = engine_of(weights_, options_of(2));
  auto one = engine_of(weights_, options_of(1));
  ASSERT_TRUE(two && one);
  for (int rank : {2, -1}) {
    Collector c;
    GenerateRequest g = generate_request(RunRequest{tokens_of(8, 1, vocab()), greedy(2)}, c.sink());
    g.data_parallel_rank = rank;
    auto id = two->submit(std::move(g));
    ASSERT_FALSE(id.ok());
    EXPECT_NE(id.error().message.find("data_parallel_rank " + std::to_string(rank)),
              std::string::npos)
        << id.error().message;
  }
  Collector c;
  GenerateRequest g = generate_request(RunRequest{tokens_of(8, 1, vocab()), greedy(2)}, c.sink());
  g.data_parallel_rank = 0;  // the one replica of an engine without data parallelism
  EXPECT_TRUE(one->submit(std::move(g)).ok());
  one->wait_idle();
  // A request the replica refuses (a token outside the vocabulary) leaves no load behind.
  for (int i = 0; i < 4; ++i) {
    Collector bad;
    RunRequest r{{static_cast<int32_t>(vocab())}, greedy(2)};
    EXPECT_FALSE(two->submit(generate_request(r, bad.sink())).ok());
  }
  const auto out = run_all(*two, mixed_requests(vocab()));
  EXPECT_EQ(out.size(), 6u);
  EXPECT_GT(two->replica_stats()[0].prompt_tokens, 0);
  EXPECT_GT(two->replica_stats()[1].prompt_tokens, 0);
}

TEST_F(DataParallelEngine, BadSizesAndReplicasThatCannotStartAreErrors) {
  auto zero = Engine::create(weights_, options_of(0));
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.error().message.find("data parallel size 0"), std::string::npos)
      << zero.error().message;
  // A replica that cannot start (no room for its KV pools) fails the engine, naming it; the
  // replicas that did start are stopped.
  EngineOptions tiny = options_of(3);
  tiny.kv_budget_bytes = 1024;
  auto refused = Engine::create(weights_, tiny);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message.rfind("data-parallel replica 0: ", 0), 0u)
      << refused.error().message;
}

// Requests from several threads (siblings, logprobs, routing and hidden-state records, prompt
// logprobs, cancels and stopped siblings, some to a named replica) while a control thread flushes the cache, pauses and
// resumes in every mode, updates the weights and (with sleep mode) sleeps and wakes: every sibling
// still gets its final event (a watchdog aborts after 60 s: a hang), no two requests share an id,
// and every replica ends with nothing held.
// lora_dir: adapters "a" and "b" of that folder loaded, the requests naming "", "a" or "b" while
// the control thread replaces "a" and unloads and reloads "b" (a request naming "b" meanwhile may
// be refused at submit: it then has no events).
void stress(Engine& engine, const std::shared_ptr<const BeamWeights>& weights, bool sleep,
            const std::string& lora_dir = "") {
  const int64_t vocab = weights->config.vocab_size;
  std::atomic<bool> done{false};
  std::thread watchdog([&] {
    for (int i = 0; i < 600 && !done; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!done) {
      ADD_FAILURE() << "requests still unfinished after 60 s";
      std::abort();  // a hang: no later check could run
    }
  });
  constexpr int kThreads = 3, kPerThread = 10;
  std::vector<std::unique_ptr<Collector>> collectors(kThreads * kPerThread);
  std::vector<int64_t> siblings(collectors.size());
  std::vector<int64_t> ids(collectors.size(), -1);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const size_t k = static_cast<size_t>(t * kPerThread + i);
        collectors[k] = std::make_unique<Collector>();
        RunRequest r{tokens_of(6 + (k % 4) * 9, k % 5, vocab), greedy(4 + k % 11)};
        r.params.n = 1 + static_cast<int64_t>(k % 3);
        r.params.logprobs = k % 2 == 0;
        r.return_routed_experts = k % 4 == 0;
        r.return_hidden_states = k % 4 == 1;
        siblings[k] = r.params.n;
        if (!lora_dir.empty()) r.lora_name = k % 3 == 0 ? "" : (k % 3 == 1 ? "a" : "b");
        GenerateRequest g = generate_request(r, collectors[k]->sink());
        if (k % 7 == 2) g.prompt_logprobs = PromptLogprobsOptions{.start = 1, .num_top = 2};
        if (k % 4 == 3) g.data_parallel_rank = static_cast<int>(k % engine.data_parallel_size());
        auto id = engine.submit(std::move(g));
        if (!id.ok() && r.lora_name == "b") {  // unloaded just now
          siblings[k] = 0;
          continue;
        }
        ASSERT_TRUE(id.ok()) << id.error().message;
        ids[k] = id->value;
        if (k % 6 == 1) engine.cancel(*id);
        if (k % 5 == 3) engine.stop_sibling(*id, static_cast<int32_t>(k % 2));
        std::this_thread::sleep_for(std::chrono::milliseconds(k % 3));
      }
    });
  }
  std::thread control([&] {
    engine.flush_prefix_cache();
    for (PauseMode mode : {PauseMode::kKeep, PauseMode::kRetract, PauseMode::kWait}) {
      EXPECT_TRUE(engine.pause(mode, mode == PauseMode::kRetract).ok());
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      EXPECT_TRUE(engine.resume().ok());
    }
    EXPECT_TRUE(engine.update_weights(weights, /*abort_in_flight=*/false).ok());
    if (!lora_dir.empty()) {
      EXPECT_TRUE(engine.load_lora_adapter("a", lora_dir, /*replace=*/true).ok());
      EXPECT_TRUE(engine.unload_lora_adapter("b").ok());
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
      EXPECT_TRUE(engine.load_lora_adapter("b", lora_dir).ok());
    }
    if (sleep) {
      EXPECT_TRUE(engine.sleep(SleepLevel::kOffloadWeights).ok());
      EXPECT_TRUE(engine.wake_up(true, true).ok());
    }
    engine.flush_prefix_cache();
  });
  for (std::thread& t : threads) t.join();
  control.join();
  engine.wait_idle();
  done = true;
  watchdog.join();
  std::set<int64_t> distinct;
  for (size_t k = 0; k < collectors.size(); ++k) {
    const std::vector<SiblingResult> results = collectors[k]->results();
    ASSERT_EQ(static_cast<int64_t>(results.size()), siblings[k]) << "request " << k;
    for (const SiblingResult& r : results) EXPECT_TRUE(r.finish.has_value()) << "request " << k;
    if (ids[k] >= 0) {
      EXPECT_TRUE(distinct.insert(ids[k]).second) << "request " << k;
    }
  }
  expect_pools_full(engine);  // flushes first: each replica's stats are published after it
  for (const EngineStats& r : engine.replica_stats()) {
    EXPECT_EQ(r.running, 0);
    EXPECT_EQ(r.waiting, 0);
    EXPECT_EQ(r.sequence_records, 0);
  }
}

TEST_F(DataParallelEngine, RequestsAndControlCallsTogetherLeaveNothingBehind) {
  for (int dp : {1, 3}) {
    SCOPED_TRACE(::testing::Message() << dp << " replica(s), sleep mode");
    EngineOptions o = options_of(dp, LoadBalance::kCacheAware);
    o.enable_sleep_mode = true;
    auto engine = engine_of(weights_, o);
    ASSERT_TRUE(engine);
    stress(*engine, weights_, /*sleep=*/true);
  }
  for (int dp : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << dp << " replica(s), drafts, host tier, preemption");
    EngineOptions o = options_of(dp, LoadBalance::kShortestQueue);
    o.speculative.num_draft_tokens = 3;
    o.enable_hierarchical_cache = true;
    o.max_running = 4;
    o.kv_budget_bytes = 2 << 20;
    auto engine = engine_of(weights_, o);
    ASSERT_TRUE(engine);
    stress(*engine, weights_, /*sleep=*/false);
  }
  for (int dp : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << dp << " replica(s), DFlash2 drafts, 4-token blocks");
    EngineOptions o = options_of(dp, LoadBalance::kCacheAware);
    o.speculative.dflash2_drafter =
        std::string(BEAMSERVE_SOURCE_DIR) + "/models/tiny-beam-dflash2-trained";
    o.block_size_tokens = 4;
    o.max_running = 6;
    o.kv_budget_bytes = 4 << 20;
    auto engine = engine_of(weights_, o);
    ASSERT_TRUE(engine);
    stress(*engine, weights_, /*sleep=*/false);
  }
  const std::string lora = test::write_lora_adapter(
      "dp_stress_lora", test::servable_lora_modules(weights_->config), 4, 70, 8);
  for (int dp : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << dp << " replica(s), LoRA adapters coming and going");
    EngineOptions o = options_of(dp, LoadBalance::kCacheAware);
    o.max_loras = 1;  // two adapters and the base share one slot: requests wait their turn
    o.max_lora_rank = 8;
    auto engine = engine_of(weights_, o);
    ASSERT_TRUE(engine);
    ASSERT_TRUE(engine->load_lora_adapter("a", lora).ok());
    ASSERT_TRUE(engine->load_lora_adapter("b", lora).ok());
    stress(*engine, weights_, /*sleep=*/false, lora);
  }
}

TEST_F(DataParallelEngine, WeightUpdatesReachEveryReplica) {
  std::shared_ptr<const BeamWeights> next = other_synthetic_weights(weights_->config);
  const std::vector<RunRequest> reqs = mixed_requests(vocab());
  auto fresh = engine_of(next, options_of(1));
  auto engine = engine_of(weights_, options_of(2));
  ASSERT_TRUE(fresh && engine);
  (void)run_all(*engine, reqs);  // both replicas cache prefixes of the old weights
  ASSERT_TRUE(engine->update_weights(next, /*abort_in_flight=*/false).ok());
  expect_same_results(run_all(*fresh, reqs), run_all(*engine, reqs));
}

TEST_F(DataParallelEngine, CpuReplicasShareOneLoadOfTheWeights) {
  std::atomic<int> loads{0};
  std::shared_ptr<const BeamWeights> next = other_synthetic_weights(weights_->config);
  std::shared_ptr<const BeamWeights> current = weights_;
  const RankWeights source = [&](TensorParallel) -> Expected<std::shared_ptr<const BeamWeights>> {
    ++loads;
    return current;
  };
  auto e = Engine::create(source, options_of(3));
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(loads.load(), 1);  // three replicas, one load
  current = next;
  ASSERT_TRUE((*e)->update_weights(source, /*abort_in_flight=*/false).ok());
  EXPECT_EQ(loads.load(), 2);  // the replicas update together from one load
  auto fresh = engine_of(next, options_of(1));
  ASSERT_TRUE(fresh);
  const std::vector<RunRequest> reqs = mixed_requests(vocab());
  expect_same_results(run_all(*fresh, reqs), run_all(**e, reqs));
}

TEST_F(DataParallelEngine, PauseAndResumeReachEveryReplica) {
  auto engine = engine_of(weights_, options_of(2));
  ASSERT_TRUE(engine);
  ASSERT_TRUE(engine->pause(PauseMode::kKeep, /*clear_cache=*/false).ok());
  EXPECT_TRUE(engine->paused());
  std::vector<std::unique_ptr<Collector>> cs;
  for (int d = 0; d < 2; ++d) {
    cs.push_back(std::make_unique<Collector>());
    GenerateRequest g = generate_request(RunRequest{tokens_of(10, 9, vocab()), greedy(3)},
                                         cs.back()->sink());
    g.data_parallel_rank = d;
    ASSERT_TRUE(engine->submit(std::move(g)).ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  for (const auto& c : cs) EXPECT_TRUE(c->results().empty());  // no replica runs a step
  ASSERT_TRUE(engine->resume().ok());
  engine->wait_idle();
  for (const auto& c : cs) {
    ASSERT_EQ(c->results().size(), 1u);
    EXPECT_EQ(c->results()[0].tokens.size(), 3u);
    EXPECT_EQ(c->results()[0].tokens, cs[0]->results()[0].tokens);  // same prompt, same tokens
  }
}

TEST_F(DataParallelEngine, SleepReleasesEveryReplicasPools) {
  EngineOptions o = options_of(2);
  o.enable_sleep_mode = true;
  auto engine = engine_of(weights_, o);
  ASSERT_TRUE(engine);
  const auto before = run_all(*engine, mixed_requests(vocab()));
  ASSERT_TRUE(engine->sleep(SleepLevel::kOffloadWeights).ok());
  const SleepState s = engine->sleep_state();
  EXPECT_TRUE(s.kv_released);
  EXPECT_GT(s.released_bytes, 0);
  // Each replica gave back its pools: at least twice what an idle one-replica engine gives.
  auto single = engine_of(weights_, [] {
    EngineOptions one = options_of(1);
    one.enable_sleep_mode = true;
    return one;
  }());
  ASSERT_TRUE(single);
  ASSERT_TRUE(single->sleep(SleepLevel::kOffloadWeights).ok());
  EXPECT_GE(s.released_bytes, 2 * single->sleep_state().released_bytes);
  ASSERT_TRUE(engine->wake_up(true, true).ok());
  EXPECT_FALSE(engine->sleep_state().asleep());
  expect_same_results(before, run_all(*engine, mixed_requests(vocab())));
}

// Pauses, resumes, sleeps and wake-ups from three threads at once: each call is done on every
// replica or refused as a whole (the busy message, naming no replica), never applied to some
// replicas and refused by others; afterwards every replica serves.
TEST_F(DataParallelEngine, ControlCallsAtOnceNeverLeaveTheReplicasApart) {
  EngineOptions o = options_of(3);
  o.enable_sleep_mode = true;
  auto engine = engine_of(weights_, o);
  ASSERT_TRUE(engine);
  const auto whole = [](const Status& st, const char* busy) {
    EXPECT_EQ(st.ok() ? busy : st.error().message, busy);
  };
  std::vector<std::thread> threads;
  for (PauseMode mode : {PauseMode::kKeep, PauseMode::kRetract}) {
    threads.emplace_back([&, mode] {
      for (int i = 0; i < 200; ++i) {
        whole(engine->pause(mode, /*clear_cache=*/false), "another pause or resume is in progress");
        whole(engine->resume(), "another pause or resume is in progress");
      }
    });
  }
  threads.emplace_back([&] {
    for (int i = 0; i < 100; ++i) {
      whole(engine->sleep(SleepLevel::kOffloadWeights), "another sleep or wake-up is in progress");
      whole(engine->wake_up(true, true), "another sleep or wake-up is in progress");
    }
  });
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(engine->resume().ok());
  ASSERT_TRUE(engine->wake_up(true, true).ok());
  std::vector<std::unique_ptr<Collector>> cs;
  for (int d = 0; d < 3; ++d) {
    cs.push_back(std::make_unique<Collector>());
    GenerateRequest g = generate_request(RunRequest{tokens_of(10, 9, vocab()), greedy(3)},
                                         cs.back()->sink());
    g.data_parallel_rank = d;
    ASSERT_TRUE(engine->submit(std::move(g)).ok());
  }
  engine->wait_idle();
  for (const auto& c : cs) ASSERT_EQ(c->results().size(), 1u);
}

// A sleep that one replica must refuse (requests kept through a pause hold its KV) is refused on
// every replica: none is left asleep, and each serves after the resume.
TEST_F(DataParallelEngine, ASleepOneReplicaRefusesLeavesEveryReplicaAwake) {
  EngineOptions o = options_of(2);
  o.enable_sleep_mode = true;
  auto engine = engine_of(weights_, o);
  ASSERT_TRUE(engine);
  Collector kept;
  GenerateRequest g = generate_request(RunRequest{tokens_of(10, 4, vocab()), greedy(3000)},
                                       kept.sink());
  g.data_parallel_rank = 1;
  auto id = engine->submit(std::move(g));
  ASSERT_TRUE(id.ok());
  while (engine->replica_stats()[1].running == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(engine->pause(PauseMode::kKeep, /*clear_cache=*/false).ok());
  const Status refused = engine->sleep(SleepLevel::kOffloadWeights);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("data-parallel replica 1: requests kept through the pause"),
            std::string::npos)
      << refused.error().message;
  EXPECT_FALSE(engine->sleep_state().asleep());
  ASSERT_TRUE(engine->resume().ok());
  engine->cancel(*id);
  Collector fresh;
  GenerateRequest other = generate_request(RunRequest{tokens_of(10, 9, vocab()), greedy(3)},
                                           fresh.sink());
  other.data_parallel_rank = 0;  // the replica that would have slept
  ASSERT_TRUE(engine->submit(std::move(other)).ok());
  engine->wait_idle();
  ASSERT_EQ(fresh.results().size(), 1u);
  EXPECT_EQ(fresh.results()[0].tokens.size(), 3u);
  // Once the kept request is gone, the sleep goes through on both.
  ASSERT_TRUE(engine->sleep(SleepLevel::kOffloadWeights).ok());
  EXPECT_TRUE(engine->sleep_state().kv_released);
  ASSERT_TRUE(engine->wake_up(true, true).ok());
}

TEST_F(DataParallelEngine, LoraAdaptersLoadOnEveryReplica) {
  const std::string dir = test::write_lora_adapter(
      "dp_lora", test::servable_lora_modules(weights_->config), 4, 50, 8);
  EngineOptions o = options_of(2);
  o.max_loras = 1;
  o.max_lora_rank = 8;
  auto engine = engine_of(weights_, o);
  ASSERT_TRUE(engine);
  ASSERT_TRUE(engine->load_lora_adapter("a", dir).ok());
  // Loading the name again fails on replica 0 and leaves both replicas serving the first.
  const Status again = engine->load_lora_adapter("a", dir);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().message.find("replica 0"), std::string::npos) << again.error().message;
  std::vector<SiblingResult> got;
  for (int d = 0; d < 2; ++d) {
    Collector c;
    RunRequest r{tokens_of(20, 11, vocab()), greedy(6), "a"};
    GenerateRequest g = generate_request(r, c.sink());
    g.data_parallel_rank = d;
    ASSERT_TRUE(engine->submit(std::move(g)).ok());
    engine->wait_idle();
    ASSERT_EQ(c.results().size(), 1u);
    got.push_back(c.results()[0]);
  }
  EXPECT_EQ(got[0].tokens, got[1].tokens);
  ASSERT_TRUE(engine->unload_lora_adapter("a").ok());
  Collector c;
  RunRequest r{tokens_of(20, 11, vocab()), greedy(6), "a"};
  GenerateRequest g = generate_request(r, c.sink());
  g.data_parallel_rank = 1;
  EXPECT_FALSE(engine->submit(std::move(g)).ok());  // gone from replica 1 too
}

}  // namespace
}  // namespace beam::testing
