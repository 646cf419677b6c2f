#include "comm/local_group.h"

#include <gtest/gtest.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/bf16.h"

namespace beam {
namespace {

// Runs fn(rank r's communicator) on one thread per rank and joins them.
void run_ranks(LocalGroup& group, const std::function<void(Communicator&)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < group.size(); ++r) threads.emplace_back([&, r] { fn(group.rank(r)); });
  for (std::thread& t : threads) t.join();
}

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Rank r's element i in round `round`: magnitudes from 1e-3 to 1e8 and both signs, so that the
// rounding of a sum depends on the order of its terms; now and then -0.0 on every rank.
float value(int round, int r, int64_t i) {
  const uint64_t h = mix((static_cast<uint64_t>(round) << 40) ^ (static_cast<uint64_t>(r) << 32) ^
                         static_cast<uint64_t>(i));
  if (h % 17 == 0) return -0.0f;
  const float magnitude = (h >> 8) % 3 == 0 ? 1e8f : (h >> 8) % 3 == 1 ? 1.0f : 1e-3f;
  const float sign = (h >> 16) & 1 ? -1.0f : 1.0f;
  return sign * magnitude * (1.0f + static_cast<float>((h >> 20) % 1000) / 1000.0f);
}

// The sum of value(round, 0..size-1, i) added in rank order, as the group must compute it.
float serial_sum(int round, int size, int64_t i) {
  float acc = value(round, 0, i);
  for (int r = 1; r < size; ++r) acc += value(round, r, i);
  return acc;
}

// Fills rank r's tensor, all-reduces it and checks every element's bits against serial_sum.
void all_reduce_and_check(Communicator& comm, int round, int64_t n) {
  HostTensor t(DType::kF32, {n});
  for (int64_t i = 0; i < n; ++i) t.as<float>()[i] = value(round, comm.rank(), i);
  comm.all_reduce_sum(t.view);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t want = std::bit_cast<uint32_t>(serial_sum(round, comm.size(), i));
    const uint32_t got = std::bit_cast<uint32_t>(t.as<float>()[i]);
    if (got != want) {
      ADD_FAILURE() << "round " << round << " rank " << comm.rank() << " of " << comm.size()
                    << " element " << i << " of " << n << ": " << t.as<float>()[i]
                    << " != " << std::bit_cast<float>(want);
      return;
    }
  }
}

// Rank r gathers rows x 5 f32 values that name the round, the rank and the element.
void all_gather_and_check(Communicator& comm, int round, int64_t rows) {
  const int64_t per_rank = rows * 5;
  HostTensor in(DType::kF32, {rows, 5});
  HostTensor out(DType::kF32, {comm.size() * rows, 5});
  for (int64_t i = 0; i < per_rank; ++i) in.as<float>()[i] = value(round, comm.rank(), i);
  comm.all_gather(in.view, out.view);
  for (int r = 0; r < comm.size(); ++r) {
    for (int64_t i = 0; i < per_rank; ++i) {
      const float got = out.as<float>()[r * per_rank + i];
      if (std::bit_cast<uint32_t>(got) != std::bit_cast<uint32_t>(value(round, r, i))) {
        ADD_FAILURE() << "round " << round << " rank " << comm.rank() << ": rank " << r
                      << "'s element " << i << " gathered as " << got;
        return;
      }
    }
  }
}

TEST(LocalGroup, RanksAndSize) {
  LocalGroup group(3);
  EXPECT_EQ(group.size(), 3);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(group.rank(r).rank(), r);
    EXPECT_EQ(group.rank(r).size(), 3);
  }
  EXPECT_FALSE(group.aborted());
}

TEST(LocalGroup, SumsInRankOrderWithIdenticalBitsOnEveryRank) {
  constexpr int64_t kNumElements = 4099;
  for (int size : {1, 2, 3, 4}) {
    LocalGroup group(size);
    run_ranks(group, [&](Communicator& comm) { all_reduce_and_check(comm, 0, kNumElements); });
    if (size >= 3) {  // the values would catch another order (two terms commute exactly)
      int64_t num_order_sensitive = 0;
      for (int64_t i = 0; i < kNumElements; ++i) {
        float reversed = value(0, size - 1, i);
        for (int r = size - 2; r >= 0; --r) reversed += value(0, r, i);
        num_order_sensitive +=
            std::bit_cast<uint32_t>(reversed) != std::bit_cast<uint32_t>(serial_sum(0, size, i));
      }
      EXPECT_GT(num_order_sensitive, kNumElements / 20) << "size " << size;
    }
  }
}

TEST(LocalGroup, RankOrderIsVisibleInOneElement) {
  // 1e8 + 1 rounds back to 1e8 in f32: rank order gives 1e8 + 1 - 1e8 + 1 = 1, another order 2.
  LocalGroup group(4);
  const float rank_values[4] = {1e8f, 1.0f, -1e8f, 1.0f};
  std::vector<float> results(4);
  run_ranks(group, [&](Communicator& comm) {
    HostTensor t(DType::kF32, {1});
    t.as<float>()[0] = rank_values[comm.rank()];
    comm.all_reduce_sum(t.view);
    results[comm.rank()] = t.as<float>()[0];
  });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(results[r], 1.0f) << "rank " << r;
}

