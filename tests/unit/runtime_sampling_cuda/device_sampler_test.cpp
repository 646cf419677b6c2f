// GPU sampling (kernels/api/sampling.h through runtime's DeviceBatchSampler) against the CPU
// Sampler: greedy equals the CPU argmax (ties → lowest id), seeded draws give the CPU's token on
// >= 99% of rows and never leave the allowed set, logprobs and top-n match a double log_softmax,
// penalties hit the right tokens, allowed-token masks (siblings of one logits row with different
// masks) give the CPU's tokens; scored tokens (prompt logprobs) give compute_logprobs' ranks and
// top-n (also on flat, tied and mostly -inf rows), and the same chosen-token bits with
// alternatives or without (two kernels). B in
// {1, 7, 64}; vocab 151936 and small. Skips without a GPU.
#include "runtime/sampling/device_sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <set>
#include <string>

#include "../kernels_cuda/cuda_test_util.h"
#include "../runtime_sampling/sampling_test_util.h"
#include "runtime/sampling/fast_exp.h"
#include "runtime/sampling/logit_processors.h"
#include "runtime/structured/output_constraint.h"

namespace beam {
namespace {

using testing::make_state;
using testing::random_softcapped_logits;
using testing::StateOptions;

constexpr int64_t kBeamVocab = 151936;

class SamplingCudaTest : public test::CudaTest {
 protected:
  // [rows, vocab] logits: row r from seed base + r, scale varying by row (peaked and flat rows).
  std::vector<float> make_logits(int64_t rows, int64_t vocab, uint32_t base) {
    std::vector<float> all;
    all.reserve(static_cast<size_t>(rows * vocab));
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> row = random_softcapped_logits(vocab, base + static_cast<uint32_t>(r), 1.0 + r % 5);
      all.insert(all.end(), row.begin(), row.end());
    }
    return all;
  }
  TensorView upload_logits(std::vector<float>& host, int64_t vocab) {
    const int64_t rows = static_cast<int64_t>(host.size()) / vocab;
    return upload(TensorView{host.data(), DType::kF32, {rows, vocab}, Device::kCpu});
  }
  // GPU tokens for states[i] on logits row rows[i], under masks[i] when masks is not empty.
  std::vector<SampledToken> gpu_sample(const TensorView& logits, int64_t vocab,
                                       const std::vector<SequenceSamplingState>& states,
                                       const std::vector<int64_t>& rows,
                                       const std::vector<std::vector<uint32_t>>& masks = {}) {
    DeviceBatchSampler sampler(gpu, vocab);
    std::vector<DeviceSampleRow> in;
    for (size_t i = 0; i < states.size(); ++i)
      in.push_back(
          {rows[i], &states[i], {}, masks.empty() ? std::span<const uint32_t>{} : masks[i]});
    std::vector<SampledToken> out(in.size());
    Status st = sampler.sample(logits, in, out);
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
    return out;
  }
  // DeviceBatchSampler::score of `rows` over the uploaded `d` (the [rows, vocab] logits `host`),
  // each checked against compute_logprobs: the token, its rank, the alternatives' ids, logprobs
  // within 1e-4 (-inf ones exactly). Returns the GPU's answers.
  std::vector<TokenLogprobs> score_like_cpu(const TensorView& d, const std::vector<float>& host,
                                            int64_t vocab, const std::vector<ScoreRow>& rows) {
    DeviceBatchSampler sampler(gpu, vocab);
    std::vector<TokenLogprobs> got(rows.size());
    Status st = sampler.score(d, rows, got);
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
    if (!st.ok()) return got;
    const auto near = [](float a, float b) {
      return std::isfinite(b) ? std::abs(a - b) <= 1e-4 : a == b;
    };
    for (size_t i = 0; i < rows.size(); ++i) {
      const ScoreRow& r = rows[i];
      std::span<const float> raw(host.data() + r.logits_row * vocab, static_cast<size_t>(vocab));
      const TokenLogprobs cpu = compute_logprobs(raw, r.token, r.temperature, r.num_top);
      const std::string at = "vocab " + std::to_string(vocab) + " row " +
                             std::to_string(r.logits_row) + " n " + std::to_string(r.num_top);
      EXPECT_EQ(got[i].chosen.token, r.token) << at;
      EXPECT_PRED2(near, got[i].chosen.logprob, cpu.chosen.logprob) << at;
      EXPECT_EQ(got[i].chosen_rank, cpu.chosen_rank) << at;
      EXPECT_EQ(got[i].top.size(), cpu.top.size()) << at;
      for (size_t j = 0; j < std::min(cpu.top.size(), got[i].top.size()); ++j) {
        EXPECT_EQ(got[i].top[j].token, cpu.top[j].token) << at << " rank " << j;
        EXPECT_PRED2(near, got[i].top[j].logprob, cpu.top[j].logprob) << at << " rank " << j;
      }
    }
    return got;
  }
  static SampledToken cpu_sample(const std::vector<float>& host, int64_t vocab, int64_t row,
                                 const SequenceSamplingState& seq,
                                 std::span<const uint32_t> mask = {}) {
    Sampler sampler(vocab);
    return sampler.sample(
        SampleRow{{host.data() + row * vocab, static_cast<size_t>(vocab)}, &seq, {}, mask});
  }
};

std::vector<SequenceSamplingState> states_for(const SamplingParams& p, int64_t vocab, int64_t n,
                                              uint64_t seed0) {
  std::vector<SequenceSamplingState> states;
  for (int64_t i = 0; i < n; ++i) {
    StateOptions o;
    o.vocab_size = vocab;
    o.seed = seed0 + static_cast<uint64_t>(i);
    states.push_back(make_state(p, o));
  }
  return states;
}

std::vector<int64_t> iota_rows(int64_t n) {
  std::vector<int64_t> rows(static_cast<size_t>(n));
  std::iota(rows.begin(), rows.end(), 0);
  return rows;
}

// Tokens the filters may keep (top-k, top-p, min-p on the processed row, as docs/sampling.md
// defines them), with a 1e-9 relative slack at the top-p boundary for summation order.
std::set<int32_t> allowed_tokens(std::span<const float> raw, const SequenceSamplingState& seq) {
  const SamplingParams& p = seq.params();
  std::vector<TokenCandidate> c(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) c[i] = {raw[i], static_cast<int32_t>(i)};
  apply_logit_processors(c, seq, {});
  std::sort(c.begin(), c.end(), ranks_before);
  if (p.top_k_active(seq.vocab_size())) c.resize(static_cast<size_t>(p.top_k));
  const float max = c[0].value;
  const auto inv_t = static_cast<float>(1.0 / p.temperature);
  double total = 0.0;
  for (TokenCandidate& x : c) {
    x.value = exp_nonpositive((x.value - max) * inv_t);
    total += x.value;
  }
  std::sort(c.begin(), c.end(), ranks_before);
  std::set<int32_t> out;
  double mass = 0.0;
  for (const TokenCandidate& x : c) {
    if (mass >= p.top_p * total * (1 + 1e-9)) break;
    mass += x.value;
    if (x.value > 0.0f && static_cast<double>(x.value) >= p.min_p) out.insert(x.id);
  }
  return out;
}

TEST_F(SamplingCudaTest, GreedyIsCpuArgmaxWithTies) {
  SamplingParams p;
  p.temperature = 0.0;
  for (int64_t vocab : {int64_t{17}, int64_t{1000}, kBeamVocab}) {
    for (int64_t b : {int64_t{1}, int64_t{7}, int64_t{64}}) {
      std::vector<float> host = make_logits(b, vocab, 100);
      for (int64_t r = 0; r < b; r += 2) {  // ties at the maximum: the lowest id must win
        float* row = host.data() + r * vocab;
        const float m = *std::max_element(row, row + vocab);
        row[vocab - 1] = m;
        row[(r * 7919) % vocab] = m;
      }
      TensorView d = upload_logits(host, vocab);
      auto states = states_for(p, vocab, b, 1);
      auto got = gpu_sample(d, vocab, states, iota_rows(b));
      for (int64_t r = 0; r < b; ++r)
        EXPECT_EQ(got[r].token, cpu_sample(host, vocab, r, states[r]).token)
            << "vocab " << vocab << " B " << b << " row " << r;
    }
  }
}

struct FilterCase {
  int64_t top_k;
  double top_p, min_p;
};

TEST_F(SamplingCudaTest, SeededDrawsMatchTheCpuAndStayInTheAllowedSet) {
  const FilterCase cases[] = {{0, 1.0, 0.0},  {50, 1.0, 0.0},  {0, 0.9, 0.0},  {0, 1.0, 0.05},
                              {40, 0.95, 0.02}, {1, 1.0, 0.0}, {0, 0.5, 0.1}, {1000, 0.99, 0.0}};
  int64_t agree = 0, total = 0;
  for (int64_t vocab : {int64_t{50}, kBeamVocab}) {
    const int64_t b = vocab == kBeamVocab ? 64 : 7;
    std::vector<float> host = make_logits(b, vocab, 7);
    TensorView d = upload_logits(host, vocab);
    for (size_t ci = 0; ci < std::size(cases); ++ci) {
      SamplingParams p;
      p.temperature = 0.7;
      p.top_k = cases[ci].top_k;
      p.top_p = cases[ci].top_p;
      p.min_p = cases[ci].min_p;
      for (uint64_t draw = 0; draw < 4; ++draw) {
        auto states = states_for(p, vocab, b, 1000 * ci + 100 * draw);
        auto got = gpu_sample(d, vocab, states, iota_rows(b));
        for (int64_t r = 0; r < b; ++r) {
          const int32_t token = got[r].token;
          std::span<const float> raw(host.data() + r * vocab, static_cast<size_t>(vocab));
          EXPECT_TRUE(allowed_tokens(raw, states[r]).contains(token))
              << "case " << ci << " vocab " << vocab << " row " << r << " token " << token;
          agree += token == cpu_sample(host, vocab, r, states[r]).token ? 1 : 0;
          ++total;
        }
      }
    }
  }
  EXPECT_GE(static_cast<double>(agree), 0.99 * static_cast<double>(total)) << agree << " of " << total;
}

// Double-precision log_softmax(raw / T).
std::vector<double> log_softmax(std::span<const float> raw, double t) {
  double m = -INFINITY, s = 0.0;
  for (float v : raw) m = std::max(m, static_cast<double>(v));
  for (float v : raw) s += std::exp((v - m) / t);
  std::vector<double> out;
  for (float v : raw) out.push_back((v - m) / t - std::log(s));
  return out;
}

TEST_F(SamplingCudaTest, LogprobsAndTopAlternativesMatchLogSoftmax) {
  for (int64_t vocab : {int64_t{30}, kBeamVocab}) {
    const int64_t b = 7;
    std::vector<float> host = make_logits(b, vocab, 55);
    host[3] = host[4] = 9.0f;  // a tie among the top tokens of row 0
    TensorView d = upload_logits(host, vocab);
    for (double temperature : {0.0, 0.7}) {
      SamplingParams p;
      p.temperature = temperature;
      p.logprobs = true;
      p.top_logprobs = 20;
      auto states = states_for(p, vocab, b, 5);
      auto got = gpu_sample(d, vocab, states, iota_rows(b));
      for (int64_t r = 0; r < b; ++r) {
        std::span<const float> raw(host.data() + r * vocab, static_cast<size_t>(vocab));
        const std::vector<double> want = log_softmax(raw, temperature > 0 ? temperature : 1.0);
        ASSERT_TRUE(got[r].logprobs.has_value());
        const TokenLogprobs& lp = *got[r].logprobs;
        const TokenLogprobs cpu = compute_logprobs(raw, got[r].token, temperature, 20);
        EXPECT_EQ(lp.chosen.token, got[r].token);
        EXPECT_NEAR(lp.chosen.logprob, want[static_cast<size_t>(got[r].token)], 1e-4);
        EXPECT_EQ(lp.chosen_rank, cpu.chosen_rank);
        ASSERT_EQ(lp.top.size(), cpu.top.size());
        for (size_t j = 0; j < lp.top.size(); ++j) {
          EXPECT_EQ(lp.top[j].token, cpu.top[j].token) << "row " << r << " rank " << j;
          EXPECT_NEAR(lp.top[j].logprob, want[static_cast<size_t>(lp.top[j].token)], 1e-4);
        }
      }
    }
  }
}

// return_entropy: each row's entropy of softmax(raw / logprob temperature) equals the CPU's
// distribution_entropy (the same weights, summed in another order), with or without logprobs,
// on edited rows (logit_bias: the entropy stays the raw row's) and greedy ones; rows that do not
// ask get none.
TEST_F(SamplingCudaTest, EntropiesMatchTheCpus) {
  for (int64_t vocab : {int64_t{30}, kBeamVocab}) {
    const int64_t b = 7;
    std::vector<float> host = make_logits(b, vocab, 71);
    TensorView d = upload_logits(host, vocab);
    for (double temperature : {0.0, 0.7}) {
      for (bool logprobs : {false, true}) {
        SamplingParams p;
        p.temperature = temperature;
        p.logprobs = logprobs;
        p.return_entropy = true;
        p.logit_bias = {{3, 5.0}};
        auto states = states_for(p, vocab, b, 9);
        p.return_entropy = false;
        states.push_back(states_for(p, vocab, 1, 9)[0]);
        std::vector<int64_t> rows = iota_rows(b);
        rows.push_back(0);
        auto got = gpu_sample(d, vocab, states, rows);
        for (int64_t r = 0; r < b; ++r) {
          std::span<const float> raw(host.data() + r * vocab, static_cast<size_t>(vocab));
          const double want = distribution_entropy(raw, states[r].params().logprob_temperature());
          ASSERT_TRUE(got[r].entropy.has_value()) << "row " << r;
          EXPECT_NEAR(*got[r].entropy, want, 1e-5 * want + 1e-6) << "row " << r;
          EXPECT_EQ(got[r].logprobs.has_value(), logprobs);
        }
        EXPECT_FALSE(got[b].entropy.has_value());
      }
    }
  }
}

// token_ids_logprob: each row's logprobs of the given ids (scored on its logits row) match the
// CPU's logprobs_of, in the ids' order; rows without ids get none.
TEST_F(SamplingCudaTest, TokenIdsLogprobsMatchTheCpus) {
  const int64_t vocab = kBeamVocab, b = 5;
  std::vector<float> host = make_logits(b, vocab, 83);
  TensorView d = upload_logits(host, vocab);
  SamplingParams p;
  p.temperature = 0.7;
  p.token_ids_logprob = {0, 151935, 42, 42};
  auto states = states_for(p, vocab, b, 4);
  p.token_ids_logprob.clear();
  states.push_back(states_for(p, vocab, 1, 4)[0]);
  std::vector<int64_t> rows = iota_rows(b);
  rows.push_back(2);
  auto got = gpu_sample(d, vocab, states, rows);
  for (int64_t r = 0; r < b; ++r) {
    std::span<const float> raw(host.data() + r * vocab, static_cast<size_t>(vocab));
    const std::vector<TokenLogprob> want = logprobs_of(raw, states[r].params().token_ids_logprob, 0.7);
    ASSERT_EQ(got[r].token_ids_logprobs.size(), want.size()) << "row " << r;
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_EQ(got[r].token_ids_logprobs[k].token, want[k].token);
      EXPECT_NEAR(got[r].token_ids_logprobs[k].logprob, want[k].logprob, 1e-4) << "row " << r;
    }
  }
  EXPECT_TRUE(got[b].token_ids_logprobs.empty());
}

