// base64_encode against RFC 4648's test vectors and the int32 layout routed experts use
// (base64_encode_le32).
#include "core/base64.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace beam {
namespace {

std::string encode(std::string_view s) {
  return base64_encode(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
}

TEST(Base64, Rfc4648Vectors) {
  EXPECT_EQ(encode(""), "");
  EXPECT_EQ(encode("f"), "Zg==");
  EXPECT_EQ(encode("fo"), "Zm8=");
  EXPECT_EQ(encode("foo"), "Zm9v");
  EXPECT_EQ(encode("foob"), "Zm9vYg==");
  EXPECT_EQ(encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(encode("foobar"), "Zm9vYmFy");
}

TEST(Base64, Int32LittleEndian) {
  const std::vector<int32_t> ids = {1, 255, 256};
  std::vector<uint8_t> bytes(ids.size() * 4);
  std::memcpy(bytes.data(), ids.data(), bytes.size());
  EXPECT_EQ(base64_encode(bytes), "AQAAAP8AAAAAAQAA");  // 01000000 ff000000 00010000
  const std::vector<uint32_t> words = {1, 255, 256};
  EXPECT_EQ(base64_encode_le32(words), "AQAAAP8AAAAAAQAA");  // whatever the host's byte order
}

}  // namespace
}  // namespace beam
