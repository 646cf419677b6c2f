// Offline benchmark driver. Requests are submitted from this thread; the engine's sinks push
// completions into a queue, and agentic conversations submit their next turn (previous prompt +
// the model's answer + new tokens) when the previous one finishes, so the prefix cache sees the
// same growth pattern as a multi-turn coding agent.
#include "runtime/bench/offline_bench.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>

namespace beam {
namespace {

using Clock = std::chrono::steady_clock;

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

struct Tracker {
  int64_t conversation = -1;
  int64_t turn = 0;
  std::vector<int32_t> prompt;
  std::vector<int32_t> output;
  Clock::time_point submitted, last_token;
  bool got_first = false;
  Usage usage;
  bool failed = false;
};

class Driver {
 public:
  Driver(Engine& engine, const WorkloadOptions& o) : engine_(engine), o_(o), rng_(o.seed) {}

  BenchResult run() {
    auto start = Clock::now();
    EngineStats before = engine_.stats();
    switch (o_.workload) {
      case Workload::kUniform:
        for (int64_t i = 0; i < o_.requests; ++i) submit(random_tokens(o_.prompt_len), -1, 0);
        break;
      case Workload::kSharedPrefix: {
        auto prefix = random_tokens(o_.shared_prefix_len);
        for (int64_t i = 0; i < o_.requests; ++i) {
          auto p = prefix;
          auto suffix = random_tokens(o_.prompt_len);
          p.insert(p.end(), suffix.begin(), suffix.end());
          submit(std::move(p), -1, 0);
        }
        break;
      }
      case Workload::kAgentic:
        for (int64_t c = 0; c < o_.conversations; ++c) {
          submit(random_tokens(o_.first_prompt_len), c, 1);
          submit_one_offs();
        }
        break;
    }
    drive();
    BenchResult r = summarise();
    r.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
    r.output_tokens_per_s = r.output_tokens / r.wall_s;
    r.total_tokens_per_s = (r.output_tokens + r.prompt_tokens) / r.wall_s;
    const EngineStats after = engine_.stats();
    r.preemptions = after.preemptions - before.preemptions;
    r.steps = after.steps - before.steps;
    r.spec_draft_tokens = after.spec_draft_tokens - before.spec_draft_tokens;
    r.spec_accepted_tokens = after.spec_accepted_tokens - before.spec_accepted_tokens;
    const auto blocks = [](const BlockCounts& c) { return c.full + c.sliding; };
    r.host_restored_tokens = after.host_cache.restored_tokens - before.host_cache.restored_tokens;
    r.host_saved_blocks = blocks(after.host_cache.tier.saved) - blocks(before.host_cache.tier.saved);
    r.host_loaded_blocks = blocks(after.host_cache.tier.loaded) - blocks(before.host_cache.tier.loaded);
    r.host_unused_blocks = after.host_cache.unused_blocks - before.host_cache.unused_blocks;
    return r;
  }

 private:
  std::vector<int32_t> random_tokens(int64_t n) {
    std::uniform_int_distribution<int32_t> d(0, static_cast<int32_t>(engine_.config().vocab_size - 1));
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = d(rng_);
    return t;
  }

  void submit_one_offs() {
    for (int64_t i = 0; i < o_.one_off_per_turn; ++i)
      submit(random_tokens(o_.first_prompt_len), -1, 0);
  }

  void submit(std::vector<int32_t> prompt, int64_t conversation, int64_t turn) {
    auto tr = std::make_shared<Tracker>();
    tr->conversation = conversation;
    tr->turn = turn;
    tr->prompt = std::move(prompt);
    GenerateRequest g;
    g.prompt = tr->prompt;
    g.sampling.temperature = 0;
    g.sampling.max_tokens = o_.output_len;
    g.sampling.ignore_eos = o_.constraint == nullptr;
    g.sampling.constraint = o_.constraint;
    g.sink = [this, tr](TokenEvent&& ev) { on_event(*tr, std::move(ev), tr); };
    {
      std::lock_guard<std::mutex> lock(mu_);
      tr->submitted = Clock::now();
      in_flight_++;
    }
    if (!engine_.submit(std::move(g)).ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      tr->failed = true;
      in_flight_--;
      done_.push_back(tr);
    }
  }

