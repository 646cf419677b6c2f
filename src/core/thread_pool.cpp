// ThreadPool implementation: chunks are claimed from a shared counter under one mutex.
#include "core/thread_pool.h"

#include <algorithm>

namespace beam {

ThreadPool::ThreadPool(int num_threads) {
  int n = num_threads > 0 ? num_threads : static_cast<int>(std::thread::hardware_concurrency());
  n = std::max(n, 1);
  for (int i = 0; i + 1 < n; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::parallel_for(int64_t n, int64_t min_chunk,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(min_chunk, 1);
  int64_t max_chunks = std::max<int64_t>(1, n / min_chunk);
  int64_t chunks = std::min<int64_t>(max_chunks, static_cast<int64_t>(num_threads()) * 4);
  if (chunks <= 1 || workers_.empty()) {
    fn(0, n);
    return;
  }
  auto run_chunk = [&](int64_t c) {
    int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
    if (begin < end) fn(begin, end);
  };
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_n_ = n;
    job_chunks_ = chunks;
    next_chunk_ = 0;
    chunks_done_ = 0;
    ++generation_;
  }
  start_cv_.notify_all();
  for (;;) {
    int64_t c;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (next_chunk_ >= job_chunks_) break;
      c = next_chunk_++;
    }
    run_chunk(c);
    std::lock_guard<std::mutex> lock(mu_);
    if (++chunks_done_ == job_chunks_) done_cv_.notify_all();
  }
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return chunks_done_ == job_chunks_; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(int) {
  uint64_t seen = 0;
  for (;;) {
    std::unique_lock<std::mutex> lock(mu_);
    start_cv_.wait(lock, [&] { return stop_ || (generation_ != seen && job_ != nullptr); });
    if (stop_) return;
    seen = generation_;
    while (job_ != nullptr && next_chunk_ < job_chunks_) {
      int64_t c = next_chunk_++;
      const auto* fn = job_;
      int64_t n = job_n_, chunks = job_chunks_;
      lock.unlock();
      int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
      if (begin < end) (*fn)(begin, end);
      lock.lock();
      if (++chunks_done_ == job_chunks_) done_cv_.notify_all();
    }
  }
}

}  // namespace beam