// score: given tokens (every rank from the best to the worst), rows read in any order and more
// than once, against the CPU's compute_logprobs.
TEST_F(SamplingCudaTest, ScoredTokensMatchComputeLogprobs) {
  for (int64_t vocab : {int64_t{30}, kBeamVocab}) {
    const int64_t b = 64;
    std::vector<float> host = make_logits(b, vocab, 77);
    host[5] = host[6] = 11.0f;  // a tie at the top of row 0
    TensorView d = upload_logits(host, vocab);
    for (double temperature : {0.0, 0.6}) {
      std::vector<ScoreRow> rows;
      for (int64_t i = 0; i < 3 * b; ++i)
        rows.push_back(
            ScoreRow{(i * 37) % b, static_cast<int32_t>((i * 7919) % vocab), temperature, i % 21});
      rows.push_back(ScoreRow{0, 6, temperature, 2});  // the tie's higher id
      const std::vector<TokenLogprobs> got = score_like_cpu(d, host, vocab, rows);
      ASSERT_EQ(got.size(), rows.size());
      EXPECT_EQ(got.back().chosen_rank, 2);
    }
  }
}

// score_tokens' rows without alternatives (their own kernel) give the chosen token's rank and
// logprob bit for bit as the same rows asking for alternatives, both kinds in one launch; on rows
// with -inf and NaN logits, at vocabularies that do and do not split evenly over a cluster.
TEST_F(SamplingCudaTest, ScoredRowsGiveTheSameBitsWithOrWithoutAlternatives) {
  for (int64_t vocab : {int64_t{30}, int64_t{1001}, kBeamVocab}) {
    const int64_t b = 40;
    std::vector<float> host = make_logits(b, vocab, 91);
    host[3] = -INFINITY;
    host[static_cast<size_t>(vocab + 5)] = NAN;
    TensorView d = upload_logits(host, vocab);
    std::vector<ScoreRowParams> rows;
    for (int64_t i = 0; i < 300; ++i) {
      ScoreRowParams p;
      p.temperature = i % 2 == 0 ? 1.0 : 0.7;
      p.inv_temperature = static_cast<float>(1.0 / p.temperature);
      p.logits_row = static_cast<int32_t>(i % b);
      p.token = static_cast<int32_t>((i * 7919) % vocab);
      p.num_top = i % 3 == 0 ? 5 : 0;
      rows.push_back(p);
    }
    std::vector<ScoreRowParams> flipped = rows;  // alternatives where rows has none, and back
    for (ScoreRowParams& p : flipped) p.num_top = p.num_top == 0 ? 5 : 0;
    const auto run = [&](const std::vector<ScoreRowParams>& in) {
      const auto n = static_cast<int64_t>(in.size());
      TensorView out = device_tensor(DType::kI32, {n, kSampledRowWords});
      score_tokens(gpu, d, in, out);
      HostTensor h = download(out);
      std::vector<SampledRow> got(in.size());
      std::memcpy(got.data(), h.view.data, h.view.nbytes());
      return got;
    };
    const std::vector<SampledRow> a = run(rows), c = run(flipped);
    for (size_t i = 0; i < rows.size(); ++i) {
      const std::string at = "vocab " + std::to_string(vocab) + " row " + std::to_string(i);
      EXPECT_EQ(a[i].token, rows[i].token) << at;
      EXPECT_EQ(c[i].token, rows[i].token) << at;
      EXPECT_EQ(a[i].num_top, rows[i].num_top) << at;
      EXPECT_EQ(c[i].num_top, flipped[i].num_top) << at;
      EXPECT_EQ(a[i].chosen_rank, c[i].chosen_rank) << at;
      EXPECT_EQ(std::bit_cast<uint32_t>(a[i].chosen_logprob),
                std::bit_cast<uint32_t>(c[i].chosen_logprob))
          << at << ": " << a[i].chosen_logprob << " vs " << c[i].chosen_logprob;
    }
  }
}

