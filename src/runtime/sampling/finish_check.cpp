// check_finish: the per-token finish rules (stop before length on the same token).
#include "runtime/sampling/finish_check.h"

#include "core/check.h"

namespace beam {

std::string_view finish_reason_name(FinishCause cause) {
  switch (cause) {
    case FinishCause::kEos:
    case FinishCause::kStopTokenId:
      return "stop";
    case FinishCause::kMaxTokens:
    case FinishCause::kContextLimit:
      return "length";
  }
  return "stop";
}

StepFinish check_finish(const SequenceSamplingState& seq, std::span<const int32_t> step_tokens) {
  const SamplingParams& p = seq.params();
  int64_t first_index = seq.num_output_tokens();
  BEAM_CHECK(first_index < seq.output_limit_tokens())
      << "sequence already at its output limit " << seq.output_limit_tokens();
  StepFinish out;
  for (int32_t token : step_tokens) {
    int64_t index = first_index + out.num_accepted;
    ++out.num_accepted;
    if (index >= p.min_tokens) {
      if (seq.is_stop_token(token)) {
        out.cause = FinishCause::kStopTokenId;
      } else if (!p.ignore_eos && seq.is_eos(token)) {
        out.cause = FinishCause::kEos;
      }
      if (out.cause) {
        out.stop_token = token;
        return out;
      }
    }
    if (index + 1 == seq.output_limit_tokens()) {
      out.cause = seq.limit_is_max_tokens() ? FinishCause::kMaxTokens : FinishCause::kContextLimit;
      return out;
    }
  }
  return out;
}

}  // namespace beam
