// Engine: the step loop. Each step drains the inbox (submits, cancels), plans with the scheduler,
// commits the plan to the KV and prefix caches, runs the forward, samples, applies the finish
// checks token by token and emits TokenEvents. Only the engine thread touches the state.
#include "runtime/engine.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <numeric>
#include <optional>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <limits>
#include <set>
#include <thread>

#include "core/logging.h"
#include "runtime/data_parallel.h"
#include "runtime/engine_device.h"
#include "runtime/engine_ranks.h"
#include "runtime/ranked_host_mover.h"
#include "runtime/engine_sleep.h"
#include "runtime/engine_state.h"
#include "runtime/prefix_cache/host_kv_store.h"
#include "runtime/rate_window.h"
#include "runtime/sampling/device_sampler.h"
#include "runtime/sampling/finish_check.h"
#include "runtime/sampling/sampling_rng.h"
#include "runtime/scheduler/host_restore.h"
#include "runtime/scheduler/step_commit.h"
#include "runtime/speculative/dflash2_context_cache.h"
#include "runtime/speculative/ngram_corpus.h"

namespace beam {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "error";
}

namespace {

// Other requests of a decode's prompt whose text it drafts from (Engine::Impl::draft_from_request).
constexpr int64_t kMaxPromptPeers = 8;

double now_unix_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double to_gib(int64_t bytes) { return static_cast<double>(bytes) / (int64_t{1} << 30); }

// One start-up line: the device, where its memory went, and the pools' block counts.
void log_memory_plan(const EngineDevice& device, const KvStorage& storage, const KvPoolSizes& sizes,
                     bool explicit_budget) {
  const KernelContext ctx = device.context(nullptr);
  char weights[64] = "weights in host memory";
  if (device.device == Device::kCuda)
    std::snprintf(weights, sizeof(weights), "weights %.3f GiB on the device", to_gib(device.weight_device_bytes));
  char line[512];
  std::snprintf(line, sizeof(line), "engine: device %s; %s; KV pools (%s): full %d blocks %.3f GiB, sliding %d blocks %.3f GiB",
                describe_device(ctx).c_str(), weights, explicit_budget ? "explicit budget" : "default budget",
                sizes.num_full_blocks, to_gib(storage.bytes(AttentionKind::kFull)), sizes.num_sliding_blocks,
                to_gib(storage.bytes(AttentionKind::kSliding)));
  log_info(line);
}

// One start-up line: a step's token budget, where it came from, and what its largest step held.
void log_step_budget(int64_t tokens, bool explicit_tokens, int64_t device_default,
                     const std::optional<StepMemory>& step) {
  std::string source = "the device's default";
  if (explicit_tokens)
    source = "--max-tokens-per-step";
  else if (tokens != device_default)
    source += " " + std::to_string(device_default) + ", lowered to fit the KV budget";
  std::string line = "engine: up to " + std::to_string(tokens) + " tokens a step (" + source + ")";
  if (step) {
    char held[128];
    std::snprintf(held, sizeof(held),
                  "; such a step held %.3f GiB of activations and kernel scratch (warm-up %.2f s)",
                  to_gib(step->step_bytes), step->seconds);
    line += held;
  }
  log_info(line);
}

// EngineOptions::data_parallel_size against the GPUs there are.
Status check_engine_data_parallel(const EngineOptions& options) {
  const int dp = options.data_parallel_size;
  if (dp < 1)
    return make_error("engine: data parallel size " + std::to_string(dp) + ": must be >= 1");
  if (dp == 1 || options.device != Device::kCuda) return ok_status();
  const int gpus = cuda_device_count();
  const int need = dp * std::max(1, options.tensor_parallel_size);
  if (gpus < need)
    return make_error("engine: data parallel size " + std::to_string(dp) + " x tensor parallel size " +
                      std::to_string(options.tensor_parallel_size) + " needs " +
                      std::to_string(need) + " GPUs; " + std::to_string(gpus) + " visible");
  return ok_status();
}

// source's weights loaded once per rank and shared by every replica that asks for them (host
// weights are read-only), while the returned function lives. Replicas asking for the same rank at
// once (a weight update runs on every replica together) wait for one load.
RankWeights shared_rank_weights(RankWeights source) {
  struct Slot {
    std::mutex mu;  // held while the rank loads
    std::shared_ptr<const BeamWeights> weights;
  };
  struct Memo {
    std::mutex mu;
    std::map<int, std::shared_ptr<Slot>> by_rank;
  };
  auto memo = std::make_shared<Memo>();
  return [source = std::move(source),
          memo](TensorParallel tp) -> Expected<std::shared_ptr<const BeamWeights>> {
    std::shared_ptr<Slot> slot;
    {
      std::lock_guard<std::mutex> lock(memo->mu);
      std::shared_ptr<Slot>& s = memo->by_rank[tp.rank];
      if (!s) s = std::make_shared<Slot>();
      slot = s;
    }
    std::lock_guard<std::mutex> lock(slot->mu);
    if (!slot->weights) {  // a failed load leaves it empty: the next asker tries again
      BEAM_ASSIGN_OR_RETURN(slot->weights, source(tp));
    }
    return slot->weights;
  };
}

// The CPU threads EngineOptions::num_threads asks for (0: every core).
int engine_threads(const EngineOptions& options) {
  return options.num_threads > 0 ? options.num_threads
                                 : static_cast<int>(std::thread::hardware_concurrency());
}

// The refusals of a control call while another of its kind is in progress (a replica's, and the
// engine's while the call takes its turn over the replicas).
constexpr char kWeightsBusy[] = "another weight update is in progress";
constexpr char kMemoryBusy[] = "another sleep or wake-up is in progress";
constexpr char kPauseBusy[] = "another pause or resume is in progress";
// A sleep that would release the KV pools under requests a kKeep pause kept.
constexpr char kKeptRequestsHoldKv[] =
    "requests kept through the pause hold the KV cache; release the weights alone, or pause with "
    "mode abort or retract to release it";

// f(0) .. f(n - 1) at once: f(0) on the calling thread, the others on threads of their own.
void at_once(int n, const std::function<void(int)>& f) {
  std::vector<std::thread> threads;
  for (int i = 1; i < n; ++i) threads.emplace_back(f, i);
  f(0);
  for (std::thread& t : threads) t.join();
}

// The tokens a request may hold at most (its prompt, then each sibling's output limit within the
// context): LoadBalance::kMinimumTokens's weight.
int64_t request_tokens(const GenerateRequest& r, int64_t max_context) {
  const int64_t prompt = static_cast<int64_t>(r.prompt.size());
  const int64_t room = std::max<int64_t>(0, max_context - prompt);
  return prompt + r.sampling.n * std::min(r.sampling.max_tokens.value_or(room), room);
}

// What a tensor-parallel engine needs before any weights load (EngineOptions::
// tensor_parallel_size): a size >= 1. The split itself is checked by the slicing, GPUs and NCCL
// as the ranks start.
Status check_engine_tensor_parallel(const EngineOptions& options) {
  const int tp = options.tensor_parallel_size;
  if (tp == 1) return ok_status();
  const std::string what = "engine: tensor parallel size " + std::to_string(tp);
  if (tp < 1) return make_error(what + ": must be >= 1");
  return ok_status();
}

// What the hierarchical cache needs before any weights load (EngineOptions::
// enable_hierarchical_cache): the prefix cache, one rank, a positive size.
Status check_engine_hierarchical_cache(const EngineOptions& options) {
  if (!options.enable_hierarchical_cache) return ok_status();
  const std::string what = "engine: the hierarchical cache (--enable-hierarchical-cache)";
  if (!options.enable_prefix_cache) return make_error(what + " needs the prefix cache (drop --no-prefix-cache)");
  if (!(options.hicache_ratio > 0) || options.hicache_ratio > 1e6)
    return make_error(what + ": hicache_ratio " + std::to_string(options.hicache_ratio) +
                      " must be a positive multiple of the device pools");
  if (options.hicache_bytes && *options.hicache_bytes <= 0)
    return make_error(what + ": hicache size " + std::to_string(*options.hicache_bytes) +
                      " bytes must be positive");
  return ok_status();
}

// The host tier's slots per pool: hicache_bytes split as the device pools' bytes are, else
// hicache_ratio times the device pools' blocks.
BlockCounts host_tier_slots(const EngineOptions& options, const KvStorage& storage) {
  BlockCounts slots;
  const double device_bytes = static_cast<double>(storage.bytes(AttentionKind::kFull) + storage.bytes(AttentionKind::kSliding));
  for (AttentionKind pool : kKvPools) {
    if (storage.num_blocks(pool) == 0) continue;
    const auto blocks = static_cast<double>(storage.num_blocks(pool));
    slots.of(pool) = static_cast<int64_t>(
        options.hicache_bytes
            ? static_cast<double>(*options.hicache_bytes) * static_cast<double>(storage.bytes(pool)) /
                  device_bytes / static_cast<double>(HostKvStore::block_bytes(storage, pool))
            : options.hicache_ratio * blocks);
    slots.of(pool) = std::min<int64_t>(slots.of(pool), std::numeric_limits<int32_t>::max());
  }
  return slots;
}

// Host memory the kernel could give without swapping (MemAvailable in /proc/meminfo), if known.
std::optional<int64_t> available_host_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return std::nullopt;
}

// Rank 0's host tier memory (EngineOptions::enable_hierarchical_cache), logged; none when off.
// Every rank holds as many slots of its own heads (SGLang's sizes are per rank too). A tier
// whose ranks together need more than the host's available memory is refused before any of it
// is pinned.
Expected<std::optional<HostKvStore>> make_host_store(const EngineOptions& options,
                                                     const KernelContext& ctx,
                                                     const KvStorage& storage) {
  if (!options.enable_hierarchical_cache) return std::optional<HostKvStore>();
  const BlockCounts slots = host_tier_slots(options, storage);
  if (slots.full == 0 && slots.sliding == 0)
    return make_error("engine: the hierarchical cache's host size holds no block of either pool");
  const int ranks = options.tensor_parallel_size;
  int64_t bytes = 0;
  for (AttentionKind pool : kKvPools)
    if (slots.of(pool) > 0) bytes += slots.of(pool) * HostKvStore::block_bytes(storage, pool);
  const std::optional<int64_t> available = available_host_bytes();
  if (available && bytes * ranks > *available)
    return make_error("engine: the hierarchical cache's host tier needs " +
                      std::to_string(bytes * ranks) + " bytes" +
                      (ranks > 1 ? " (" + std::to_string(ranks) + " ranks)" : std::string()) +
                      " but the host has " + std::to_string(*available) +
                      " available: lower --hicache-ratio or give --hicache-size");
  BEAM_ASSIGN_OR_RETURN(HostKvStore store, HostKvStore::create(ctx, storage, slots));
  char line[200];
  std::snprintf(line, sizeof(line),
                "engine: hierarchical cache: %lld full + %lld sliding blocks in %.3f GiB of %s "
                "host memory%s, %s",
                static_cast<long long>(slots.full), static_cast<long long>(slots.sliding),
                to_gib(store.bytes()), ctx.device == Device::kCuda ? "pinned" : "plain",
                ranks > 1 ? " a rank" : "", host_write_policy_name(options.hicache_write_policy));
  log_info(line);
  return std::optional<HostKvStore>(std::move(store));
}

// EngineOptions::speculative.dflash2_drafter's weights on the engine's device (null without one),
// checked against the target.
Expected<std::shared_ptr<const DFlash2Weights>> load_engine_drafter(const EngineOptions& options,
                                                                    const KernelContext& ctx,
                                                                    const BeamConfig& target) {
  const std::string& dir = options.speculative.dflash2_drafter;
  if (dir.empty()) return std::shared_ptr<const DFlash2Weights>();
  Expected<std::shared_ptr<DFlash2Weights>> w = load_dflash2_weights(dir, target);
  if (!w.ok()) return make_error("engine: the DFlash2 drafter: " + w.error().message);
  const DFlash2Config& c = w.value()->config;
  std::string taps;
  for (int64_t id : c.target_layer_ids) taps += (taps.empty() ? "" : ", ") + std::to_string(id);
  log_info("engine: DFlash2 drafter " + dir + ": " + std::to_string(c.num_layers) +
           " layers, block " + std::to_string(c.block_size) + ", the target's layers " + taps +
           " tapped");
  Expected<std::shared_ptr<const DFlash2Weights>> on_device =
      upload_dflash2_weights(ctx, std::shared_ptr<const DFlash2Weights>(std::move(w).value()));
  if (!on_device.ok()) return make_error("engine: " + on_device.error().message);
  return on_device;
}

// The drafter's context pool as KV pools plan it: every running sequence's ring (its pages for
// max_context positions without a window) and the drafter's own page (docs/runtime.md "DFlash2
// drafts"); 0 page bytes without a drafter or with an explicit size.
KvRingPool draft_ring_pool(const DFlash2Weights* drafter, int64_t max_context,
                           int64_t requested_bytes) {
  if (drafter == nullptr || requested_bytes > 0) return {};
  return KvRingPool{.page_bytes = DFlash2ContextPool::page_bytes(drafter->config),
                    .page_tokens = DFlash2ContextPool::kPageSize,
                    .pages_per_seq = DFlash2ContextPool::pages_for(drafter->config, max_context),
                    .fixed_pages = 1};
}

// The drafter's context pool of `pages` pages (`asked`: Speculation::dflash2_context_pool_bytes
// set them, else plan_kv_pools did).
Expected<std::shared_ptr<DFlash2ContextPool>> make_draft_pool(const KernelContext& ctx,
                                                              const DFlash2Config& c,
                                                              int64_t max_running, int64_t pages,
                                                              bool asked) {
  const int64_t page = DFlash2ContextPool::page_bytes(c);
  char line[240];
  std::snprintf(line, sizeof(line),
                "engine: DFlash2 context pool %.2f GiB off the KV budget (%lld pages of %lld "
                "positions; %s)",
                static_cast<double>(pages * page) / (1 << 30), static_cast<long long>(pages),
                static_cast<long long>(DFlash2ContextPool::kPageSize),
                asked ? "as asked"
                      : ("rings of " + std::to_string(max_running) +
                         " sequences, finished contexts in the rest")
                            .c_str());
  log_info(line);
  return DFlash2ContextPool::create(ctx, c, pages);
}

}  // namespace