// Alternatives (score_tokens' top-n) on rows where the warps' maxima give a loose threshold or
// too many candidates (sampling_top.cuh falls back to a radix select): a flat row, a top value
// shared by thousands of tokens, a row of -inf but for a few tokens, a top-25 tie, NaNs among a
// random row; n in {1, 7, 20}, against compute_logprobs.
TEST_F(SamplingCudaTest, AlternativesOnFlatTiedAndSparseRows) {
  for (int64_t vocab : {int64_t{1001}, kBeamVocab}) {
    const int64_t b = 5;
    std::vector<float> host = make_logits(b, vocab, 123);
    const auto row = [&](int64_t r) { return host.data() + r * vocab; };
    std::fill(row(0), row(1), 1.0f);
    for (int64_t i = 0; i < vocab; i += 37) row(1)[i] = 8.0f;
    std::fill(row(2), row(3), -INFINITY);
    for (int64_t i : {int64_t{3}, vocab / 2, vocab - 1}) row(2)[i] = static_cast<float>(i % 7);
    for (int64_t i = 0; i < 25; ++i) row(3)[(i * 4099) % vocab] = 40.0f;
    for (int64_t i = vocab / 2; i < vocab; i += 97) row(4)[i] = NAN;  // past the CPU top's fill
    TensorView d = upload_logits(host, vocab);
    std::vector<ScoreRow> rows;
    for (int64_t r = 0; r < b; ++r)
      for (int32_t n : {1, 7, 20})
        rows.push_back(ScoreRow{r, static_cast<int32_t>((r * 7919 + n) % vocab), 1.0, n});
    score_like_cpu(d, host, vocab, rows);
  }
}

