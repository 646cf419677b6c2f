// /score and /rerank request parsing (vLLM's fields): the pairings text_1 / text_2 allow,
// documents as strings or {"text"} objects, top_n and return_documents, and 400s that name the
// field.
#include "server/openai/score_request.h"

#include <gtest/gtest.h>

namespace beam::server {
namespace {

template <typename Request>
Request parse_ok(ApiExpected<Request> (*parse)(const Json&), const std::string& body) {
  ApiExpected<Request> r = parse(Json::parse(body));
  EXPECT_TRUE(r.ok()) << body << ": " << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : Request{};
}

template <typename Request>
std::string error_param(ApiExpected<Request> (*parse)(const Json&), const std::string& body) {
  ApiExpected<Request> r = parse(Json::parse(body));
  EXPECT_FALSE(r.ok()) << body;
  return r.ok() ? "" : r.error().param;
}

TEST(ScoreRequest, PairsOneFirstTextWithEachSecondOrListsPairwise) {
  const ScoreRequest one = parse_ok(parse_score_request,
                                    R"({"model": "m", "text_1": "q", "text_2": ["a", "b", "c"],
                                        "truncate_prompt_tokens": 8, "priority": -2})");
  EXPECT_EQ(one.common.model, "m");
  ASSERT_EQ(one.text_1.size(), 1u);
  EXPECT_EQ(one.text_1[0].text, "q");
  ASSERT_EQ(one.text_2.size(), 3u);
  EXPECT_EQ(one.common.truncate_prompt_tokens, 8);
  EXPECT_EQ(one.common.priority, -2);
  const ScoreRequest pairwise =
      parse_ok(parse_score_request, R"({"text_1": ["a", [1, 2]], "text_2": ["b", [3]]})");
  ASSERT_EQ(pairwise.text_1.size(), 2u);
  EXPECT_EQ(pairwise.text_1[1].ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(pairwise.text_2[1].ids, (std::vector<int32_t>{3}));
  // vLLM's activation switches: read for their type, no effect on a cosine similarity.
  parse_ok(parse_score_request, R"({"text_1": "a", "text_2": "b", "use_activation": false})");
}

TEST(ScoreRequest, RefusesWhatItCannotPairOrRead) {
  EXPECT_EQ(error_param(parse_score_request, R"({"text_2": "b"})"), "text_1");
  EXPECT_EQ(error_param(parse_score_request, R"({"text_1": "a"})"), "text_2");
  EXPECT_EQ(error_param(parse_score_request, R"({"text_1": ["a", "b"], "text_2": ["c"]})"),
            "text_2");
  EXPECT_EQ(
      error_param(parse_score_request, R"({"text_1": ["a", "b"], "text_2": ["c", "d", "e"]})"),
      "text_2");
  EXPECT_EQ(error_param(parse_score_request, R"({"text_1": "a", "text_2": "b", "priority": "x"})"),
            "priority");
  EXPECT_EQ(error_param(parse_score_request,
                        R"({"text_1": "a", "text_2": "b", "truncate_prompt_tokens": 0})"),
            "truncate_prompt_tokens");
  EXPECT_EQ(error_param(parse_score_request, R"({"text_1": "a", "text_2": "b", "softmax": 1})"),
            "softmax");
  EXPECT_FALSE(parse_score_request(Json::parse("[]")).ok());
}

TEST(RerankRequest, TakesDocumentsAsStringsOrTextObjects) {
  const RerankRequest r = parse_ok(parse_rerank_request,
                                   R"({"model": "m", "query": "q",
                                       "documents": ["a", {"text": "b"}], "top_n": 1,
                                       "return_documents": false})");
  EXPECT_EQ(r.query.text, "q");
  EXPECT_EQ(r.documents, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.top_n, 1);
  EXPECT_FALSE(r.return_documents);
  const RerankRequest defaults =
      parse_ok(parse_rerank_request, R"({"query": [4, 5], "documents": ["a"]})");
  EXPECT_EQ(defaults.query.ids, (std::vector<int32_t>{4, 5}));
  EXPECT_FALSE(defaults.top_n.has_value());
  EXPECT_TRUE(defaults.return_documents);
}

TEST(RerankRequest, RefusesWhatItCannotRead) {
  EXPECT_EQ(error_param(parse_rerank_request, R"({"documents": ["a"]})"), "query");
  EXPECT_EQ(error_param(parse_rerank_request, R"({"query": ["a", "b"], "documents": ["a"]})"),
            "query");
  EXPECT_EQ(error_param(parse_rerank_request, R"({"query": "q"})"), "documents");
  EXPECT_EQ(error_param(parse_rerank_request, R"({"query": "q", "documents": []})"), "documents");
  EXPECT_EQ(error_param(parse_rerank_request, R"({"query": "q", "documents": "a"})"), "documents");
  EXPECT_EQ(error_param(parse_rerank_request, R"({"query": "q", "documents": ["a", 3]})"),
            "documents[1]");
  EXPECT_EQ(error_param(parse_rerank_request, R"({"query": "q", "documents": ["a", {"t": "b"}]})"),
            "documents[1]");
  EXPECT_EQ(error_param(parse_rerank_request, R"({"query": "q", "documents": [""]})"),
            "documents[0]");
  EXPECT_EQ(error_param(parse_rerank_request, R"({"query": "q", "documents": ["a"], "top_n": -1})"),
            "top_n");
  EXPECT_EQ(error_param(parse_rerank_request,
                        R"({"query": "q", "documents": ["a"], "return_documents": "no"})"),
            "return_documents");
}

}  // namespace
}  // namespace beam::server
