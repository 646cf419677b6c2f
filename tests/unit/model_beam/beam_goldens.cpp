// Golden file loading (see beam_goldens.h).
#include "beam_goldens.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "beam_test_util.h"

namespace beam::testing {

std::vector<GoldenSequence> load_goldens(const std::string& model) {
  std::string dir = model_path(model) + "/golden/";
  std::ifstream f(dir + "manifest.json");
  EXPECT_TRUE(f.good()) << "missing " << dir << "manifest.json";
  if (!f.good()) return {};
  nlohmann::json manifest = nlohmann::json::parse(f);
  std::vector<GoldenSequence> out;
  for (const auto& s : manifest.at("sequences")) {
    GoldenSequence g;
    g.name = s.at("name");
    g.start_pos = s.at("start_pos");
    if (s.contains("chunk") && s.at("chunk").is_number()) g.chunk = s.at("chunk");
    auto read = [&](const char* key) {
      auto a = read_npy(dir + s.at("files").at(key).get<std::string>());
      EXPECT_TRUE(a.ok()) << (a.ok() ? "" : a.error().message);
      return a.ok() ? *a : NpyArray{};
    };
    NpyArray tokens = read("tokens");
    for (int64_t i = 0; i < tokens.numel(); ++i) g.tokens.push_back(tokens.as<int32_t>()[i]);
    g.logits = read("logits");
    g.experts = read("experts");
    g.margins = read("margins");
    out.push_back(std::move(g));
  }
  return out;
}

GreedyGoldens load_greedy_goldens(const std::string& model) {
  GreedyGoldens g;
  std::ifstream f(model_path(model) + "/golden/greedy.json");
  EXPECT_TRUE(f.good()) << "missing " << model_path(model) << "/golden/greedy.json";
  if (!f.good()) return g;
  auto j = nlohmann::json::parse(f);
  g.max_new_tokens = j.at("decoding").at("max_new_tokens");
  g.stop_token_ids = j.at("decoding").at("stop_token_ids").get<std::vector<int32_t>>();
  for (const auto& c : j.at("cases"))
    g.cases.push_back({c.at("prompt"), c.at("prompt_ids"), c.at("generated_ids"), c.at("generated_text")});
  return g;
}

}  // namespace beam::testing
