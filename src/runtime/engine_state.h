// The engine's private state: requests, their sequences (one per sample), the queues, and the
// model/KV/scheduler objects a step uses. Owned by the engine thread except the inbox.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <unordered_map>
#include <vector>

#include "core/thread_pool.h"
#include "model/beam/beam_model.h"
#include "model/dflash2/dflash2_drafter.h"
#include "model/tensor_parallel.h"
#include "model/weight_locator.h"
#include "runtime/engine.h"
#include "runtime/kv_cache/kv_cache_manager.h"
#include "runtime/kv_cache/kv_geometry.h"
#include "runtime/kv_cache/kv_storage.h"
#include "runtime/lora_registry.h"
#include "runtime/prefix_cache/prefix_cache.h"
#include "runtime/sampling/batch_sampler.h"
#include "runtime/sampling/sequence_sampling_state.h"
#include "runtime/scheduler/scheduler.h"

namespace beam {

enum class SeqPhase { kWaiting, kRunning, kFinished };

// One sample of a request: its tokens (prompt, then output) and sampling state.
struct Sequence {
  SeqId id;
  RequestId request;
  int32_t sibling = 0;
  int32_t priority = 0;
  int64_t arrival = 0;
  std::vector<int32_t> tokens;
  int64_t num_prompt = 0;
  int64_t cached_prompt_tokens = 0;
  SeqId fork_parent;  // set while a sibling waits to be forked from the prompt owner
  SeqPhase phase = SeqPhase::kWaiting;
  bool admitted_once = false;  // cached_prompt_tokens counts the first admission only
  int64_t waited_steps = 0;    // steps spent waiting since the last admission (anti-starvation)
  bool retiring = false;       // finished prompt owner kept until its siblings are forked
  // Within a step only: the last num_drafts tokens are speculative drafts (Engine::propose_drafts).
  int64_t num_drafts = 0;
  int64_t draft_limit = 0;     // most drafts it proposes next (next_draft_limit)
  int64_t draft_misses = 0;    // verifications in a row that accepted no draft
  int64_t draft_cooldown = 0;  // steps left before it proposes drafts again
  int64_t spec_verifications = 0;  // Usage::spec_verifications
  // With a DFlash2 drafter: the drafter's K/V of the positions the target computed for it
  // (Engine::feed_drafter), created at its first step; a fork copies its parent's.
  std::shared_ptr<DFlash2Context> draft_context;
  std::optional<SequenceSamplingState> sampling;
  // GenerateRequest::return_routed_experts: [positions computed, sparse layers, top_k] expert
  // ids, written by position (a recompute after preemption overwrites).
  std::vector<int32_t> routed_experts;
  // GenerateRequest::return_hidden_states: [positions computed from hidden_states_start,
  // hidden_size] bf16 bits, written by position like routed_experts.
  std::vector<uint16_t> hidden_states;
  bool sent_prompt_logprobs = false;  // its first event carried the request's prompt logprobs
  int64_t retractions = 0;            // Usage::retractions
  SequenceTimes times;                // Usage::times
};

struct RequestState {
  GenerateRequest request;
  std::shared_ptr<const SamplingParams> params;
  uint64_t seed = 0;
  uint64_t cache_salt = 0;                // of request.cache_salt and its adapter (PrefixCache)
  std::shared_ptr<const LoraEntry> lora;  // request.lora_name's adapter (null: none)
  std::vector<SeqId> seqs;  // [n], sibling order
  int64_t num_unfinished = 0;
  uint64_t prompt_key = 0;  // PrefixCache::hash_block of the prompt (speculation's prompt peers)
  // GenerateRequest::prompt_logprobs: positions [start, prompt length), by position - start (an
  // entry whose chosen token is -1 is not computed yet); the first `prompt_logprobs_done` are.
  std::vector<TokenLogprobs> prompt_logprobs;
  int64_t prompt_logprobs_done = 0;
  bool prompt_scored() const {
    return prompt_logprobs_done == static_cast<int64_t>(prompt_logprobs.size());
  }
};

// A sleep (level) or a wake-up (which memory).
struct MemoryCommand {
  bool sleep = false;
  SleepLevel level = SleepLevel::kOffloadWeights;
  bool weights = true, kv_cache = true;
};

// A pause (its mode and whether the prefix cache is emptied) or a resume.
struct PauseCommand {
  bool pause = true;
  PauseMode mode = PauseMode::kAbort;
  bool clear_cache = true;
};

// A call the engine thread answers (Engine::update_weights, sleep / wake_up, pause / resume): one
// at a time, its caller waiting for `result`.
struct EngineAnswer {
  bool busy = false;
  std::optional<Status> result;
};

// A submitted request with its adapter (resolved by name on the submitting thread).
struct Submission {
  RequestId id;
  GenerateRequest request;
  std::shared_ptr<const LoraEntry> lora;
};

struct Inbox {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Submission> submitted;
  std::vector<RequestId> cancelled;
  std::vector<std::pair<RequestId, int32_t>> stopped;  // (request, sibling)
  bool stop = false;
  bool flush = false;
  // Engine::update_weights: the new weights until the engine thread takes them, whether requests
  // in flight end at once, and the outcome for the waiting caller.
  RankWeights new_weights;  // update_weights' source (empty: none waiting)
  bool abort_for_weights = false;
  EngineAnswer weights_answer;
  // Engine::sleep / wake_up: the command until the engine thread takes it (a sleep once nothing
  // is in flight), and its outcome for the waiting caller.
  std::optional<MemoryCommand> memory_command;
  EngineAnswer memory_answer;
  // Engine::pause / resume: likewise (a kWait pause once nothing is in flight).
  std::optional<PauseCommand> pause_command;
  EngineAnswer pause_answer;
  // Engine::read_weight: the tensor name and row limit until the engine thread reads it between
  // steps, the values it read, and the outcome for the waiting caller.
  std::optional<std::pair<std::string, int64_t>> weight_read;
  WeightValues weight_values;
  EngineAnswer weight_read_answer;
  int64_t pending = 0;  // submitted but not yet finished (wait_idle)
  std::condition_variable idle_cv;
};

}  // namespace beam