TEST(LocalGroup, ElementCountsThatDoNotDivideBySize) {
  for (int size : {2, 3, 4}) {
    LocalGroup group(size);
    for (int64_t n : {0, 1, 2, 3, 5, 7, 511, 513, 1025, 4097}) {
      run_ranks(group, [&](Communicator& comm) { all_reduce_and_check(comm, 1, n); });
    }
  }
}

TEST(LocalGroup, TwoDimensionalTensorSumsEveryElement) {
  LocalGroup group(3);
  run_ranks(group, [&](Communicator& comm) {
    HostTensor t(DType::kF32, {7, 3});
    for (int64_t i = 0; i < 21; ++i) t.as<float>()[i] = value(2, comm.rank(), i);
    comm.all_reduce_sum(t.view);
    for (int64_t i = 0; i < 21; ++i) {
      EXPECT_EQ(std::bit_cast<uint32_t>(t.as<float>()[i]),
                std::bit_cast<uint32_t>(serial_sum(2, 3, i)))
          << "rank " << comm.rank() << " element " << i;
    }
  });
}

TEST(LocalGroup, ManySuccessiveCollectivesDoNotMix) {
  for (int size : {2, 3, 4}) {
    LocalGroup group(size);
    run_ranks(group, [&](Communicator& comm) {
      for (int round = 0; round < 200; ++round) {
        // Sizes change from round to round and buffers are new each time: a rank that read a
        // peer's tensor of another round would see other values (or other memory).
        const int64_t n = 1 + (round * 37) % 101;
        switch (round % 3) {
          case 0:
            all_reduce_and_check(comm, round, n);
            all_gather_and_check(comm, round, n % 4);
            break;
          case 1:
            all_gather_and_check(comm, round, 1 + n % 5);
            all_reduce_and_check(comm, round, n);
            break;
          case 2:
            all_reduce_and_check(comm, round, n);
            all_reduce_and_check(comm, round + 1000, n / 2);
            break;
        }
      }
    });
  }
}

TEST(LocalGroup, AllGatherBf16InRankOrder) {
  for (int size : {1, 2, 3, 4}) {
    LocalGroup group(size);
    run_ranks(group, [&](Communicator& comm) {
      HostTensor in(DType::kBF16, {3, 5});
      HostTensor out(DType::kBF16, {size, 3, 5});
      for (int i = 0; i < 15; ++i)
        in.as<bf16>()[i] = to_bf16(static_cast<float>(comm.rank() * 100 + i));
      comm.all_gather(in.view, out.view);
      for (int r = 0; r < size; ++r) {
        for (int i = 0; i < 15; ++i) {
          EXPECT_EQ(out.as<bf16>()[r * 15 + i].bits, to_bf16(static_cast<float>(r * 100 + i)).bits)
              << "size " << size << " rank " << comm.rank() << " from rank " << r << " element "
              << i;
        }
      }
      for (int i = 0; i < 15; ++i) {  // the input is left as it was
        EXPECT_EQ(in.as<bf16>()[i].bits, to_bf16(static_cast<float>(comm.rank() * 100 + i)).bits);
      }
    });
  }
}

TEST(LocalGroup, AllGatherF32InRankOrder) {
  for (int size : {1, 2, 3, 4}) {
    LocalGroup group(size);
    run_ranks(group, [&](Communicator& comm) { all_gather_and_check(comm, 7, 9); });
  }
}

TEST(LocalGroup, AllGatherInPlace) {
  // Each rank's input is its own slice of its output (NCCL's in-place form).
  LocalGroup group(3);
  run_ranks(group, [&](Communicator& comm) {
    HostTensor out(DType::kF32, {3 * 4});
    TensorView in = out.view.rows(comm.rank() * 4, 4);
    for (int64_t i = 0; i < 4; ++i) in.as<float>()[i] = value(3, comm.rank(), i);
    comm.all_gather(in, out.view);
    for (int r = 0; r < 3; ++r) {
      for (int64_t i = 0; i < 4; ++i) {
        EXPECT_EQ(out.as<float>()[r * 4 + i], value(3, r, i)) << "rank " << comm.rank();
      }
    }
  });
}

// Ranks 0..size-2 enter `collective`; the last rank never does, so they wait until abort().
void expect_waiting_ranks_abort(int size, const std::function<void(Communicator&)>& collective) {
  LocalGroup group(size);
  std::vector<std::string> caught(size);
  std::vector<std::thread> threads;
  for (int r = 0; r + 1 < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        collective(group.rank(r));
        caught[r] = "returned";
      } catch (const CommAborted& e) {
        caught[r] = e.what();
      }
    });
  }
  // Whether the ranks are waiting yet or enter after abort(), each must throw.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  group.abort("rank 3 failed: out of memory");
  for (std::thread& t : threads) t.join();
  for (int r = 0; r + 1 < size; ++r) EXPECT_EQ(caught[r], "rank 3 failed: out of memory");
  EXPECT_TRUE(group.aborted());

  // Later calls throw too, on every rank, until reset().
  run_ranks(group, [&](Communicator& comm) {
    EXPECT_THROW(all_reduce_and_check(comm, 0, 8), CommAborted) << "rank " << comm.rank();
  });
  ASSERT_TRUE(group.reset().ok());
  EXPECT_FALSE(group.aborted());
  run_ranks(group, [&](Communicator& comm) {
    for (int round = 0; round < 10; ++round) {
      all_reduce_and_check(comm, round, 33);
      all_gather_and_check(comm, round, 2);
    }
  });
}

