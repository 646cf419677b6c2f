// /v1/embeddings and /pooling request parsing: OpenAI's input forms and fields, vLLM's extras
// and /pooling's task, and 400s that name the field.
#include "server/openai/embeddings_request.h"

#include <gtest/gtest.h>

namespace beam::server {
namespace {

EmbeddingsRequest parse_ok(const std::string& body,
                           PooledEndpoint endpoint = PooledEndpoint::kEmbeddings) {
  ApiExpected<EmbeddingsRequest> r = parse_embeddings_request(Json::parse(body), endpoint);
  EXPECT_TRUE(r.ok()) << body << ": " << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : EmbeddingsRequest{};
}

std::string error_param(const std::string& body,
                        PooledEndpoint endpoint = PooledEndpoint::kEmbeddings) {
  ApiExpected<EmbeddingsRequest> r = parse_embeddings_request(Json::parse(body), endpoint);
  EXPECT_FALSE(r.ok()) << body;
  return r.ok() ? "" : r.error().param;
}

TEST(EmbeddingsRequest, TakesTextIdsAndListsOfEither) {
  const EmbeddingsRequest one = parse_ok(R"({"model": "m", "input": "hello"})");
  ASSERT_EQ(one.inputs.size(), 1u);
  EXPECT_EQ(one.inputs[0].text, "hello");
  EXPECT_FALSE(one.base64);
  EXPECT_TRUE(one.normalize);
  const EmbeddingsRequest ids = parse_ok(R"({"input": [5, 6, 7]})");
  ASSERT_EQ(ids.inputs.size(), 1u);
  EXPECT_EQ(ids.inputs[0].ids, (std::vector<int32_t>{5, 6, 7}));
  const EmbeddingsRequest batch = parse_ok(
      R"({"input": ["a", [1, 2]], "encoding_format": "base64", "normalize": false,
          "dimensions": 256, "truncate_prompt_tokens": 8, "user": "u", "priority": 3})");
  ASSERT_EQ(batch.inputs.size(), 2u);
  EXPECT_EQ(batch.inputs[1].ids, (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(batch.base64);
  EXPECT_FALSE(batch.normalize);
  EXPECT_EQ(batch.dimensions, 256);
  EXPECT_EQ(batch.truncate_prompt_tokens, 8);
  EXPECT_EQ(batch.priority, 3);
}

// vLLM's chat form: one conversation, no generation prompt unless asked.
TEST(EmbeddingsRequest, TakesAConversation) {
  const EmbeddingsRequest chat = parse_ok(
      R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"x": 1}})");
  ASSERT_TRUE(chat.chat.has_value());
  EXPECT_TRUE(chat.inputs.empty());
  EXPECT_EQ(chat.chat->messages.size(), 1u);
  EXPECT_FALSE(chat.chat->add_generation_prompt);
  EXPECT_EQ(chat.chat->variables["x"], 1);
  EXPECT_TRUE(parse_ok(R"({"messages": [{"role": "user", "content": "hi"}],
                           "add_generation_prompt": true})")
                  .chat->add_generation_prompt);
  EXPECT_EQ(error_param(R"({"messages": [{"role": "user", "content": "hi"}], "input": "a"})"),
            "messages");
  EXPECT_EQ(error_param(R"({"messages": 3})"), "messages");
}

TEST(EmbeddingsRequest, RefusesWhatItCannotRead) {
  EXPECT_EQ(error_param(R"({"model": "m"})"), "input");
  EXPECT_EQ(error_param(R"({"input": ""})"), "input");
  EXPECT_EQ(error_param(R"({"input": []})"), "input");
  EXPECT_EQ(error_param(R"({"input": [[1], 2]})"), "input");
  EXPECT_EQ(error_param(R"({"input": 3})"), "input");
  EXPECT_EQ(error_param(R"({"input": "a", "encoding_format": "int8"})"), "encoding_format");
  EXPECT_EQ(error_param(R"({"input": "a", "dimensions": 0})"), "dimensions");
  EXPECT_EQ(error_param(R"({"input": "a", "normalize": "yes"})"), "normalize");
  EXPECT_EQ(error_param(R"({"input": "a", "truncate_prompt_tokens": 0})"),
            "truncate_prompt_tokens");
  EXPECT_FALSE(parse_embeddings_request(Json::parse("[1]"), PooledEndpoint::kEmbeddings).ok());
}

TEST(EmbeddingsRequest, EmbeddingsPoolTheLastPositionAndIgnoreTask) {
  const EmbeddingsRequest r = parse_ok(R"({"input": "a", "task": "token_embed"})");
  EXPECT_EQ(r.endpoint, PooledEndpoint::kEmbeddings);
  EXPECT_EQ(r.pooling, Pooling::kLast);
}

TEST(PoolingRequest, TaskPicksEveryPositionOrTheLast) {
  constexpr PooledEndpoint kPool = PooledEndpoint::kPooling;
  EXPECT_EQ(parse_ok(R"({"input": "a"})", kPool).pooling, Pooling::kAll);
  EXPECT_EQ(parse_ok(R"({"input": "a", "task": "token_embed"})", kPool).pooling, Pooling::kAll);
  EXPECT_EQ(parse_ok(R"({"input": "a", "task": "encode"})", kPool).pooling, Pooling::kAll);
  const EmbeddingsRequest last = parse_ok(R"({"input": [1, 2], "task": "embed",
                                              "normalize": false})", kPool);
  EXPECT_EQ(last.endpoint, kPool);
  EXPECT_EQ(last.pooling, Pooling::kLast);
  EXPECT_FALSE(last.normalize);
  EXPECT_EQ(error_param(R"({"input": "a", "task": "classify"})", kPool), "task");
  EXPECT_EQ(error_param(R"({"input": "a", "task": 3})", kPool), "task");
  const EmbeddingsRequest chat =
      parse_ok(R"({"messages": [{"role": "user", "content": "hi"}]})", kPool);
  EXPECT_TRUE(chat.chat.has_value());
}

}  // namespace
}  // namespace beam::server