class Engine::Impl {
 public:
  Impl(EngineDevice device, const EngineOptions& options, KvGeometry geometry, KvPoolSizes sizes,
       std::unique_ptr<KvMemoryAllocator> allocator, KvStorage storage, KvCacheManager kv,
       std::unique_ptr<LoraSlots> lora, std::unique_ptr<EngineRanks> ranks,
       std::optional<HostKvStore> host_store, std::shared_ptr<const DFlash2Weights> drafter,
       std::shared_ptr<DFlash2ContextPool> draft_pool, DeviceBuffer drafter_lm_head,
       ReplicaPlace place)
      : options_(options),
        cuda_(device.cuda),
        allocator_(std::move(allocator)),
        pool_(options.num_threads),
        ranks_(std::move(ranks)),
        model_(device.weights, device.context(&pool_), std::move(lora),
               ranks_ ? ranks_->rank0_shard() : ModelShard{}),
        geometry_(std::move(geometry)),
        sizes_(sizes),
        storage_(std::move(storage)),
        kv_(std::move(kv)),
        scheduler_(SchedulerConfig{*options.max_tokens_per_step, options.max_running,
                                   *options.max_tokens_per_step, 1}),
        sampler_(model_.config().vocab_size, &pool_),
        loras_(options.max_loaded_loras, std::max(0, options.max_loras - 1)),
        lora_table_(options.max_loras),
        mask_scratch_(static_cast<size_t>(pool_.num_threads())),
        next_request_id_(place.index + 1),
        request_id_stride_(place.count) {
    if (model_.context().device != Device::kCpu)
      device_sampler_.emplace(model_.context(), model_.config().vocab_size);
    if (options.enable_sleep_mode)
      sleep_ = SleepController(model_.context(), device.weight_memory, model_.lora_slots(),
                               &dynamic_cast<ReleasableKvAllocator&>(*allocator_));
    if (options.enable_prefix_cache) prefix_.emplace(kv_);
    if (host_store) {
      host_store_ = std::move(host_store);
      host_store_->attach(storage_);
      HostBlockMover* mover = &*host_store_;
      if (ranks_) mover = &ranked_mover_.emplace(*host_store_, *ranks_);  // every rank's heads
      host_tier_.emplace(options.block_size_tokens, host_store_->slots(), *mover);
      prefix_->attach_host_tier(&*host_tier_, options.hicache_write_policy);
    }
    const auto& eos = model_.config().eos_token_ids;
    eos_.assign(eos.begin(), eos.end());
    max_context_ = options.max_context_tokens > 0 ? options.max_context_tokens
                                                  : model_.config().max_position_embeddings;
    stats_.full_pool.total_blocks = sizes.num_full_blocks;
    stats_.sliding_pool.total_blocks = sizes.num_sliding_blocks;
    counters_.spec_accepted_per_position.assign(
        static_cast<size_t>(options.speculative.num_draft_tokens), 0);
    if (options.speculative.enabled() && options.speculative.corpus_tokens > 0)
      corpus_.emplace(options.speculative.corpus_tokens, options.speculative);
    if (drafter) {  // on the target's device, reading its embedding and LM head
      const BeamWeights& target = *device.weights;
      // With several ranks, rank 0 holds a vocabulary slice of the head: the gathered whole.
      drafter_lm_head_ = std::move(drafter_lm_head);
      const TensorView lm_head = drafter_lm_head_.data() != nullptr
                                     ? drafter_lm_head_.view(DType::kBF16, target.embed.shape)
                                     : target.lm_head;
      // Finished contexts may fill the pool; running sequences evict them for pages.
      draft_contexts_ = DFlash2ContextCache(
          draft_pool->total_pages() * DFlash2ContextPool::page_bytes(draft_pool->config()));
      drafter_.emplace(std::move(drafter), target.embed, lm_head, model_.context(),
                       std::move(draft_pool));
      // Memory the KV budget left for it (Engine::create); an error leaves drafting to retry.
      const Status st = drafter_->reserve(*options.max_tokens_per_step, options.max_running);
      if (!st.ok()) log_warning("engine: the DFlash2 drafter's scratch: " + st.error().message);
    }
    publish_stats();
    thread_ = std::thread([this] { run(); });
  }

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(inbox_.mu);
      inbox_.stop = true;
    }
    inbox_.cv.notify_all();
    thread_.join();
  }

  const BeamConfig& config() const { return model_.config(); }
  int64_t max_tokens_per_step() const { return *options_.max_tokens_per_step; }
  int tensor_parallel_size() const { return options_.tensor_parallel_size; }
  Device device() const { return options_.device; }
  int64_t max_context() const { return max_context_; }
  int64_t speculative_draft_tokens() const { return options_.speculative.num_draft_tokens; }

  Expected<RequestId> submit(GenerateRequest request) {
    if (request.prompt.empty()) return make_error("prompt: must contain at least one token");
    for (int32_t t : request.prompt)
      if (t < 0 || t >= config().vocab_size)
        return make_error("prompt: token id " + std::to_string(t) + " is outside the vocabulary (" +
                          std::to_string(config().vocab_size) + ")");
    if (static_cast<int64_t>(request.prompt.size()) >= max_context_)
      return make_error("prompt: " + std::to_string(request.prompt.size()) +
                        " tokens leave no room to generate within the context of " +
                        std::to_string(max_context_) + " tokens");
    BEAM_RETURN_IF_ERROR(request.sampling.validate(config().vocab_size));
    BEAM_RETURN_IF_ERROR(validate_prompt_logprobs(request, config().vocab_size));
    if (request.routed_experts_start < 0 || request.hidden_states_start < 0)
      return make_error("routed_experts_start / hidden_states_start: must be >= 0");
    std::shared_ptr<const LoraEntry> lora;
    if (!request.lora_name.empty()) {
      if (options_.max_loras == 0)
        return make_error("lora: the engine serves no LoRA adapters (its max_loras is 0), so '" +
                          request.lora_name + "' cannot be used");
      BEAM_ASSIGN_OR_RETURN(lora, loras_.find(request.lora_name));
    }
    std::lock_guard<std::mutex> lock(inbox_.mu);
    RequestId id(next_request_id_);
    next_request_id_ += request_id_stride_;
    inbox_.submitted.push_back(Submission{id, std::move(request), std::move(lora)});
    inbox_.pending++;
    inbox_.cv.notify_all();
    return id;
  }

  // The prompt_logprobs options against the prompt.
  static Status validate_prompt_logprobs(const GenerateRequest& request, int64_t vocab_size) {
    const auto len = static_cast<int64_t>(request.prompt.size());
    const auto& o = request.prompt_logprobs;
    if (!o) return ok_status();
    if (o->start < 1 || o->start > len)
      return make_error("prompt_logprobs: start " + std::to_string(o->start) +
                        " is outside the prompt's positions [1, " + std::to_string(len) + "]");
    if (o->num_top < 0 || o->num_top > kMaxTopLogprobs)
      return make_error("prompt_logprobs: " + std::to_string(o->num_top) +
                        " alternatives; must be in [0, " + std::to_string(kMaxTopLogprobs) + "]");
    if (static_cast<int64_t>(o->token_ids.size()) > kMaxTokenIdsLogprob)
      return make_error("prompt_logprobs: " + std::to_string(o->token_ids.size()) +
                        " token ids; at most " + std::to_string(kMaxTokenIdsLogprob));
    for (int32_t id : o->token_ids)
      if (id < 0 || id >= vocab_size)
        return make_error("prompt_logprobs: token id " + std::to_string(id) +
                          " is outside the vocabulary (" + std::to_string(vocab_size) + ")");
    return ok_status();
  }

  void cancel(RequestId id) {
    std::lock_guard<std::mutex> lock(inbox_.mu);
    inbox_.cancelled.push_back(id);
    inbox_.cv.notify_all();
  }

  void stop_sibling(RequestId id, int32_t sibling) {
    std::lock_guard<std::mutex> lock(inbox_.mu);
    inbox_.stopped.emplace_back(id, sibling);
    inbox_.cv.notify_all();
  }

  EngineStats stats() const {
    std::lock_guard<std::mutex> lock(stats_mu_);
    EngineStats s = stats_;
    s.generation_tokens_per_s = generation_rate_.rate(now_unix_s());
    return s;
  }

  void flush_prefix_cache() {
    std::unique_lock<std::mutex> lock(inbox_.mu);
    inbox_.flush = true;
    inbox_.cv.notify_all();
    inbox_.idle_cv.wait(lock, [&] { return !inbox_.flush; });
  }

  Status update_weights(RankWeights source, bool abort_in_flight) {
    return ask_engine_thread(inbox_.weights_answer, kWeightsBusy, [&] {
      inbox_.new_weights = std::move(source);
      inbox_.abort_for_weights = abort_in_flight;
    });
  }

  void wait_idle() {
    std::unique_lock<std::mutex> lock(inbox_.mu);
    inbox_.idle_cv.wait(lock, [&] { return inbox_.pending == 0; });
  }

  Status load_lora_adapter(const std::string& name, const std::string& dir, bool replace,
                           bool pinned) {
    if (options_.max_loras == 0)
      return make_error("the engine serves no LoRA adapters (start it with max_loras >= 1)");
    BEAM_ASSIGN_OR_RETURN(std::shared_ptr<const LoraAdapter> adapter, LoraAdapter::open(dir));
    // The slots' module shapes never change, so any thread may check against them.
    BEAM_RETURN_IF_ERROR(model_.lora_slots()->check(*adapter));
    return loras_.add(name, std::move(adapter), replace, pinned);
  }

  Status unload_lora_adapter(const std::string& name) { return loras_.remove(name); }

  std::vector<LoraAdapterInfo> lora_adapters() const {
    std::vector<LoraAdapterInfo> out;
    for (const auto& e : loras_.list()) out.push_back({e->name, e->adapter->dir()});
    return out;
  }

  Expected<WeightValues> read_weight(const std::string& name, int64_t max_rows) {
    // Callers take turns (one read waits in the inbox at a time), each taking its own values.
    std::lock_guard<std::mutex> turn(weight_read_mu_);
    BEAM_RETURN_IF_ERROR(ask_engine_thread(inbox_.weight_read_answer, "another weight read is waiting",
                                           [&] { inbox_.weight_read = {name, max_rows}; }));
    std::lock_guard<std::mutex> lock(inbox_.mu);
    return std::move(inbox_.weight_values);
  }

  Status memory_command(MemoryCommand command) {
    return ask_engine_thread(inbox_.memory_answer, kMemoryBusy,
                             [&] { inbox_.memory_command = command; });
  }

  SleepState sleep_state() const {
    std::lock_guard<std::mutex> lock(stats_mu_);
    return sleep_published_;
  }

  Status pause_command(PauseCommand command) {
    return ask_engine_thread(inbox_.pause_answer, kPauseBusy,
                             [&] { inbox_.pause_command = command; });
  }

  bool paused() const {
    std::lock_guard<std::mutex> lock(stats_mu_);
    return paused_published_;
  }

 private:
  // Posts a call the engine thread answers in `slot` (post() fills the inbox under its lock) and
  // waits for the answer; `busy` is the error while another such call waits.
  template <typename Post>
  Status ask_engine_thread(EngineAnswer& slot, const char* busy, Post post) {
    std::unique_lock<std::mutex> lock(inbox_.mu);
    if (slot.busy) return make_error(busy);
    slot.busy = true;
    post();
    inbox_.cv.notify_all();
    inbox_.idle_cv.wait(lock, [&] { return slot.result.has_value(); });
    Status result = std::move(*slot.result);
    slot.result.reset();
    slot.busy = false;
    return result;
  }
  // The engine thread's answer to the call waiting in `slot`.
  void answer(EngineAnswer& slot, Status st) {
    std::lock_guard<std::mutex> lock(inbox_.mu);
    slot.result = std::move(st);
    inbox_.idle_cv.notify_all();
  }
  void run();
  bool drain_inbox();
  void admit_request(Submission&& submission);
  // Whether seq's adapter (if any) holds a model slot this step: running sequences' adapters keep
  // theirs (in `pinned`); another gets a free slot or the least recently used one no pinned
  // adapter holds (its factors copied in now) and is pinned; false: none is free, seq waits.
  // An adapter that fails to load ends its request (`failed`).
  bool take_lora_slot(const Sequence& seq, std::set<uint64_t>& pinned,
                      std::vector<std::pair<RequestId, std::string>>& failed);
  // The model slot of seq's adapter (kNoLoraSlot without one); it holds one while seq runs.
  int32_t lora_slot_of(const Sequence& seq);
  // After the weights (and with them the LoRA slots) woke up: each slot's adapter copied in again.
  void reload_lora_slots();
  void cancel_request(RequestId id);
  void stop_request_sibling(RequestId id, int32_t sibling);
  // One step: drafts proposed (speculation on), the step run, the drafts not accepted dropped.
  void step();
  void run_step();
  // Whether seq's next work is a decode of its own (it holds KV for all but its last token).
  bool decodes_next(const Sequence& seq) const;
  // A prompt owner before its first token: that sample also draws its siblings' first tokens
  // (sample_and_emit forks them from it).
  static bool forks_siblings_next(const Sequence& s) {
    return s.sibling == 0 && s.sampling->num_output_tokens() == 0;
  }
  // Appends n-gram drafts to the tokens of each running sequence that can speculate.
  void propose_drafts();
  // The decodes that may draft this step and how many drafts each may take (output room, draft
  // limit, the step's logit rows), in running order; cooling sequences count a step down.
  std::vector<std::pair<SeqId, int64_t>> drafting_decodes();
  // Appends `drafts` to seq's tokens, stopped at the first one its masks refuse.
  void take_drafts(Sequence& seq, std::span<const int32_t> drafts);
  // With a DFlash2 drafter: the blocks of the decodes that draft, one drafter forward for all.
  void propose_dflash2_drafts();
  // With a DFlash2 drafter: adds the positions each work item of the step committed (its prefill
  // chunk, its decoded token, a verification's accepted ones) to its sequence's drafter context,
  // from the target's captured hidden states.
  void feed_drafter(const StepPlan& plan, const ForwardOutput& out);
  // Logs a drafter error (out of device memory), the first and every 1,000th.
  void note_drafter_failure(const std::string& what);
  // Drops finished sequences' drafter contexts (oldest first) until the pool has `pages` free:
  // running sequences come first.
  void reclaim_draft_pages(int64_t pages);
  // Writes seq's drafts into `out` (returns how many): the longest n-gram match of its suffix in
  // its own tokens or, when longer, in a sibling sample's (n > 1: samples of one prompt often
  // write the same text).
  int64_t draft_from_request(const Sequence& seq, std::span<int32_t> out) const;
  // Takes seq's drafts off its tokens.
  void drop_drafts(Sequence& seq);
  // Takes a finished request out of prompt_peers_.
  void forget_prompt_peer(RequestId id, uint64_t prompt_key);
  // After a verified decode of `work` sampled `tokens` (one per fed position): the drafts up to
  // the first mismatch and the token sampled there are the step's tokens; the KV of the rest is
  // given up. Rows from usable_rows on failed their masks: drafts stop before that row, and a
  // sequence that reaches it takes no token there. Returns how many drafts were accepted (fewer
  // than usable_rows: the token sampled at the row after them is taken too).
  int64_t accept_drafts(const SeqWork& work, Sequence& seq, std::span<const int32_t> tokens,
                        int64_t usable_rows);
  // Whether a sequence has written output (it finishes on the weights it started with).
  bool in_flight(const Sequence& s) const;
  bool any_in_flight() const;
  // With new weights waiting: replaces the model's once nothing is in flight.
  void apply_pending_weights();
  // Serves source's weights on every rank: rank 0's slice on model_ (which refuses another config
  // before any rank changes; its load checks the whole checkpoint), the others' through ranks_.
  Status replace_weights(const RankWeights& source);
  // Points the DFlash2 drafter (if any) at the target's new embedding and LM head (rank 0's
  // slice of the head: the whole one gathered again into drafter_lm_head_).
  Status retarget_drafter();
  // Engine::read_weight on the engine thread: rank 0's part and each worker's, gathered.
  Expected<WeightValues> read_served_weight(const std::string& name, int64_t max_rows);
  // With a sleep or wake-up waiting: runs it (a sleep once nothing is in flight, or while paused
  // once nothing holds the KV it releases) on rank 0, then on the other ranks.
  void apply_memory_command();
  // Records how the workers' sleep or wake-up that rank 0 made went (ranks_memory_apart_: steps
  // stop until a wake-up succeeds on every rank); a failure's error says so.
  Status workers_followed(const Status& workers);
  // With a pause or resume waiting: runs it (a kWait pause once nothing is in flight).
  void apply_pause_command();
  // The pause, weight and memory commands the inbox brought, each once it can apply.
  void apply_pending_commands();
  // PauseMode::kRetract: every running sequence gives its KV back (cached) and waits.
  void retract_running();
  // Whether steps stop: paused, or memory given back.
  bool halted() const {
    return paused_ || sleep_.state().asleep() || weights_mixed_ || ranks_memory_apart_;
  }
  // sleep_.state() and paused_ for sleep_state() / paused() callers.
  void publish_halt_state() {
    std::lock_guard<std::mutex> lock(stats_mu_);
    sleep_published_ = sleep_.state();
    sleep_published_.released_bytes = released_bytes_;
    paused_published_ = paused_;
  }
  // A running sequence whose KV was released (preempted, or retracted by a pause) waits to
  // recompute it.
  void requeue_released(Sequence& s);
  // Whether no new request may start: new weights, a sleep or a kWait pause are waiting for
  // those in flight.
  bool holding_new_requests() const {
    return pending_weights_ || (pending_memory_ && pending_memory_->sleep) ||
           (pending_pause_ && pending_pause_->pause && pending_pause_->mode == PauseMode::kWait);
  }
  void order_waiting();
  // Steps a waiting sequence may be passed over before it is served in arrival order again.
  static constexpr int64_t kMaxSkippedSteps = 64;
  // Waiting sequences a step may restore from the hierarchical cache's host tier.
  static constexpr int64_t kHostRestoreLookahead = 8;
  static bool starved(const Sequence& s) { return s.waited_steps > kMaxSkippedSteps; }
  void apply_preemptions(const StepPlan& plan);
  // One row to sample and the sequence that takes its token.
  struct SampleTarget {
    SeqId seq;
    bool fork_child = false;  // a sibling drawing its first token from the prompt owner's row
    size_t work = 0;          // its StepPlan::work item (a verified decode: a row a position)
    int64_t draft_row = 0;    // a verified decode's row: 0 at the last token, j after draft j - 1
    // A draft row's mask error (attach_allowed_tokens): plain decoding meets it only if every
    // draft before the row is accepted; the row then ends the sequence instead of sampling.
    std::string draft_row_error = {};
  };
  void sample_and_emit(const StepPlan& plan, const ForwardOutput& out);
  bool finish_unsampled(Sequence& owner);
  void finish_request(RequestId id, FinishReason reason, const std::string& error);
  bool needs_prompt_logits(const Sequence& seq) const;
  void record_prompt_logprobs(const StepPlan& plan, const ForwardOutput& out);
  Status score_rows(const ForwardOutput& out, std::span<const ScoreRow> rows,
                    std::span<TokenLogprobs> scored);
  void attach_allowed_tokens(std::vector<DeviceSampleRow>& rows,
                             std::vector<SampleTarget>& targets);
  Status sample_rows(const ForwardOutput& out, std::span<const DeviceSampleRow> rows,
                     std::span<SampledToken> sampled);
  // Appends a step's tokens with what was sampled alongside each (SampledToken's logprobs,
  // entropy and token ids' logprobs, when the request asked), cut where the sequence finishes.
  void append_tokens(Sequence& seq, std::span<const int32_t> tokens,
                     std::span<SampledToken> sampled);
  SeqId rs_owner(const Sequence& seq) const;
  bool has_pending_children(const Sequence& parent) const;
  void release_retired_parents();
  void finish_sequence(Sequence& seq, FinishReason reason, std::optional<int32_t> stop_token,
                       std::string error, bool emit);
  void emit(Sequence& seq, TokenEvent&& ev);
  SeqState scheduler_view(const Sequence& seq) const;
  bool wants_routing(const Sequence& seq) const;
  bool wants_hidden_states(const Sequence& seq) const;
  int64_t hidden_states_start(const Sequence& seq) const;
  int64_t final_hidden_from(const SeqWork& w) const;
  void record_hidden_states(const StepPlan& plan, const ForwardOutput& out);
  int64_t routed_moe_layers() const { return config().num_layers_of(MlpKind::kSparse); }
  void record_routing(const StepPlan& plan, const ForwardOutput& out);
  void publish_stats();
  // Erases the records of finished requests' sequences (between steps: nothing reads them then).
  void forget_finished_sequences();

  EngineOptions options_;
  std::shared_ptr<CudaContext> cuda_;             // Device::kCuda: outlives everything on the GPU
  std::unique_ptr<KvMemoryAllocator> allocator_;  // outlives storage_, which it allocated
  ThreadPool pool_;
  // Ranks 1.. of a tensor-parallel model (null with one rank); before model_, which is rank 0.
  std::unique_ptr<EngineRanks> ranks_;
  BeamModel model_;
  KvGeometry geometry_;
  KvPoolSizes sizes_;
  KvStorage storage_;
  KvCacheManager kv_;
  std::optional<PrefixCache> prefix_;
  std::optional<HostKvStore> host_store_;  // the hierarchical cache's memory (and copies)
  std::optional<RankedHostMover> ranked_mover_;  // several ranks: the workers' copies too
  std::optional<HostKvTier> host_tier_;    // its entries; prefix_ saves to and restores from it
  HostRestoreMemo host_memo_;              // waiting sequences with nothing to restore
  Scheduler scheduler_;
  BatchSampler sampler_;                            // Device::kCpu
  std::optional<DeviceBatchSampler> device_sampler_;  // other devices: logits stay there
  LoraRegistry loras_;                                // adapters by name (any thread)
  LoraSlotTable lora_table_;       // which adapter each of the model's LoRA slots holds
  std::vector<uint32_t> allowed_;  // the step's allowed-token masks (attach_allowed_tokens)
  std::vector<MaskScratch> mask_scratch_;  // one per pool thread
  std::vector<int32_t> eos_;
  int64_t max_context_ = 0;
  std::vector<SeqId> drafted_;  // sequences holding drafts this step (propose_drafts)
  // With speculation: the unfinished requests of each prompt (RequestState::prompt_key), oldest
  // first, whose sequences a decode drafts from (draft_from_request).
  std::unordered_map<uint64_t, std::vector<RequestId>> prompt_peers_;
  // The step's draft positions of masked verified decodes (has_masks): sampling states advanced
  // over the drafts before each (sample_and_emit; their rows point here).
  std::vector<std::unique_ptr<SequenceSamplingState>> draft_states_;
  // Finished requests' tokens to draft from (EngineOptions::speculative.corpus_tokens > 0).
  std::optional<NgramCorpus> corpus_;
  // With a drafter and several ranks: the whole LM head on rank 0's device (EngineRanks::
  // gather_lm_head); empty otherwise.
  DeviceBuffer drafter_lm_head_;
  // EngineOptions::speculative.dflash2_drafter's model (on the target's device, rank 0's).
  std::optional<DFlash2Drafter> drafter_;
  int64_t drafter_failures_ = 0;  // note_drafter_failure's count
  // Finished sequences' drafter contexts for requests that start with their text.
  DFlash2ContextCache draft_contexts_{0};

  Inbox inbox_;
  int64_t next_request_id_ = 1;  // guarded by inbox_.mu
  int64_t request_id_stride_ = 1;  // ReplicaPlace::count
  std::unordered_map<RequestId, RequestState> requests_;
  std::unordered_map<SeqId, Sequence> seqs_;
  // The sequences of finished requests, erased from seqs_ by forget_finished_sequences.
  std::vector<SeqId> finished_seqs_;
  std::vector<SeqId> running_;
  std::vector<SeqId> waiting_;
  int64_t next_seq_id_ = 1;
  int64_t next_arrival_ = 0;

  mutable std::mutex stats_mu_;
  std::mutex weight_read_mu_;  // read_weight's callers, one at a time
  EngineStats stats_;
  RateWindow generation_rate_{kGenerationRateSpanS};  // generated tokens (under stats_mu_)
  EngineStats counters_;                     // engine-thread copy, published after each step
  std::optional<TokenEvent> pending_final_;  // tokens of the step that finished a sequence
  RankWeights pending_weights_;              // update_weights': applied when idle
  // An update failed after some weights changed (a rank after rank 0 took the new weights, or a
  // copy that stopped part way): the served weights are not one model's, so no step runs until
  // an update succeeds (halted()).
  bool weights_mixed_ = false;
  // A worker failed a sleep or wake-up that rank 0 made (workers_followed).
  bool ranks_memory_apart_ = false;
  std::optional<MemoryCommand> pending_memory_;         // sleep / wake_up: applied when idle
  SleepController sleep_;                               // sleep mode (off: default)
  int64_t released_bytes_ = 0;  // what the last sleep gave back over every rank (SleepState)
  SleepState sleep_published_;  // sleep_.state() for other threads (stats_mu_)
  std::optional<PauseCommand> pending_pause_;  // pause / resume: applied when its mode allows
  bool paused_ = false;                        // Engine::pause: no step runs
  bool paused_published_ = false;              // paused_ for other threads (stats_mu_)
  // Counts weight updates: the prefix cache's salts include it, so KV cached under older weights
  // (by requests kept through a pause) is never matched again.
  uint64_t weights_epoch_ = 0;
  std::thread thread_;
};

