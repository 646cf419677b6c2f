// GenerationJob: one engine request from submit to its last sibling. Engine events (posted off the
// engine thread onto the job's strand) run through one SiblingDecoder per sibling and reach the
// endpoint's GenerationObserver; a client disconnect cancels the engine request at once, and so
// does the last sibling's stop string. Records TTFT / inter-token / end-to-end latency.
#pragma once

#include <atomic>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "runtime/engine.h"
#include "server/api/api_error.h"
#include "server/generation/generation_spec.h"
#include "server/generation/job_registry.h"
#include "server/generation/sibling_decoder.h"
#include "server/metrics/server_metrics.h"

namespace beam::server {

using Clock = std::chrono::steady_clock;
using WorkStrand = boost::asio::strand<boost::asio::thread_pool::executor_type>;

struct GenerationUsage {
  int64_t prompt_tokens = 0;
  int64_t cached_prompt_tokens = 0;
  int64_t completion_tokens = 0;  // kept tokens over all siblings
};

// What an endpoint does with the output. Every call runs on the job's strand, in this order:
// either on_rejected once, or on_delta* / on_sibling_done per sibling, then on_complete once.
class GenerationObserver {
 public:
  virtual ~GenerationObserver() = default;
  virtual void on_rejected(const ApiError& error) = 0;
  virtual void on_delta(int32_t sibling, SiblingDelta&& delta) = 0;
  virtual void on_sibling_done(int32_t sibling, SiblingResult&& result) = 0;
  virtual void on_complete(const GenerationUsage& usage) = 0;
  // Generation groups only: one job's own usage (its siblings start at `first_sibling`), before
  // the group's summed on_complete.
  virtual void on_job_usage(int32_t first_sibling, const GenerationUsage& usage) {
    (void)first_sibling;
    (void)usage;
  }
};

// Server-wide counts of running jobs (/metrics, /health). Thread-safe.
struct GenerationCounters {
  std::atomic<int64_t> active{0};             // jobs submitted and not complete
  std::atomic<double> busy_since_unix_s{0};   // when `active` last rose from 0
};

// What a job needs from the server; everything outlives every job.
struct GenerationContext {
  Engine* engine = nullptr;
  const text::Tokenizer* tokenizer = nullptr;           // null: the model has no tokenizer
  std::shared_ptr<const ResponseTemplate> response_template;
  ServerMetrics* metrics = nullptr;
  GenerationCounters* counters = nullptr;
  JobRegistry* jobs = nullptr;  // null: jobs cannot be aborted by id
};

class GenerationJob : public std::enable_shared_from_this<GenerationJob> {
 public:
  GenerationJob(const GenerationContext& context, WorkStrand strand, GenerationSpec spec,
                std::shared_ptr<GenerationObserver> observer, Clock::time_point received);

  // Posts the submit onto the job's strand.
  void start();
  // Thread-safe and idempotent: the client left, stop generating and free the KV now.
  void cancel();

 private:
  void submit();
  void handle(TokenEvent&& event);
  void finish_sibling(int32_t sibling, const TokenEvent* engine_final, SiblingDelta&& delta);
  void record_timing(const TokenEvent& event);

  GenerationContext context_;
  WorkStrand strand_;
  GenerationSpec spec_;
  std::shared_ptr<GenerationObserver> observer_;
  Clock::time_point received_;
  std::vector<SiblingDecoder> decoders_;
  std::vector<std::optional<Clock::time_point>> last_event_;  // per sibling, for ITL
  bool first_token_seen_ = false;
  int64_t siblings_left_ = 0;
  int64_t engine_finals_ = 0;
  GenerationUsage usage_;
  std::atomic<int64_t> request_id_{-1};
  std::atomic<bool> cancelled_{false};
};

}  // namespace beam::server
