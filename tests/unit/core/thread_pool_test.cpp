// ThreadPool: every index of a job runs exactly once, back-to-back jobs (the workers spinning
// between them), jobs after the workers went to sleep, chunks slower than the spin (the caller
// blocking for the last ones), and destruction in either state.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace beam {
namespace {

// Runs one job over [0, n) and checks that each index ran once.
void expect_each_index_once(ThreadPool& pool, int64_t n, int64_t min_chunk,
                            std::chrono::microseconds per_chunk = {}) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  pool.parallel_for(n, min_chunk, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
    if (per_chunk.count() > 0) std::this_thread::sleep_for(per_chunk);
  });
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "n=" << n << " i=" << i;
}

TEST(ThreadPool, CoversRangeExactlyOnce) {
  ThreadPool pool(2);
  for (int64_t n : {1, 7, 1000, 12345}) expect_each_index_once(pool, n, 3);
}

TEST(ThreadPool, BackToBackJobsEachRunOnce) {
  ThreadPool pool(4);
  for (int job = 0; job < 5000; ++job) expect_each_index_once(pool, 1 + job % 37, 1);
}

TEST(ThreadPool, JobsAfterTheWorkersSleptAndChunksSlowerThanTheSpin) {
  ThreadPool pool(3);
  for (int round = 0; round < 4; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // past the spin: workers block
    expect_each_index_once(pool, 64, 1);
    expect_each_index_once(pool, 12, 1, std::chrono::milliseconds(2));  // the caller blocks
  }
}

TEST(ThreadPool, StopsWhileSpinningOrAsleep) {
  { ThreadPool pool(4); }  // never used
  {
    ThreadPool pool(4);
    expect_each_index_once(pool, 100, 1);  // destroyed while the workers spin
  }
  {
    ThreadPool pool(4);
    expect_each_index_once(pool, 100, 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // ... and once they sleep
  }
}

}  // namespace
}  // namespace beam
