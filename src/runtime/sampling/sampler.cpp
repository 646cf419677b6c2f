// Sampler: the per-row pipeline. Order and the exact definition of each filter: docs/sampling.md.
#include "runtime/sampling/sampler.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "runtime/sampling/logit_processors.h"

namespace beam {
namespace {

// argmax over the row (in token order); ties → lowest id.
int32_t argmax_token(std::span<const TokenCandidate> row) {
  size_t best = 0;
  for (size_t i = 1; i < row.size(); ++i)
    if (row[i].value > row[best].value) best = i;
  BEAM_CHECK(!std::isnan(row[best].value)) << "NaN logits row";
  return row[best].id;
}

// Keeps the candidates whose weight is >= min_p (the largest weight is exactly 1). A sorted
// prefix stays sorted: cut at the first weight below min_p; otherwise partition.
int64_t keep_min_p(std::span<TokenCandidate> c, int64_t sorted_prefix, double min_p) {
  auto kept = [min_p](const TokenCandidate& x) { return static_cast<double>(x.value) >= min_p; };
  if (sorted_prefix == static_cast<int64_t>(c.size()))
    return std::partition_point(c.begin(), c.end(), kept) - c.begin();
  return std::partition(c.begin(), c.end(), kept) - c.begin();
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
  apply_logit_processors(scratch_, seq, row.pending_tokens);

  int64_t output_index = seq.num_output_tokens() + static_cast<int64_t>(row.pending_tokens.size());
  SampledToken out;
  out.token = p.is_greedy() ? argmax_token(scratch_) : draw(seq, output_index);
  if (p.logprobs)
    out.logprobs = compute_logprobs(row.logits, out.token, p.temperature, p.top_logprobs);
  return out;
}

int32_t Sampler::draw(const SequenceSamplingState& seq, int64_t output_index) {
  const SamplingParams& p = seq.params();
  std::span<TokenCandidate> c(scratch_);
  if (p.top_k_active(seq.vocab_size())) c = c.first(static_cast<size_t>(keep_top_k(c, p.top_k)));

  WeightedCandidates weighted = to_weights(c, p.temperature);
  c = c.first(static_cast<size_t>(weighted.size));
  int64_t sorted_prefix = 0;
  double kept_mass = weighted.total_weight;
  if (p.top_p < 1.0) {
    RankedPrefix nucleus = walk_ranked(c, 0, p.top_p * kept_mass, MassBound::kAtLeast);
    c = c.first(static_cast<size_t>(nucleus.count));
    sorted_prefix = nucleus.count;
    kept_mass = nucleus.mass;
  }
  if (p.min_p > 0.0) {
    int64_t kept = keep_min_p(c, sorted_prefix, p.min_p);
    c = c.first(static_cast<size_t>(kept));
    sorted_prefix = std::min(sorted_prefix, kept);
    kept_mass = sum_weights(c);
  }
  BEAM_CHECK(!c.empty()) << "no candidate left after filtering";

  double u = seq.rng().uniform(output_index, RngStream::kTokenDraw);
  RankedPrefix walked = walk_ranked(c, sorted_prefix, u * kept_mass, MassBound::kAbove);
  return c[static_cast<size_t>(walked.count - 1)].id;
}

}  // namespace beam