  void on_event(Tracker& tr, TokenEvent&& ev, const std::shared_ptr<Tracker>& self) {
    auto now = Clock::now();
    std::lock_guard<std::mutex> lock(mu_);
    if (!ev.tokens.empty()) {
      if (!tr.got_first) {
        ttft_ms_.push_back(std::chrono::duration<double, std::milli>(now - tr.submitted).count());
        tr.got_first = true;
      } else {
        itl_ms_.push_back(std::chrono::duration<double, std::milli>(now - tr.last_token).count());
      }
      tr.last_token = now;
      tr.output.insert(tr.output.end(), ev.tokens.begin(), ev.tokens.end());
    }
    tr.usage = ev.usage;
    if (ev.finish) {
      tr.failed = *ev.finish == FinishReason::kError || *ev.finish == FinishReason::kCancelled;
      finished_.push_back(self);
      cv_.notify_all();
    }
  }

  // Waits for completions; agentic conversations continue with their next turn.
  void drive() {
    std::unique_lock<std::mutex> lock(mu_);
    while (in_flight_ > 0) {
      cv_.wait(lock, [&] { return !finished_.empty(); });
      auto batch = std::move(finished_);
      finished_.clear();
      for (auto& tr : batch) {
        in_flight_--;
        done_.push_back(tr);
        if (tr->conversation < 0 || tr->turn >= o_.turns || tr->failed) continue;
        auto next = tr->prompt;
        next.insert(next.end(), tr->output.begin(), tr->output.end());
        lock.unlock();
        auto append = random_tokens(o_.turn_append_len);
        next.insert(next.end(), append.begin(), append.end());
        submit(std::move(next), tr->conversation, tr->turn + 1);
        submit_one_offs();
        lock.lock();
      }
    }
  }

  BenchResult summarise() {
    BenchResult r;
    std::vector<int64_t> prompt_by_turn, cached_by_turn;
    int64_t later_prompt = 0, later_cached = 0;
    for (const auto& tr : done_) {
      r.requests++;
      if (tr->failed) r.failed++;
      r.prompt_tokens += static_cast<int64_t>(tr->prompt.size());
      r.cached_prompt_tokens += tr->usage.cached_prompt_tokens;
      r.output_tokens += static_cast<int64_t>(tr->output.size());
      if (tr->conversation >= 0) {
        size_t t = static_cast<size_t>(tr->turn);
        if (prompt_by_turn.size() <= t) {
          prompt_by_turn.resize(t + 1);
          cached_by_turn.resize(t + 1);
        }
        prompt_by_turn[t] += static_cast<int64_t>(tr->prompt.size());
        cached_by_turn[t] += tr->usage.cached_prompt_tokens;
        if (tr->turn >= 2) {
          later_prompt += static_cast<int64_t>(tr->prompt.size());
          later_cached += tr->usage.cached_prompt_tokens;
        }
      }
    }
    r.prefix_cache_hit_rate = r.prompt_tokens ? double(r.cached_prompt_tokens) / r.prompt_tokens : 0;
    r.prefix_cache_hit_rate_later = later_prompt ? double(later_cached) / later_prompt : 0;
    for (size_t t = 1; t < prompt_by_turn.size(); ++t)
      r.hit_rate_by_turn.push_back(prompt_by_turn[t] ? double(cached_by_turn[t]) / prompt_by_turn[t] : 0);
    r.ttft_ms_p50 = percentile(ttft_ms_, 0.5);
    r.ttft_ms_p99 = percentile(ttft_ms_, 0.99);
    r.itl_ms_p50 = percentile(itl_ms_, 0.5);
    r.itl_ms_p99 = percentile(itl_ms_, 0.99);
    return r;
  }

  Engine& engine_;
  WorkloadOptions o_;
  std::mt19937_64 rng_;
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t in_flight_ = 0;
  std::vector<std::shared_ptr<Tracker>> finished_;
  std::vector<std::shared_ptr<Tracker>> done_;
  std::vector<double> ttft_ms_, itl_ms_;
};

}  // namespace

Expected<Workload> parse_workload(const std::string& name) {
  if (name == "uniform") return Workload::kUniform;
  if (name == "shared-prefix") return Workload::kSharedPrefix;
  if (name == "agentic") return Workload::kAgentic;
  return make_error("--workload: expected uniform, shared-prefix or agentic, got '" + name + "'");
}

BenchResult run_offline_bench(Engine& engine, const WorkloadOptions& options) {
  return Driver(engine, options).run();
}

}  // namespace beam
