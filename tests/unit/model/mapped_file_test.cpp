// MappedFile::read_at and check_whole: pread of byte ranges equals the mapping's bytes, ranges
// past the end and files cut short after the open are errors naming the file (a mapping would
// SIGBUS there), and copy_of's files answer from their own bytes.
#include "model/mapped_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_checkpoint_writer.h"

namespace beam {
namespace {

std::string write_bytes(const std::string& name, size_t n) {
  const std::string path = test::make_temp_dir(name) + "/data.bin";
  std::ofstream out(path, std::ios::binary);
  for (size_t i = 0; i < n; ++i) out.put(static_cast<char>(i * 7 + 3));
  return path;
}

TEST(MappedFileRead, PreadEqualsTheMappingAndFailsPastTheEnd) {
  const std::string path = write_bytes("mapped_read", 10000);
  for (auto open : {&MappedFile::open, &MappedFile::copy_of}) {
    auto file = open(path);
    ASSERT_TRUE(file.ok()) << file.error().message;
    std::vector<uint8_t> got(1234);
    ASSERT_TRUE((*file)->read_at(4000, got.data(), got.size()).ok());
    EXPECT_EQ(0, std::memcmp(got.data(), (*file)->data() + 4000, got.size()));
    EXPECT_TRUE((*file)->holds((*file)->data() + 9999));
    EXPECT_FALSE((*file)->holds((*file)->data() + 10000));
    const Status past = (*file)->read_at(9000, got.data(), got.size());
    ASSERT_FALSE(past.ok());
    EXPECT_NE(past.error().message.find(path), std::string::npos) << past.error().message;
    EXPECT_TRUE((*file)->check_whole().ok());
  }
}

TEST(MappedFileRead, AFileCutShortIsAnErrorNotASigbus) {
  const std::string path = write_bytes("mapped_cut", 100000);
  auto file = MappedFile::open(path);
  ASSERT_TRUE(file.ok());
  std::filesystem::resize_file(path, 1000);
  std::vector<uint8_t> got(5000);
  const Status read = (*file)->read_at(50000, got.data(), got.size());
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.error().message.find("cut short"), std::string::npos) << read.error().message;
  const Status whole = (*file)->check_whole();
  ASSERT_FALSE(whole.ok());
  EXPECT_NE(whole.error().message.find("1000 of its 100000 bytes"), std::string::npos)
      << whole.error().message;
  EXPECT_TRUE((*file)->read_at(0, got.data(), 1000).ok());  // what is left still reads
}

}  // namespace
}  // namespace beam
