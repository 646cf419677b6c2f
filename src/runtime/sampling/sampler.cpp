// Sampler: the per-row pipeline. Order and the exact definition of each filter: docs/sampling.md.
#include "runtime/sampling/sampler.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "kernels/api/sampling.h"
#include "runtime/sampling/logit_processors.h"

namespace beam {
namespace {

// argmax over the row (in token order); ties → lowest id; NaN entries never win.
int32_t argmax_token(std::span<const TokenCandidate> row) {
  float best_value = -INFINITY;
  int32_t best = -1;
  for (const TokenCandidate& c : row) {
    if (c.value > best_value) {
      best_value = c.value;
      best = c.id;
    }
  }
  BEAM_CHECK(best >= 0) << "logits row has no finite value";
  return best;
}

// Keeps the candidates whose weight is >= min_p (the largest weight is exactly 1).
int64_t keep_min_p(std::span<TokenCandidate> c, double min_p) {
  auto kept = [min_p](const TokenCandidate& x) { return static_cast<double>(x.value) >= min_p; };
  return std::partition(c.begin(), c.end(), kept) - c.begin();
}

// Sets every token the mask leaves out to -inf; all-ones words (every token allowed) are skipped.
void mask_disallowed(std::span<TokenCandidate> row, std::span<const uint32_t> allowed) {
  BEAM_CHECK_EQ(static_cast<int64_t>(allowed.size()),
                allowed_mask_words(static_cast<int64_t>(row.size())))
      << "allowed_tokens words, vocab " << row.size();
  for (size_t w = 0; w < allowed.size(); ++w) {
    const uint32_t bits = allowed[w];
    if (bits == ~0u) continue;
    const size_t begin = w * 32, end = std::min(begin + 32, row.size());
    for (size_t t = begin; t < end; ++t)
      if (((bits >> (t - begin)) & 1u) == 0) row[t].value = -INFINITY;
  }
}

double sum_weights(std::span<const TokenCandidate> c) {
  double sum = 0.0;
  for (const TokenCandidate& x : c) sum += x.value;
  return sum;
}

}  // namespace

Sampler::Sampler(int64_t vocab_size) : scratch_(static_cast<size_t>(vocab_size)) {
  BEAM_CHECK(vocab_size > 0) << "vocab_size " << vocab_size;
}

SampledToken Sampler::sample(const SampleRow& row) {
  BEAM_CHECK(row.seq != nullptr);
  const SequenceSamplingState& seq = *row.seq;
  const SamplingParams& p = seq.params();
  BEAM_CHECK_EQ(row.logits.size(), scratch_.size()) << "logits row size";
  for (size_t i = 0; i < scratch_.size(); ++i)
    scratch_[i] = {row.logits[i], static_cast<int32_t>(i)};
  if (!row.allowed_tokens.empty()) mask_disallowed(scratch_, row.allowed_tokens);
  apply_logit_processors(scratch_, seq, row.pending_tokens);

  int64_t output_index = seq.num_output_tokens() + static_cast<int64_t>(row.pending_tokens.size());
  SampledToken out;
  out.token = p.is_greedy() ? argmax_token(scratch_) : draw(seq, output_index);
  if (p.logprobs)
    out.logprobs = compute_logprobs(row.logits, out.token, p.logprob_temperature(), p.top_logprobs);
  if (p.return_entropy)
    out.entropy = static_cast<float>(distribution_entropy(row.logits, p.logprob_temperature()));
  if (!p.token_ids_logprob.empty())
    out.token_ids_logprobs = logprobs_of(row.logits, p.token_ids_logprob, p.logprob_temperature());
  return out;
}

int32_t Sampler::draw(const SequenceSamplingState& seq, int64_t output_index) {
  const SamplingParams& p = seq.params();
  std::span<TokenCandidate> c(scratch_);
  if (p.top_k_active(seq.vocab_size())) c = c.first(static_cast<size_t>(keep_top_k(c, p.top_k)));

  double kept_mass = to_weights(c, p.temperature);
  if (p.top_p < 1.0) {
    RankedPrefix nucleus = select_by_mass(c, p.top_p * kept_mass, MassBound::kAtLeast);
    c = c.first(static_cast<size_t>(nucleus.count));
    kept_mass = nucleus.mass;
  }
  if (p.min_p > 0.0) {
    c = c.first(static_cast<size_t>(keep_min_p(c, p.min_p)));
    kept_mass = sum_weights(c);
  }
  BEAM_CHECK(!c.empty()) << "no candidate left after filtering";

  // Inverse CDF in rank order: the first token at which the cumulative weight exceeds u * mass.
  double u = seq.rng().uniform(output_index, RngStream::kTokenDraw);
  RankedPrefix drawn = select_by_mass(c, u * kept_mass, MassBound::kAbove);
  return c[static_cast<size_t>(drawn.count - 1)].id;
}

}  // namespace beam
