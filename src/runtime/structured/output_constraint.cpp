#include "runtime/structured/output_constraint.h"

#include <algorithm>
#include <string>

#include "core/check.h"

namespace beam {

ConstraintState::ConstraintState(std::shared_ptr<const OutputConstraint> constraint)
    : constraint_(std::move(constraint)) {
  BEAM_CHECK((constraint_->grammar != nullptr) + (constraint_->regex != nullptr) +
                 (constraint_->ebnf != nullptr) ==
             1)
      << "a constraint has one of a JSON grammar, a regex and an ebnf grammar";
  if (constraint_->grammar) matcher_.emplace(constraint_->grammar);
  if (constraint_->ebnf) ebnf_matcher_.emplace(constraint_->ebnf);
  restart();
  BEAM_CHECK(!(constraint_->starts_in_reasoning || constraint_->reasoning_open) ||
             !constraint_->json_after.empty())
      << "a constraint with reasoning needs the tokens that end it";
  if (constraint_->starts_in_reasoning)
    phase_ = Phase::kReasoning;
  else if (constraint_->reasoning_open)
    phase_ = Phase::kJsonOrReasoning;
}

void ConstraintState::restart() {
  if (matcher_)
    state_ = matcher_->initial();
  else if (ebnf_matcher_)
    ebnf_state_ = ebnf_matcher_->initial();
  else
    dfa_state_ = constraint_->regex->start();
}

void ConstraintState::kill() {
  state_.clear();
  ebnf_state_.clear();
  dfa_state_ = ByteDfa::kDead;
}

bool ConstraintState::dead() const {
  if (matcher_) return state_.dead();
  if (ebnf_matcher_) return ebnf_state_.dead();
  return dfa_state_ == ByteDfa::kDead;
}

bool ConstraintState::can_end() const {
  if (matcher_) return matcher_->can_end(state_);
  if (ebnf_matcher_) return ebnf_matcher_->can_end(ebnf_state_);
  return dfa_state_ != ByteDfa::kDead && constraint_->regex->accepting(dfa_state_);
}

Status ConstraintState::fill_allowed(std::span<uint32_t> bits, std::span<const int32_t> end_tokens,
                                     MaskScratch& scratch) const {
  BEAM_CHECK(active()) << "the output is reasoning, not constrained";
  std::fill(bits.begin(), bits.end(), 0u);
  if (phase_ == Phase::kBetweenCalls) {
    if (!dead()) {
      for (int32_t t : end_tokens) set_mask_bit(bits, t);
      if (constraint_->call_open) set_mask_bit(bits, *constraint_->call_open);
      if (!gap_written_) constraint_->vocab->add_whitespace(bits);
    }
  } else {
    if (matcher_) {
      constraint_->vocab->add_allowed(*matcher_, state_, bits, scratch,
                                      constraint_->pattern_masks.get());
    } else if (ebnf_matcher_) {
      if (!constraint_->vocab->add_allowed(*ebnf_matcher_, ebnf_state_, bits, scratch,
                                           constraint_->grammar_masks.get()))
        return make_error(
            "the grammar is too ambiguous to enforce: one token's mask needs more "
            "than " +
            std::to_string(kMaxMaskParseSteps) + " parse steps");
    } else if (dfa_state_ != ByteDfa::kDead) {
      constraint_->regex_masks->add_allowed(*constraint_->vocab, *constraint_->regex, dfa_state_,
                                            bits);
    }
    for (const auto& ids : {std::span<const int32_t>(constraint_->hidden_tokens), end_tokens})
      for (int32_t t : ids) clear_mask_bit(bits, t);
    // The call delimiters are never text: the close written inside a string would end the call
    // there for the output's parser (which watches only for the close).
    for (const std::optional<int32_t>& t : {constraint_->call_open, constraint_->call_close})
      if (t) clear_mask_bit(bits, *t);
    if (can_end()) {
      for (int32_t t : end_tokens) set_mask_bit(bits, t);
      if (constraint_->call_close) set_mask_bit(bits, *constraint_->call_close);
    }
    if (phase_ == Phase::kJsonOrReasoning) set_mask_bit(bits, *constraint_->reasoning_open);
  }
  if (std::none_of(bits.begin(), bits.end(), [](uint32_t w) { return w != 0; }))
    return make_error("the output no longer fits its response format");
  return ok_status();
}

bool ConstraintState::accept(int32_t token, bool end_token) {
  if (phase_ == Phase::kBetweenCalls) return accept_between_calls(token, end_token);
  if (phase_ == Phase::kJson && constraint_->call_close && token == *constraint_->call_close &&
      can_end()) {
    phase_ = Phase::kBetweenCalls;
    gap_written_ = false;
    return true;
  }
  if (phase_ == Phase::kReasoning) {
    const std::vector<int32_t>& after = constraint_->json_after;
    if (recent_.size() == after.size()) recent_.erase(recent_.begin());
    recent_.push_back(token);
    if (recent_ == after) phase_ = Phase::kJson;
    return true;
  }
  if (phase_ == Phase::kJsonOrReasoning) {
    phase_ = token == *constraint_->reasoning_open ? Phase::kReasoning : Phase::kJson;
    if (phase_ == Phase::kReasoning) return true;
  }
  const std::vector<int32_t>& hidden = constraint_->hidden_tokens;
  if (end_token) {
    if (can_end()) return true;
  } else if (std::find(hidden.begin(), hidden.end(), token) == hidden.end() &&
             token != constraint_->call_open && token != constraint_->call_close &&
             advance(constraint_->vocab->bytes(token))) {  // empty: not a text token
    return true;
  }
  kill();
  return false;
}

bool ConstraintState::accept_between_calls(int32_t token, bool end_token) {
  if (dead()) return false;
  if (end_token) return true;
  if (constraint_->call_open && token == *constraint_->call_open) {
    phase_ = Phase::kJson;
    restart();
    return true;
  }
  if (!gap_written_ && constraint_->vocab->is_whitespace(token)) {
    gap_written_ = true;
    return true;
  }
  kill();
  return false;
}

bool ConstraintState::advance(std::string_view bytes) {
  if (bytes.empty()) return false;
  if (matcher_) return matcher_->advance_bytes(state_, bytes, scratch_);
  if (ebnf_matcher_) return ebnf_matcher_->advance_bytes(ebnf_state_, bytes, ebnf_scratch_);
  const int32_t s = constraint_->regex->walk(dfa_state_, bytes);
  if (s == ByteDfa::kDead) return false;
  dfa_state_ = s;
  return true;
}

}  // namespace beam
