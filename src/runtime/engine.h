// Engine: the serving loop on its own thread — plan (scheduler) → commit (KV, prefix cache)
// → forward → sample → emit TokenEvents. Public API: submit / cancel / stats; thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/strong_id.h"
#include "kernels/api/context.h"
#include "model/tensor_parallel.h"
#include "model/weight_locator.h"
#include "model/weights.h"
#include "runtime/prefix_cache/host_kv_tier.h"
#include "runtime/sampling/logprobs.h"
#include "runtime/sampling/sampling_params.h"
#include "runtime/speculative/ngram_proposer.h"

namespace beam {

struct RequestTag;
using RequestId = StrongId<RequestTag>;

enum class FinishReason { kStop, kLength, kCancelled, kError };

const char* finish_reason_name(FinishReason r);  // "stop", "length", "cancelled", "error"

// When the engine took a sequence in, first ran it in a step, and sampled its first token
// (SGLang's wait_queue_entry, forward_entry and prefill_finished times); a default time_point:
// not yet. The first of each stays through preemptions and retractions, as in SGLang.
struct SequenceTimes {
  std::chrono::steady_clock::time_point queued;
  std::chrono::steady_clock::time_point scheduled;
  std::chrono::steady_clock::time_point prefilled;
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t cached_prompt_tokens = 0;  // prompt tokens served from the prefix cache
  int64_t completion_tokens = 0;
  // Times the sequence gave its KV back and waited to recompute it (preempted for KV room, or
  // retracted by a pause); SGLang's total_retractions.
  int64_t retractions = 0;
  // Its decodes that verified speculative drafts (EngineOptions::speculative; SGLang's
  // spec_verify_ct).
  int64_t spec_verifications = 0;
  SequenceTimes times;
};

// New tokens of one sibling sequence (index < n) of a request; several tokens per step are
// possible. The last event of a sibling has finish set; usage is filled on every event.
struct TokenEvent {
  RequestId request;
  int32_t sibling = 0;
  std::vector<int32_t> tokens;
  std::vector<TokenLogprobs> logprobs;  // parallel to tokens when SamplingParams::logprobs:
                                       // log_softmax(softcapped logits / T), docs/sampling.md
  // Parallel to tokens when SamplingParams::return_entropy: each token's distribution's entropy
  // (runtime/sampling/logprobs.h's distribution_entropy at the logprobs' temperature).
  std::vector<float> entropies;
  // Parallel to tokens when SamplingParams::token_ids_logprob is set: each token's logprobs of
  // those ids (in their order), as the logprobs are computed.
  std::vector<std::vector<TokenLogprob>> token_ids_logprobs;
  std::optional<FinishReason> finish;
  std::optional<int32_t> stop_token;   // the stop/eos id that finished it (kept in tokens)
  std::string error;                   // with kError
  Usage usage;
  // The final event of a GenerateRequest::return_routed_experts request: the routed experts of
  // every position the model read (the prompt, then each output but the last) from
  // routed_experts_start on, [positions, sparse layers, top_k] expert ids (routing replay for RL,
  // docs/runtime.md).
  std::vector<int32_t> routed_experts;
  // The final event of a GenerateRequest::return_hidden_states request: the final norm's output
  // (the LM head's input) at every position the model read (the prompt, then each output but the
  // last) from hidden_states_start on, [positions, hidden_size] bf16 bits.
  std::vector<uint16_t> hidden_states;
  // The first event of each sibling of a GenerateRequest::prompt_logprobs request: the logprobs of
  // prompt positions [prompt_logprobs->start, prompt length), each the prompt token at that
  // position under the model's distribution after the tokens before it (chosen = that token,
  // chosen_rank its rank, top = the num_top most likely), log_softmax(softcapped logits / T) as
  // for output logprobs (T = SamplingParams::logprob_temperature()). Empty on later events.
  std::vector<TokenLogprobs> prompt_logprobs;
};

// Called on the engine thread; must be quick and must not call back into the engine.
using EventSink = std::function<void(TokenEvent&&)>;

// Which prompt positions get logprobs (vLLM's prompt_logprobs, SGLang's input_token_logprobs).
struct PromptLogprobsOptions {
  int64_t start = 1;    // [1, prompt length]: the first position reported (position 0 has none)
  int64_t num_top = 0;  // [0, kMaxTopLogprobs] most likely alternatives per position
  // Also these ids' logprobs at every position (TokenLogprobs::token_ids; SGLang's
  // input_token_ids_logprobs): at most kMaxTokenIdsLogprob ids of the vocabulary.
  std::vector<int32_t> token_ids{};
};

struct GenerateRequest {
  std::vector<int32_t> prompt;  // token ids, non-empty
  SamplingParams sampling;
  int32_t priority = 0;         // higher runs first; FCFS within a priority
  EventSink sink;
  // Report each position's routed experts (TokenEvent::routed_experts) from position
  // routed_experts_start on (SGLang's routed_experts_start_len: what earlier turns already have).
  // Its steps run eagerly (no decode graph); prefix reuse stops at routed_experts_start.
  bool return_routed_experts = false;
  int64_t routed_experts_start = 0;
  // Report each position's final hidden state (TokenEvent::hidden_states; SGLang's
  // return_hidden_states) from position hidden_states_start on (an embedding: the last prompt
  // position). Prefix reuse stops at hidden_states_start; decode steps keep their CUDA graphs
  // (each of their tokens is a logit row, whose normed input is the state).
  bool return_hidden_states = false;
  int64_t hidden_states_start = 0;
  // Logprobs of the prompt's tokens (TokenEvent::prompt_logprobs). Positions before start - 1 may
  // come from the prefix cache; from there on the prompt is computed with logits for every
  // position. SamplingParams::max_tokens 0 computes the prompt only (scoring it, or warming the
  // prefix cache): every sibling finishes with kLength and no tokens.
  std::optional<PromptLogprobsOptions> prompt_logprobs = std::nullopt;
  // Prefix-cache namespace (vLLM's cache_salt): cached prefixes are shared only among requests
  // with the same salt; "" (none) shares with other unsalted requests only.
  std::string cache_salt = {};
  // A LoRA adapter loaded with Engine::load_lora_adapter, by name ("": the base model).
  std::string lora_name = {};
  // The data-parallel replica that serves it (vLLM's data_parallel_rank, SGLang's
  // routed_dp_rank), in [0, EngineOptions::data_parallel_size); unset: EngineOptions::load_balance
  // picks one.
  std::optional<int> data_parallel_rank = std::nullopt;
};

// How a data-parallel engine picks a request's replica (SGLang's --load-balance-method, and its
// router's cache_aware policy).
enum class LoadBalance {
  kCacheAware,     // the replica whose prefix cache likely holds the most of the prompt (at
                   // least 30% of it; runtime/data_parallel.h), unless the loads are imbalanced
                   // or nothing matches: then the shortest queue
  kRoundRobin,     // the replicas in turn
  kShortestQueue,  // the fewest requests in flight (submitted and not finished); ties in turn
  kMinimumTokens,  // the fewest tokens in flight (each request's prompt plus n times its output
                   // limit); ties in turn
};

// "cache_aware", "round_robin", "shortest_queue", "minimum_tokens".
const char* load_balance_name(LoadBalance b);
// The policy a name (load_balance_name's) gives; nullopt for another name.
std::optional<LoadBalance> parse_load_balance(std::string_view name);

// A loaded LoRA adapter (Engine::lora_adapters).
struct LoraAdapterInfo {
  std::string name;
  std::string path;  // its directory
};

struct EngineOptions {
  Device device = Device::kCpu;                // kCuda: GPU 0; the weights are uploaded at create()
  // Both pools together. Unset: 1 GiB on the CPU; on CUDA the free device memory after the weights
  // minus an activation reserve (docs/runtime.md, "Device").
  std::optional<int64_t> kv_budget_bytes;
  int64_t block_size_tokens = 64;
  // Chunked-prefill token budget per step (decodes and prefill chunks together). Unset: 8192 on a
  // CUDA device of >= 70 GiB, else 2048 (default_max_tokens_per_step, runtime/engine_device.h).
  std::optional<int64_t> max_tokens_per_step;
  int64_t max_running = 256;                   // sequences decoding at once
  int64_t max_context_tokens = 0;              // 0 = the model's max_position_embeddings
  int num_threads = 0;                         // CPU ops and sampling; 0 = all cores
  bool enable_prefix_cache = true;
  // Hierarchical cache (SGLang's --enable-hierarchical-cache, HiCache; docs/runtime.md,
  // "Hierarchical cache"): blocks the prefix cache evicts are copied to host memory (pinned on
  // CUDA) and loaded back when a waiting prompt extends a cached prefix with them. Needs the
  // prefix cache. With several ranks each holds its heads of every host block.
  bool enable_hierarchical_cache = false;
  // The host tier's blocks per pool as a multiple of the device pool's (SGLang's hicache_ratio).
  double hicache_ratio = 2.0;
  // The host tier's bytes a rank (SGLang's hicache_size, in GB there); overrides hicache_ratio.
  // Split between the pools as the device pools' bytes are.
  std::optional<int64_t> hicache_bytes;
  // When blocks go to the host tier (SGLang's hicache_write_policy): write-back as eviction drops
  // them; write-through also as they are cached; write-through-selective only once reused.
  HostWritePolicy hicache_write_policy = HostWritePolicy::kWriteBack;
  bool cuda_graphs = true;                     // CUDA: decode steps replay CUDA graphs (docs/runtime.md, Device)
  // How attention's P enters P·V (KernelContext::attention_probs): kBf16 = FlashAttention's
  // rounding.
  AttentionProbs attention_probs = AttentionProbs::kFp32;
  // kAlways (--enable-deterministic-inference, SGLang's name): a request's tokens and logprobs do
  // not depend on the batch around it or on its chunking on the GPU either (KernelContext::
  // batch_invariance; docs/runtime.md "Batch invariance"); tensor-parallel ranks then sum their
  // partials in rank order (BeamModel::reduce_partials) instead of NCCL's all-reduce.
  BatchInvariance batch_invariance = BatchInvariance::kCpuOnly;
  // Engine::sleep / wake_up may give the KV pools' and (CUDA) the weights' memory back (vLLM's
  // enable_sleep_mode): that memory is then ReleasableMemory (kernels/api/releasable_memory.h).
  bool enable_sleep_mode = false;
  // Per-request LoRA adapters (vLLM's --max-loras / --max-lora-rank): the adapters one step may
  // use (device slots; 0 = none served) and the highest rank a slot holds.
  int max_loras = 0;
  int max_lora_rank = 16;
  // The most adapters loaded at once (SGLang's --max-loaded-loras; >= max_loras); 0: any number.
  int max_loaded_loras = 0;
  // The slots serve the routed experts too (--lora-experts; E times a dense MLP's slot memory a
  // layer). Without it an adapter with expert modules is refused unless merged at load.
  bool lora_experts = false;
  // The model split over this many ranks (vLLM's --tensor-parallel-size, SGLang's --tp-size;
  // model/tensor_parallel.h): attention heads, dense width and vocabulary split, routed experts
  // whole per rank, partial sums added in fp32 and rounded once. Each rank's KV pools hold its KV
  // heads within kv_budget_bytes. On CUDA rank r runs on GPU r and the ranks meet through NCCL
  // (libnccl.so.2 loaded at start); on the CPU the ranks are threads. Without LoRA slots or sleep
  // mode for now.
  int tensor_parallel_size = 1;
  // Replicas of the whole engine (vLLM's --data-parallel-size, SGLang's --dp-size; docs/runtime.md
  // "Data parallelism"), each with its own model copy, KV pools (kv_budget_bytes each), scheduler
  // and thread, sharing the host weights on the CPU; a request runs on one replica, which
  // load_balance picks unless the request names one. On CUDA replica d runs on GPUs
  // [d * tensor_parallel_size, (d + 1) * tensor_parallel_size); on the CPU the threads
  // (num_threads) are split between the replicas.
  int data_parallel_size = 1;
  LoadBalance load_balance = LoadBalance::kCacheAware;
  // Speculative decoding with n-gram drafts (vLLM's "ngram" method; docs/runtime.md,
  // "Speculative decoding"): each decode verifies up to num_draft_tokens drafts in one forward.
  // Sampling stays exact: every position draws with its own counter, so the tokens are those
  // decoding one at a time would give on the same logits.
  Speculation speculative;
};

// How far Engine::sleep lets go of the weights (vLLM's sleep levels). On the CPU the weights stay
// in host memory at either level; only the KV pools' pages go.
enum class SleepLevel {
  kOffloadWeights = 1,  // the device weights wait in host memory (a copy) until wake_up
  kDiscardWeights = 2,  // the device weights are dropped: after waking them, give new ones
                        // (update_weights) before anything is served
};

// What a sleeping engine holds back; serving resumes when none of it is.
struct SleepState {
  bool weights_released = false;   // the weights' device memory is given back
  bool kv_released = false;        // the KV pools' memory is given back
  bool weights_discarded = false;  // level 2: no weights until update_weights gives some
  // Bytes the last sleep gave back over every rank: KV pools, weights (and LoRA stacks) and
  // eager activations (0 before any sleep).
  int64_t released_bytes = 0;
  bool asleep() const { return weights_released || kv_released || weights_discarded; }
};

// How Engine::pause treats the requests it finds (vLLM's /pause modes; SGLang's pause_generation
// modes abort, in_place = kKeep and retract).
enum class PauseMode {
  kAbort,    // every request submitted so far ends now (FinishReason::kCancelled)
  kWait,     // no new request starts; those in flight finish, then the engine pauses
  kKeep,     // requests stay as they are, their KV included, and go on at resume
  kRetract,  // running requests give their KV back (cached by the prefix cache) and wait; at
             // resume they recompute what is not cached
};

struct PoolStats {
  int64_t total_blocks = 0;
  int64_t free_blocks = 0;  // free or evictable-now blocks are reported separately:
  int64_t cached_blocks = 0;  // held only by the prefix cache (evictable)
  int64_t used_blocks() const { return total_blocks - free_blocks - cached_blocks; }
  // used_blocks() as a share of the pool (0 for an empty pool).
  double usage() const {
    return total_blocks > 0
               ? static_cast<double>(used_blocks()) / static_cast<double>(total_blocks)
               : 0.0;
  }
};

inline constexpr double kGenerationRateSpanS = 5;

// The hierarchical cache's host tier (EngineOptions::enable_hierarchical_cache).
struct HostCacheStats {
  bool enabled = false;
  int64_t bytes = 0;           // host memory of its slots
  HostTierStats tier;          // slots, use, blocks saved and loaded
  int64_t restored_tokens = 0; // tokens of the full blocks loaded back from it
  int64_t unused_blocks = 0;   // full blocks loaded back, evicted before any sequence used them
};

struct EngineStats {
  int64_t running = 0;
  int64_t waiting = 0;
  // Sequence records the engine holds: running and waiting ones, and those of requests that
  // finished in the step just published (forgotten at the loop's next turn).
  int64_t sequence_records = 0;
  int64_t steps = 0;
  int64_t prompt_tokens = 0;         // totals since start
  int64_t cached_prompt_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t preemptions = 0;
  // Speculative decoding (EngineOptions::speculative; vLLM's spec_decode_num_drafts,
  // _num_draft_tokens and _num_accepted_tokens): decodes that verified drafts, the drafts they
  // verified, and those accepted.
  int64_t spec_verifications = 0;
  int64_t spec_draft_tokens = 0;
  int64_t spec_accepted_tokens = 0;
  // [j]: verifications whose draft j (0-based) was accepted (vLLM's
  // spec_decode_num_accepted_tokens_per_pos); num_draft_tokens entries with speculation on.
  std::vector<int64_t> spec_accepted_per_position;
  // With a DFlash2 drafter: its context pool's pages (docs/runtime.md "DFlash2 drafts"), those
  // free, and those the finished contexts' cache holds (evictable); all 0 without a drafter.
  int64_t draft_context_pages = 0;
  int64_t draft_context_free_pages = 0;
  int64_t draft_context_cached_pages = 0;
  double last_step_unix_s = 0;       // wall time the loop last advanced (health)
  // Generated tokens per second over the last kGenerationRateSpanS seconds of steps, as of the
  // stats() call; 0 when no step ran in that span.
  double generation_tokens_per_s = 0;
  PoolStats full_pool;
  PoolStats sliding_pool;
  HostCacheStats host_cache;
  // Per-request LoRA (vLLM's lora_requests_info): the adapters of running and of waiting
  // sequences (each name once, sorted) and EngineOptions::max_loras.
  std::vector<std::string> running_loras;
  std::vector<std::string> waiting_loras;
  int max_loras = 0;
};

class ReplicaBalancer;
struct BalancerOptions;

// Owns its thread (a thread per data-parallel replica); every public method may be called from
// any thread. With data parallelism (EngineOptions::data_parallel_size) a request runs on one
// replica; flush_prefix_cache, update_weights, LoRA loads, sleep / wake_up, pause / resume and
// wait_idle act on every replica (at once where they block), and the getters answer for replica
// 0, which holds what every replica holds.
class Engine {
 public:
  // weights: host weights (load_beam_weights); on CUDA they are copied to the device and the host
  // copy is no longer referenced. Logs the device and its memory plan.
  static Expected<std::unique_ptr<Engine>> create(std::shared_ptr<const BeamWeights> weights,
                                                  const EngineOptions& options);
  // The same with each rank's weights from `source` (model/tensor_parallel.h): with
  // load_rank_weights, a tensor-parallel engine's ranks each load only their experts (rank r on
  // its thread; a GPU rank's load and upload one at a time, so the host holds one rank's share).
  static Expected<std::unique_ptr<Engine>> create(const RankWeights& source,
                                                  const EngineOptions& options);
  ~Engine();

