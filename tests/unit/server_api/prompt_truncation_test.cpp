// vLLM's truncate_prompt_tokens: chat and completions read it (k >= 1 or -1; 0, below -1, a
// fraction or another type is a 400 naming it), and truncate_prompt keeps the prompt's last k
// tokens (-1: the model's context), detokenizing what is kept as the prompt's new text; a k past
// the context is a 400 naming the field.
#include "server/api/prompt_truncation.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "server/openai/chat_request.h"
#include "server/openai/completion_request.h"

namespace beam::server {
namespace {

// The tiny-chat fixture's tokenizer with a context of 8 tokens.
const ServedModel& tiny() {
  static const ServedModel model = [] {
    ServedModel m;
    auto tok = text::Tokenizer::load(std::string(BEAMSERVE_SOURCE_DIR) +
                                     "/tests/server/fixtures/tiny-chat");
    EXPECT_TRUE(tok.ok()) << tok.error().message;
    if (tok.ok()) m.tokenizer.emplace(std::move(*tok));
    m.max_context_tokens = 8;
    return m;
  }();
  return model;
}

std::optional<int64_t> read(const std::string& value, std::string* error_param) {
  const Json body = Json::parse(R"({"truncate_prompt_tokens": )" + value + "}");
  FieldReader r(body, "");
  std::optional<int64_t> k;
  read_truncate_prompt_tokens(r, &k);
  *error_param = r.failed() ? r.error().param : "";
  return k;
}

TEST(PromptTruncation, ReadsPositiveCountsAndMinusOne) {
  std::string param;
  EXPECT_EQ(read("3", &param), 3);
  EXPECT_EQ(param, "");
  EXPECT_EQ(read("-1", &param), -1);
  EXPECT_EQ(param, "");
  EXPECT_EQ(read("4.0", &param), 4);
  EXPECT_EQ(param, "");
  EXPECT_EQ(read("null", &param), std::nullopt);
  EXPECT_EQ(param, "");
  for (const char* bad : {"0", "-2", "-100", "2.5", "\"3\"", "true", "[3]"}) {
    read(bad, &param);
    EXPECT_EQ(param, "truncate_prompt_tokens") << bad;
  }
}

TEST(PromptTruncation, ChatAndCompletionsReadTheField) {
  ApiExpected<ChatRequest> chat = parse_chat_request(
      Json::parse(
          R"({"messages": [{"role": "user", "content": "hi"}], "truncate_prompt_tokens": 5})"),
      {});
  ASSERT_TRUE(chat.ok()) << chat.error().message;
  EXPECT_EQ(chat->truncate_prompt_tokens, 5);
  ApiExpected<CompletionRequest> completion = parse_completion_request(
      Json::parse(R"({"prompt": ["a", "b"], "truncate_prompt_tokens": -1})"), {});
  ASSERT_TRUE(completion.ok()) << completion.error().message;
  EXPECT_EQ(completion->truncate_prompt_tokens, -1);
  EXPECT_EQ(parse_completion_request(Json::parse(R"({"prompt": "a"})"), {})->truncate_prompt_tokens,
            std::nullopt);
  EXPECT_EQ(parse_chat_request(Json::parse(R"({"messages": [{"role": "user", "content": "hi"}],
                                              "truncate_prompt_tokens": 0})"),
                               {})
                .error()
                .param,
            "truncate_prompt_tokens");
  EXPECT_EQ(parse_completion_request(
                Json::parse(R"({"prompt": "a", "truncate_prompt_tokens": "all"})"), {})
                .error()
                .param,
            "truncate_prompt_tokens");
}

TEST(PromptTruncation, KeepsTheLastTokensAndTheirText) {
  const std::vector<int32_t> prompt = tiny().tokenizer->encode("Hello ab", false).value();
  ASSERT_EQ(prompt.size(), 3u) << "the fixture spells \"Hello ab\" in three tokens";
  std::vector<int32_t> ids = prompt;
  std::string text = "Hello ab";
  ApiExpected<bool> cut = truncate_prompt(tiny(), 2, &ids, &text);
  ASSERT_TRUE(cut.ok()) << cut.error().message;
  EXPECT_TRUE(*cut);
  EXPECT_EQ(ids, std::vector<int32_t>(prompt.end() - 2, prompt.end()));
  EXPECT_EQ(text, tiny().tokenizer->decode(ids, false).value());
  EXPECT_TRUE(std::string("Hello ab").ends_with(text));
  EXPECT_LT(text.size(), std::string("Hello ab").size());
  // Absent, or no shorter than the prompt: nothing changes.
  for (std::optional<int64_t> k : {std::optional<int64_t>(), std::optional<int64_t>(8),
                                   std::optional<int64_t>(static_cast<int64_t>(prompt.size()))}) {
    ids = prompt;
    text = "Hello ab";
    EXPECT_FALSE(*truncate_prompt(tiny(), k, &ids, &text));
    EXPECT_EQ(ids, prompt);
    EXPECT_EQ(text, "Hello ab");
  }
}

TEST(PromptTruncation, MinusOneKeepsTheContextAndLargerCountsAreRefused) {
  std::vector<int32_t> ids = {40, 41, 42, 43, 44, 45, 46, 47, 48, 49};
  std::string text = "the prompt";
  ASSERT_TRUE(*truncate_prompt(tiny(), -1, &ids, &text));
  EXPECT_EQ(ids, (std::vector<int32_t>{42, 43, 44, 45, 46, 47, 48, 49}));
  EXPECT_EQ(text, tiny().tokenizer->decode(ids, false).value());
  ApiExpected<bool> big = truncate_prompt(tiny(), 9, &ids, &text);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().param, "truncate_prompt_tokens");
  EXPECT_NE(big.error().message.find("context"), std::string::npos);
}

}  // namespace
}  // namespace beam::server
