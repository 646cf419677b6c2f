// Shared by the CUDA attention tests (attention_test.cpp, attention_prefill_test.cpp): a batch of
// sequences in a host paged cache (physical blocks shuffled, garbage in unused slots, written by
// the CPU store_kv) with its device copies, the eager op on the GPU and on the CPU, and the
// GPU-vs-CPU bounds (fp32 sums in another order: a few outputs 1 ulp apart, very few 2).
#pragma once

#include <algorithm>
#include <iostream>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/api/attention.h"

namespace beam::test {

struct AttentionGeometry {
  int64_t Nq, Nkv, D, block_size, window;
};

// kv_pos0, kv_len, q_count: the queries are the sequence's last q_count slots.
struct SeqSpec {
  int64_t kv_pos0, kv_len, q_count;
};

struct AttentionBatch {
  AttentionGeometry g;
  std::vector<SeqSpec> specs;
  std::vector<std::vector<int32_t>> tables;
  HostTensor q, cache_k, cache_v;
  TensorView dq, dk, dv;

  std::vector<AttentionSeq> seqs() const {
    std::vector<AttentionSeq> out;
    int64_t row = 0;
    for (size_t i = 0; i < specs.size(); ++i) {
      const SeqSpec& s = specs[i];
      out.push_back({row, s.q_count, s.kv_pos0 + s.kv_len - s.q_count, s.kv_pos0, s.kv_len,
                     tables[i]});
      row += s.q_count;
    }
    return out;
  }
};

class AttentionCudaTest : public CudaTest {
 protected:
  // spare_blocks: pool blocks no sequence maps (they join the shuffle); label: printed results.
  AttentionCudaTest(int64_t spare_blocks, std::string label)
      : spare_blocks_(spare_blocks), label_(std::move(label)) {}

  AttentionBatch make_batch(const AttentionGeometry& g, const std::vector<SeqSpec>& specs,
                            uint32_t seed) {
    AttentionBatch b;
    b.g = g;
    b.specs = specs;
    std::mt19937 rng(seed);
    int64_t T = 0;
    for (const SeqSpec& s : specs) T += s.q_count;
    const std::vector<int32_t> physical = new_cache(b, seed, rng);
    b.q = random_bf16({T, g.Nq, g.D}, rng, 1.5f);
    size_t next = 0;
    for (const SeqSpec& s : specs) {
      HostTensor k = random_bf16({s.kv_len, g.Nkv, g.D}, rng, 1.5f);
      HostTensor v = random_bf16({s.kv_len, g.Nkv, g.D}, rng);
      std::vector<int32_t> table = next_table(physical, next, s.kv_len, g.block_size);
      HostTensor slots(DType::kI64, {s.kv_len});
      for (int64_t j = 0; j < s.kv_len; ++j)
        slots.as<int64_t>()[j] = slot_of(table, g.block_size, j);
      store_kv(cpu.two, k.view, v.view, slots.view, {b.cache_k.view, b.cache_v.view, g.block_size});
      b.tables.push_back(std::move(table));
    }
    upload_all(b);
    return b;
  }

  // The same sequences (q, every key and value) in a paged cache of `block_size`-slot blocks,
  // shuffled anew by `seed` with fresh garbage in the unused slots.
  AttentionBatch repaged(const AttentionBatch& b, int64_t block_size, uint32_t seed) {
    AttentionBatch r;
    r.g = b.g;
    r.g.block_size = block_size;
    r.specs = b.specs;
    r.q = HostTensor(DType::kBF16, b.q.view.shape);
    std::copy_n(b.q.as<uint16_t>(), b.q.view.numel(), r.q.as<uint16_t>());
    std::mt19937 rng(seed);
    const std::vector<int32_t> physical = new_cache(r, seed, rng);
    const int64_t row = b.g.Nkv * b.g.D;  // bf16 of one slot
    size_t next = 0;
    for (size_t i = 0; i < b.specs.size(); ++i) {
      std::vector<int32_t> table = next_table(physical, next, b.specs[i].kv_len, block_size);
      for (int64_t j = 0; j < b.specs[i].kv_len; ++j) {
        const int64_t from = slot_of(b.tables[i], b.g.block_size, j) * row;
        const int64_t to = slot_of(table, block_size, j) * row;
        std::copy_n(b.cache_k.as<uint16_t>() + from, row, r.cache_k.as<uint16_t>() + to);
        std::copy_n(b.cache_v.as<uint16_t>() + from, row, r.cache_v.as<uint16_t>() + to);
      }
      r.tables.push_back(std::move(table));
    }
    upload_all(r);
    return r;
  }