  const BeamConfig& config() const;
  // The step's token budget in force: EngineOptions::max_tokens_per_step or the device's default.
  int64_t max_tokens_per_step() const;
  // Ranks the model is split over (EngineOptions::tensor_parallel_size).
  int tensor_parallel_size() const;
  // Replicas the requests are spread over (EngineOptions::data_parallel_size).
  int data_parallel_size() const;
  // Where the model runs (EngineOptions::device).
  Device device() const;
  // Most drafts a decode verifies (EngineOptions::speculative resolved: a DFlash2 drafter's
  // block_size - 1 when not given); 0 without speculation.
  int64_t speculative_draft_tokens() const;
  // Validates (prompt length vs context, sampling params) and queues the request.
  Expected<RequestId> submit(GenerateRequest request);
  // Idempotent; releases everything the request holds within one step. The sink then receives a
  // final event with FinishReason::kCancelled for each unfinished sibling.
  void cancel(RequestId id);
  // Ends one sibling now as if it had stopped (the server's stop strings): within one step its
  // sink gets a final event with FinishReason::kStop (and its routed experts when asked for), and
  // its KV is released. Idempotent; ignored once the sibling or the request has finished.
  void stop_sibling(RequestId id, int32_t sibling);
  // Totals over the replicas (counts, pools and rates added; data_parallel.h's add_replica_stats).
  EngineStats stats() const;
  // Each data-parallel replica's own, in replica order (one entry without data parallelism).
  std::vector<EngineStats> replica_stats() const;
  // Drops every cached prefix no request is using (tests check pools are full afterwards).
  void flush_prefix_cache();
  // Serves new weights of the same architecture (load_beam_weights' result; SGLang's
  // update_weights_from_disk): no new request starts meanwhile; the requests in flight finish on
  // the old weights (abort_in_flight: they end at once, FinishReason::kCancelled); then the
  // weights are replaced and the prefix cache emptied (its KV came from the old weights). Blocks
  // until done. Errors (another architecture, an update already waiting) leave the old weights.
  Status update_weights(std::shared_ptr<const BeamWeights> weights, bool abort_in_flight);
  // The same with each rank's weights from `source` (load_rank_weights: a tensor-parallel rank
  // loads only its experts; the ranks one after another). A rank that fails after rank 0 took
  // the new weights leaves the ranks disagreeing: no step runs until an update succeeds.
  Status update_weights(const RankWeights& source, bool abort_in_flight);
  // The same with the weights `load` gives, called once this call holds the weight updates' turn
  // and while the engine still serves (a checkpoint is read before anything pauses): an update
  // called meanwhile is refused at once, before it reads a second copy. load's error is returned
  // as it is, the old weights serving.
  Status update_weights(const std::function<Expected<RankWeights>()>& load, bool abort_in_flight);
  // The first max_rows rows (all with max_rows < 0) of checkpoint tensor `name` (BEAM.md 0a's
  // names) as the model serves them, in f32, gathered over the ranks (SGLang's
  // get_weights_by_name, for RL loops that check a weight sync); read between steps, callers
  // taking turns. Errors: no such tensor (locate_weight's message), the weights asleep.
  Expected<WeightValues> read_weight(const std::string& name, int64_t max_rows);
  // Sleep mode (EngineOptions::enable_sleep_mode; vLLM's /sleep, SGLang's
  // release_memory_occupation, for RL loops that train on the same GPU): no new request starts,
  // the ones in flight finish, then the KV pools' memory (the prefix cache emptied first) and / or
  // (CUDA) the weights' go back to the device (`level`). Requests submitted while anything is
  // released wait for wake_up. Blocks until done. Errors: sleep mode off, nothing named, or a named
  // part already released.
  Status sleep(SleepLevel level, bool weights = true, bool kv_cache = true);
  // Takes memory back (vLLM's /wake_up with tags, SGLang's resume_memory_occupation): the weights'
  // (with their host copy at level 1) and / or the KV pools'. Serving resumes once both are back
  // and, after level 2, update_weights has given new weights. Errors: the device has no room (what
  // was not restored stays released).
  Status wake_up(bool weights, bool kv_cache);
  SleepState sleep_state() const;
  // Loads the PEFT LoRA adapter of `dir` as `name`, for requests naming it
  // (GenerateRequest::lora_name; vLLM's /v1/load_lora_adapter). Up to
  // EngineOptions::max_loaded_loras may be loaded (0: any number); a step serves up to max_loras
  // of them (the others' requests wait for a slot). Errors: LoRA off (max_loras 0), the name
  // taken, max_loaded_loras adapters loaded, the adapter unreadable or not servable (a rank above
  // max_lora_rank, routed-expert or unknown modules: LoraSlots::check's message). `replace`
  // (vLLM's load_inplace, for RL loops that save the adapter each step): a loaded name then means
  // the new adapter; requests holding the old one finish with it; no prefix cached under it is
  // reused. `pinned` (SGLang's): once in a slot the adapter never leaves it for another while
  // loaded; at most max_loras - 1 adapters may be pinned (an error names those that are).
  Status load_lora_adapter(const std::string& name, const std::string& dir, bool replace = false,
                           bool pinned = false);
  // New requests can no longer name it; those holding it finish with it. Errors: no such name.
  Status unload_lora_adapter(const std::string& name);
  std::vector<LoraAdapterInfo> lora_adapters() const;
  // Stops running steps (RL weight syncs: vLLM's /pause, SGLang's pause_generation) after treating
  // the requests as `mode` says; with clear_cache (not kKeep) the prefix cache is emptied. New
  // requests are queued until resume. While paused, update_weights applies at once: kept requests
  // go on with their KV on the new weights, retracted ones recompute on them (the prefix cache
  // never serves KV of older weights), and sleep may release the KV pools unless kept requests
  // hold them. Pausing a paused engine changes nothing. Blocks until paused.
  Status pause(PauseMode mode, bool clear_cache);
  // Runs steps again (vLLM's /resume, SGLang's continue_generation); a no-op when not paused.
  Status resume();
  bool paused() const;
  // Blocks until nothing is waiting or running (tests, offline benchmarks).
  void wait_idle();

