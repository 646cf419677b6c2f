// ReplicaBalancer and add_replica_stats (data_parallel.h).
#include "runtime/data_parallel.h"

#include <algorithm>
#include <set>
#include <string>

#include "core/check.h"

namespace beam {

const char* load_balance_name(LoadBalance b) {
  switch (b) {
    case LoadBalance::kCacheAware: return "cache_aware";
    case LoadBalance::kRoundRobin: return "round_robin";
    case LoadBalance::kShortestQueue: return "shortest_queue";
    case LoadBalance::kMinimumTokens: return "minimum_tokens";
  }
  return "?";
}

std::optional<LoadBalance> parse_load_balance(std::string_view name) {
  for (LoadBalance b : {LoadBalance::kCacheAware, LoadBalance::kRoundRobin,
                        LoadBalance::kShortestQueue, LoadBalance::kMinimumTokens})
    if (name == load_balance_name(b)) return b;
  return std::nullopt;
}

ReplicaBalancer::ReplicaBalancer(int replicas, BalancerOptions options)
    : options_(options), loads_(static_cast<size_t>(replicas)) {
  BEAM_CHECK(replicas >= 1) << "ReplicaBalancer of " << replicas << " replicas";
  if (options_.policy == LoadBalance::kCacheAware)
    indexes_.assign(static_cast<size_t>(replicas), PromptBlockIndex(options_.capacity_blocks));
}

int ReplicaBalancer::least_loaded(bool by_tokens) const {
  const int n = static_cast<int>(loads_.size());
  auto weight = [&](int r) {
    const Load& l = loads_[static_cast<size_t>(r)];
    return by_tokens ? l.tokens : l.requests;
  };
  int pick = next_;
  for (int i = 1; i < n; ++i) {
    const int r = (next_ + i) % n;
    if (weight(r) < weight(pick)) pick = r;
  }
  return pick;
}

int ReplicaBalancer::cache_aware_pick(std::span<const uint64_t> chain,
                                      int64_t prompt_tokens) const {
  const auto [lo, hi] = std::minmax_element(
      loads_.begin(), loads_.end(),
      [](const Load& a, const Load& b) { return a.requests < b.requests; });
  const bool imbalanced =
      hi->requests - lo->requests > options_.balance_abs &&
      static_cast<double>(hi->requests) > options_.balance_rel * static_cast<double>(lo->requests);
  if (imbalanced || chain.empty()) return least_loaded(false);
  // The longest match; among equal matches the shorter queue, then the turn.
  const int n = static_cast<int>(loads_.size());
  int best = next_;
  int64_t best_blocks = indexes_[static_cast<size_t>(best)].matched(chain);
  for (int i = 1; i < n; ++i) {
    const int r = (next_ + i) % n;
    const int64_t blocks = indexes_[static_cast<size_t>(r)].matched(chain);
    if (blocks > best_blocks ||
        (blocks == best_blocks && loads_[static_cast<size_t>(r)].requests <
                                      loads_[static_cast<size_t>(best)].requests)) {
      best = r;
      best_blocks = blocks;
    }
  }
  const double share = static_cast<double>(best_blocks * options_.block_tokens) /
                       static_cast<double>(std::max<int64_t>(1, prompt_tokens));
  return best_blocks > 0 && share >= options_.cache_threshold ? best : least_loaded(false);
}

int ReplicaBalancer::take(const Request& request, std::optional<int> pinned) {
  const bool cache_aware = options_.policy == LoadBalance::kCacheAware;
  // Hashed outside the lock: a long prompt's chain is the costly part.
  const std::vector<uint64_t> chain =
      cache_aware ? prompt_block_chain(request.prompt, options_.block_tokens,
                                       request.prefix_namespace)
                  : std::vector<uint64_t>{};
  std::lock_guard<std::mutex> lock(mu_);
  const int n = static_cast<int>(loads_.size());
  int pick = next_;
  if (pinned) {
    BEAM_CHECK(*pinned >= 0 && *pinned < n) << "replica " << *pinned << " of " << n;
    pick = *pinned;
  } else if (options_.policy == LoadBalance::kShortestQueue) {
    pick = least_loaded(false);
  } else if (options_.policy == LoadBalance::kMinimumTokens) {
    pick = least_loaded(true);
  } else if (cache_aware) {
    pick = cache_aware_pick(chain, static_cast<int64_t>(request.prompt.size()));
  }
  if (cache_aware) indexes_[static_cast<size_t>(pick)].insert(chain);
  Load& l = loads_[static_cast<size_t>(pick)];
  ++l.requests;
  l.tokens += request.tokens;
  if (!pinned) next_ = (pick + 1) % n;
  return pick;
}

void ReplicaBalancer::release(int replica, int64_t tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  Load& l = loads_.at(static_cast<size_t>(replica));
  BEAM_CHECK(l.requests > 0 && l.tokens >= tokens)
      << "ReplicaBalancer: replica " << replica << " releases more than it took";
  --l.requests;
  l.tokens -= tokens;
}

std::vector<ReplicaBalancer::Load> ReplicaBalancer::loads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return loads_;
}