  HostTensor run_gpu(const AttentionBatch& b, std::span<const AttentionSeq> seqs,
                     AttentionProbs probs = AttentionProbs::kFp32) {
    return run_gpu_on(b, b.dq, seqs, probs);
  }
  // The eager op on q (any rows; rows no sequence covers stay NaN), P entering P·V as `probs`.
  HostTensor run_gpu_on(const AttentionBatch& b, const TensorView& q,
                        std::span<const AttentionSeq> seqs,
                        AttentionProbs probs = AttentionProbs::kFp32) {
    const TensorView out = device_tensor(DType::kBF16, q.shape);
    KernelContext ctx = gpu;
    ctx.attention_probs = probs;
    begin_step(ctx);
    paged_attention(ctx, q, {b.dk, b.dv, b.g.block_size}, seqs, b.g.window, out);
    HostTensor h = download(out);
    synchronize(ctx);
    return h;
  }
  HostTensor run_cpu(const AttentionBatch& b, std::span<const AttentionSeq> seqs) {
    HostTensor out(DType::kBF16, b.q.view.shape);
    std::memset(out.view.data, 0xff, out.view.nbytes());
    paged_attention(cpu.two, b.q.view, {b.cache_k.view, b.cache_v.view, b.g.block_size}, seqs,
                    b.g.window, out.view);
    return out;
  }

  // Both ops agree on every row: fp32 sums in another order, so a few outputs 1 ulp apart.
  void expect_matches_cpu(const AttentionGeometry& g, const std::vector<SeqSpec>& specs,
                          uint32_t seed) {
    SCOPED_TRACE(::testing::Message() << "heads " << g.Nq << "/" << g.Nkv << " D " << g.D
                                      << " block " << g.block_size << " window " << g.window);
    expect_batch_matches_cpu(make_batch(g, specs, seed));
  }
  // expect_matches_cpu on a batch already made (its geometry in b.g).
  void expect_batch_matches_cpu(const AttentionBatch& b) {
    const AttentionGeometry& g = b.g;
    const std::vector<AttentionSeq> seqs = b.seqs();
    const HostTensor got = run_gpu(b, seqs), want = run_cpu(b, seqs);
    const Diff one = compare(got.view, want.view, 1);
    const Diff two = compare(got.view, want.view, 2);
    std::cout << label_ << " " << g.Nq << "/" << g.Nkv << "x" << g.D << " bs " << g.block_size
              << " W " << g.window << ": max rel err " << one.rel << ", exact "
              << exact_fraction(got.view, want.view) << ", >1 ulp " << one.far << ", >2 ulps "
              << two.far << " of " << want.view.numel() << "\n";
    EXPECT_LT(one.rel, 1e-2) << "worst element " << one.worst;
    EXPECT_LE(one.far, want.view.numel() / 200) << "more than 0.5% of outputs > 1 ulp off";
    EXPECT_LE(two.far, want.view.numel() / 2000) << "more than 0.05% of outputs > 2 ulps off";
  }

 private:
  // b's paged K/V cache for b.specs at b.g.block_size (and the spare blocks), garbage from `seed`
  // in every slot; returns its physical blocks in the order the sequences take them (shuffled).
  std::vector<int32_t> new_cache(AttentionBatch& b, uint32_t seed, std::mt19937& rng) {
    const AttentionGeometry& g = b.g;
    int64_t blocks = spare_blocks_;
    for (const SeqSpec& s : b.specs) blocks += (s.kv_len + g.block_size - 1) / g.block_size;
    b.cache_k = HostTensor(DType::kBF16, {blocks, g.block_size, g.Nkv, g.D});
    b.cache_v = HostTensor(DType::kBF16, {blocks, g.block_size, g.Nkv, g.D});
    fill_uniform(b.cache_k.view, seed + 1, 100.0f);  // garbage in unused slots
    fill_uniform(b.cache_v.view, seed + 2, 100.0f);
    std::vector<int32_t> physical(static_cast<size_t>(blocks));
    std::iota(physical.begin(), physical.end(), 0);
    std::shuffle(physical.begin(), physical.end(), rng);
    return physical;
  }
  // The block table of a sequence of kv_len keys: the next physical blocks from `next` on.
  static std::vector<int32_t> next_table(const std::vector<int32_t>& physical, size_t& next,
                                         int64_t kv_len, int64_t block_size) {
    std::vector<int32_t> table;
    for (int64_t j = 0; j < kv_len; j += block_size) table.push_back(physical[next++]);
    return table;
  }
  // The cache slot of key j through `table`.
  static int64_t slot_of(const std::vector<int32_t>& table, int64_t block_size, int64_t j) {
    return table[static_cast<size_t>(j / block_size)] * block_size + j % block_size;
  }
  void upload_all(AttentionBatch& b) {
    b.dq = upload(b.q);
    b.dk = upload(b.cache_k);
    b.dv = upload(b.cache_v);
  }

  int64_t spare_blocks_;
  std::string label_;
};

}  // namespace beam::test
