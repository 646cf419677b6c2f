// Engine::read_weight (SGLang's get_weights_by_name) on the CPU: a served tensor's first rows,
// gathered from two tensor-parallel ranks as from one, follow an update_weights; unknown names
// are errors naming them and leave the engine serving.
#include <gtest/gtest.h>

#include <thread>

#include "engine_test_util.h"
#include "model/weight_locator.h"

namespace beam::testing {
namespace {

// Rows [0, rows) of the served tensor `name` of host weights w (one rank: w's own layout).
std::vector<float> host_rows(const BeamWeights& w, const std::string& name, int64_t rows) {
  ThreadPool pool(1);
  auto part = read_weight_part(KernelContext{Device::kCpu, &pool}, w, {0, 1}, name, rows);
  EXPECT_TRUE(part.ok()) << part.error().message;
  return part.ok() ? part->values : std::vector<float>{};
}

TEST(EngineWeightRead, GathersRanksAndFollowsUpdates) {
  auto weights = engine_test_model("tiny-beam");
  ASSERT_NE(weights, nullptr);
  const std::vector<std::string> names = {
      "model.layers.2.self_attn.o_proj.weight", "model.layers.0.mlp.down_proj.weight",
      "model.layers.3.mlp.experts.12.gate_proj.weight", "lm_head.weight",
      "model.layers.1.self_attn.gate_bias"};
  for (int tp : {1, 2}) {
    SCOPED_TRACE(std::to_string(tp) + " rank(s)");
    std::unique_ptr<Engine> engine;
    if (tp == 1) {
      engine = control_test_engine(weights, /*sleep_mode=*/false);
    } else {
      EngineOptions o;
      o.num_threads = 2;
      o.tensor_parallel_size = tp;
      auto created = Engine::create(weights, o);
      ASSERT_TRUE(created.ok()) << created.error().message;
      engine = std::move(*created);
    }
    for (const std::string& name : names) {
      auto got = engine->read_weight(name, 2);
      ASSERT_TRUE(got.ok()) << name << ": " << got.error().message;
      EXPECT_EQ(got->shape[0], 2) << name;
      EXPECT_EQ(got->values, host_rows(*weights, name, 2)) << name;
    }
    auto bad = engine->read_weight("model.layers.9.input_layernorm.weight", 1);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("layer 9 of a model of 6"), std::string::npos);
    auto other = other_synthetic_weights(weights->config);
    ASSERT_TRUE(engine->update_weights(other, /*abort_in_flight=*/false).ok());
    auto updated = engine->read_weight(names[0], 1);
    ASSERT_TRUE(updated.ok());
    EXPECT_EQ(updated->values, host_rows(*other, names[0], 1));
  }
}

// Readers at once take turns: every read answers, with its own tensor's values.
TEST(EngineWeightRead, ConcurrentReadersEachGetTheirOwnValues) {
  auto weights = engine_test_model("tiny-beam");
  ASSERT_NE(weights, nullptr);
  auto engine = control_test_engine(weights, /*sleep_mode=*/false);
  const std::vector<std::string> names = {"model.layers.1.self_attn.q_proj.weight",
                                          "model.layers.4.mlp.experts.3.up_proj.weight",
                                          "model.norm.weight", "lm_head.weight"};
  std::vector<std::thread> readers;
  std::vector<int> good(names.size() * 8, 0);
  for (size_t i = 0; i < good.size(); ++i)
    readers.emplace_back([&, i] {
      const std::string& name = names[i % names.size()];
      auto got = engine->read_weight(name, 2);
      good[i] = got.ok() && got->values == host_rows(*weights, name, 2);
    });
  for (std::thread& t : readers) t.join();
  for (size_t i = 0; i < good.size(); ++i) EXPECT_TRUE(good[i]) << "reader " << i;
}

}  // namespace
}  // namespace beam::testing
