// SamplingParams validation: valid defaults, and every invalid field named in its error.
#include "runtime/sampling/sampling_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

namespace beam {
namespace {

constexpr int64_t kParamsVocab = 100;

void expect_error_names(const SamplingParams& p, const std::string& field) {
  Status s = p.validate(kParamsVocab);
  ASSERT_FALSE(s.ok()) << "expected an error naming " << field;
  EXPECT_NE(s.error().message.find("'" + field + "'"), std::string::npos) << s.error().message;
}

TEST(SamplingParams, DefaultsAndEdgeValuesAreValid) {
  SamplingParams p;
  EXPECT_TRUE(p.validate(kParamsVocab).ok());
  p.temperature = 0.0;
  p.top_k = -1;
  p.top_p = 1.0;
  p.min_p = 1.0;
  p.repetition_penalty = 0.5;
  p.frequency_penalty = -2.0;
  p.presence_penalty = 2.0;
  p.logit_bias = {{0, -100.0}, {99, 100.0}};
  p.stop_token_ids = {0, 99};
  p.max_tokens = 1;
  p.min_tokens = 1;
  p.n = 128;
  p.logprobs = true;
  p.top_logprobs = 20;
  EXPECT_TRUE(p.validate(kParamsVocab).ok());
  p.top_k = 1000;  // larger than the vocabulary: keeps everything
  EXPECT_TRUE(p.validate(kParamsVocab).ok());
  EXPECT_FALSE(p.top_k_active(kParamsVocab));
}

TEST(SamplingParams, EachInvalidFieldIsNamed) {
  struct Case {
    std::string field;
    std::function<void(SamplingParams&)> set;
  };
  const Case cases[] = {
      {"temperature", [](SamplingParams& p) { p.temperature = -0.1; }},
      {"temperature", [](SamplingParams& p) { p.temperature = NAN; }},
      {"temperature", [](SamplingParams& p) { p.temperature = INFINITY; }},
      {"top_k", [](SamplingParams& p) { p.top_k = -2; }},
      {"top_p", [](SamplingParams& p) { p.top_p = 0.0; }},
      {"top_p", [](SamplingParams& p) { p.top_p = 1.5; }},
      {"top_p", [](SamplingParams& p) { p.top_p = NAN; }},
      {"min_p", [](SamplingParams& p) { p.min_p = -0.01; }},
      {"min_p", [](SamplingParams& p) { p.min_p = 1.01; }},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = 0.0; }},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = -1.0; }},
      {"frequency_penalty", [](SamplingParams& p) { p.frequency_penalty = 2.5; }},
      {"presence_penalty", [](SamplingParams& p) { p.presence_penalty = -2.5; }},
      {"presence_penalty", [](SamplingParams& p) { p.presence_penalty = NAN; }},
      {"logit_bias", [](SamplingParams& p) { p.logit_bias[kParamsVocab] = 1.0; }},
      {"logit_bias", [](SamplingParams& p) { p.logit_bias[-1] = 1.0; }},
      {"logit_bias[5]", [](SamplingParams& p) { p.logit_bias[5] = 101.0; }},
      {"stop_token_ids",
       [](SamplingParams& p) {
         p.stop_token_ids = {3, kParamsVocab};
       }},
      {"max_tokens", [](SamplingParams& p) { p.max_tokens = -1; }},
      {"min_tokens", [](SamplingParams& p) { p.min_tokens = -1; }},
      {"min_tokens",
       [](SamplingParams& p) {
         p.max_tokens = 4;
         p.min_tokens = 5;
       }},
      {"n", [](SamplingParams& p) { p.n = 0; }},
      {"n", [](SamplingParams& p) { p.n = 129; }},
      {"top_logprobs",
       [](SamplingParams& p) {
         p.logprobs = true;
         p.top_logprobs = 21;
       }},
      {"top_logprobs", [](SamplingParams& p) { p.top_logprobs = 2; }},  // logprobs false
  };
  for (const Case& c : cases) {
    SamplingParams p;
    c.set(p);
    SCOPED_TRACE(c.field);
    expect_error_names(p, c.field);
  }
}

TEST(SamplingParams, ErrorCarriesValueAndRange) {
  SamplingParams p;
  p.top_p = 1.5;
  Status s = p.validate(kParamsVocab);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, "sampling parameter 'top_p' must be in (0, 1], got 1.5");
  p = SamplingParams();
  p.stop_token_ids = {kParamsVocab};
  s = p.validate(kParamsVocab);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message,
            "sampling parameter 'stop_token_ids' holds token id 100, outside the vocabulary "
            "[0, 100)");
}

TEST(SamplingParams, LogprobsModeNamesAndTemperature) {
  EXPECT_EQ(parse_logprobs_mode("scaled"), LogprobsMode::kScaled);
  EXPECT_EQ(parse_logprobs_mode("raw"), LogprobsMode::kRaw);
  EXPECT_EQ(parse_logprobs_mode("raw_logprobs"), LogprobsMode::kRaw);
  EXPECT_EQ(parse_logprobs_mode("processed_logprobs"), std::nullopt);
  EXPECT_EQ(parse_logprobs_mode(""), std::nullopt);
  SamplingParams p;
  p.temperature = 0.6;
  EXPECT_EQ(p.logprob_temperature(), 0.6);
  p.logprobs_mode = LogprobsMode::kRaw;
  EXPECT_EQ(p.logprob_temperature(), 1.0);
  p = SamplingParams();
  p.temperature = 0.0;  // greedy: T = 1 in either mode
  EXPECT_EQ(p.logprob_temperature(), 1.0);
}

}  // namespace
}  // namespace beam