 private:
  class Impl;
  // Which data-parallel replica an Impl is: its request ids are index + 1, index + 1 + count, ...
  // (an id names its replica); on CUDA its GPUs start at index * tensor_parallel_size.
  struct ReplicaPlace {
    int index = 0;
    int count = 1;
  };
  Engine(std::vector<std::unique_ptr<Impl>> replicas, const BalancerOptions& balance);
  static Expected<std::unique_ptr<Impl>> create_replica(const RankWeights& source,
                                                        const EngineOptions& options,
                                                        ReplicaPlace place);
  // The replica that issued id.
  Impl& replica_of(RequestId id) const;
  // f on every replica at once (each call blocks until its replica is done: replicas past the
  // first on threads of their own); each replica's answer.
  std::vector<Status> each_replica(const std::function<Status(Impl&)>& f);
  // The first error of each_replica's answers, naming its replica (one replica: its own).
  Status first_replica_error(const std::vector<Status>& done) const;
  // each_replica in `turn`: while another call holds it, make_error(busy) and no replica is asked.
  Status on_replicas(std::mutex& turn, const char* busy, const std::function<Status(Impl&)>& f);

  // Control calls of one kind take turns over the replicas, so that two at once cannot reach
  // them in different orders and leave them apart (one replica paused, another resumed). Weight
  // updates, sleeps and pauses refuse a second call as a replica does; LoRA loads wait.
  struct ControlTurns {
    std::mutex weights, memory, pause, lora;
  };

  std::shared_ptr<ReplicaBalancer> balancer_;  // the requests' sinks hold it too
  std::vector<std::unique_ptr<Impl>> replicas_;
  ControlTurns turns_;
};

}  // namespace beam
