// ReleasableMemory on the host: release() gives the pages back (mincore: none resident), restore()
// keeps the address and reads zeros, and the memory is usable again. (CUDA's in kernels_cuda.)
#include "kernels/api/releasable_memory.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace beam {
namespace {

// Pages of [data, data + nbytes) resident in memory.
size_t resident_pages(void* data, size_t nbytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((nbytes + page - 1) / page);
  EXPECT_EQ(mincore(data, nbytes, in.data()), 0);
  size_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n;
}

TEST(ReleasableMemory, HostPagesGoBackAndComeBackAsZeros) {
  KernelContext ctx;
  constexpr size_t kBytes = size_t{16} << 20;
  auto m = allocate_releasable(ctx, kBytes);
  ASSERT_TRUE(m.ok()) << m.error().message;
  ReleasableMemory& mem = **m;
  ASSERT_GE(mem.nbytes(), kBytes);
  EXPECT_EQ(mem.device(), Device::kCpu);
  auto* bytes = static_cast<unsigned char*>(mem.data());
  std::memset(bytes, 0x5a, kBytes);
  const size_t pages = kBytes / static_cast<size_t>(sysconf(_SC_PAGESIZE));
  EXPECT_EQ(resident_pages(bytes, kBytes), pages);

  mem.release();
  EXPECT_TRUE(mem.released());
  EXPECT_EQ(resident_pages(bytes, kBytes), 0u);
  mem.release();  // no-op
  ASSERT_TRUE(mem.restore().ok());
  EXPECT_FALSE(mem.released());
  EXPECT_EQ(mem.data(), bytes);
  EXPECT_EQ(bytes[0], 0);
  EXPECT_EQ(bytes[kBytes - 1], 0);
  bytes[123] = 7;
  EXPECT_EQ(bytes[123], 7);

  const DeviceBuffer view = releasable_buffer(*m);
  EXPECT_EQ(view.data(), bytes);
  EXPECT_EQ(view.nbytes(), mem.nbytes());
}

}  // namespace
}  // namespace beam
