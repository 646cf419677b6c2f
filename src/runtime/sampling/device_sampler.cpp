// DeviceBatchSampler and the translation of sequence state into the sampling kernel's row
// parameters and sparse edits (the same edits logit_processors.cpp makes, token by token).
#include "runtime/sampling/device_sampler.h"

#include <algorithm>
#include <cfloat>
#include <map>

#include "core/check.h"
#include "kernels/api/device_out_of_memory.h"

namespace beam {
namespace {

float inverse_temperature(double t) {
  return static_cast<float>(std::min(1.0 / t, static_cast<double>(FLT_MAX)));
}

TokenLogprobs to_logprobs(const SampledRow& r) {
  TokenLogprobs lp;
  lp.chosen = {r.token, r.chosen_logprob};
  lp.chosen_rank = r.chosen_rank;
  lp.top.reserve(static_cast<size_t>(r.num_top));
  for (int32_t j = 0; j < r.num_top; ++j) lp.top.push_back({r.top_ids[j], r.top_logprobs[j]});
  return lp;
}

}  // namespace

void append_logit_edits(const SequenceSamplingState& seq, std::span<const int32_t> pending,
                        std::vector<LogitEdit>& out, bool bans) {
  const SamplingParams& p = seq.params();
  std::map<int32_t, LogitEdit> edits;  // ordered: the edit list is a function of the state only
  auto edit = [&](int32_t token) -> LogitEdit& {
    LogitEdit& e = edits[token];
    e.token = token;
    return e;
  };
  for (const auto& [token, bias] : p.logit_bias) {
    LogitEdit& e = edit(token);
    e.bias = bias;
    e.flags |= kEditBias;
  }
  if (seq.num_output_tokens() + static_cast<int64_t>(pending.size()) < p.min_tokens)
    for (int32_t token : seq.min_tokens_masked_ids()) edit(token).flags |= kEditMask;
  if (bans)
    for (int32_t token : seq.banned_next(pending)) edit(token).flags |= kEditMask;
  if (p.repetition_penalty != 1.0) {
    for (int32_t token : seq.prompt_token_set()) edit(token).flags |= kEditRepetition;
    for (const auto& entry : seq.output_counts()) edit(entry.first).flags |= kEditRepetition;
    for (int32_t token : pending) edit(token).flags |= kEditRepetition;
  }
  if (p.frequency_penalty != 0.0 || p.presence_penalty != 0.0) {
    for (const auto& [token, count] : seq.output_counts()) {
      LogitEdit& e = edit(token);
      e.flags |= kEditFrequencyPresence;
      e.output_count += count;
    }
    for (int32_t token : pending) {
      LogitEdit& e = edit(token);
      e.flags |= kEditFrequencyPresence;
      ++e.output_count;
    }
  }
  for (const auto& entry : edits) out.push_back(entry.second);
}

SamplingRowParams sampling_row_params(const SequenceSamplingState& seq,
                                      std::span<const int32_t> pending, int64_t logits_row) {
  const SamplingParams& p = seq.params();
  SamplingRowParams r;
  const bool greedy = p.is_greedy();
  const int64_t output_index = seq.num_output_tokens() + static_cast<int64_t>(pending.size());
  r.uniform = greedy ? 0.0 : seq.rng().uniform(output_index, RngStream::kTokenDraw);
  r.top_p = p.top_p;
  r.min_p = p.min_p;
  r.repetition_penalty = p.repetition_penalty;
  r.frequency_penalty = p.frequency_penalty;
  r.presence_penalty = p.presence_penalty;
  r.logprob_temperature = p.logprob_temperature();
  r.inv_temperature = greedy ? 0.0f : inverse_temperature(p.temperature);
  r.logprob_inv_temperature = inverse_temperature(r.logprob_temperature);
  r.top_k = p.top_k_active(seq.vocab_size()) ? p.top_k : 0;
  r.logits_row = static_cast<int32_t>(logits_row);
  r.num_top_logprobs = p.logprobs ? static_cast<int32_t>(p.top_logprobs) : -1;
  r.entropy = p.return_entropy ? 1 : 0;
  return r;
}

DeviceBatchSampler::DeviceBatchSampler(KernelContext ctx, int64_t vocab_size)
    : ctx_(ctx), vocab_size_(vocab_size) {
  BEAM_CHECK(ctx.device != Device::kCpu) << "DeviceBatchSampler needs a device context";
  BEAM_CHECK(vocab_size > 0) << "vocab_size " << vocab_size;
}

Status DeviceBatchSampler::reserve(int64_t num_rows) {
  BEAM_RETURN_IF_ERROR(reserve_results(num_rows));
  if (num_rows <= capacity_rows_) return ok_status();
  const int64_t rows = std::max(num_rows, 2 * capacity_rows_);
  const auto v = static_cast<size_t>(vocab_size_), n = static_cast<size_t>(rows);
  BEAM_ASSIGN_OR_RETURN(scratch_, allocate_buffer(ctx_, n * v * sizeof(float)));
  capacity_rows_ = rows;
  return ok_status();
}

Status DeviceBatchSampler::reserve_results(int64_t num_rows) {
  if (num_rows <= capacity_results_) return ok_status();
  const int64_t rows = std::max(num_rows, 2 * capacity_results_);
  BEAM_ASSIGN_OR_RETURN(results_,
                        allocate_buffer(ctx_, static_cast<size_t>(rows) * sizeof(SampledRow)));
  capacity_results_ = rows;
  return ok_status();
}

Status DeviceBatchSampler::score(const TensorView& logits, std::span<const ScoreRow> rows,
                                 std::span<TokenLogprobs> out) {
  BEAM_CHECK_EQ(rows.size(), out.size());
  BEAM_CHECK(logits.rank() == 2 && logits.dim(1) == vocab_size_) << "logits " << logits.shape.str();
  const auto num_rows = static_cast<int64_t>(rows.size());
  if (num_rows == 0) return ok_status();
  BEAM_RETURN_IF_ERROR(reserve_results(num_rows));
  score_params_.clear();
  for (const ScoreRow& row : rows) {
    ScoreRowParams p;
    p.temperature = row.temperature > 0.0 ? row.temperature : 1.0;
    p.inv_temperature = inverse_temperature(p.temperature);
    p.logits_row = static_cast<int32_t>(row.logits_row);
    p.token = row.token;
    p.num_top = static_cast<int32_t>(row.num_top);
    score_params_.push_back(p);
  }
  const TensorView results = results_.view(DType::kI32, {num_rows, kSampledRowWords});
  try {
    score_tokens(ctx_, logits, score_params_, results);
  } catch (const DeviceOutOfMemory& e) {  // the rows' staging did not fit
    return make_error(e.what());
  }
  host_results_.resize(static_cast<size_t>(num_rows));
  copy_tensor(ctx_, TensorView{host_results_.data(), DType::kI32, results.shape, Device::kCpu},
              results);  // waits for the kernel
  for (size_t i = 0; i < rows.size(); ++i) out[i] = to_logprobs(host_results_[i]);
  return ok_status();
}

Status DeviceBatchSampler::sample(const TensorView& logits, std::span<const DeviceSampleRow> rows,
                                  std::span<SampledToken> out) {
  BEAM_CHECK_EQ(rows.size(), out.size());
  BEAM_CHECK(logits.rank() == 2 && logits.dim(1) == vocab_size_) << "logits " << logits.shape.str();
  const auto num_rows = static_cast<int64_t>(rows.size());
  if (num_rows == 0) return ok_status();
  BEAM_RETURN_IF_ERROR(reserve(num_rows));
  params_.clear();
  edits_.clear();
  allowed_.clear();
  const int64_t mask_words = allowed_mask_words(vocab_size_);
  for (const DeviceSampleRow& row : rows) {
    BEAM_CHECK(row.seq != nullptr);
    BEAM_CHECK_EQ(row.seq->vocab_size(), vocab_size_);
    SamplingRowParams p = sampling_row_params(*row.seq, row.pending_tokens, row.logits_row);
    p.edit_begin = static_cast<int32_t>(edits_.size());
    append_logit_edits(*row.seq, row.pending_tokens, edits_, row.allowed_tokens.empty());
    p.edit_count = static_cast<int32_t>(edits_.size()) - p.edit_begin;
    if (!row.allowed_tokens.empty()) {
      BEAM_CHECK_EQ(static_cast<int64_t>(row.allowed_tokens.size()), mask_words)
          << "allowed_tokens words, vocab " << vocab_size_;
      p.allowed_row = static_cast<int32_t>(static_cast<int64_t>(allowed_.size()) / mask_words);
      allowed_.insert(allowed_.end(), row.allowed_tokens.begin(), row.allowed_tokens.end());
    }
    params_.push_back(p);
  }
  const TensorView scratch = scratch_.view(DType::kF32, {num_rows, vocab_size_});
  const TensorView results = results_.view(DType::kI32, {num_rows, kSampledRowWords});
  try {
    sample_tokens(ctx_, logits, params_, edits_, allowed_, scratch, results);
  } catch (const DeviceOutOfMemory& e) {  // the rows' staging did not fit
    return make_error(e.what());
  }
  host_results_.resize(static_cast<size_t>(num_rows));
  copy_tensor(ctx_, TensorView{host_results_.data(), DType::kI32, results.shape, Device::kCpu},
              results);  // waits for the kernel
  for (size_t i = 0; i < rows.size(); ++i) {
    const SampledRow& r = host_results_[i];
    BEAM_CHECK(r.token >= 0 && r.token < vocab_size_) << "logits row has no finite value (row " << i << ")";
    out[i].token = r.token;
    out[i].logprobs.reset();
    if (rows[i].seq->params().logprobs) out[i].logprobs = to_logprobs(r);
    out[i].entropy.reset();
    if (rows[i].seq->params().return_entropy) out[i].entropy = r.entropy;
  }
  return score_token_ids(logits, rows, out);
}

Status DeviceBatchSampler::score_token_ids(const TensorView& logits,
                                           std::span<const DeviceSampleRow> rows,
                                           std::span<SampledToken> out) {
  std::vector<ScoreRow> scored;
  for (const DeviceSampleRow& row : rows) {
    const SamplingParams& p = row.seq->params();
    for (int32_t id : p.token_ids_logprob)
      scored.push_back(ScoreRow{row.logits_row, id, p.logprob_temperature(), 0});
  }
  for (SampledToken& t : out) t.token_ids_logprobs.clear();
  if (scored.empty()) return ok_status();
  std::vector<TokenLogprobs> values(scored.size());
  BEAM_RETURN_IF_ERROR(score(logits, scored, values));
  size_t k = 0;
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t j = 0; j < rows[i].seq->params().token_ids_logprob.size(); ++j)
      out[i].token_ids_logprobs.push_back(values[k++].chosen);
  return ok_status();
}

}  // namespace beam