void Engine::Impl::run() {
  bind_calling_thread(model_.context());  // a data-parallel replica's GPU is not the creator's
  for (;;) {
    forget_finished_sequences();  // those a cancel or a command finished, before waiting
    if (!drain_inbox()) return;
    apply_pending_commands();
    if (halted() || (running_.empty() && waiting_.empty())) continue;
    step();
    forget_finished_sequences();
    publish_stats();
    // A command waiting for the requests in flight applies as soon as they finish: the loop may
    // find no other work and wait for new requests next.
    apply_pending_commands();
  }
}

void Engine::Impl::apply_pending_commands() {
  if (pending_pause_) apply_pause_command();
  if (pending_weights_) apply_pending_weights();
  if (pending_memory_) apply_memory_command();
}

void Engine::Impl::forget_finished_sequences() {
  for (SeqId id : finished_seqs_) seqs_.erase(id);
  finished_seqs_.clear();
}

// Applies submits, cancels and sibling stops; blocks while there is nothing to do. False when
// stopping.
bool Engine::Impl::drain_inbox() {
  std::vector<Submission> submitted;
  std::vector<RequestId> cancelled;
  std::vector<std::pair<RequestId, int32_t>> stopped;
  bool flush = false;
  bool abort_for_weights = false;
  std::optional<std::pair<std::string, int64_t>> weight_read;
  {
    std::unique_lock<std::mutex> lock(inbox_.mu);
    auto has_work = [&] {
      return inbox_.stop || inbox_.flush || inbox_.new_weights || inbox_.memory_command ||
             inbox_.weight_read ||
             inbox_.pause_command || !inbox_.submitted.empty() || !inbox_.cancelled.empty() ||
             !inbox_.stopped.empty() || (!halted() && (!running_.empty() || !waiting_.empty()));
    };
    inbox_.cv.wait(lock, has_work);
    if (inbox_.stop) {
      for (auto [slot, what] : {std::pair{&inbox_.weights_answer, "the weights were updated"},
                                std::pair{&inbox_.memory_answer, "it slept or woke"},
                                std::pair{&inbox_.pause_answer, "it paused or resumed"},
                                std::pair{&inbox_.weight_read_answer, "it read the weight"}})
        if (slot->busy && !slot->result)
          slot->result = make_error(std::string("the engine stopped before ") + what);
      inbox_.idle_cv.notify_all();
      return false;
    }
    if (inbox_.new_weights) {
      pending_weights_ = std::move(inbox_.new_weights);
      inbox_.new_weights = nullptr;  // a moved-from function need not be empty
      abort_for_weights = inbox_.abort_for_weights;
    }
    if (inbox_.memory_command) {
      pending_memory_ = inbox_.memory_command;
      inbox_.memory_command.reset();
    }
    if (inbox_.pause_command) {
      pending_pause_ = inbox_.pause_command;
      inbox_.pause_command.reset();
    }
    weight_read.swap(inbox_.weight_read);
    submitted.swap(inbox_.submitted);
    cancelled.swap(inbox_.cancelled);
    stopped.swap(inbox_.stopped);
    flush = inbox_.flush;
  }
  for (Submission& s : submitted) admit_request(std::move(s));
  if (abort_for_weights) {  // every request in flight ends now
    std::vector<RequestId> ids;
    for (const auto& [id, rs] : requests_)
      for (SeqId sid : rs.seqs)
        if (in_flight(seqs_.at(sid))) {
          ids.push_back(id);
          break;
        }
    cancelled.insert(cancelled.end(), ids.begin(), ids.end());
  }
  for (RequestId id : cancelled) cancel_request(id);
  for (const auto& [id, sibling] : stopped) stop_request_sibling(id, sibling);
  if (!cancelled.empty() || !stopped.empty()) {
    release_retired_parents();
    publish_stats();
  }
  if (weight_read) {
    Expected<WeightValues> values = read_served_weight(weight_read->first, weight_read->second);
    {
      std::lock_guard<std::mutex> lock(inbox_.mu);
      inbox_.weight_values = values.ok() ? std::move(*values) : WeightValues{};
    }
    answer(inbox_.weight_read_answer, values.ok() ? ok_status() : Status(values.error()));
  }
  if (flush) {
    if (prefix_) prefix_->flush();
    publish_stats();
    std::lock_guard<std::mutex> lock(inbox_.mu);
    inbox_.flush = false;
    inbox_.idle_cv.notify_all();
  }
  return true;
}

bool Engine::Impl::in_flight(const Sequence& s) const {
  return s.phase == SeqPhase::kRunning || static_cast<int64_t>(s.tokens.size()) > s.num_prompt;
}

bool Engine::Impl::any_in_flight() const {
  for (SeqId id : running_)
    if (in_flight(seqs_.at(id))) return true;
  for (SeqId id : waiting_)
    if (in_flight(seqs_.at(id))) return true;
  return false;
}

Status Engine::Impl::replace_weights(const RankWeights& source) {
  const int n = ranks_ ? ranks_->size() : 1;
  BEAM_ASSIGN_OR_RETURN(std::shared_ptr<const BeamWeights> slice,
                        load_rank_slice(source, TensorParallel{0, n}));
  bool partial = false;
  if (Status own = model_.replace_weights(std::move(slice), &partial); !own.ok()) {
    if (!partial) return own;  // nothing changed (a mixed state before stays mixed)
    weights_mixed_ = true;
    return make_error(own.error().message + ": no step runs until an update succeeds");
  }
  if (!ranks_) {
    weights_mixed_ = false;
    return retarget_drafter();
  }
  const Status st = ranks_->replace_weights(source);
  weights_mixed_ = !st.ok();
  if (!st.ok())
    return make_error(st.error().message +
                      "; rank 0 took the new weights, so the ranks disagree: no step runs until "
                      "an update succeeds");
  return retarget_drafter();
}

Status Engine::Impl::retarget_drafter() {
  if (!drafter_) return ok_status();
  const BeamWeights& target = model_.weights();
  if (drafter_lm_head_.data() == nullptr) {
    drafter_->retarget(target.embed, target.lm_head);
    return ok_status();
  }
  // Rank 0 holds a slice of the head: the whole one gathered again, in place.
  const TensorView whole = drafter_lm_head_.view(DType::kBF16, target.embed.shape);
  if (Status st = ranks_->gather_lm_head(model_.context(), target.lm_head, whole); !st.ok()) {
    weights_mixed_ = true;  // the drafter would read out over the old head
    return make_error("the DFlash2 drafter's LM head: " + st.error().message +
                      ": no step runs until an update succeeds");
  }
  drafter_->retarget(target.embed, whole);
  return ok_status();
}

