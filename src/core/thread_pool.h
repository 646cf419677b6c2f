// ThreadPool: a fixed set of worker threads running parallel_for over index ranges.
// Owned by one caller thread at a time; parallel_for blocks until every chunk is done.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace beam {

class ThreadPool {
 public:
  // num_threads includes the calling thread; 0 means hardware concurrency.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint chunks covering [0, n); chunks are at least min_chunk long.
  void parallel_for(int64_t n, int64_t min_chunk,
                    const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_chunks_ = 0;
  int64_t next_chunk_ = 0;
  int64_t chunks_done_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace beam
