// ThreadPool implementation: chunks are claimed from a shared counter under one mutex; the waits
// spin (bounded by kSpin) before they block on a condition variable.
#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace beam {
namespace {

// How long a wait spins before it blocks: longer than the gaps between a step's parallel_for
// calls, short enough that an idle engine's threads sleep at once by human measures.
constexpr std::chrono::microseconds kSpin{100};

void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until done() or kSpin has passed; true when done() came true.
template <typename Done>
bool spin_until(Done done) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (done()) return true;
    cpu_relax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() >= until) return false;
  }
}

// Waits until ready(): spinning, then blocked on cv counted in *sleepers (under lock's mutex, so
// the side that makes ready() true notifies only when someone sleeps). `lock` does not hold its
// mutex on entry and holds it on return.
template <typename Ready>
void spin_then_wait(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                    int* sleepers, Ready ready) {
  const bool spun = spin_until(ready);
  lock.lock();
  if (spun) return;
  ++*sleepers;
  cv.wait(lock, ready);
  --*sleepers;
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  int n = num_threads > 0 ? num_threads : static_cast<int>(std::thread::hardware_concurrency());
  n = std::max(n, 1);
  for (int i = 0; i + 1 < n; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks(std::unique_lock<std::mutex>& lock) {
  while (job_ != nullptr && next_chunk_ < job_chunks_) {
    const int64_t c = next_chunk_++;
    const auto* fn = job_;
    const int64_t n = job_n_, chunks = job_chunks_;
    lock.unlock();
    const int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
    if (begin < end) (*fn)(begin, end);
    lock.lock();
    if (chunks_done_.fetch_add(1) + 1 == job_chunks_ && sleeping_callers_ > 0)
      done_cv_.notify_one();
  }
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
  std::unique_lock<std::mutex> lock(mu_);
  job_ = &fn;
  job_n_ = n;
  job_chunks_ = chunks;
  next_chunk_ = 0;
  chunks_done_.store(0);
  generation_.fetch_add(1);
  if (sleeping_workers_ > 0) start_cv_.notify_all();
  run_chunks(lock);
  lock.unlock();  // the workers' last chunks
  spin_then_wait(lock, done_cv_, &sleeping_callers_, [&] { return chunks_done_.load() == chunks; });
  job_ = nullptr;
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
    spin_then_wait(lock, start_cv_, &sleeping_workers_,
                   [&] { return stop_.load() || generation_.load() != seen; });
    if (stop_.load()) return;
    seen = generation_.load();
    run_chunks(lock);
  }
}

}  // namespace beam