TEST_F(SamplingCudaTest, PenaltiesHitTheRightTokens) {
  const int64_t vocab = 1000;
  std::vector<float> host = make_logits(1, vocab, 9);
  for (int32_t t : {11, 12, 13, 14}) host[static_cast<size_t>(t)] = 20.0f - 0.5f * (t - 11);
  TensorView d = upload_logits(host, vocab);
  std::vector<SamplingParams> params(5);
  for (SamplingParams& p : params) p.temperature = 0.0;
  params[0].repetition_penalty = 2.0;           // 11 (prompt) and 12 (output) lose
  params[1].frequency_penalty = 2.0;            // 12 (output, twice) loses
  params[2].presence_penalty = 2.0;
  params[3].logit_bias = {{500, 100.0}};        // 500 wins
  params[4].min_tokens = 3;                     // eos 11 masked
  std::vector<SequenceSamplingState> states;
  for (const SamplingParams& p : params) {
    StateOptions o;
    o.vocab_size = vocab;
    o.prompt = {11, 40};
    o.eos = {11};
    states.push_back(make_state(p, o));
    const std::vector<int32_t> out = {12, 12};
    states.back().append_output(out);
  }
  std::vector<int64_t> rows(states.size(), 0);  // every state reads the one logits row
  auto got = gpu_sample(d, vocab, states, rows);
  const int32_t want[] = {13, 11, 11, 500, 12};
  for (size_t i = 0; i < states.size(); ++i) {
    EXPECT_EQ(got[i].token, want[i]) << "case " << i;
    EXPECT_EQ(got[i].token, cpu_sample(host, vocab, 0, states[i]).token) << "case " << i;
  }
}