TEST(LocalGroup, AbortWakesRanksWaitingInAllReduce) {
  for (int size : {2, 3, 4}) {
    expect_waiting_ranks_abort(size, [](Communicator& comm) {
      HostTensor t(DType::kF32, {16});
      comm.all_reduce_sum(t.view);
    });
  }
}

TEST(LocalGroup, AbortWakesRanksWaitingInAllGather) {
  for (int size : {2, 4}) {
    expect_waiting_ranks_abort(size, [](Communicator& comm) {
      HostTensor in(DType::kBF16, {2, 3});
      HostTensor out(DType::kBF16, {comm.size() * 2, 3});
      comm.all_gather(in.view, out.view);
    });
  }
}

TEST(LocalGroup, AbortWhileRanksWorkLeavesNoRankStuck) {
  // abort() lands at any point of a stream of collectives: every rank ends (returning or
  // throwing CommAborted), and after reset() the group sums correctly again.
  for (int attempt = 0; attempt < 20; ++attempt) {
    LocalGroup group(3);
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::microseconds(50 * attempt));
      group.abort("stop");
    });
    run_ranks(group, [&](Communicator& comm) {
      try {
        for (int round = 0; round < 100000; ++round) all_reduce_and_check(comm, round, 64);
      } catch (const CommAborted& e) {
        EXPECT_STREQ(e.what(), "stop");
      }
    });
    aborter.join();
    ASSERT_TRUE(group.reset().ok());
    run_ranks(group, [&](Communicator& comm) { all_reduce_and_check(comm, 5, 100); });
  }
}

TEST(LocalGroup, SizeOneNeedsNoPeers) {
  LocalGroup group(1);
  Communicator& comm = group.rank(0);
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.size(), 1);
  HostTensor t(DType::kF32, {5});
  for (int i = 0; i < 5; ++i) t.as<float>()[i] = value(4, 0, i);
  comm.all_reduce_sum(t.view);  // on this thread: no peer to wait for
  for (int i = 0; i < 5; ++i) EXPECT_EQ(t.as<float>()[i], value(4, 0, i));
  HostTensor in(DType::kBF16, {4});
  HostTensor out(DType::kBF16, {4});
  for (int i = 0; i < 4; ++i) in.as<bf16>()[i] = to_bf16(static_cast<float>(i) + 0.5f);
  comm.all_gather(in.view, out.view);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out.as<bf16>()[i].bits, in.as<bf16>()[i].bits);

  group.abort("shutting down");
  EXPECT_THROW(comm.all_reduce_sum(t.view), CommAborted);
  ASSERT_TRUE(group.reset().ok());
  comm.all_reduce_sum(t.view);
}

TEST(LocalGroupDeathTest, MismatchedShapesAreNamed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        LocalGroup group(2);
        run_ranks(group, [](Communicator& comm) {
          HostTensor t(DType::kF32, {comm.rank() == 0 ? 4 : 5});
          comm.all_reduce_sum(t.view);
        });
      },
      "all_reduce_sum: rank 1 passed \\[5\\] while rank 0 passed \\[4\\]");
}

TEST(LocalGroupDeathTest, MismatchedCollectivesAreNamed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        LocalGroup group(2);
        run_ranks(group, [](Communicator& comm) {
          HostTensor t(DType::kF32, {2});
          HostTensor out(DType::kF32, {4});
          if (comm.rank() == 0)
            comm.all_reduce_sum(t.view);
          else
            comm.all_gather(t.view, out.view);
        });
      },
      "rank 1 called all_gather while rank 0 called all_reduce_sum");
}

TEST(LocalGroupDeathTest, BadTensorsAreRefused) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  LocalGroup group(1);
  HostTensor bf(DType::kBF16, {4});
  EXPECT_DEATH(group.rank(0).all_reduce_sum(bf.view), "only f32 is summed");
  HostTensor in(DType::kF32, {4});
  HostTensor small(DType::kF32, {3});
  EXPECT_DEATH(group.rank(0).all_gather(in.view, small.view), "gathers 1 x \\[4\\] into \\[3\\]");
  TensorView on_device = in.view;
  on_device.device = Device::kCuda;
  EXPECT_DEATH(group.rank(0).all_reduce_sum(on_device), "host only");
  EXPECT_DEATH(LocalGroup(0), "LocalGroup of 0 ranks");
  EXPECT_DEATH(group.rank(1), "rank 1 of a group of 1");
}

}  // namespace
}  // namespace beam
