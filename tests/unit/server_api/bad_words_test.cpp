// vLLM's token filters on the request: bad_words tokenized as vLLM does (the word without its
// leading whitespace, and after a space when that spelling has as many tokens; beam-nano's
// tokenizer), allowed_token_ids read sorted and distinct, and bad values as 400s naming the field.
#include "server/api/bad_words.h"

#include <gtest/gtest.h>

#include "server/api/sampling_fields.h"

namespace beam::server {
namespace {

const text::Tokenizer& nano_tokenizer() {
  static const text::Tokenizer tok = [] {
    auto t = text::Tokenizer::load("models/beam-nano");
    EXPECT_TRUE(t.ok()) << t.error().message;
    return std::move(t).value();
  }();
  return tok;
}

TEST(BadWords, TokenizedAloneAndAfterASpaceAsVllmDoes) {
  // beam-nano: "hello" = [286, 82, 317], " hello" = [1356, 82, 317] (as many tokens: both);
  // "rain" = [800], " rain" = [227, 800] (one more token: the word alone).
  const std::vector<std::string> words = {"hello", "  rain"};
  auto ids = bad_words_token_ids(nano_tokenizer(), words);
  ASSERT_TRUE(ids.ok()) << ids.error().message;
  EXPECT_EQ(*ids, (std::vector<std::vector<int32_t>>{{286, 82, 317}, {1356, 82, 317}, {800}}));
  const std::vector<std::string> blank = {"rain", " \t "};
  auto bad = bad_words_token_ids(nano_tokenizer(), blank);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().param, "bad_words");
  EXPECT_EQ(bad.error().message, "'bad_words': \" \t \" is only whitespace");
}

// The fields as read_sampling_fields reads them from a request body (the error, if any).
std::optional<ApiError> read(const char* body, SamplingFields* out) {
  const Json j = Json::parse(body);
  FieldReader r(j, "");
  read_sampling_fields(r, "stop", out);
  if (r.failed()) return r.take_error();
  return std::nullopt;
}

TEST(TokenFilterFields, ReadSortedAndDistinctWithNamedErrors) {
  SamplingFields f;
  ASSERT_FALSE(read(R"({"allowed_token_ids": [9, 3, 9], "bad_words": ["a b", "c"]})", &f));
  EXPECT_EQ(f.params.allowed_token_ids, (std::vector<int32_t>{3, 9}));
  EXPECT_EQ(f.bad_words, (std::vector<std::string>{"a b", "c"}));
  for (const char* body : {R"({"allowed_token_ids": []})", R"({"allowed_token_ids": [-1]})",
                           R"({"allowed_token_ids": "3"})"}) {
    SamplingFields g;
    const auto e = read(body, &g);
    ASSERT_TRUE(e) << body;
    EXPECT_EQ(e->param, "allowed_token_ids") << body;
  }
  for (const char* body :
       {R"({"bad_words": "x"})", R"({"bad_words": [""]})", R"({"bad_words": [1]})"}) {
    SamplingFields g;
    const auto e = read(body, &g);
    ASSERT_TRUE(e) << body;
    EXPECT_EQ(e->param, "bad_words") << body;
  }
  SamplingFields none;
  ASSERT_FALSE(read(R"({"allowed_token_ids": null, "bad_words": null})", &none));
  EXPECT_TRUE(none.params.allowed_token_ids.empty());
  EXPECT_TRUE(none.bad_words.empty());
}

}  // namespace
}  // namespace beam::server