// A mask allowing about `density` of the tokens (at least one), never token 0 or the row's best
// raw token.
std::vector<uint32_t> random_mask(std::span<const float> raw, double density, uint32_t seed) {
  const auto vocab = static_cast<int64_t>(raw.size());
  std::vector<uint32_t> words(static_cast<size_t>(allowed_mask_words(vocab)), 0u);
  std::mt19937 gen(seed);
  std::bernoulli_distribution keep(density);
  auto allow = [&](int64_t t) { words[static_cast<size_t>(t / 32)] |= 1u << (t % 32); };
  auto deny = [&](int64_t t) { words[static_cast<size_t>(t / 32)] &= ~(1u << (t % 32)); };
  allow(static_cast<int64_t>(gen() % static_cast<uint32_t>(vocab)));
  for (int64_t t = 0; t < vocab; ++t)
    if (keep(gen)) allow(t);
  const int64_t best = std::max_element(raw.begin(), raw.end()) - raw.begin();
  deny(best);
  deny(0);
  if (std::all_of(words.begin(), words.end(), [](uint32_t w) { return w == 0; }))
    allow(best == 1 ? 2 : 1);
  return words;
}

bool mask_allows(std::span<const uint32_t> mask, int32_t t) {
  return t >= 0 && ((mask[static_cast<size_t>(t / 32)] >> (t % 32)) & 1u) != 0;
}

