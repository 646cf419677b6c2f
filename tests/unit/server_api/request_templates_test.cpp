// Request chat templates: compiled once per distinct source (the same object comes back), the
// 32 most recent kept, syntax errors a 400 naming chat_template, the model's special tokens kept.
#include "server/api/request_templates.h"

#include <gtest/gtest.h>

namespace beam::server {
namespace {

text::ChatTemplate model_template() {
  nlohmann::ordered_json config = {{"chat_template", "{{ bos_token }}model"},
                                   {"bos_token", "<s>"}};
  return std::move(text::ChatTemplate::from_config(config, std::nullopt, "test").value());
}

TEST(RequestTemplates, CompilesEachSourceOnceAndKeepsTheModelsSpecialTokens) {
  RequestTemplates templates(model_template());
  auto a = templates.get("{{ bos_token }}{{ messages[0].content }}");
  ASSERT_TRUE(a.ok()) << a.error().message;
  auto again = templates.get("{{ bos_token }}{{ messages[0].content }}");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(a->get(), again->get());
  text::ChatTemplateInputs inputs;
  inputs.messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", "hi"}}});
  EXPECT_EQ((*a)->render(inputs).value(), "<s>hi");
}

TEST(RequestTemplates, KeepsTheMostRecentOnes) {
  RequestTemplates templates(std::nullopt);
  auto first = templates.get("0");
  ASSERT_TRUE(first.ok());
  const text::ChatTemplate* kept = first->get();
  for (size_t i = 1; i <= RequestTemplates::kCapacity; ++i)
    ASSERT_TRUE(templates.get(std::to_string(i)).ok());
  auto evicted = templates.get("0");  // compiled again: it had become the least recent
  ASSERT_TRUE(evicted.ok());
  EXPECT_NE(evicted->get(), kept);
}

TEST(RequestTemplates, SyntaxErrorsNameTheField) {
  RequestTemplates templates(std::nullopt);
  auto bad = templates.get("{% for %}");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().param, "chat_template");
}

}  // namespace
}  // namespace beam::server
