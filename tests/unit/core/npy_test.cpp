#include "core/npy.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

namespace beam {

TEST(Npy, RoundTripF32) {
  std::vector<float> v = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, 8.0f};
  std::string path = ::testing::TempDir() + "/rt.npy";
  ASSERT_TRUE(write_npy_f32(path, {2, 3}, v.data()).ok());
  auto a = read_npy(path);
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a->descr, "<f4");
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(a->as<float>()[i], v[i]);
  std::remove(path.c_str());
}

TEST(Npy, MissingFileIsAnError) {
  auto a = read_npy("/nonexistent/x.npy");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error().message.find("/nonexistent/x.npy"), std::string::npos);
}

}  // namespace beam
