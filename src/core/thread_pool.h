// ThreadPool: a fixed set of worker threads running parallel_for over index ranges.
// Owned by one caller thread at a time; parallel_for blocks until every chunk is done.
// A model's step calls parallel_for hundreds of times, microseconds apart, so the threads wait
// for the next job (and the caller for the last chunks) spinning for a short while before they
// block: waking a blocked thread costs a futex round trip per call, more than a small op's work.
#pragma once

#include <atomic>
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
  void worker_loop();
  // Runs chunks of the current job until none is left to claim. Holds `lock` (on mu_) on entry
  // and on return.
  void run_chunks(std::unique_lock<std::mutex>& lock);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  // The job, written under mu_ before generation_ moves on.
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_chunks_ = 0;
  int64_t next_chunk_ = 0;
  // Written under mu_, read without it by the spinning waits.
  std::atomic<uint64_t> generation_{0};
  std::atomic<int64_t> chunks_done_{0};
  std::atomic<bool> stop_{false};
  int sleeping_workers_ = 0;  // under mu_: workers blocked on start_cv_
  int sleeping_callers_ = 0;  // under mu_: the caller blocked on done_cv_ (0 or 1)
};

}  // namespace beam