Expected<WeightValues> Engine::Impl::read_served_weight(const std::string& name,
                                                       int64_t max_rows) {
  if (sleep_.state().weights_released)
    return make_error("the weights are asleep: wake them first (/wake_up?tags=weights)");
  const int n = ranks_ ? ranks_->size() : 1;
  std::vector<WeightPart> parts(static_cast<size_t>(n));
  BEAM_ASSIGN_OR_RETURN(parts[0], read_weight_part(model_.context(), model_.weights(),
                                                   TensorParallel{0, n}, name, max_rows));
  if (ranks_) BEAM_RETURN_IF_ERROR(ranks_->read_weight_parts(name, max_rows, parts));
  return gather_weight(parts, max_rows);
}

Status Engine::Impl::workers_followed(const Status& workers) {
  ranks_memory_apart_ = !workers.ok();
  if (workers.ok()) return workers;
  return make_error(workers.error().message +
                    "; rank 0 went ahead, so the ranks disagree: no step runs until a wake-up "
                    "succeeds on every rank");
}

void Engine::Impl::apply_pending_weights() {
  if (!paused_ && any_in_flight()) return;
  Status st = sleep_.check_weights_writable();
  if (st.ok()) st = replace_weights(pending_weights_);
  pending_weights_ = nullptr;
  if (st.ok()) {
    if (prefix_) prefix_->flush();
    ++weights_epoch_;
    sleep_.weights_replaced();
    publish_halt_state();
    log_info("engine: new weights are served; the prefix cache was emptied");
  }
  publish_stats();
  answer(inbox_.weights_answer, std::move(st));
}

void Engine::Impl::apply_memory_command() {
  const MemoryCommand command = *pending_memory_;
  if (command.sleep && any_in_flight() && !paused_) return;
  pending_memory_.reset();
  Status st = ok_status();
  if (command.sleep && command.kv_cache && !running_.empty()) {  // paused, kept requests
    st = make_error(kKeptRequestsHoldKv);
  } else if (command.sleep) {
    st = sleep_.check_sleep(command.weights, command.kv_cache);
    if (st.ok() && prefix_ && command.kv_cache) prefix_->flush();  // its KV goes with the pools
    if (ranked_mover_) ranked_mover_->flush();  // the workers' host copies before their pools go
    Expected<int64_t> rank0 = int64_t{0};
    if (st.ok()) rank0 = sleep_.sleep(command.level, command.weights, command.kv_cache);
    if (!rank0.ok()) st = rank0.error();
    int64_t workers_bytes = 0;
    if (st.ok() && ranks_) {
      Expected<int64_t> b = ranks_->sleep(command.level, command.weights, command.kv_cache);
      st = workers_followed(b.ok() ? ok_status() : Status(b.error()));
      workers_bytes = b.ok() ? *b : 0;
    }
    int64_t drafter_bytes = 0;
    if (st.ok() && command.kv_cache && drafter_) {  // the drafter's K/V go with the KV pools
      for (auto& [id, seq] : seqs_) seq.draft_context.reset();
      draft_contexts_.clear();
      drafter_bytes = drafter_->release_memory();
    }
    if (st.ok()) {
      const auto activations = static_cast<int64_t>(model_.release_eager_workspace());
      released_bytes_ = *rank0 + activations + workers_bytes + drafter_bytes;
      log_info(std::string("engine: asleep (level ") +
               (command.level == SleepLevel::kOffloadWeights ? "1" : "2") + "): released" +
               (command.kv_cache ? " the KV pools," : "") +
               (command.weights && sleep_.state().weights_released ? " the weights," : "") + " " +
               gib_text(activations) + " of eager activations; " +
               (drafter_bytes > 0 ? gib_text(drafter_bytes) + " of the drafter's; " : "") +
               gib_text(released_bytes_) +
               " in all" + (ranks_ ? " (" + gib_text(workers_bytes) + " on the other ranks)" : ""));
    }
  } else {
    const bool weights_back = command.weights && sleep_.state().weights_released;
    st = sleep_.wake_up(command.weights, command.kv_cache);
    if (st.ok() && ranks_) {
      st = workers_followed(ranks_->wake_up(command.weights, command.kv_cache));
    }
    if (st.ok() && weights_back) reload_lora_slots();
    if (st.ok() && command.kv_cache && drafter_)
      st = drafter_->restore_memory(*options_.max_tokens_per_step, options_.max_running);
    if (st.ok())
      log_info(std::string("engine: ") + (sleep_.state().asleep() ? "partly awake" : "awake"));
  }
  publish_halt_state();
  publish_stats();
  answer(inbox_.memory_answer, std::move(st));
}

void Engine::Impl::apply_pause_command() {
  const PauseCommand command = *pending_pause_;
  if (command.pause && !paused_ && command.mode == PauseMode::kWait && any_in_flight()) return;
  pending_pause_.reset();
  if (!command.pause) {
    if (paused_) log_info("engine: generation resumed");
    paused_ = false;
  } else if (!paused_) {
    if (command.mode == PauseMode::kAbort) {
      std::vector<RequestId> ids;
      for (const auto& [id, rs] : requests_) ids.push_back(id);
      for (RequestId id : ids) cancel_request(id);
      release_retired_parents();
    } else if (command.mode == PauseMode::kRetract) {
      retract_running();
    }
    if (command.clear_cache && command.mode != PauseMode::kKeep && prefix_) prefix_->flush();
    paused_ = true;
    log_info("engine: generation paused");
  }
  publish_halt_state();
  publish_stats();
  answer(inbox_.pause_answer, ok_status());
}

void Engine::Impl::retract_running() {
  PrefixCache* prefix = prefix_ ? &*prefix_ : nullptr;
  const std::vector<SeqId> running = running_;
  for (SeqId id : running) {
    Sequence& s = seqs_.at(id);
    if (s.retiring) continue;  // released below, once no sibling waits to fork from it
    // A sibling not forked yet holds no KV: it resumes from its own prompt and first token.
    if (!s.fork_parent.valid())
      release_sequence(s.id, s.tokens, CacheOnRelease::kInsert, kv_, prefix);
    requeue_released(s);
  }
  release_retired_parents();
}

void Engine::Impl::requeue_released(Sequence& s) {
  running_.erase(std::find(running_.begin(), running_.end(), s.id));
  s.phase = SeqPhase::kWaiting;
  s.fork_parent = SeqId();  // a never-forked sibling resumes from its own prompt
  waiting_.push_back(s.id);
  s.retractions++;
  counters_.preemptions++;
}

void Engine::Impl::admit_request(Submission&& submission) {
  const RequestId id = submission.id;
  RequestState rs;
  rs.params = std::make_shared<const SamplingParams>(submission.request.sampling);
  rs.seed = rs.params->seed.value_or(draw_random_seed());
  rs.request = std::move(submission.request);
  rs.lora = std::move(submission.lora);
  rs.cache_salt = PrefixCache::salt_for_adapter(PrefixCache::salt_of_text(rs.request.cache_salt),
                                                rs.lora ? rs.lora->id : 0);
  const int64_t n = rs.params->n;
  int64_t arrival = next_arrival_++;
  const auto queued = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < n; ++i) {
    Sequence s;
    s.times.queued = queued;
    s.id = SeqId(next_seq_id_++);
    s.request = id;
    s.sibling = static_cast<int32_t>(i);
    s.priority = rs.request.priority;
    s.arrival = arrival;
    s.tokens = rs.request.prompt;
    s.num_prompt = static_cast<int64_t>(s.tokens.size());
    s.draft_limit = options_.speculative.num_draft_tokens;
    SequenceSamplingSetup setup{rs.params, rs.seed, i, rs.request.prompt, eos_, config().vocab_size,
                                max_context_};
    auto st = SequenceSamplingState::create(setup);
    BEAM_CHECK(st.ok()) << "validated at submit: " << st.error().message;
    s.sampling.emplace(std::move(*st));
    rs.seqs.push_back(s.id);
    // Sibling 0 owns the prompt's KV; the others are forked from it once it has sampled.
    if (i == 0) waiting_.push_back(s.id);
    seqs_.emplace(s.id, std::move(s));
  }
  rs.num_unfinished = n;
  if (options_.speculative.enabled()) {
    rs.prompt_key = PrefixCache::hash_block(rs.request.prompt);
    prompt_peers_[rs.prompt_key].push_back(id);
  }
  if (rs.request.prompt_logprobs)
    rs.prompt_logprobs.resize(static_cast<size_t>(rs.request.prompt.size()) -
                              static_cast<size_t>(rs.request.prompt_logprobs->start));
  requests_.emplace(id, std::move(rs));
}

void Engine::Impl::cancel_request(RequestId id) {
  // Finished already, or never existed: idempotent.
  if (requests_.count(id)) finish_request(id, FinishReason::kCancelled, "");
}

void Engine::Impl::stop_request_sibling(RequestId id, int32_t sibling) {
  const auto it = requests_.find(id);
  if (it == requests_.end() || sibling < 0 ||
      static_cast<size_t>(sibling) >= it->second.seqs.size())
    return;
  const std::vector<SeqId> siblings = it->second.seqs;
  Sequence& s = seqs_.at(siblings[static_cast<size_t>(sibling)]);
  if (s.phase == SeqPhase::kFinished) return;
  // The prompt owner stopped before its first token: the siblings that were to fork from it then
  // run from the prompt themselves (the prefix cache shares what it holds), as retracted ones do.
  const bool orphans = forks_siblings_next(s);
  finish_sequence(s, FinishReason::kStop, std::nullopt, "", true);
  if (!orphans) return;
  for (size_t k = 1; k < siblings.size(); ++k) {
    Sequence& sib = seqs_.at(siblings[k]);
    if (sib.phase == SeqPhase::kWaiting &&
        std::find(waiting_.begin(), waiting_.end(), sib.id) == waiting_.end())
      waiting_.push_back(sib.id);
  }
}

bool Engine::Impl::wants_routing(const Sequence& seq) const {
  return requests_.at(seq.request).request.return_routed_experts;
}

// Copies the step's routed experts ([sparse layers, step tokens, top_k], tokens in batch order)
// into each routing sequence's record by position.
void Engine::Impl::record_routing(const StepPlan& plan, const ForwardOutput& out) {
  const int64_t k = config().num_experts_per_tok, layers = routed_moe_layers();
  const auto per_pos = static_cast<size_t>(layers * k);
  int64_t tokens = 0;
  for (const SeqWork& w : plan.work) tokens += w.num_tokens;
  int64_t t0 = 0;
  for (const SeqWork& w : plan.work) {
    Sequence& s = seqs_.at(w.seq);
    if (wants_routing(s)) {
      const auto end = static_cast<size_t>(w.num_computed + w.num_tokens);
      if (s.routed_experts.size() < end * per_pos) s.routed_experts.resize(end * per_pos);
      for (int64_t j = 0; j < w.num_tokens; ++j)
        for (int64_t l = 0; l < layers; ++l)
          std::copy_n(out.routed_experts.begin() + ((l * tokens + t0 + j) * k), k,
                      s.routed_experts.begin() + ((w.num_computed + j) * layers + l) * k);
    }
    t0 += w.num_tokens;
  }
}

bool Engine::Impl::wants_hidden_states(const Sequence& seq) const {
  return requests_.at(seq.request).request.return_hidden_states;
}

int64_t Engine::Impl::hidden_states_start(const Sequence& seq) const {
  return requests_.at(seq.request).request.hidden_states_start;
}

// The first of the work's new tokens whose final hidden state its sequence reports (from its
// hidden_states_start on), or SeqChunk::kNoFinalHidden.
int64_t Engine::Impl::final_hidden_from(const SeqWork& w) const {
  const Sequence& s = seqs_.at(w.seq);
  if (!wants_hidden_states(s)) return SeqChunk::kNoFinalHidden;
  const int64_t from = std::max<int64_t>(0, hidden_states_start(s) - w.num_computed);
  return from < w.num_tokens ? from : SeqChunk::kNoFinalHidden;
}

// Copies the step's final hidden states (ForwardOutput::final_hidden: each chunk's rows from its
// final_hidden_from on, batch order) into their sequences' records by position.
void Engine::Impl::record_hidden_states(const StepPlan& plan, const ForwardOutput& out) {
  const auto H = static_cast<size_t>(config().hidden_size);
  size_t at = 0;  // rows of out.final_hidden taken
  for (const SeqWork& w : plan.work) {
    const int64_t from = final_hidden_from(w);
    if (from == SeqChunk::kNoFinalHidden) continue;
    Sequence& s = seqs_.at(w.seq);
    const auto rows = static_cast<size_t>(w.num_tokens - from);
    const auto to = static_cast<size_t>(w.num_computed + from - hidden_states_start(s)) * H;
    BEAM_CHECK((at + rows) * H <= out.final_hidden.size()) << "the step's final hidden states";
    if (s.hidden_states.size() < to + rows * H) s.hidden_states.resize(to + rows * H);
    std::copy_n(out.final_hidden.begin() + static_cast<std::ptrdiff_t>(at * H), rows * H,
                s.hidden_states.begin() + static_cast<std::ptrdiff_t>(to));
    at += rows;
  }
  BEAM_CHECK_EQ(at * H, out.final_hidden.size()) << "the step's final hidden states";
}

SeqState Engine::Impl::scheduler_view(const Sequence& seq) const {
  SeqState v;
  v.id = seq.id;
  v.priority = seq.priority;
  v.arrival = seq.arrival;
  v.tokens = seq.tokens;
  v.fork_parent = seq.fork_parent;
  v.logits_every_token = needs_prompt_logits(seq);
  const RequestState& rs = requests_.at(seq.request);
  v.cache_salt = PrefixCache::salt_for_weights(rs.cache_salt, weights_epoch_);
  // Deterministic GPU inference: another request's prompt computes these tokens on the prefill
  // attention kernel, so only prompt blocks are shared (docs/runtime.md "Batch invariance").
  if (options_.device == Device::kCuda && options_.batch_invariance == BatchInvariance::kAlways)
    v.max_cached_tokens = seq.num_prompt;
  if (wants_routing(seq))  // reuse up to the first position whose routing is reported
    v.max_reused_tokens = rs.request.routed_experts_start;
  if (wants_hidden_states(seq))  // reuse up to the first position whose state is reported
    v.max_reused_tokens = std::min(v.max_reused_tokens, rs.request.hidden_states_start);
  if (v.logits_every_token)  // reuse up to the first row still to score
    v.max_reused_tokens = std::min(v.max_reused_tokens,
                                   rs.request.prompt_logprobs->start - 1 + rs.prompt_logprobs_done);
  return v;
}

// Whether the request's prompt logprobs still need logits of this sequence's prompt rows.
bool Engine::Impl::needs_prompt_logits(const Sequence& seq) const {
  const RequestState& rs = requests_.at(seq.request);
  return rs.request.prompt_logprobs.has_value() && !rs.prompt_scored();
}