TEST_F(SamplingCudaTest, AllowedTokenMasksMatchTheCpu) {
  const FilterCase cases[] = {{0, 1.0, 0.0}, {40, 0.95, 0.0}, {0, 0.9, 0.05}, {1, 1.0, 0.0}};
  const double densities[] = {0.0, 0.01, 0.5, 0.97};  // 0: one allowed token
  int64_t agree = 0, total = 0;
  for (int64_t vocab : {int64_t{37}, kBeamVocab}) {
    const int64_t logit_rows = 4, siblings = 3;  // each logits row sampled by 3 masked states
    std::vector<float> host = make_logits(logit_rows, vocab, 31);
    TensorView d = upload_logits(host, vocab);
    std::vector<int64_t> rows;
    std::vector<std::vector<uint32_t>> masks;
    for (int64_t r = 0; r < logit_rows; ++r)
      for (int64_t s = 0; s < siblings; ++s) {
        std::span<const float> raw(host.data() + r * vocab, static_cast<size_t>(vocab));
        const double density = densities[static_cast<size_t>(r + s) % std::size(densities)];
        rows.push_back(r);
        masks.push_back(random_mask(raw, density, static_cast<uint32_t>(10 * r + s)));
      }
    const int64_t b = logit_rows * siblings;
    for (double temperature : {0.0, 0.7}) {
      for (size_t ci = 0; ci < std::size(cases); ++ci) {
        SamplingParams p;
        p.temperature = temperature;
        p.top_k = cases[ci].top_k;
        p.top_p = cases[ci].top_p;
        p.min_p = cases[ci].min_p;
        p.logprobs = ci == 0;
        p.top_logprobs = ci == 0 ? 5 : 0;
        p.logit_bias = {{0, 100.0}};  // token 0 is masked: the bias must not revive it
        for (uint64_t draw = 0; draw < (temperature > 0 ? 4 : 1); ++draw) {
          auto states = states_for(p, vocab, b, 1000 * ci + 100 * draw);
          auto got = gpu_sample(d, vocab, states, rows, masks);
          for (int64_t i = 0; i < b; ++i) {
            const auto& mask = masks[static_cast<size_t>(i)];
            const int64_t r = rows[static_cast<size_t>(i)];
            const SampledToken cpu = cpu_sample(host, vocab, r, states[i], mask);
            const std::string where = "vocab " + std::to_string(vocab) + " T " +
                                      std::to_string(temperature) + " case " + std::to_string(ci) +
                                      " row " + std::to_string(i);
            EXPECT_TRUE(mask_allows(mask, got[i].token)) << where << " token " << got[i].token;
            if (temperature == 0.0) {
              EXPECT_EQ(got[i].token, cpu.token) << where;
            }
            agree += got[i].token == cpu.token ? 1 : 0;
            ++total;
            if (!p.logprobs) continue;
            std::span<const float> raw(host.data() + r * vocab, static_cast<size_t>(vocab));
            const TokenLogprobs want = compute_logprobs(raw, got[i].token, temperature, 5);
            ASSERT_TRUE(got[i].logprobs.has_value()) << where;
            EXPECT_NEAR(got[i].logprobs->chosen.logprob, want.chosen.logprob, 1e-4) << where;
            EXPECT_EQ(got[i].logprobs->chosen_rank, want.chosen_rank) << where;
          }
        }
      }
    }
  }
  EXPECT_GE(static_cast<double>(agree), 0.99 * static_cast<double>(total))
      << agree << " of " << total;
}

