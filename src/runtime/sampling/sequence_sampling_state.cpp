// SequenceSamplingState: creation-time validation, the sorted id sets and incremental counts.
#include "runtime/sampling/sequence_sampling_state.h"

#include <algorithm>
#include <sstream>

#include "core/check.h"

namespace beam {
namespace {

std::vector<int32_t> sorted_distinct(std::span<const int32_t> ids) {
  std::vector<int32_t> out(ids.begin(), ids.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Error no_token_left() {
  return make_error(
      "no token may come next: allowed_token_ids, bad_words and min_tokens leave none");
}

bool contains(const std::vector<int32_t>& sorted, int32_t token) {
  return std::binary_search(sorted.begin(), sorted.end(), token);
}

Status validate_setup(const SequenceSamplingSetup& s) {
  BEAM_CHECK(s.params != nullptr) << "SequenceSamplingSetup without params";
  BEAM_RETURN_IF_ERROR(s.params->validate(s.vocab_size));
  std::ostringstream os;
  if (s.sibling_index < 0 || s.sibling_index >= s.params->n) {
    os << "sibling_index " << s.sibling_index << " outside [0, n=" << s.params->n << ")";
    return make_error(os.str());
  }
  for (int32_t token : s.eos_token_ids) {
    if (token < 0 || token >= s.vocab_size) {
      os << "eos token id " << token << " outside the vocabulary [0, " << s.vocab_size << ")";
      return make_error(os.str());
    }
  }
  auto num_prompt = static_cast<int64_t>(s.prompt_tokens.size());
  if (num_prompt >= s.max_context_tokens) {
    os << "prompt of " << num_prompt << " tokens leaves no room for output in a context of "
       << s.max_context_tokens << " tokens";
    return make_error(os.str());
  }
  return ok_status();
}

}  // namespace

uint64_t resolve_seed(const SamplingParams& params) {
  return params.seed.has_value() ? *params.seed : draw_random_seed();
}

SequenceSamplingState::SequenceSamplingState(const SequenceSamplingSetup& s)
    : params_(s.params), rng_(s.seed, s.sibling_index), vocab_size_(s.vocab_size) {
  const SamplingParams& p = *params_;
  num_prompt_tokens_ = static_cast<int64_t>(s.prompt_tokens.size());
  int64_t context_room = s.max_context_tokens - num_prompt_tokens_;
  limit_is_max_tokens_ = p.max_tokens.has_value() && *p.max_tokens <= context_room;
  output_limit_tokens_ = limit_is_max_tokens_ ? *p.max_tokens : context_room;
  eos_ids_ = sorted_distinct(s.eos_token_ids);
  stop_ids_ = sorted_distinct(p.stop_token_ids);
  std::vector<int32_t> masked = stop_ids_;
  if (!p.ignore_eos) masked.insert(masked.end(), eos_ids_.begin(), eos_ids_.end());
  min_tokens_masked_ = sorted_distinct(masked);
  if (p.repetition_penalty != 1.0)
    prompt_set_ = std::make_shared<const std::vector<int32_t>>(sorted_distinct(s.prompt_tokens));
  if (p.constraint) {
    std::vector<int32_t> ends = eos_ids_;
    ends.insert(ends.end(), stop_ids_.begin(), stop_ids_.end());
    end_ids_ = sorted_distinct(ends);
    constraint_.emplace(p.constraint);
  }
  if (!p.allowed_token_ids.empty()) {
    allowed_bits_.assign(static_cast<size_t>(allowed_mask_words(vocab_size_)), 0u);
    for (int32_t token : p.allowed_token_ids) set_mask_bit(allowed_bits_, token);
  }
  if (p.reasoning_budget) {
    budget_phase_ =
        p.reasoning_budget->start_token ? BudgetPhase::kBefore : BudgetPhase::kReasoning;
    if (budget_phase_ == BudgetPhase::kReasoning && p.reasoning_budget->max_tokens == 0)
      budget_phase_ = BudgetPhase::kForcing;
  }
}

void SequenceSamplingState::advance_budget(int32_t token) {
  const ReasoningBudget& b = *params_->reasoning_budget;
  switch (budget_phase_) {
    case BudgetPhase::kNone:
      return;
    case BudgetPhase::kBefore:
      if (token == *b.start_token)
        budget_phase_ = b.max_tokens == 0 ? BudgetPhase::kForcing : BudgetPhase::kReasoning;
      return;
    case BudgetPhase::kReasoning:
      if (token == b.end_tokens.back()) {  // the model closed it within the budget
        budget_phase_ = BudgetPhase::kNone;
        return;
      }
      if (++reasoning_tokens_ >= b.max_tokens) budget_phase_ = BudgetPhase::kForcing;
      return;
    case BudgetPhase::kForcing:
      if (++forced_ == b.end_tokens.size()) budget_phase_ = BudgetPhase::kNone;
      return;
  }
}

Expected<SequenceSamplingState> SequenceSamplingState::create(const SequenceSamplingSetup& setup) {
  BEAM_RETURN_IF_ERROR(validate_setup(setup));
  return SequenceSamplingState(setup);
}

void SequenceSamplingState::append_output(std::span<const int32_t> tokens) {
  if (params_->has_output_penalties()) {
    for (int32_t token : tokens) {
      BEAM_CHECK(token >= 0 && token < vocab_size_) << "token " << token;
      ++output_counts_[token];
    }
  }
  for (int32_t token : tokens) advance_budget(token);
  size_t context = 0;  // output tokens a bad word may need before its last one
  for (const std::vector<int32_t>& word : params_->bad_words_token_ids)
    context = std::max(context, word.size() - 1);
  if (context > 0) {
    recent_.insert(recent_.end(), tokens.begin(), tokens.end());
    if (recent_.size() > context)
      recent_.erase(recent_.begin(), recent_.end() - static_cast<std::ptrdiff_t>(context));
  }
  if (constraint_) {
    // A token outside the mask leaves the state dead; fill_allowed_tokens then reports it.
    for (int32_t token : tokens)
      if (!constraint_->accept(token, is_eos(token) || is_stop_token(token))) break;
  }
  num_output_tokens_ += static_cast<int64_t>(tokens.size());
}

Status SequenceSamplingState::fill_allowed_tokens(std::span<uint32_t> bits,
                                                  MaskScratch& scratch) const {
  BEAM_CHECK(constrained()) << "fill_allowed_tokens without an active constraint";
  if (forcing_reasoning_end()) {
    std::fill(bits.begin(), bits.end(), 0u);
    set_mask_bit(bits, params_->reasoning_budget->end_tokens[forced_]);
    return ok_status();
  }
  if (constraint_ && constraint_->active()) {
    BEAM_RETURN_IF_ERROR(constraint_->fill_allowed(bits, end_ids_, scratch));
  } else {  // every token: whole words, then the last word's bits below vocab_size
    std::fill(bits.begin(), bits.end(), ~0u);
    if (const int64_t tail = vocab_size_ % 32; tail != 0) bits.back() = (1u << tail) - 1u;
  }
  const SamplingParams& p = *params_;
  if (!p.has_token_filters()) return ok_status();
  if (!allowed_bits_.empty())
    for (size_t w = 0; w < bits.size(); ++w) bits[w] &= allowed_bits_[w];
  for (int32_t token : banned_next()) clear_mask_bit(bits, token);
  if (num_output_tokens_ < p.min_tokens)  // these would be -inf: none may be all that is left
    for (int32_t token : min_tokens_masked_) clear_mask_bit(bits, token);
  if (std::none_of(bits.begin(), bits.end(), [](uint32_t w) { return w != 0; }))
    return no_token_left();
  return ok_status();
}

int64_t SequenceSamplingState::allowed_drafts(std::span<const int32_t> drafts) const {
  SequenceSamplingState at = *this;  // advanced over the drafts allowed so far
  const SamplingParams& p = *params_;
  for (size_t j = 0; j < drafts.size(); ++j) {
    const int32_t token = drafts[j];
    bool allowed = token >= 0 && token < vocab_size_;
    if (allowed && at.forcing_reasoning_end())
      allowed = token == p.reasoning_budget->end_tokens[at.forced_];
    if (allowed && !at.allowed_bits_.empty()) allowed = mask_bit(at.allowed_bits_, token);
    if (allowed && !p.bad_words_token_ids.empty()) allowed = !contains(at.banned_next(), token);
    if (allowed && at.num_output_tokens_ < p.min_tokens)
      allowed = !contains(at.min_tokens_masked_, token);
    if (allowed && !at.forcing_reasoning_end() && at.constraint_ && at.constraint_->active()) {
      ConstraintState next = *at.constraint_;
      allowed = next.accept(token, at.is_eos(token) || at.is_stop_token(token));
    }
    if (!allowed) return static_cast<int64_t>(j);
    at.append_output(drafts.subspan(j, 1));
  }
  return static_cast<int64_t>(drafts.size());
}

std::vector<int32_t> SequenceSamplingState::banned_next(std::span<const int32_t> pending) const {
  std::vector<int32_t> tail = recent_;  // the output's last tokens, then the pending ones
  tail.insert(tail.end(), pending.begin(), pending.end());
  std::vector<int32_t> banned;
  for (const std::vector<int32_t>& word : params_->bad_words_token_ids) {
    const size_t before = word.size() - 1;
    if (before > tail.size()) continue;
    if (std::equal(word.begin(), word.end() - 1, tail.end() - static_cast<std::ptrdiff_t>(before)))
      banned.push_back(word.back());
  }
  return sorted_distinct(banned);
}

Status SequenceSamplingState::check_bans_leave_a_token(std::span<const int32_t> pending) const {
  std::vector<int32_t> gone = banned_next(pending);
  if (num_output_tokens_ + static_cast<int64_t>(pending.size()) < params_->min_tokens)
    gone.insert(gone.end(), min_tokens_masked_.begin(), min_tokens_masked_.end());
  if (static_cast<int64_t>(sorted_distinct(gone).size()) < vocab_size_) return ok_status();
  return no_token_left();
}

bool SequenceSamplingState::is_eos(int32_t token) const { return contains(eos_ids_, token); }

bool SequenceSamplingState::is_stop_token(int32_t token) const {
  return contains(stop_ids_, token);
}

bool SequenceSamplingState::prompt_contains(int32_t token) const {
  return prompt_set_ && contains(*prompt_set_, token);
}

}  // namespace beam