// Scores the prompt rows of the step's prompt-logprobs sequences: row r (position p) gives the
// logprob of the prompt token at p + 1.
void Engine::Impl::record_prompt_logprobs(const StepPlan& plan, const ForwardOutput& out) {
  std::vector<ScoreRow> rows;
  // Where each scored row goes: the request, the position's entry, and whether it scores one
  // of PromptLogprobsOptions::token_ids (in their order, after the position's prompt token).
  struct Dest {
    RequestId request;
    size_t entry;
    bool token_id;
  };
  std::vector<Dest> dest;
  for (size_t r = 0; r < out.row_seq.size(); ++r) {
    const Sequence& s = seqs_.at(plan.work[static_cast<size_t>(out.row_seq[r])].seq);
    if (!needs_prompt_logits(s)) continue;
    const RequestState& rs = requests_.at(s.request);
    const PromptLogprobsOptions& o = *rs.request.prompt_logprobs;
    const int64_t q = out.row_position[r] + 1, start = o.start;
    if (q < start || q >= s.num_prompt) continue;
    const double t = rs.params->logprob_temperature();
    rows.push_back(ScoreRow{static_cast<int64_t>(r), s.tokens[static_cast<size_t>(q)], t, o.num_top});
    dest.push_back({s.request, static_cast<size_t>(q - start), false});
    for (int32_t id : o.token_ids) {
      rows.push_back(ScoreRow{static_cast<int64_t>(r), id, t, 0});
      dest.push_back({s.request, static_cast<size_t>(q - start), true});
    }
  }
  if (rows.empty()) return;
  std::vector<TokenLogprobs> scored(rows.size());
  if (Status st = score_rows(out, rows, scored); !st.ok()) {
    log_error("prompt logprobs failed: " + st.error().message);
    for (const Dest& d : dest)
      if (requests_.count(d.request))
        finish_request(d.request, FinishReason::kError, st.error().message);
    return;
  }
  for (size_t k = 0; k < rows.size(); ++k) {  // a position's prompt token, then its ids
    RequestState& rs = requests_.at(dest[k].request);
    TokenLogprobs& entry = rs.prompt_logprobs[dest[k].entry];
    if (dest[k].token_id)
      entry.token_ids.push_back(scored[k].chosen);
    else
      entry = std::move(scored[k]);
    while (!rs.prompt_scored() &&
           rs.prompt_logprobs[static_cast<size_t>(rs.prompt_logprobs_done)].chosen.token >= 0)
      ++rs.prompt_logprobs_done;
  }
}

// The CPU BatchSampler on host logits, or the DeviceBatchSampler on the device's.
Status Engine::Impl::score_rows(const ForwardOutput& out, std::span<const ScoreRow> rows,
                                std::span<TokenLogprobs> scored) {
  if (device_sampler_) return device_sampler_->score(out.device_logits, rows, scored);
  sampler_.score(out.logits, rows, scored);
  return ok_status();
}

}  // namespace beam

namespace beam {

void Engine::Impl::step() {
  propose_drafts();
  run_step();
  for (SeqId id : drafted_)
    if (auto it = seqs_.find(id); it != seqs_.end()) drop_drafts(it->second);
  drafted_.clear();
}

bool Engine::Impl::decodes_next(const Sequence& s) const {
  return s.phase == SeqPhase::kRunning && !s.retiring && !s.fork_parent.valid() &&
         kv_.num_computed(s.id) + 1 == static_cast<int64_t>(s.tokens.size());
}

std::vector<std::pair<SeqId, int64_t>> Engine::Impl::drafting_decodes() {
  const Speculation& spec = options_.speculative;
  std::vector<std::pair<SeqId, int64_t>> out;
  if (!spec.enabled() ||
      (spec.max_batch > 0 && static_cast<int64_t>(running_.size()) >= spec.max_batch))
    return out;
  // The step's drafts are logits rows beyond its decodes: capped as prompt-logprobs rows are.
  int64_t rows_left = scheduler_.config().max_logit_tokens_per_step;
  for (SeqId id : running_) {
    Sequence& s = seqs_.at(id);
    if (rows_left <= 0) break;
    if (!decodes_next(s)) continue;
    // A verify step does not fork siblings: the prompt owner samples that token without drafts.
    if (forks_siblings_next(s) && requests_.at(s.request).seqs.size() > 1) continue;
    if (s.draft_cooldown > 0) {
      --s.draft_cooldown;
      continue;
    }
    const int64_t room = s.sampling->output_limit_tokens() - s.sampling->num_output_tokens() - 1;
    const int64_t most = std::min({s.draft_limit, room, rows_left});
    if (most <= 0) continue;
    out.emplace_back(id, most);
    rows_left -= most;
  }
  return out;
}

void Engine::Impl::take_drafts(Sequence& s, std::span<const int32_t> drafts) {
  int64_t n = static_cast<int64_t>(drafts.size());
  // Under masks, drafts stop at the first one its position's mask refuses.
  if (n > 0 && s.sampling->has_masks()) n = s.sampling->allowed_drafts(drafts);
  if (n == 0) return;
  s.tokens.insert(s.tokens.end(), drafts.begin(), drafts.begin() + n);
  s.num_drafts = n;
  drafted_.push_back(s.id);
}

void Engine::Impl::propose_drafts() {
  if (drafter_) return propose_dflash2_drafts();
  std::array<int32_t, kMaxDraftTokens> drafts{};
  for (const auto& [id, most] : drafting_decodes()) {
    Sequence& s = seqs_.at(id);
    const int64_t n =
        draft_from_request(s, std::span<int32_t>(drafts).first(static_cast<size_t>(most)));
    take_drafts(s, std::span<const int32_t>(drafts).first(static_cast<size_t>(n)));
  }
}

void Engine::Impl::propose_dflash2_drafts() {
  const std::vector<std::pair<SeqId, int64_t>> decodes = drafting_decodes();
  if (decodes.empty()) return;
  std::vector<DFlash2Block> blocks;
  for (const auto& [id, most] : decodes) {
    Sequence& s = seqs_.at(id);
    if (!s.draft_context) s.draft_context = drafter_->new_context();
    blocks.push_back(DFlash2Block{s.tokens.back(), static_cast<int64_t>(s.tokens.size()) - 1,
                                  s.draft_context.get()});
  }
  const int64_t per_block = drafter_->config().max_drafts();
  std::vector<int32_t> drafts(blocks.size() * static_cast<size_t>(per_block));
  if (const Status st = drafter_->draft(blocks, drafts); !st.ok()) {
    note_drafter_failure("no DFlash2 drafts this step: " + st.error().message);
    return;
  }
  for (size_t i = 0; i < decodes.size(); ++i)
    take_drafts(seqs_.at(decodes[i].first),
                std::span<const int32_t>(drafts).subspan(i * static_cast<size_t>(per_block),
                                                         static_cast<size_t>(decodes[i].second)));
}

void Engine::Impl::feed_drafter(const StepPlan& plan, const ForwardOutput& out) {
  constexpr int64_t kPage = DFlash2ContextPool::kPageSize;
  int64_t row = 0;  // the work item's first token in the batch
  int64_t pages = 0;  // the most pages the items may take
  int64_t tokens = 0;
  for (const SeqWork& w : plan.work) tokens += w.num_tokens;
  std::vector<int64_t> positions(static_cast<size_t>(tokens));  // by batch row
  std::vector<DFlash2ContextRows> items;
  for (const SeqWork& w : plan.work) {
    const int64_t first = row;
    row += w.num_tokens;
    const auto it = seqs_.find(w.seq);
    if (it == seqs_.end() || it->second.phase == SeqPhase::kFinished) continue;
    Sequence& s = it->second;
    const int64_t committed =
        std::clamp<int64_t>(kv_.num_computed(s.id) - w.num_computed, 0, w.num_tokens);
    if (committed == 0) continue;
    if (!s.draft_context) s.draft_context = drafter_->new_context();
    const std::span<int64_t> p = std::span<int64_t>(positions).subspan(
        static_cast<size_t>(first), static_cast<size_t>(committed));
    std::iota(p.begin(), p.end(), w.num_computed);
    items.push_back(DFlash2ContextRows{s.draft_context.get(), first, p});
    pages += committed / kPage + 2;
  }
  reclaim_draft_pages(pages);
  if (const Status st = drafter_->add_context(out.device_captured, items); !st.ok())
    note_drafter_failure("the DFlash2 context of a step is lost: " + st.error().message);
}

void Engine::Impl::reclaim_draft_pages(int64_t pages) {
  while (drafter_->pool().free_pages() < pages && draft_contexts_.evict_oldest()) {
  }
}

void Engine::Impl::note_drafter_failure(const std::string& what) {
  // The first and then every 1,000th: a device short of memory fails every step alike.
  if (drafter_failures_++ % 1000 == 0)
    log_warning("engine: " + what + " (" + std::to_string(drafter_failures_) +
                " drafter failures so far; decoding goes on without drafts)");
}

int64_t Engine::Impl::draft_from_request(const Sequence& s, std::span<int32_t> out) const {
  const Speculation& spec = options_.speculative;
  std::span<const int32_t> from = s.tokens;
  NgramMatch best = find_ngram_match(s.tokens, s.tokens, spec);
  auto scan = [&](const Sequence& other) {
    const std::span<const int32_t> text =
        std::span<const int32_t>(other.tokens)
            .first(other.tokens.size() - static_cast<size_t>(other.num_drafts));
    const NgramMatch m = find_ngram_match(s.tokens, text, spec);
    if (m.length > best.length) {
      best = m;
      from = text;
    }
  };
  const RequestState& rs = requests_.at(s.request);
  for (SeqId id : rs.seqs)  // samples of one prompt often agree
    if (id != s.id && best.length < spec.max_match) scan(seqs_.at(id));
  // So do other requests of the same prompt running now (RL rollouts sent one sample a request;
  // SGLang's corpus takes running requests' tokens too): up to kMaxPromptPeers of them.
  int64_t peers = 0;
  for (RequestId peer : prompt_peers_.at(rs.prompt_key)) {
    if (peer == s.request) continue;
    if (best.length == spec.max_match || peers++ == kMaxPromptPeers) break;
    for (SeqId id : requests_.at(peer).seqs)
      if (best.length < spec.max_match) scan(seqs_.at(id));
  }
  if (corpus_ && best.length < spec.max_match) {  // other requests' text, when it matches longer
    const int64_t n = corpus_->propose(s.tokens, out, best.length);
    if (n > 0) return n;
  }
  return copy_ngram_drafts(from, best, out);
}

void Engine::Impl::forget_prompt_peer(RequestId id, uint64_t prompt_key) {
  const auto it = prompt_peers_.find(prompt_key);
  std::vector<RequestId>& peers = it->second;
  peers.erase(std::find(peers.begin(), peers.end(), id));
  if (peers.empty()) prompt_peers_.erase(it);
}

void Engine::Impl::drop_drafts(Sequence& s) {
  s.tokens.resize(s.tokens.size() - static_cast<size_t>(s.num_drafts));
  s.num_drafts = 0;
}

// A decode that feeds drafts: its tokens are accepted only after sampling (accept_drafts).
static bool verifies_drafts(const SeqWork& w) {
  return w.kind == WorkKind::kDecode && w.num_tokens > 1;
}

// The drafts a decode of `w` fed (after the last accepted token), in seq's tokens.
static std::span<const int32_t> fed_drafts(const SeqWork& w, const Sequence& s) {
  return std::span<const int32_t>(s.tokens).subspan(static_cast<size_t>(w.num_computed + 1),
                                                    static_cast<size_t>(w.num_tokens - 1));
}

int64_t Engine::Impl::accept_drafts(const SeqWork& w, Sequence& s, std::span<const int32_t> tokens,
                                    int64_t usable_rows) {
  const int64_t fed = w.num_tokens - 1;
  BEAM_CHECK_EQ(static_cast<int64_t>(tokens.size()), fed + 1) << "sequence " << s.id.value;
  const int64_t accepted = std::min(count_accepted_drafts(fed_drafts(w, s), tokens), usable_rows);
  PrefixCache* prefix = prefix_ ? &*prefix_ : nullptr;
  complete_work(w, 1 + accepted, kv_, prefix);
  if (wants_routing(s)) {  // positions past the accepted ones are recomputed later
    const auto per_pos = static_cast<size_t>(routed_moe_layers() * config().num_experts_per_tok);
    const auto computed = static_cast<size_t>(kv_.num_computed(s.id)) * per_pos;
    if (s.routed_experts.size() > computed) s.routed_experts.resize(computed);
  }
  const auto computed_states = static_cast<size_t>(
      std::max<int64_t>(0, kv_.num_computed(s.id) - hidden_states_start(s)) * config().hidden_size);
  if (s.hidden_states.size() > computed_states) s.hidden_states.resize(computed_states);
  drop_drafts(s);
  s.draft_limit =
      next_draft_limit(s.draft_limit, fed, accepted, options_.speculative.num_draft_tokens);
  s.draft_misses = accepted == 0 ? s.draft_misses + 1 : 0;
  s.draft_cooldown = draft_cooldown_steps(s.draft_misses);
  counters_.spec_verifications++;
  s.spec_verifications++;
  counters_.spec_draft_tokens += fed;
  counters_.spec_accepted_tokens += accepted;
  for (int64_t j = 0; j < accepted; ++j)
    counters_.spec_accepted_per_position[static_cast<size_t>(j)]++;
  return accepted;
}

void Engine::Impl::run_step() {
  order_waiting();
  std::vector<SeqState> running, waiting;
  // Adapters whose slots stay this step: the running sequences' and the pinned ones.
  std::set<uint64_t> pinned = options_.max_loras > 0 ? loras_.pinned_ids() : std::set<uint64_t>{};
  std::vector<std::pair<RequestId, std::string>> lora_failed;
  for (SeqId id : running_) {
    const Sequence& s = seqs_.at(id);
    running.push_back(scheduler_view(s));
    running.back().num_draft_tokens = s.num_drafts;
    if (const auto& lora = requests_.at(s.request).lora) pinned.insert(lora->id);
  }
  // A starved sequence that finds every LoRA slot held waits with the adapters' newer sequences
  // held back, so the slots free as their running sequences finish (base-model ones still start).
  bool slots_reserved = false;
  for (SeqId id : waiting_) {
    const Sequence& s = seqs_.at(id);
    // With new weights or a sleep waiting, only what is in flight goes on.
    if (holding_new_requests() && !in_flight(s)) continue;
    const bool uses_lora = requests_.at(s.request).lora != nullptr;
    if (uses_lora && slots_reserved) continue;
    if (take_lora_slot(s, pinned, lora_failed)) {
      waiting.push_back(scheduler_view(s));
    } else if (uses_lora && starved(s)) {
      slots_reserved = true;
    }
  }
  for (const auto& [id, error] : lora_failed)
    if (requests_.contains(id)) finish_request(id, FinishReason::kError, "lora: " + error);
  PrefixCache* prefix = prefix_ ? &*prefix_ : nullptr;
  if (host_tier_) {
    const int64_t room = options_.max_running - static_cast<int64_t>(running.size());
    const HostRestore r = restore_waiting_from_host(
        waiting, std::min<int64_t>(room, kHostRestoreLookahead), kv_, *prefix_, &host_memo_);
    counters_.host_cache.restored_tokens += r.blocks.full * options_.block_size_tokens;
  }
  StepPlan plan = scheduler_.plan(SchedulerInput{running, waiting, &kv_, prefix});

  CommitResult commit = commit_plan(plan, kv_, prefix);
  storage_.copy_blocks(commit.copies);
  if (ranks_) {
    if (ranked_mover_) ranked_mover_->flush();  // the host tier's copies first, as on rank 0
    ranks_->copy_blocks(commit.copies);
  }
  apply_preemptions(plan);
  for (SeqId id : plan.rejected)
    finish_sequence(seqs_.at(id), FinishReason::kError, std::nullopt,
                    "the prompt needs more KV cache than the pools hold", true);
  if (plan.work.empty()) {
    release_retired_parents();
    return;
  }

  ForwardBatch batch;
  batch.logits_on_device = device_sampler_.has_value();
  if (drafter_) {
    batch.capture_layers = drafter_->config().target_layer_ids;
    batch.captured_on_device = true;
  }
  bool scores_prompt = false, states = false;
  const auto step_start = std::chrono::steady_clock::now();
  for (const SeqWork& w : plan.work) {
    Sequence& s = seqs_.at(w.seq);
    if (s.times.scheduled == std::chrono::steady_clock::time_point{})
      s.times.scheduled = step_start;
    // Every row of a multi-token prompt-logprobs chunk or verified decode; one token: its row.
    const bool all_logits = w.num_tokens > 1 && (needs_prompt_logits(s) || verifies_drafts(w));
    batch.seqs.push_back(SeqChunk{
        std::span<const int32_t>(s.tokens).subspan(w.num_computed, w.num_tokens), 0, w.num_computed,
        kv_.full_table(w.seq), kv_.sliding_table(w.seq), all_logits, lora_slot_of(s),
        final_hidden_from(w), s.num_prompt});
    batch.capture_routing = batch.capture_routing || wants_routing(s);
    states = states || batch.seqs.back().wants_final_hidden();
    scores_prompt = scores_prompt || needs_prompt_logits(s);
  }
  ForwardOutput out;
  if (ranked_mover_) ranked_mover_->flush();  // the copies since (preemptions' releases prune)
  Status st = ranks_ ? ranks_->forward(model_, storage_, batch, out)
                     : model_.forward(batch, storage_.layers(), out);
  if (!st.ok()) {
    // A batch the scheduler built must be valid; fail its requests rather than the server.
    log_error("forward failed: " + st.error().message);
    for (const SeqWork& w : plan.work) {
      Sequence& s = seqs_.at(w.seq);
      if (s.phase != SeqPhase::kFinished) finish_sequence(s, FinishReason::kError, std::nullopt, st.error().message, true);
    }
    release_retired_parents();
    return;
  }
  for (const SeqWork& w : plan.work)  // verified decodes complete once their drafts are checked
    if (!verifies_drafts(w)) complete_work(w, w.num_tokens, kv_, prefix);
  counters_.steps++;
  if (batch.capture_routing) record_routing(plan, out);
  if (states) record_hidden_states(plan, out);
  if (scores_prompt) record_prompt_logprobs(plan, out);
  sample_and_emit(plan, out);
  if (drafter_) feed_drafter(plan, out);
  release_retired_parents();
}

bool Engine::Impl::take_lora_slot(const Sequence& seq, std::set<uint64_t>& pinned,
                                  std::vector<std::pair<RequestId, std::string>>& failed) {
  const auto& lora = requests_.at(seq.request).lora;
  if (!lora) return true;
  const int64_t step = counters_.steps;
  if (lora_table_.find(lora->id, step)) {
    pinned.insert(lora->id);
    return true;
  }
  const std::optional<int32_t> slot = lora_table_.victim(pinned);
  if (!slot) return false;
  Status st = model_.lora_slots()->load(model_.context(), *slot, *lora->adapter);
  if (st.ok() && ranks_) st = ranks_->load_lora(*slot, *lora->adapter);
  if (!st.ok()) {
    lora_table_.clear(*slot);
    failed.emplace_back(seq.request, st.error().message);
    return false;
  }
  lora_table_.assign(*slot, lora, step);
  pinned.insert(lora->id);
  return true;
}

void Engine::Impl::reload_lora_slots() {
  LoraSlots* slots = model_.lora_slots();
  if (slots == nullptr || slots->releasable_memory() == nullptr) return;
  const std::vector<std::shared_ptr<const LoraEntry>> held = lora_table_.held();
  for (size_t s = 0; s < held.size(); ++s) {
    if (!held[s]) continue;
    Status st = slots->load(model_.context(), static_cast<int32_t>(s), *held[s]->adapter);
    if (st.ok() && ranks_) st = ranks_->load_lora(static_cast<int32_t>(s), *held[s]->adapter);
    BEAM_CHECK(st.ok()) << "adapter " << held[s]->name << " no longer loads into slot " << s << ": "
                        << st.error().message;
  }
}

int32_t Engine::Impl::lora_slot_of(const Sequence& seq) {
  const auto& lora = requests_.at(seq.request).lora;
  if (!lora) return kNoLoraSlot;
  const std::optional<int32_t> slot = lora_table_.find(lora->id, counters_.steps);
  BEAM_CHECK(slot.has_value()) << "sequence " << seq.id.value << " runs without its LoRA slot";
  return *slot;
}

// Admission order: priority first; then, while the queue is short, longest cached prefix first
// (SGLang's "lpm"; device and host tier together): a session's next turn that hits the cache needs few new blocks and keeps its
// prefix from being evicted by a cold request, which is what keeps multi-session hit rates from
// collapsing under pool pressure. A request passed over for kMaxSkippedSteps steps is served in
// arrival order again, so none starves.
void Engine::Impl::order_waiting() {
  constexpr size_t kMaxLpmQueue = 128;
  const bool lpm = prefix_ && waiting_.size() <= kMaxLpmQueue;
  struct Key {
    int32_t priority;
    bool starved;
    int64_t cached;
    int64_t arrival;
  };
  std::unordered_map<SeqId, Key> keys;
  for (SeqId id : waiting_) {
    Sequence& s = seqs_.at(id);
    // With a host tier, what it could restore counts too (SGLang's LPM counts host hits).
    const SeqState view = scheduler_view(s);
    int64_t cached = !lpm      ? 0
                     : host_tier_ ? prefix_->match_with_host(reusable_tokens(view), view.cache_salt)
                                  : match_reusable(*prefix_, view).num_tokens;
    keys[id] = Key{s.priority, s.waited_steps++ > kMaxSkippedSteps, cached, s.arrival};
  }
  std::stable_sort(waiting_.begin(), waiting_.end(), [&](SeqId a, SeqId b) {
    const Key &x = keys.at(a), &y = keys.at(b);
    if (x.priority != y.priority) return x.priority > y.priority;
    if (x.starved != y.starved) return x.starved;
    if (!x.starved && x.cached != y.cached) return x.cached > y.cached;
    return x.arrival < y.arrival;
  });
}

void Engine::Impl::apply_preemptions(const StepPlan& plan) {
  for (const Preemption& p : plan.preempted) {
    Sequence& s = seqs_.at(p.seq);
    drop_drafts(s);
    requeue_released(s);
  }
  for (const Admission& a : plan.admitted) {
    Sequence& s = seqs_.at(a.seq);
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), a.seq));
    running_.push_back(a.seq);
    s.phase = SeqPhase::kRunning;
    s.waited_steps = 0;
    if (drafter_ && !s.draft_context && a.match.num_tokens > 0)  // the cached positions' K/V
      s.draft_context = draft_contexts_.copy_for(
          std::span<const int32_t>(s.tokens).first(static_cast<size_t>(a.match.num_tokens)));
    if (!s.admitted_once) {
      s.admitted_once = true;
      s.cached_prompt_tokens = a.match.num_tokens;
      counters_.cached_prompt_tokens += a.match.num_tokens;
      counters_.prompt_tokens += s.num_prompt;
    }
  }
  for (const ForkOp& f : plan.forks) {
    Sequence& child = seqs_.at(f.child);
    child.fork_parent = SeqId();
    if (const auto& parent = seqs_.at(f.parent).draft_context) {  // the prompt's drafter K/V
      reclaim_draft_pages(static_cast<int64_t>(parent->table().size()));
      child.draft_context = parent->clone();
    }
  }
}