// bad_words without a mask (the engine's GPU path): the bans are sparse edits, and greedy rows
// give the CPU's masked argmax, even when the ban falls on the row's favourite.
TEST_F(SamplingCudaTest, BadWordsAsEditsMatchTheCpusMask) {
  const int64_t vocab = kBeamVocab, b = 8;
  std::vector<float> host = make_logits(b, vocab, 77);
  std::vector<int32_t> favourites;
  for (int64_t r = 0; r < b; ++r) {
    const float* row = host.data() + r * vocab;
    favourites.push_back(static_cast<int32_t>(std::max_element(row, row + vocab) - row));
  }
  TensorView d = upload_logits(host, vocab);
  SamplingParams p;
  p.temperature = 0.0;
  for (int64_t r = 0; r < b; ++r)  // rows' favourites banned after a 3, or always (odd rows)
    p.bad_words_token_ids.push_back(r % 2 ? std::vector<int32_t>{favourites[r]}
                                          : std::vector<int32_t>{3, favourites[r]});
  auto states = states_for(p, vocab, b, 5);
  for (auto& s : states) {
    const std::vector<int32_t> out = {3};
    s.append_output(out);
    ASSERT_FALSE(s.needs_mask(true));
  }
  const auto got = gpu_sample(d, vocab, states, iota_rows(b));
  for (int64_t r = 0; r < b; ++r) {
    std::vector<uint32_t> mask(static_cast<size_t>(allowed_mask_words(vocab)));
    MaskScratch scratch;
    ASSERT_TRUE(states[r].fill_allowed_tokens(mask, scratch).ok());
    EXPECT_EQ(got[r].token, cpu_sample(host, vocab, r, states[r], mask).token) << "row " << r;
    EXPECT_NE(got[r].token, favourites[r]) << "row " << r;
  }
}

}  // namespace
}  // namespace beam
