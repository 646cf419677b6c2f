// EndpointEnv: what a generating endpoint needs from the server (model, metrics, worker pool, id
// source), and launch_generation, the one way an endpoint starts an engine request: finish the
// GenerationSpec (stop ids, checks), run it as a GenerationJob, cancel it when the client leaves.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <span>

#include <boost/asio/thread_pool.hpp>

#include "server/api/exchange.h"
#include "server/api/sampling_fields.h"
#include "server/api/served_model.h"
#include "server/generation/generation_job.h"

namespace beam::server {

// Random ids for responses ("chatcmpl-…", "msg_…"). Thread-safe.
class IdSource {
 public:
  IdSource();
  std::string next(const std::string& prefix);

 private:
  std::mutex mu_;
  std::mt19937_64 rng_;
};

struct EndpointEnv {
  const ServedModel* model = nullptr;
  ServerMetrics* metrics = nullptr;
  GenerationCounters* counters = nullptr;
  boost::asio::thread_pool* workers = nullptr;
  IdSource* ids = nullptr;
  JobRegistry* jobs = nullptr;  // jobs in progress by rid (POST /abort_request)
};

// Fills the spec's sampling and stop fields, adds the tokenizer's eos ids as stop ids (unless
// ignore_eos), and checks sampling values and prompt length (400s). `max_tokens_field` names the
// endpoint's limit field in errors; it may be 0 only when spec->prompt_logprobs is set.
ApiExpected<bool> finish_spec(const ServedModel& model, const SamplingFields& fields,
                              const char* max_tokens_field, GenerationSpec* spec);

// vLLM's X-data-parallel-rank header (launch_generation applies it): the replica of every spec
// that names none in its body; a 400 when it is not a replica's index.
ApiExpected<bool> apply_rank_header(const ServedModel& model, const http::HttpRequest& request,
                                    std::span<GenerationSpec> specs);

// Starts the job; `observer` answers the exchange. The client leaving cancels the engine request.
void launch_generation(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange, GenerationSpec spec,
                       std::shared_ptr<GenerationObserver> observer);

// launch_generation for several prompts answered together (generation_group.h: the observer sees
// prompt i's sibling s as sibling i * n + s). Every spec asks for the same n.
void launch_generations(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange,
                        std::vector<GenerationSpec> specs,
                        std::shared_ptr<GenerationObserver> observer);

int64_t unix_time_s();

}  // namespace beam::server
