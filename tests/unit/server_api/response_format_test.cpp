// Where constrained output starts (make_output_constraint): a Hermes-style <think> model by what
// the rendered prompt left open, a channel template (Beam's layout) after its answer header.
#include "server/api/response_format.h"

#include <gtest/gtest.h>

#include <fstream>

#include "server/api/served_model.h"
#include "server/parsers/builtin_templates.h"
#include "server/parsers/response_template.h"

namespace beam::server {
namespace {

ServedModel nano_with(std::shared_ptr<const ResponseTemplate> response_template) {
  ServedModel m;
  auto tok = text::Tokenizer::load("models/beam-nano");
  EXPECT_TRUE(tok.ok()) << tok.error().message;
  m.tokenizer.emplace(std::move(*tok));
  m.structured_vocab = build_structured_vocab(*m.tokenizer, m.tokenizer->vocab_size());
  m.response_template = std::move(response_template);
  return m;
}

std::shared_ptr<const ResponseTemplate> fixture_template(const std::string& name) {
  std::ifstream in("tests/data/response_templates/" + name + ".json");
  EXPECT_TRUE(in.good()) << name;
  auto t = load_response_template(Json::parse(in)["template"]);
  EXPECT_TRUE(t.ok()) << t.error().message;
  return t.ok() ? *t : nullptr;
}

ResponseFormat json_object() {
  ResponseFormat f;
  f.kind = ResponseFormat::Kind::kJsonObject;
  f.grammar = JsonGrammar::any_object();
  return f;
}

std::shared_ptr<const OutputConstraint> constraint(const ServedModel& m, std::string_view prompt,
                                                   bool chat = true) {
  auto c = make_output_constraint(m, json_object(), prompt, chat);
  EXPECT_TRUE(c.ok());
  return c.ok() ? *c : nullptr;
}

TEST(ResponseFormatPrelude, ThinkTokensFollowThePrompt) {
  auto hermes = load_hermes_response_template();
  ASSERT_TRUE(hermes.ok());
  const ServedModel m = nano_with(*hermes);
  const auto think = added_token_id(*m.tokenizer, "<think>");
  const auto unthink = added_token_id(*m.tokenizer, "</think>");
  ASSERT_TRUE(think && unthink);
  const std::string head = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n";
  auto closed = constraint(m, head + "<think>\n\n</think>\n\n");
  EXPECT_FALSE(closed->starts_in_reasoning);
  EXPECT_TRUE(closed->json_after.empty());
  auto open = constraint(m, head + "<think>\n");
  EXPECT_TRUE(open->starts_in_reasoning);
  EXPECT_EQ(open->json_after, std::vector<int32_t>{*unthink});
  auto either = constraint(m, head);
  EXPECT_FALSE(either->starts_in_reasoning);
  EXPECT_EQ(either->reasoning_open, think);
  EXPECT_EQ(either->json_after, std::vector<int32_t>{*unthink});
  auto raw = constraint(m, head, /*chat=*/false);  // completions: JSON from the first token
  EXPECT_FALSE(raw->reasoning_open.has_value());
  EXPECT_TRUE(raw->json_after.empty());
}

// Beam's channel layout (open_pattern) and gpt-oss's (a literal open): free until the answer
// header `<|channel|>final<|message|>`, in the tokenizer's tokens; JSON at once when the prompt
// already wrote it.
TEST(ResponseFormatPrelude, ChannelTemplatesStartTheJsonAfterTheAnswerHeader) {
  for (const char* name : {"beam_channel", "gpt_oss"}) {
    SCOPED_TRACE(name);
    const ServedModel m = nano_with(fixture_template(name));
    ASSERT_NE(m.response_template, nullptr);
    auto header = m.tokenizer->encode("<|channel|>final<|message|>", true);
    ASSERT_TRUE(header.ok());
    const std::string prompt = "<|start|>user<|message|>hi<|end|><|start|>assistant";
    auto c = constraint(m, prompt);
    EXPECT_TRUE(c->starts_in_reasoning);
    EXPECT_FALSE(c->reasoning_open.has_value());
    EXPECT_EQ(c->json_after, std::vector<int32_t>(header->begin(), header->end()));
    auto prefilled = constraint(m, prompt + "<|channel|>final<|message|>");
    EXPECT_FALSE(prefilled->starts_in_reasoning);
    EXPECT_TRUE(prefilled->json_after.empty());
    // An earlier turn's header (before the last start anchor) does not count.
    auto earlier =
        constraint(m, "<|start|>assistant<|channel|>final<|message|>x<|end|><|start|>assistant");
    EXPECT_TRUE(earlier->starts_in_reasoning);
  }
}

}  // namespace
}  // namespace beam::server
