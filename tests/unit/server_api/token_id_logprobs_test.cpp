// vLLM's return_tokens_as_token_ids: chat and completions requests read it as a boolean (anything
// else is a 400 naming it), and the logprobs writers then name every token "token_id:<id>" (bytes
// are that string's), top alternatives and the echoed prompt included, while legacy text_offset
// keeps counting the bytes of the choice's text.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/openai/chat_request.h"
#include "server/openai/completion_request.h"
#include "server/openai/logprobs_json.h"
#include "tiny_chat_tokenizer.h"

namespace beam::server {
namespace {

constexpr int32_t kHello = 511;  // "Hello" in the fixture
constexpr int32_t kA = 40;

Json ascii_bytes(const std::string& s) {
  Json a = Json::array();
  for (unsigned char c : s) a.push_back(static_cast<int>(c));
  return a;
}

OutputToken token(int32_t id, float logprob, std::vector<TokenLogprob> top) {
  return OutputToken{id, TokenLogprobs{TokenLogprob{id, logprob}, 1, std::move(top), {}}, std::nullopt, {}};
}

TEST(TokenIdLogprobs, NamesAreTheBytesOrTokenIdStrings) {
  const text::Tokenizer* tok = &tiny_chat_tokenizer();
  EXPECT_EQ((LogprobTokenNames{tok, false})(kHello), "Hello");
  EXPECT_EQ((LogprobTokenNames{tok, true})(kHello), "token_id:511");
  EXPECT_EQ((LogprobTokenNames{tok, true})(0), "token_id:0");
}

TEST(TokenIdLogprobs, ChatEntriesNameTheChosenTokenAndItsAlternatives) {
  const std::vector<OutputToken> out = {token(kHello, -0.5f, {{kHello, -0.5f}, {kA, -1.0f}})};
  const Json ids = logprob_entries({&tiny_chat_tokenizer(), true}, out, 2);
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(ids[0]["token"], "token_id:511");
  EXPECT_EQ(ids[0]["bytes"], ascii_bytes("token_id:511"));
  EXPECT_EQ(ids[0]["logprob"], -0.5);
  ASSERT_EQ(ids[0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(ids[0]["top_logprobs"][0]["token"], "token_id:511");
  EXPECT_EQ(ids[0]["top_logprobs"][1]["token"], "token_id:40");
  EXPECT_EQ(ids[0]["top_logprobs"][1]["bytes"], ascii_bytes("token_id:40"));
  const Json text = logprob_entries({&tiny_chat_tokenizer(), false}, out, 2);
  EXPECT_EQ(text[0]["token"], "Hello");
  EXPECT_EQ(text[0]["bytes"], ascii_bytes("Hello"));
}

TEST(TokenIdLogprobs, LegacyTokensAndTopKeysAreIdsButOffsetsCountTheText) {
  CompletionLogprobs b({&tiny_chat_tokenizer(), true}, 1);
  const TokenLogprobs scored{TokenLogprob{kA, -2.0f}, 3, {{kHello, -0.25f}}, {}};
  b.add_prompt({kHello, kA}, 1, {scored});
  b.add({token(kHello, -0.5f, {{kA, -0.75f}})});
  const Json j = b.take();
  EXPECT_EQ(j["tokens"], (Json::array({"token_id:511", "token_id:40", "token_id:511"})));
  EXPECT_EQ(j["top_logprobs"],
            (Json::array({nullptr, {{"token_id:511", -0.25}}, {{"token_id:40", -0.75}}})));
  EXPECT_EQ(j["token_logprobs"], (Json::array({nullptr, -2.0, -0.5})));
  const size_t a_len = tiny_chat_tokenizer().piece(kA)->bytes.size();
  EXPECT_EQ(j["text_offset"], (Json::array({0, 5, 5 + a_len})));
}

TEST(TokenIdLogprobs, RequestsReadTheFieldAsABoolean) {
  const std::string messages = R"("messages": [{"role": "user", "content": "hi"}])";
  ApiExpected<ChatRequest> chat = parse_chat_request(
      Json::parse("{" + messages + R"(, "return_tokens_as_token_ids": true})"), {});
  ASSERT_TRUE(chat.ok()) << chat.error().message;
  EXPECT_TRUE(chat->tokens_as_ids);
  EXPECT_FALSE(parse_chat_request(Json::parse("{" + messages + "}"), {})->tokens_as_ids);
  ApiExpected<CompletionRequest> completion =
      parse_completion_request(Json::parse(R"({"prompt": "a", "return_tokens_as_token_ids": true,
                                                "logprobs": 1})"),
                               {});
  ASSERT_TRUE(completion.ok()) << completion.error().message;
  EXPECT_TRUE(completion->tokens_as_ids);
  for (const char* bad : {"1", "\"true\"", "[]"}) {
    const std::string field = std::string(R"("return_tokens_as_token_ids": )") + bad;
    ApiExpected<ChatRequest> c =
        parse_chat_request(Json::parse("{" + messages + ", " + field + "}"), {});
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.error().param, "return_tokens_as_token_ids");
    ApiExpected<CompletionRequest> p =
        parse_completion_request(Json::parse(R"({"prompt": "a", )" + field + "}"), {});
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.error().param, "return_tokens_as_token_ids");
  }
}

}  // namespace
}  // namespace beam::server