namespace {

void add_pool(const PoolStats& a, PoolStats& total) {
  total.total_blocks += a.total_blocks;
  total.free_blocks += a.free_blocks;
  total.cached_blocks += a.cached_blocks;
}

void add_counts(const BlockCounts& a, BlockCounts& total) {
  total.full += a.full;
  total.sliding += a.sliding;
}

// `names` and `more` merged, sorted, each once.
std::vector<std::string> merge_names(const std::vector<std::string>& names,
                                     const std::vector<std::string>& more) {
  std::set<std::string> all(names.begin(), names.end());
  all.insert(more.begin(), more.end());
  return {all.begin(), all.end()};
}

}  // namespace

void add_replica_stats(const EngineStats& r, EngineStats& total) {
  total.running += r.running;
  total.waiting += r.waiting;
  total.sequence_records += r.sequence_records;
  total.steps += r.steps;
  total.prompt_tokens += r.prompt_tokens;
  total.cached_prompt_tokens += r.cached_prompt_tokens;
  total.generated_tokens += r.generated_tokens;
  total.preemptions += r.preemptions;
  total.spec_verifications += r.spec_verifications;
  total.spec_draft_tokens += r.spec_draft_tokens;
  total.spec_accepted_tokens += r.spec_accepted_tokens;
  if (total.spec_accepted_per_position.size() < r.spec_accepted_per_position.size())
    total.spec_accepted_per_position.resize(r.spec_accepted_per_position.size(), 0);
  for (size_t j = 0; j < r.spec_accepted_per_position.size(); ++j)
    total.spec_accepted_per_position[j] += r.spec_accepted_per_position[j];
  total.draft_context_pages += r.draft_context_pages;
  total.draft_context_free_pages += r.draft_context_free_pages;
  total.draft_context_cached_pages += r.draft_context_cached_pages;
  total.last_step_unix_s = std::max(total.last_step_unix_s, r.last_step_unix_s);
  total.generation_tokens_per_s += r.generation_tokens_per_s;
  add_pool(r.full_pool, total.full_pool);
  add_pool(r.sliding_pool, total.sliding_pool);
  HostCacheStats& h = total.host_cache;
  h.enabled = h.enabled || r.host_cache.enabled;
  h.bytes += r.host_cache.bytes;
  add_counts(r.host_cache.tier.capacity, h.tier.capacity);
  add_counts(r.host_cache.tier.used, h.tier.used);
  add_counts(r.host_cache.tier.saved, h.tier.saved);
  add_counts(r.host_cache.tier.loaded, h.tier.loaded);
  h.tier.num_entries += r.host_cache.tier.num_entries;
  h.restored_tokens += r.host_cache.restored_tokens;
  h.unused_blocks += r.host_cache.unused_blocks;
  total.running_loras = merge_names(total.running_loras, r.running_loras);
  total.waiting_loras = merge_names(total.waiting_loras, r.waiting_loras);
  if (total.max_loras == 0) total.max_loras = r.max_loras;
}

}  // namespace beam
