// Final hidden states in responses: beamserve's base64 rows, SGLang's meta_info lists and choice
// field, and the per-request size limit.
#include "server/api/hidden_states.h"

#include <gtest/gtest.h>

namespace beam::server {
namespace {

// Three positions of width 2: 1.0, -2.0 | 0.5, 0.25 | 3.0, 0.0 (bf16 bits).
HiddenStateRows three_rows() {
  return HiddenStateRows{{0x3f80, 0xc000, 0x3f00, 0x3e80, 0x4040, 0x0000}, 2};
}

TEST(HiddenStates, EncodesLittleEndianBf16InBase64) {
  EXPECT_EQ(encode_hidden_states(HiddenStateRows{{0x3f80, 0xc000}, 2}), "gD8AwA==");
  EXPECT_EQ(encode_hidden_states(HiddenStateRows{{}, 2}), "");
}

// SGLang's layout: the prompt's rows as one list of lists, then a list per later position.
TEST(HiddenStates, SglangListsThePromptRowsFirstThenOneRowAPosition) {
  const Json lists = sglang_hidden_states(three_rows(), 2);
  EXPECT_EQ(lists.dump(), "[[[1.0,-2.0],[0.5,0.25]],[3.0,0.0]]");
  EXPECT_EQ(sglang_hidden_states(three_rows(), 3).dump(), "[[[1.0,-2.0],[0.5,0.25],[3.0,0.0]]]");
  // A record shorter than the prompt (a cancelled prefill) lists what there is.
  EXPECT_EQ(sglang_hidden_states(HiddenStateRows{{0x3f80, 0xc000}, 2}, 5).dump(), "[[[1.0,-2.0]]]");
}

TEST(HiddenStates, AChoiceCarriesItsLastRowWhenAsked) {
  Json choice = {{"index", 0}};
  add_last_hidden_state(std::nullopt, choice);
  EXPECT_FALSE(choice.contains("hidden_states"));
  add_last_hidden_state(three_rows(), choice);
  EXPECT_EQ(choice["hidden_states"].dump(), "[3.0,0.0]");
  add_last_hidden_state(HiddenStateRows{{}, 2}, choice);
  EXPECT_EQ(choice["hidden_states"].dump(), "[]");
}

// Beam 1.0's width, 5,120: 10 KiB a position.
TEST(HiddenStates, ARequestMayHoldUpTo256MibOfStates) {
  EXPECT_TRUE(check_hidden_states_size(1, 26214, 5120).ok());
  EXPECT_TRUE(check_hidden_states_size(2, 13107, 5120).ok());
  const ApiExpected<bool> long_context = check_hidden_states_size(1, 131072, 5120);
  ASSERT_FALSE(long_context.ok());
  EXPECT_EQ(long_context.error().param, "return_hidden_states");
  EXPECT_NE(long_context.error().message.find("1280 MiB"), std::string::npos)
      << long_context.error().message;
  EXPECT_FALSE(check_hidden_states_size(3, 13107, 5120).ok());
}

}  // namespace
}  // namespace beam::server
