// Routing replay's response encoding and its per-request size limit.
#include "server/api/routed_experts.h"

#include <gtest/gtest.h>

namespace beam::server {
namespace {

TEST(RoutedExperts, EncodesLittleEndianInt32InBase64UnderSglExt) {
  EXPECT_EQ(encode_routed_experts({1, 255, 256}), "AQAAAP8AAAAAAQAA");
  Json choice = {{"index", 0}};
  add_routed_experts(std::nullopt, choice);
  EXPECT_FALSE(choice.contains("sgl_ext"));
  add_routed_experts(std::vector<int32_t>{}, choice);
  EXPECT_EQ(choice["sgl_ext"]["routed_experts"], "");
}

// Beam 1.0's widths: 51 MoE layers x top-8, 1,632 bytes a position.
TEST(RoutedExperts, ARequestMayHoldUpToOneGibOfIds) {
  EXPECT_TRUE(check_routed_experts_size(1, 131072, 51, 8).ok());  // 204 MiB
  EXPECT_TRUE(check_routed_experts_size(4, 131072, 51, 8).ok());  // 816 MiB
  const ApiExpected<bool> long_context = check_routed_experts_size(1, 1048576, 51, 8);
  ASSERT_FALSE(long_context.ok());
  EXPECT_EQ(long_context.error().param, "return_routed_experts");
  EXPECT_NE(long_context.error().message.find("1632 MiB"), std::string::npos)
      << long_context.error().message;
  EXPECT_FALSE(check_routed_experts_size(8, 131072, 51, 8).ok());
}

}  // namespace
}  // namespace beam::server