void Engine::Impl::sample_and_emit(const StepPlan& plan, const ForwardOutput& out) {
  std::vector<int64_t> last_row(plan.work.size(), -1);  // each work item's sampling row
  for (size_t r = 0; r < out.row_seq.size(); ++r)
    last_row[static_cast<size_t>(out.row_seq[r])] = static_cast<int64_t>(r);
  std::vector<DeviceSampleRow> rows;
  std::vector<SampleTarget> targets;
  draft_states_.clear();
  for (size_t i = 0; i < plan.work.size(); ++i) {
    const SeqWork& w = plan.work[i];
    if (!w.samples) continue;
    Sequence& s = seqs_.at(w.seq);
    if (s.phase == SeqPhase::kFinished || finish_unsampled(s)) continue;
    if (verifies_drafts(w)) {  // a row per fed position, each after the drafts before it
      const std::span<const int32_t> drafts = fed_drafts(w, s);
      const SequenceSamplingState* at = &*s.sampling;
      for (int64_t j = 0; j < w.num_tokens; ++j) {
        const int64_t row = last_row[i] - (w.num_tokens - 1) + j;
        if (j > 0 && s.sampling->has_masks()) {  // the masks of a state past drafts [0, j)
          draft_states_.push_back(std::make_unique<SequenceSamplingState>(*at));
          draft_states_.back()->append_output(drafts.subspan(static_cast<size_t>(j - 1), 1));
          at = draft_states_.back().get();
          rows.push_back(DeviceSampleRow{row, at});
        } else {
          rows.push_back(DeviceSampleRow{row, at, drafts.first(static_cast<size_t>(j))});
        }
        targets.push_back({w.seq, false, i, j});
      }
      continue;
    }
    rows.push_back(DeviceSampleRow{last_row[i], &*s.sampling});
    targets.push_back({w.seq, false, i});
    const RequestState& rs = requests_.at(s.request);
    if (forks_siblings_next(s)) {
      for (size_t k = 1; k < rs.seqs.size(); ++k) {
        Sequence& sib = seqs_.at(rs.seqs[k]);
        if (sib.phase == SeqPhase::kFinished) continue;
        rows.push_back(DeviceSampleRow{last_row[i], &*sib.sampling});
        targets.push_back({sib.id, true, i});
      }
    }
  }
  attach_allowed_tokens(rows, targets);
  std::vector<SampledToken> sampled(rows.size());
  if (Status st = sample_rows(out, rows, sampled); !st.ok()) {
    log_error("sampling failed: " + st.error().message);
    for (auto t = targets.rbegin(); t != targets.rend(); ++t) {  // siblings before their owner
      Sequence& s = seqs_.at(t->seq);
      if (s.phase != SeqPhase::kFinished)
        finish_sequence(s, FinishReason::kError, std::nullopt, st.error().message, true);
    }
    return;
  }
  const auto sampled_at = std::chrono::steady_clock::now();
  std::vector<int32_t> block;  // a verified decode's sampled tokens
  for (size_t i = 0; i < targets.size(); ++i) {
    Sequence& s = seqs_.at(targets[i].seq);
    const SeqWork& w = plan.work[targets[i].work];
    if (verifies_drafts(w)) {  // its rows are targets [i, i + w.num_tokens)
      block.clear();
      int64_t usable = w.num_tokens;  // rows before the first one whose mask failed
      for (int64_t j = 0; j < w.num_tokens; ++j) {
        block.push_back(sampled[i + j].token);
        if (usable == w.num_tokens && !targets[i + j].draft_row_error.empty()) usable = j;
      }
      const int64_t accepted = accept_drafts(w, s, block, usable);
      // Every draft before a row whose mask failed was accepted: plain decoding fails there.
      const bool blocked = accepted == usable;
      const int64_t taken = blocked ? accepted : accepted + 1;
      const std::string error =
          blocked ? targets[i + static_cast<size_t>(usable)].draft_row_error : std::string();
      append_tokens(s, std::span<const int32_t>(block).first(static_cast<size_t>(taken)),
                    std::span<SampledToken>(sampled).subspan(i, static_cast<size_t>(taken)));
      i += static_cast<size_t>(w.num_tokens - 1);
      if (blocked && s.phase != SeqPhase::kFinished)
        finish_sequence(s, FinishReason::kError, std::nullopt, error, true);
      continue;
    }
    if (s.times.prefilled == std::chrono::steady_clock::time_point{})
      s.times.prefilled = sampled_at;
    if (targets[i].fork_child) {
      // Enters the running set as a pending fork of the prompt owner (scheduler: ForkOp).
      s.fork_parent = rs_owner(s);
      s.phase = SeqPhase::kRunning;
      s.admitted_once = true;
      s.cached_prompt_tokens = seqs_.at(s.fork_parent).cached_prompt_tokens;
      s.routed_experts = seqs_.at(s.fork_parent).routed_experts;  // the shared prompt's
      s.hidden_states = seqs_.at(s.fork_parent).hidden_states;
      s.times.scheduled = seqs_.at(s.fork_parent).times.scheduled;
      running_.push_back(s.id);
    }
    const int32_t token = sampled[i].token;
    drop_drafts(s);  // a decode the budget or the pools cut to one token fed none of its drafts
    append_tokens(s, std::span<const int32_t>(&token, 1),
                  std::span<SampledToken>(sampled).subspan(i, 1));
  }
}

// A prefill-only request (max_tokens 0: scoring, cache warming) finishes when its prompt owner
// would first sample, each sibling with kLength and no tokens. True if `owner` finished.
bool Engine::Impl::finish_unsampled(Sequence& owner) {
  if (owner.sampling->output_limit_tokens() > 0) return false;
  finish_request(owner.request, FinishReason::kLength, "");
  return true;
}

// Finishes every unfinished sequence of the request, siblings before their prompt owner.
void Engine::Impl::finish_request(RequestId id, FinishReason reason, const std::string& error) {
  const std::vector<SeqId> siblings = requests_.at(id).seqs;
  for (auto sid = siblings.rbegin(); sid != siblings.rend(); ++sid) {
    Sequence& s = seqs_.at(*sid);
    if (s.phase != SeqPhase::kFinished) finish_sequence(s, reason, std::nullopt, error, true);
  }
}

// Rows under a response format or token filters sample from the tokens they allow next
// (docs/structured_output.md), their masks filled in parallel (one MaskScratch per pool thread);
// on the GPU, bad_words alone are sparse edits, not a mask (DeviceBatchSampler). A sequence that
// allows nothing more (an earlier token broke its format, or its filters leave no token) ends
// with that error instead of being sampled.
void Engine::Impl::attach_allowed_tokens(std::vector<DeviceSampleRow>& rows,
                                         std::vector<SampleTarget>& targets) {
  const bool bans_as_edits = device_sampler_.has_value();
  std::vector<size_t> masked;  // rows with a constraint, in order
  std::vector<std::pair<size_t, Status>> banned_out;  // rows whose edits would ban every token
  for (size_t i = 0; i < rows.size(); ++i) {
    const SequenceSamplingState& seq = *rows[i].seq;
    if (seq.needs_mask(bans_as_edits)) {
      masked.push_back(i);
    } else if (!seq.params().bad_words_token_ids.empty()) {
      if (Status st = seq.check_bans_leave_a_token(rows[i].pending_tokens); !st.ok())
        banned_out.emplace_back(i, std::move(st));
    }
  }
  if (masked.empty() && banned_out.empty()) return;
  const auto words = static_cast<size_t>(allowed_mask_words(model_.config().vocab_size));
  allowed_.resize(masked.size() * words);
  std::vector<Status> filled(masked.size());
  const auto num_masked = static_cast<int64_t>(masked.size());
  const int64_t num_chunks =
      std::min<int64_t>(num_masked, static_cast<int64_t>(mask_scratch_.size()));
  auto fill_chunks = [&](int64_t chunk_begin, int64_t chunk_end) {
    for (int64_t chunk = chunk_begin; chunk < chunk_end; ++chunk) {
      MaskScratch& scratch = mask_scratch_[static_cast<size_t>(chunk)];
      for (int64_t k = num_masked * chunk / num_chunks; k < num_masked * (chunk + 1) / num_chunks;
           ++k) {
        std::span<uint32_t> bits(allowed_.data() + static_cast<size_t>(k) * words, words);
        filled[static_cast<size_t>(k)] =
            rows[masked[static_cast<size_t>(k)]].seq->fill_allowed_tokens(bits, scratch);
        rows[masked[static_cast<size_t>(k)]].allowed_tokens = bits;
      }
    }
  };
  if (num_chunks > 1) {
    pool_.parallel_for(num_chunks, 1, fill_chunks);
  } else if (num_chunks == 1) {
    fill_chunks(0, 1);
  }
  std::vector<std::pair<SeqId, std::string>> broken;
  size_t kept = 0;
  const Status fine = ok_status();
  for (size_t i = 0, k = 0, b = 0; i < rows.size(); ++i) {
    const bool is_masked = k < masked.size() && masked[k] == i;
    const bool is_banned_out = b < banned_out.size() && banned_out[b].first == i;
    const Status& st = is_masked ? filled[k++] : is_banned_out ? banned_out[b++].second : fine;
    if (!broken.empty() && broken.back().first == targets[i].seq) continue;  // its later rows
    if (!st.ok() && targets[i].draft_row > 0) {  // matters only if the drafts before it are taken
      targets[i].draft_row_error = st.error().message;
      rows[i].allowed_tokens = {};
    } else if (!st.ok()) {
      broken.emplace_back(targets[i].seq, st.error().message);
      continue;
    }
    rows[kept] = rows[i];
    targets[kept++] = targets[i];
  }
  rows.resize(kept);
  targets.resize(kept);
  for (const auto& [id, error] : broken)
    finish_sequence(seqs_.at(id), FinishReason::kError, std::nullopt, error, true);
}

