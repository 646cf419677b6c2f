// KvCacheManager: block pools, per-sequence block tables, sliding-window release and forks.
#include "runtime/kv_cache/kv_cache_manager.h"

#include <algorithm>
#include <string>

#include "core/check.h"

namespace beam {

Expected<KvCacheManager> KvCacheManager::create(const KvCacheConfig& c) {
  if (c.block_size_tokens <= 0)
    return make_error("KV cache: block_size_tokens must be positive, got " +
                      std::to_string(c.block_size_tokens));
  if (c.sliding_window_tokens <= 0)
    return make_error("KV cache: sliding_window_tokens must be positive, got " +
                      std::to_string(c.sliding_window_tokens));
  if (c.num_full_blocks <= 0 || c.num_sliding_blocks <= 0)
    return make_error("KV cache: both pools need blocks (full " + std::to_string(c.num_full_blocks) +
                      ", sliding " + std::to_string(c.num_sliding_blocks) + ")");
  return KvCacheManager(c);
}

KvCacheManager::KvCacheManager(const KvCacheConfig& config)
    : config_(config),
      pools_{BlockPool(config.num_full_blocks), BlockPool(config.num_sliding_blocks)} {}

const BlockPool& KvCacheManager::pool_of(AttentionKind pool) const {
  switch (pool) {
    case AttentionKind::kFull: return pools_[0];
    case AttentionKind::kSliding: return pools_[1];
  }
  return pools_[0];
}

BlockPool& KvCacheManager::pool_mut(AttentionKind pool) {
  return const_cast<BlockPool&>(pool_of(pool));
}

BlockCounts KvCacheManager::free_blocks() const {
  return {pools_[0].num_free(), pools_[1].num_free()};
}

BlockCounts KvCacheManager::total_blocks() const {
  return {pools_[0].num_total(), pools_[1].num_total()};
}

const KvCacheManager::Seq& KvCacheManager::get(SeqId seq) const {
  auto it = seqs_.find(seq);
  BEAM_CHECK(it != seqs_.end()) << "unknown KV sequence " << seq.value;
  return it->second;
}

KvCacheManager::Seq& KvCacheManager::get(SeqId seq) {
  return const_cast<Seq&>(static_cast<const KvCacheManager*>(this)->get(seq));
}

void KvCacheManager::add_sequence(SeqId seq) {
  BEAM_CHECK(seq.valid()) << "invalid sequence id";
  BEAM_CHECK(seqs_.emplace(seq, Seq{}).second) << "KV sequence " << seq.value << " exists";
}

void KvCacheManager::free_sequence(SeqId seq) {
  Seq& s = get(seq);
  for (int32_t b : s.full) pools_[0].release(BlockId(b));
  for (int32_t b : s.sliding)
    if (b >= 0) pools_[1].release(BlockId(b));
  seqs_.erase(seq);
}

void KvCacheManager::attach_prefix(SeqId seq, std::span<const int32_t> full,
                                   std::span<const int32_t> sliding, int64_t num_tokens) {
  Seq& s = get(seq);
  const int64_t B = block_size();
  const int64_t n = num_tokens / B;
  BEAM_CHECK(s.full.empty() && s.num_computed == 0) << "attach_prefix on a started sequence";
  BEAM_CHECK(num_tokens % B == 0 && static_cast<int64_t>(full.size()) == n &&
             static_cast<int64_t>(sliding.size()) == n)
      << "prefix of " << num_tokens << " tokens with " << full.size() << "/" << sliding.size()
      << " blocks";
  const int64_t first = first_visible_block(num_tokens, sliding_window(), B);
  for (int64_t i = 0; i < n; ++i) {
    pools_[0].add_ref(BlockId(full[i]));
    BEAM_CHECK((sliding[i] >= 0) == (i >= first)) << "prefix sliding block " << i << " is "
                                                  << sliding[i] << ", window starts at " << first;
    if (sliding[i] >= 0) pools_[1].add_ref(BlockId(sliding[i]));
  }
  s.full.assign(full.begin(), full.end());
  s.sliding.assign(sliding.begin(), sliding.end());
  s.num_computed = num_tokens;
  s.release_cursor = first;
}

int64_t KvCacheManager::first_kept_sliding_block(SeqId seq) const {
  return beam::first_kept_sliding_block(get(seq).num_computed, sliding_window(), block_size());
}

BlockCounts KvCacheManager::blocks_needed(SeqId seq, int64_t end_slot) const {
  const Seq& s = get(seq);
  const int64_t more =
      std::max<int64_t>(0, blocks_for_tokens(end_slot, block_size()) - static_cast<int64_t>(s.full.size()));
  return {more, more};
}

void KvCacheManager::reserve(SeqId seq, int64_t end_slot) {
  Seq& s = get(seq);
  const int64_t target = blocks_for_tokens(end_slot, block_size());
  BEAM_CHECK(blocks_needed(seq, end_slot).fits_in(free_blocks()))
      << "reserve of " << end_slot << " slots for sequence " << seq.value << " exceeds free blocks";
  while (static_cast<int64_t>(s.full.size()) < target) {
    s.full.push_back(pools_[0].allocate().value);
    s.sliding.push_back(pools_[1].allocate().value);
  }
}

void KvCacheManager::advance(SeqId seq, int64_t num_written) {
  Seq& s = get(seq);
  BEAM_CHECK(num_written >= 0 &&
             s.num_computed + num_written <= static_cast<int64_t>(s.full.size()) * block_size())
      << "advance by " << num_written << " past the reserved slots of sequence " << seq.value;
  s.num_computed += num_written;
}

void KvCacheManager::truncate(SeqId seq, int64_t num_tokens) {
  Seq& s = get(seq);
  BEAM_CHECK(num_tokens >= 0 && num_tokens <= s.num_computed)
      << "truncate to " << num_tokens << " of " << s.num_computed;
  const int64_t keep = blocks_for_tokens(num_tokens, block_size());
  for (int64_t i = beam::first_kept_sliding_block(num_tokens, sliding_window(), block_size());
       i < keep; ++i)
    BEAM_CHECK(s.sliding[i] >= 0) << "truncate to " << num_tokens
                                  << " needs released sliding block " << i;
  while (static_cast<int64_t>(s.full.size()) > keep) {
    pools_[0].release(BlockId(s.full.back()));
    s.full.pop_back();
    if (s.sliding.back() >= 0) pools_[1].release(BlockId(s.sliding.back()));
    s.sliding.pop_back();
  }
  s.num_computed = num_tokens;
}

int64_t KvCacheManager::release_out_of_window(SeqId seq) {
  Seq& s = get(seq);
  const int64_t keep_from = first_kept_sliding_block(seq);
  const int64_t end = std::min<int64_t>(keep_from, static_cast<int64_t>(s.sliding.size()));
  for (int64_t i = s.release_cursor; i < end; ++i) {
    if (s.sliding[i] < 0) continue;
    pools_[1].release(BlockId(s.sliding[i]));
    s.sliding[i] = -1;
  }
  s.release_cursor = std::max(s.release_cursor, keep_from);
  return keep_from;
}

BlockCounts KvCacheManager::fork_cost(SeqId parent) const {
  const int64_t c = get(parent).num_computed;
  return c % block_size() != 0 ? BlockCounts{1, 1} : BlockCounts{0, 0};
}

void KvCacheManager::fork(SeqId parent, SeqId child, std::vector<BlockCopy>* copies) {
  BEAM_CHECK(fork_cost(parent).fits_in(free_blocks())) << "fork of " << parent.value << " without free blocks";
  add_sequence(child);
  const Seq& p = get(parent);
  Seq& ch = get(child);
  const int64_t n = blocks_for_tokens(p.num_computed, block_size());
  ch.full.assign(p.full.begin(), p.full.begin() + n);
  ch.sliding.assign(p.sliding.begin(), p.sliding.begin() + n);
  ch.num_computed = p.num_computed;
  ch.release_cursor = std::min(p.release_cursor, n);
  const bool partial = p.num_computed % block_size() != 0;
  for (int64_t i = 0; i < n; ++i) {
    if (partial && i == n - 1) continue;
    pools_[0].add_ref(BlockId(ch.full[i]));
    if (ch.sliding[i] >= 0) pools_[1].add_ref(BlockId(ch.sliding[i]));
  }
  if (!partial) return;
  BEAM_CHECK(ch.sliding[n - 1] >= 0) << "partial last block of " << parent.value << " released";
  for (AttentionKind pool : kKvPools) {
    std::vector<int32_t>& table = pool == AttentionKind::kFull ? ch.full : ch.sliding;
    const BlockId dst = pool_mut(pool).allocate();
    copies->push_back(BlockCopy{pool, BlockId(table[n - 1]), dst});
    table[n - 1] = dst.value;
  }
}

BlockCounts KvCacheManager::held_blocks(SeqId seq) const {
  const Seq& s = get(seq);
  BlockCounts c;
  c.full = static_cast<int64_t>(s.full.size());
  for (int32_t b : s.sliding) c.sliding += b >= 0;
  return c;
}

BlockCounts KvCacheManager::exclusive_blocks(SeqId seq) const {
  const Seq& s = get(seq);
  BlockCounts c;
  for (int32_t b : s.full) c.full += pools_[0].ref_count(BlockId(b)) == 1;
  for (int32_t b : s.sliding) c.sliding += b >= 0 && pools_[1].ref_count(BlockId(b)) == 1;
  return c;
}

void KvCacheManager::check_seq(SeqId id, const Seq& s) const {
  const int64_t B = block_size();
  const int64_t n = static_cast<int64_t>(s.full.size());
  BEAM_CHECK_EQ(n, static_cast<int64_t>(s.sliding.size())) << "seq " << id.value << " table sizes";
  BEAM_CHECK(s.num_computed >= 0 && s.num_computed <= n * B)
      << "seq " << id.value << " computed " << s.num_computed << " with " << n << " blocks";
  const int64_t keep_from = beam::first_kept_sliding_block(s.num_computed, sliding_window(), B);
  for (int64_t i = 0; i < n; ++i) {
    BEAM_CHECK(s.full[i] >= 0) << "seq " << id.value << " full block " << i << " missing";
    BEAM_CHECK(i < std::max(keep_from, s.release_cursor) || s.sliding[i] >= 0)
        << "seq " << id.value << " sliding block " << i << " missing inside the window";
    BEAM_CHECK(i >= s.release_cursor || s.sliding[i] < 0)
        << "seq " << id.value << " holds out-of-window sliding block " << i;
  }
}

void KvCacheManager::check_integrity(std::span<const int32_t> other_full_refs,
                                     std::span<const int32_t> other_sliding_refs) const {
  std::vector<int32_t> full(other_full_refs.begin(), other_full_refs.end());
  std::vector<int32_t> sliding(other_sliding_refs.begin(), other_sliding_refs.end());
  BEAM_CHECK_EQ(static_cast<int64_t>(full.size()), pools_[0].num_total()) << "full ref vector";
  BEAM_CHECK_EQ(static_cast<int64_t>(sliding.size()), pools_[1].num_total()) << "sliding ref vector";
  for (const auto& [id, s] : seqs_) {
    check_seq(id, s);
    for (int32_t b : s.full) {
      BEAM_CHECK(b < pools_[0].num_total()) << "seq " << id.value << " full block " << b;
      ++full[b];
    }
    for (int32_t b : s.sliding) {
      BEAM_CHECK(b < pools_[1].num_total()) << "seq " << id.value << " sliding block " << b;
      if (b >= 0) ++sliding[b];
    }
  }
  pools_[0].check_integrity(full, "full pool");
  pools_[1].check_integrity(sliding, "sliding pool");
}

}  // namespace beam
