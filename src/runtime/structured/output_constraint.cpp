#include "runtime/structured/output_constraint.h"

#include <algorithm>

#include "core/check.h"

namespace beam {

ConstraintState::ConstraintState(std::shared_ptr<const OutputConstraint> constraint)
    : constraint_(std::move(constraint)),
      matcher_(constraint_->grammar),
      state_(matcher_.initial()) {
  BEAM_CHECK(!(constraint_->starts_in_reasoning || constraint_->reasoning_open) ||
             !constraint_->json_after.empty())
      << "a constraint with reasoning needs the tokens that end it";
  if (constraint_->starts_in_reasoning)
    phase_ = Phase::kReasoning;
  else if (constraint_->reasoning_open)
    phase_ = Phase::kJsonOrReasoning;
}

bool ConstraintState::fill_allowed(std::span<uint32_t> bits, std::span<const int32_t> end_tokens,
                                   MaskScratch& scratch) const {
  BEAM_CHECK(active()) << "the output is reasoning, not constrained";
  std::fill(bits.begin(), bits.end(), 0u);
  constraint_->vocab->add_allowed(matcher_, state_, bits, scratch);
  if (matcher_.can_end(state_)) {
    for (int32_t t : end_tokens) set_mask_bit(bits, t);
    if (constraint_->release_token) set_mask_bit(bits, *constraint_->release_token);
  }
  if (phase_ == Phase::kJsonOrReasoning) set_mask_bit(bits, *constraint_->reasoning_open);
  return std::any_of(bits.begin(), bits.end(), [](uint32_t w) { return w != 0; });
}

bool ConstraintState::accept(int32_t token, bool end_token) {
  if (phase_ == Phase::kReleased) return true;
  if (phase_ == Phase::kJson && constraint_->release_token &&
      token == *constraint_->release_token && matcher_.can_end(state_)) {
    phase_ = Phase::kReleased;
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
  const std::string_view bytes = constraint_->vocab->bytes(token);  // empty: not a text token
  if (end_token ? matcher_.can_end(state_)
                : !bytes.empty() && matcher_.advance_bytes(state_, bytes, scratch_))
    return true;
  state_.clear();
  return false;
}

}  // namespace beam