// The CPU BatchSampler on host logits, or the DeviceBatchSampler on the device's.
Status Engine::Impl::sample_rows(const ForwardOutput& out, std::span<const DeviceSampleRow> rows,
                                 std::span<SampledToken> sampled) {
  if (device_sampler_) return device_sampler_->sample(out.device_logits, rows, sampled);
  std::vector<SampleRow> host_rows;
  host_rows.reserve(rows.size());
  for (const DeviceSampleRow& r : rows)
    host_rows.push_back(
        SampleRow{out.row(r.logits_row), r.seq, r.pending_tokens, r.allowed_tokens});
  sampler_.sample(host_rows, sampled);
  return ok_status();
}

SeqId Engine::Impl::rs_owner(const Sequence& s) const { return requests_.at(s.request).seqs.front(); }

void Engine::Impl::append_tokens(Sequence& s, std::span<const int32_t> tokens,
                                 std::span<SampledToken> sampled) {
  StepFinish fin = check_finish(*s.sampling, tokens);
  std::span<const int32_t> kept = tokens.first(static_cast<size_t>(fin.num_accepted));
  s.sampling->append_output(kept);
  s.tokens.insert(s.tokens.end(), kept.begin(), kept.end());
  counters_.generated_tokens += static_cast<int64_t>(kept.size());
  TokenEvent ev;
  ev.tokens.assign(kept.begin(), kept.end());
  for (SampledToken& t : sampled.first(kept.size())) {
    if (t.logprobs) ev.logprobs.push_back(std::move(*t.logprobs));
    if (t.entropy) ev.entropies.push_back(*t.entropy);
    if (!s.sampling->params().token_ids_logprob.empty())
      ev.token_ids_logprobs.push_back(std::move(t.token_ids_logprobs));
  }
  if (!fin.cause) {
    emit(s, std::move(ev));
    return;
  }
  // The tokens and the finish go out in one event.
  bool stop = *fin.cause == FinishCause::kEos || *fin.cause == FinishCause::kStopTokenId;
  pending_final_ = std::move(ev);
  finish_sequence(s, stop ? FinishReason::kStop : FinishReason::kLength,
                  stop ? std::optional<int32_t>(fin.stop_token) : std::nullopt, "", true);
}

bool Engine::Impl::has_pending_children(const Sequence& parent) const {
  for (SeqId id : running_) {
    const Sequence& c = seqs_.at(id);
    if (c.fork_parent == parent.id) return true;
  }
  return false;
}

void Engine::Impl::finish_sequence(Sequence& s, FinishReason reason, std::optional<int32_t> stop_token,
                                   std::string error, bool emit_event) {
  PrefixCache* prefix = prefix_ ? &*prefix_ : nullptr;
  if (s.phase == SeqPhase::kWaiting) {
    auto it = std::find(waiting_.begin(), waiting_.end(), s.id);
    if (it != waiting_.end()) waiting_.erase(it);
  } else if (s.phase == SeqPhase::kRunning) {
    if (corpus_ && reason != FinishReason::kError && !s.fork_parent.valid())  // later drafts
      corpus_->add(std::span<const int32_t>(s.tokens).first(s.tokens.size() -
                                                            static_cast<size_t>(s.num_drafts)));
    if (s.draft_context && reason != FinishReason::kError)  // for requests that continue it
      draft_contexts_.put({s.tokens.begin(), s.tokens.end() - s.num_drafts}, s.draft_context);
    if (s.fork_parent.valid()) {  // never forked: holds no KV
      running_.erase(std::find(running_.begin(), running_.end(), s.id));
    } else if (has_pending_children(s)) {
      s.retiring = true;  // stays (no work: tokens back to the prompt) until its siblings fork
      s.tokens.resize(static_cast<size_t>(s.num_prompt));
    } else {
      release_sequence(s.id, s.tokens, reason == FinishReason::kError ? CacheOnRelease::kDrop : CacheOnRelease::kInsert,
                       kv_, prefix);
      running_.erase(std::find(running_.begin(), running_.end(), s.id));
    }
  }
  s.phase = SeqPhase::kFinished;
  TokenEvent ev = pending_final_ ? std::move(*pending_final_) : TokenEvent{};
  pending_final_.reset();
  ev.finish = reason;
  ev.stop_token = stop_token;
  ev.error = std::move(error);
  if (wants_routing(s)) {
    const auto per_pos = static_cast<size_t>(routed_moe_layers() * config().num_experts_per_tok);
    const size_t from = std::min(
        s.routed_experts.size(),
        static_cast<size_t>(requests_.at(s.request).request.routed_experts_start) * per_pos);
    // A copy: siblings forked from a prompt owner copy its record, even after it finished.
    ev.routed_experts.assign(s.routed_experts.begin() + static_cast<std::ptrdiff_t>(from),
                             s.routed_experts.end());
  }
  if (wants_hidden_states(s)) ev.hidden_states = s.hidden_states;  // a copy, as above
  if (emit_event) emit(s, std::move(ev));
  RequestState& rs = requests_.at(s.request);
  if (--rs.num_unfinished == 0) {
    RequestId rid = s.request;
    if (options_.speculative.enabled()) forget_prompt_peer(rid, rs.prompt_key);
    // Its sequences may still be read this step (a plan's later items): gone at the loop's turn.
    finished_seqs_.insert(finished_seqs_.end(), rs.seqs.begin(), rs.seqs.end());
    requests_.erase(rid);
    std::lock_guard<std::mutex> lock(inbox_.mu);
    inbox_.pending--;
    inbox_.idle_cv.notify_all();
  }
}

void Engine::Impl::release_retired_parents() {
  PrefixCache* prefix = prefix_ ? &*prefix_ : nullptr;
  for (size_t i = 0; i < running_.size();) {
    Sequence& s = seqs_.at(running_[i]);
    if (s.retiring && !has_pending_children(s)) {
      release_sequence(s.id, s.tokens, CacheOnRelease::kInsert, kv_, prefix);
      s.retiring = false;
      running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    ++i;
  }
}

void Engine::Impl::emit(Sequence& s, TokenEvent&& ev) {
  ev.request = s.request;
  ev.sibling = s.sibling;
  ev.usage.prompt_tokens = s.num_prompt;
  ev.usage.cached_prompt_tokens = s.cached_prompt_tokens;
  ev.usage.completion_tokens = s.sampling->num_output_tokens();
  ev.usage.retractions = s.retractions;
  ev.usage.spec_verifications = s.spec_verifications;
  ev.usage.times = s.times;
  auto it = requests_.find(s.request);
  if (it != requests_.end() && it->second.request.prompt_logprobs && !s.sent_prompt_logprobs &&
      it->second.prompt_scored()) {
    ev.prompt_logprobs = it->second.prompt_logprobs;
    s.sent_prompt_logprobs = true;
  }
  if (it != requests_.end() && it->second.request.sink) it->second.request.sink(std::move(ev));
}

void Engine::Impl::publish_stats() {
  EngineStats s = counters_;
  s.running = static_cast<int64_t>(running_.size());
  s.waiting = static_cast<int64_t>(waiting_.size());
  s.sequence_records = static_cast<int64_t>(seqs_.size());
  s.last_step_unix_s = now_unix_s();
  BlockCounts total = kv_.total_blocks(), free = kv_.free_blocks();
  BlockCounts cached = prefix_ ? prefix_->evictable() : BlockCounts{};
  s.full_pool = PoolStats{total.full, free.full, cached.full};
  s.sliding_pool = PoolStats{total.sliding, free.sliding, cached.sliding};
  s.host_cache.enabled = host_tier_.has_value();
  if (host_tier_) {
    s.host_cache.bytes = host_store_->bytes() + (ranks_ ? ranks_->host_kv_bytes() : 0);
    s.host_cache.tier = host_tier_->stats();
    s.host_cache.unused_blocks = prefix_->stats().host_restores_unused;
  }
  if (drafter_) {
    s.draft_context_pages = drafter_->pool().total_pages();
    s.draft_context_free_pages = drafter_->pool().free_pages();
    s.draft_context_cached_pages = draft_contexts_.pages();
  }
  s.max_loras = options_.max_loras;
  if (s.max_loras > 0) {
    const auto adapters_of = [&](const std::vector<SeqId>& seqs) {
      std::set<std::string> names;
      for (SeqId id : seqs)
        if (const auto& lora = requests_.at(seqs_.at(id).request).lora) names.insert(lora->name);
      return std::vector<std::string>(names.begin(), names.end());
    };
    s.running_loras = adapters_of(running_);
    s.waiting_loras = adapters_of(waiting_);
  }
  std::lock_guard<std::mutex> lock(stats_mu_);
  generation_rate_.add(s.last_step_unix_s, s.generated_tokens);
  stats_ = s;
}

Engine::Engine(std::vector<std::unique_ptr<Impl>> replicas, const BalancerOptions& balance)
    : balancer_(std::make_shared<ReplicaBalancer>(static_cast<int>(replicas.size()), balance)),
      replicas_(std::move(replicas)) {}
Engine::~Engine() = default;

Expected<std::unique_ptr<Engine>> Engine::create(std::shared_ptr<const BeamWeights> weights,
                                                 const EngineOptions& options) {
  if (!weights) return make_error("engine: no weights");
  return create(slices_of(std::move(weights)), options);
}

// One replica (its device, model, KV pools and thread; Engine::create's checks done).
Expected<std::unique_ptr<Engine::Impl>> Engine::create_replica(const RankWeights& source,
                                                               const EngineOptions& options,
                                                               ReplicaPlace place) {
  const int tp = options.tensor_parallel_size;
  BEAM_ASSIGN_OR_RETURN(std::shared_ptr<const BeamWeights> weights,
                        load_rank_slice(source, TensorParallel{0, tp}));
  const BeamConfig config = weights->config;
  if (options.max_context_tokens > config.max_position_embeddings)  // as vLLM's max_model_len
    return make_error("engine: a context of " + std::to_string(options.max_context_tokens) +
                      " tokens (--max-model-len) is longer than the model's "
                      "max_position_embeddings, " +
                      std::to_string(config.max_position_embeddings));
  BEAM_ASSIGN_OR_RETURN(KvGeometry geometry,
                        kv_geometry_from_config(config, options.block_size_tokens));
  geometry.num_kv_heads /= tp;  // each rank's pools hold its KV heads
  BEAM_ASSIGN_OR_RETURN(EngineDevice device,
                        open_engine_device(options.device, std::move(weights),
                                           options.enable_sleep_mode, place.index * tp));
  device.cuda_graphs = options.cuda_graphs;
  device.attention_probs = options.attention_probs;
  device.batch_invariance = options.batch_invariance;
  if (options.max_loaded_loras < 0 ||
      (options.max_loaded_loras > 0 && options.max_loaded_loras < options.max_loras))
    return make_error("engine: max_loaded_loras " + std::to_string(options.max_loaded_loras) +
                      " must be 0 (any number) or at least max_loras " +
                      std::to_string(options.max_loras));
  // The LoRA slots before the warm-up step and the KV budget, which see the memory they take.
  std::unique_ptr<LoraSlots> lora;
  if (options.max_loras != 0) {
    // In sleep mode the slots go with the weights' device memory (engine_sleep.h).
    const bool releasable = options.enable_sleep_mode && device.weight_memory != nullptr;
    BEAM_ASSIGN_OR_RETURN(lora,
                          LoraSlots::create(device.context(nullptr), config,
                                            LoraSlotsOptions{.max_loras = options.max_loras,
                                                             .max_rank = options.max_lora_rank,
                                                             .experts = options.lora_experts,
                                                             .releasable = releasable,
                                                             .tp = TensorParallel{0, tp}}));
  }
  const int64_t device_default = default_max_tokens_per_step(
      device.device, device_memory_info(device.context(nullptr)).total_bytes);
  int64_t step_tokens = options.max_tokens_per_step.value_or(device_default);
  if (step_tokens < 1 || options.max_running < 1)
    return make_error("engine: max_tokens_per_step and max_running must be >= 1, got " +
                      std::to_string(step_tokens) + " and " + std::to_string(options.max_running));
  if (!options.max_tokens_per_step && options.kv_budget_bytes && *options.kv_budget_bytes > 0)
    step_tokens = fit_step_tokens_to_kv_budget(step_tokens, geometry, *options.kv_budget_bytes,
                                               options.max_running);
  EngineOptions resolved = options;
  resolved.max_tokens_per_step = step_tokens;
  BEAM_ASSIGN_OR_RETURN(std::shared_ptr<const DFlash2Weights> drafter,
                        load_engine_drafter(options, device.context(nullptr), config));
  if (drafter) {  // its block bounds the drafts
    int64_t& k = resolved.speculative.num_draft_tokens;
    if (k > drafter->config.max_drafts())
      return make_error("engine: " + std::to_string(k) + " speculative tokens asked for, the "
                        "DFlash2 drafter drafts at most " +
                        std::to_string(drafter->config.max_drafts()) + " (its block_size - 1)");
    if (k == 0) k = drafter->config.max_drafts();
  }
  std::unique_ptr<EngineRanks> ranks;
  if (tp > 1) {
    const int threads = engine_threads(options);
    std::optional<LoraSlotsOptions> rank_lora;
    if (options.max_loras != 0)
      rank_lora = LoraSlotsOptions{.max_loras = options.max_loras,
                                   .max_rank = options.max_lora_rank,
                                   .experts = options.lora_experts};
    BEAM_ASSIGN_OR_RETURN(ranks,
                          EngineRanks::create(source, tp, device, std::max(1, threads / tp),
                                              options.enable_sleep_mode, rank_lora));
  }
  DeviceBuffer drafter_lm_head;  // a drafter's whole LM head when rank 0 holds a slice
  if (drafter && ranks) {
    const TensorView& slice = device.weights->lm_head;
    BEAM_ASSIGN_OR_RETURN(drafter_lm_head,
                          allocate_buffer(device.context(nullptr),
                                          static_cast<size_t>(tp * slice.dim(0) * slice.dim(1)) * 2));
    BEAM_RETURN_IF_ERROR(ranks->gather_lm_head(
        device.context(nullptr), slice,
        drafter_lm_head.view(DType::kBF16, {tp * slice.dim(0), slice.dim(1)})));
  }
  std::optional<StepMemory> step;
  if (device.device == Device::kCuda) {
    BEAM_ASSIGN_OR_RETURN(step, warm_up_largest_step(device, step_tokens, options.max_running,
                                                     options.block_size_tokens, lora, ranks.get()));
  }
  BEAM_ASSIGN_OR_RETURN(int64_t budget, kv_budget_bytes(device, config, options.kv_budget_bytes,
                                                        options.max_running, step));
  if (drafter && step && !options.kv_budget_bytes)  // the drafter's activations (its reserve)
    budget -= DFlash2Drafter::scratch_bytes(drafter->config, step_tokens, options.max_running);
  const int64_t draft_pool_bytes = options.speculative.dflash2_context_pool_bytes;
  // An explicit pool's pages, at least 2 (the drafter keeps one).
  const int64_t asked_pages =
      drafter && draft_pool_bytes > 0
          ? std::max<int64_t>(2, draft_pool_bytes / DFlash2ContextPool::page_bytes(drafter->config))
          : 0;
  if (asked_pages > 0) {
    const int64_t pool_bytes = asked_pages * DFlash2ContextPool::page_bytes(drafter->config);
    if (pool_bytes >= budget)
      return make_error("engine: the DFlash2 context pool of " + std::to_string(pool_bytes) +
                        " bytes (speculative dflash2_context_pool_bytes) leaves nothing of the KV "
                        "budget of " + std::to_string(budget) + " bytes; lower it or raise the "
                        "budget");
    budget -= pool_bytes;
  }
  KvPoolSplit split;
  split.max_running_seqs = options.max_running;
  split.max_step_tokens = step_tokens;
  split.ring = draft_ring_pool(drafter.get(),
                               options.max_context_tokens > 0 ? options.max_context_tokens
                                                              : config.max_position_embeddings,
                               draft_pool_bytes);
  BEAM_ASSIGN_OR_RETURN(KvPoolSizes sizes, plan_kv_pools(geometry, budget, split));
  std::shared_ptr<DFlash2ContextPool> draft_pool;
  if (drafter) {
    BEAM_ASSIGN_OR_RETURN(draft_pool,
                          make_draft_pool(device.context(nullptr), drafter->config,
                                          options.max_running,
                                          asked_pages > 0 ? asked_pages
                                                          : std::max<int64_t>(2, sizes.num_ring_pages),
                                          asked_pages > 0));
  }
  std::unique_ptr<KvMemoryAllocator> allocator =
      make_kv_allocator(device, options.enable_sleep_mode);
  BEAM_ASSIGN_OR_RETURN(KvStorage storage, KvStorage::create(geometry, sizes, *allocator));
  log_memory_plan(device, storage, sizes, options.kv_budget_bytes.has_value());
  log_step_budget(step_tokens, options.max_tokens_per_step.has_value(), device_default, step);
  BEAM_ASSIGN_OR_RETURN(std::optional<HostKvStore> host_store,
                        make_host_store(options, device.context(nullptr), storage));
  KvCacheConfig kc;
  kc.block_size_tokens = options.block_size_tokens;
  kc.sliding_window_tokens = config.sliding_window;
  kc.num_full_blocks = sizes.num_full_blocks;
  kc.num_sliding_blocks = sizes.num_sliding_blocks;
  BEAM_ASSIGN_OR_RETURN(KvCacheManager kv, KvCacheManager::create(kc));
  if (ranks) {
    BEAM_RETURN_IF_ERROR(ranks->allocate_kv(geometry, sizes, options.enable_sleep_mode));
    if (host_store) BEAM_RETURN_IF_ERROR(ranks->allocate_host_kv(host_store->slots()));
    log_info("engine: the model is split over " + std::to_string(tp) + " tensor-parallel ranks (" +
             (device.device == Device::kCuda ? "GPUs " + std::to_string(device.gpu) + "-" +
                                                   std::to_string(device.gpu + tp - 1) + ", NCCL"
                                             : std::string("threads of this process")) +
             "), each with the KV pools above");
  }
  auto impl = std::make_unique<Impl>(std::move(device), resolved, std::move(geometry), sizes,
                                     std::move(allocator), std::move(storage), std::move(kv),
                                     std::move(lora), std::move(ranks), std::move(host_store),
                                     std::move(drafter), std::move(draft_pool),
                                     std::move(drafter_lm_head), place);
  return impl;
}

Expected<std::unique_ptr<Engine>> Engine::create(const RankWeights& source,
                                                 const EngineOptions& options) {
  if (Status st = options.speculative.validate(); !st.ok())
    return make_error("engine: " + st.error().message);
  BEAM_RETURN_IF_ERROR(check_engine_tensor_parallel(options));
  BEAM_RETURN_IF_ERROR(check_engine_hierarchical_cache(options));
  BEAM_RETURN_IF_ERROR(check_engine_data_parallel(options));
  const int dp = options.data_parallel_size;
  EngineOptions each = options;
  RankWeights replica_source = source;
  if (dp > 1 && options.device == Device::kCpu) {
    // The cores split between the replicas, which share the host weights. GPU replicas each load
    // theirs (a GPU's upload lets its host copy go; the routed experts stream from the checkpoint
    // without one).
    each.num_threads = std::max(1, engine_threads(options) / dp);
    replica_source = shared_rank_weights(source);
  }
  // The replicas start at once (on GPUs each loads, uploads and warms up on its own GPUs), except
  // tensor-parallel GPU replicas: their NCCL groups are made one replica at a time.
  std::vector<std::unique_ptr<Impl>> replicas(static_cast<size_t>(dp));
  std::vector<std::string> errors(static_cast<size_t>(dp));
  const auto make = [&](int d) {
    Expected<std::unique_ptr<Impl>> impl = create_replica(replica_source, each, ReplicaPlace{d, dp});
    if (impl.ok())
      replicas[static_cast<size_t>(d)] = std::move(*impl);
    else
      errors[static_cast<size_t>(d)] = impl.error().message;
  };
  if (options.device == Device::kCuda && options.tensor_parallel_size > 1) {
    for (int d = 0; d < dp; ++d) make(d);
  } else {
    at_once(dp, make);
  }
  for (int d = 0; d < dp; ++d)
    if (!replicas[static_cast<size_t>(d)])
      return make_error(dp == 1 ? errors[0]
                                : "data-parallel replica " + std::to_string(d) + ": " +
                                      errors[static_cast<size_t>(d)]);
  if (dp > 1)
    log_info("engine: " + std::to_string(dp) + " data-parallel replicas (" +
             load_balance_name(options.load_balance) + " balancing), each with the KV pools above" +
             (options.device == Device::kCpu
                  ? ", " + std::to_string(each.num_threads) +
                        (each.num_threads == 1 ? " thread" : " threads") + " each"
                  : std::string()));
  // The cache-aware index remembers about what a replica's prefix cache (and host tier) holds.
  BalancerOptions balance{.policy = options.load_balance,
                          .block_tokens = options.block_size_tokens};
  const double tiers = options.enable_hierarchical_cache ? 1 + options.hicache_ratio : 1;
  balance.capacity_blocks = std::max<int64_t>(
      1, static_cast<int64_t>(static_cast<double>(replicas[0]->stats().full_pool.total_blocks) *
                              tiers));
  return std::unique_ptr<Engine>(new Engine(std::move(replicas), balance));
}

Engine::Impl& Engine::replica_of(RequestId id) const {
  const int64_t dp = static_cast<int64_t>(replicas_.size());
  return *replicas_[static_cast<size_t>(id.value >= 1 ? (id.value - 1) % dp : 0)];
}

std::vector<Status> Engine::each_replica(const std::function<Status(Impl&)>& f) {
  std::vector<Status> done(replicas_.size());
  at_once(static_cast<int>(replicas_.size()),
          [&](int d) { done[static_cast<size_t>(d)] = f(*replicas_[static_cast<size_t>(d)]); });
  return done;
}

Status Engine::first_replica_error(const std::vector<Status>& done) const {
  if (replicas_.size() == 1) return done[0];
  for (size_t d = 0; d < done.size(); ++d)
    if (!done[d].ok())
      return make_error("data-parallel replica " + std::to_string(d) + ": " +
                        done[d].error().message);
  return ok_status();
}

Status Engine::on_replicas(std::mutex& turn, const char* busy,
                           const std::function<Status(Impl&)>& f) {
  std::unique_lock<std::mutex> held(turn, std::try_to_lock);
  if (!held.owns_lock()) return make_error(busy);
  return first_replica_error(each_replica(f));
}

const BeamConfig& Engine::config() const { return replicas_[0]->config(); }
int64_t Engine::max_tokens_per_step() const { return replicas_[0]->max_tokens_per_step(); }
int Engine::tensor_parallel_size() const { return replicas_[0]->tensor_parallel_size(); }
int Engine::data_parallel_size() const { return static_cast<int>(replicas_.size()); }
Device Engine::device() const { return replicas_[0]->device(); }
int64_t Engine::speculative_draft_tokens() const {
  return replicas_[0]->speculative_draft_tokens();
}

Expected<RequestId> Engine::submit(GenerateRequest request) {
  const int dp = data_parallel_size();
  if (const std::optional<int> rank = request.data_parallel_rank; rank && (*rank < 0 || *rank >= dp))
    return make_error("data_parallel_rank " + std::to_string(*rank) +
                      " names no replica: the engine has " + std::to_string(dp) +
                      " (data parallel size), 0 to " + std::to_string(dp - 1));
  if (dp == 1) return replicas_[0]->submit(std::move(request));
  // In flight on its replica from now until its last sibling's final event.
  const int64_t tokens = request_tokens(request, replicas_[0]->max_context());
  const int d = balancer_->take(
      ReplicaBalancer::Request{
          .tokens = tokens,
          .prompt = request.prompt,
          .prefix_namespace = prompt_namespace(request.cache_salt, request.lora_name)},
      request.data_parallel_rank);
  auto left = std::make_shared<std::atomic<int64_t>>(request.sampling.n);
  request.sink = [sink = std::move(request.sink), balancer = balancer_, d, tokens,
                  left](TokenEvent&& event) {
    const bool last = event.finish.has_value() && left->fetch_sub(1) == 1;
    sink(std::move(event));
    if (last) balancer->release(d, tokens);
  };
  Expected<RequestId> id = replicas_[static_cast<size_t>(d)]->submit(std::move(request));
  if (!id.ok()) balancer_->release(d, tokens);
  return id;
}

void Engine::cancel(RequestId id) { replica_of(id).cancel(id); }
void Engine::stop_sibling(RequestId id, int32_t sibling) {
  replica_of(id).stop_sibling(id, sibling);
}

EngineStats Engine::stats() const {
  if (replicas_.size() == 1) return replicas_[0]->stats();
  EngineStats total;
  for (const auto& r : replicas_) add_replica_stats(r->stats(), total);
  return total;
}

std::vector<EngineStats> Engine::replica_stats() const {
  std::vector<EngineStats> all;
  for (const auto& r : replicas_) all.push_back(r->stats());
  return all;
}

void Engine::flush_prefix_cache() {
  for (const auto& r : replicas_) r->flush_prefix_cache();
}

Status Engine::update_weights(std::shared_ptr<const BeamWeights> weights, bool abort_in_flight) {
  BEAM_CHECK(weights != nullptr) << "update_weights: no weights";
  const RankWeights source = slices_of(std::move(weights));
  return update_weights(source, abort_in_flight);
}

Status Engine::update_weights(const RankWeights& source, bool abort_in_flight) {
  return update_weights([&]() -> Expected<RankWeights> { return source; }, abort_in_flight);
}

Status Engine::update_weights(const std::function<Expected<RankWeights>()>& load,
                              bool abort_in_flight) {
  std::unique_lock<std::mutex> held(turns_.weights, std::try_to_lock);
  if (!held.owns_lock()) return make_error(kWeightsBusy);
  BEAM_ASSIGN_OR_RETURN(const RankWeights source, load());
  const RankWeights replica_source =
      replicas_.size() > 1 && device() == Device::kCpu ? shared_rank_weights(source) : source;
  return first_replica_error(
      each_replica([&](Impl& r) { return r.update_weights(replica_source, abort_in_flight); }));
}

Expected<WeightValues> Engine::read_weight(const std::string& name, int64_t max_rows) {
  return replicas_[0]->read_weight(name, max_rows);
}

Status Engine::load_lora_adapter(const std::string& name, const std::string& dir, bool replace,
                                 bool pinned) {
  std::lock_guard<std::mutex> turn(turns_.lora);
  for (size_t d = 0; d < replicas_.size(); ++d) {
    const Status st = replicas_[d]->load_lora_adapter(name, dir, replace, pinned);
    if (st.ok()) continue;
    if (replicas_.size() == 1) return st;
    if (!replace)  // the replicas that took it let it go again
      for (size_t e = 0; e < d; ++e) (void)replicas_[e]->unload_lora_adapter(name);
    return make_error("data-parallel replica " + std::to_string(d) + ": " + st.error().message +
                      (replace && d > 0 ? " (replicas before it serve the new adapter)" : ""));
  }
  return ok_status();
}

Status Engine::unload_lora_adapter(const std::string& name) {
  std::lock_guard<std::mutex> turn(turns_.lora);
  return first_replica_error(each_replica([&](Impl& r) { return r.unload_lora_adapter(name); }));
}

std::vector<LoraAdapterInfo> Engine::lora_adapters() const {
  return replicas_[0]->lora_adapters();
}

void Engine::wait_idle() {
  for (const auto& r : replicas_) r->wait_idle();
}

Status Engine::sleep(SleepLevel level, bool weights, bool kv_cache) {
  std::unique_lock<std::mutex> held(turns_.memory, std::try_to_lock);
  if (!held.owns_lock()) return make_error(kMemoryBusy);
  const MemoryCommand command{.sleep = true, .level = level, .weights = weights, .kv_cache = kv_cache};
  if (replicas_.size() == 1) return replicas_[0]->memory_command(command);
  // Kept requests on one replica refuse the release on every replica (a paused replica's running
  // requests stay until the resume). A pause that comes while the sleep waits is caught below.
  if (kv_cache && paused())
    for (size_t d = 0; d < replicas_.size(); ++d)
      if (replicas_[d]->stats().running > 0)
        return make_error("data-parallel replica " + std::to_string(d) + ": " + kKeptRequestsHoldKv);
  const std::vector<Status> done = each_replica([&](Impl& r) { return r.memory_command(command); });
  const Status st = first_replica_error(done);
  if (st.ok()) return st;
  // A refused sleep leaves the replicas as they were: those that slept wake again.
  bool discarded = false;
  for (size_t d = 0; d < done.size(); ++d) {
    if (!done[d].ok()) continue;
    (void)replicas_[d]->memory_command(
        MemoryCommand{.sleep = false, .weights = weights, .kv_cache = kv_cache});
    discarded = discarded || replicas_[d]->sleep_state().weights_discarded;
  }
  return make_error(st.error().message + "; the replicas that slept woke again" +
                    (discarded ? ", their weights discarded (level 2) until update_weights" : ""));
}

Status Engine::wake_up(bool weights, bool kv_cache) {
  return on_replicas(turns_.memory, kMemoryBusy, [&](Impl& r) {
    return r.memory_command(MemoryCommand{.sleep = false, .weights = weights, .kv_cache = kv_cache});
  });
}

SleepState Engine::sleep_state() const {
  SleepState state = replicas_[0]->sleep_state();
  for (size_t d = 1; d < replicas_.size(); ++d)
    state.released_bytes += replicas_[d]->sleep_state().released_bytes;
  return state;
}

Status Engine::pause(PauseMode mode, bool clear_cache) {
  return on_replicas(turns_.pause, kPauseBusy, [&](Impl& r) {
    return r.pause_command(PauseCommand{.pause = true, .mode = mode, .clear_cache = clear_cache});
  });
}

Status Engine::resume() {
  return on_replicas(turns_.pause, kPauseBusy,
                     [](Impl& r) { return r.pause_command(PauseCommand{.pause = false}); });
}

bool Engine::paused() const { return replicas_[0]->paused(); }

}  // namespace beam
