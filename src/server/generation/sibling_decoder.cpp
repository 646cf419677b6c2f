// SiblingDecoder (see sibling_decoder.h). Offsets: every token owns the byte range of the
// detokenized stream its step produced; a token is released once all of its text is released,
// and dropped when its text starts at or after a stop string.
#include "server/generation/sibling_decoder.h"

#include <algorithm>

namespace beam::server {
namespace {

ResponseStreamOptions stream_options(const GenerationSpec& spec) {
  ResponseStreamOptions o;
  o.tools = spec.tools;
  o.tool_call_id_prefix = spec.tool_call_id_prefix;
  if (!spec.parse_tool_calls) {
    o.roles.tool_calls.clear();
    o.roles.content.push_back("tool_calls");  // the call's text comes back as content
  }
  return o;
}

}  // namespace

SiblingDecoder::SiblingDecoder(const text::Tokenizer* tokenizer, const GenerationSpec& spec,
                               std::shared_ptr<const ResponseTemplate> response_template)
    : tokenizer_(tokenizer),
      spec_(spec),
      stop_matcher_(spec.stop_strings, spec.include_stop_str_in_output, spec.stop_regexes) {
  // Special tokens are filtered here (not by the detokenizer) so delimiter tokens can stay.
  if (spec_.detokenize && tokenizer_) detokenizer_.emplace(*tokenizer_, /*skip_special=*/false);
  if (spec_.detokenize && spec_.parse_output && response_template) {
    stream_.emplace(std::move(response_template), spec_.prompt_text, stream_options(spec_));
  }
}

void SiblingDecoder::on_tokens(const TokenEvent& event, SiblingDelta* out) {
  if (done_ || stop_string_) return;
  retractions_ = event.usage.retractions;
  out->retractions = retractions_;
  times_ = event.usage.times;
  out->times = times_;
  if (!event.prompt_logprobs.empty() && prompt_logprobs_.empty()) {
    prompt_logprobs_ = event.prompt_logprobs;
    out->prompt_logprobs = event.prompt_logprobs;
  }
  for (size_t k = 0; k < event.tokens.size(); ++k) {
    PendingToken p;
    p.token.id = event.tokens[k];
    if (k < event.logprobs.size()) p.token.logprobs = event.logprobs[k];
    if (k < event.entropies.size()) p.token.entropy = event.entropies[k];
    if (k < event.token_ids_logprobs.size()) p.token.token_ids_logprobs = event.token_ids_logprobs[k];
    p.text_start = text_bytes_;
    const bool is_stop_id = event.stop_token && k + 1 == event.tokens.size() && p.token.id == *event.stop_token;
    std::string text;
    if (detokenizer_ && !(is_stop_id && !spec_.include_stop_str_in_output) && shows(p.token.id)) {
      // An id the tokenizer lacks (models pad their vocabulary) contributes no text.
      auto step = detokenizer_->step(std::span<const int32_t>(&p.token.id, 1));
      if (step.ok()) text = std::move(step).value();
    }
    text_bytes_ += text.size();
    p.text_end = text_bytes_;
    pending_.push_back(std::move(p));
    if (!text.empty()) add_text(text, out);
    if (stop_string_) break;
  }
  release_tokens(/*all=*/false, out);
}

bool SiblingDecoder::shows(int32_t id) const {
  if (!spec_.skip_special_tokens) return true;
  const text::TokenPiece* piece = tokenizer_->piece(id);
  if (!piece || !piece->special) return true;
  const auto& keep = spec_.shown_special_ids;
  return std::find(keep.begin(), keep.end(), id) != keep.end();
}

void SiblingDecoder::add_text(const std::string& text, SiblingDelta* out) {
  StopMatcher::Result r = stop_matcher_.feed(text);
  if (r.stop) {
    stop_string_ = r.stop;
    stop_offset_ = r.stop_offset_bytes;
    stop_end_ = r.stop_end_bytes;
  }
  release_text(r.released, out);
}

void SiblingDecoder::release_text(const std::string& text, SiblingDelta* out) {
  if (text.empty()) return;
  released_bytes_ += text.size();
  if (stream_) {
    stream_->feed(text, &out->parts);
    return;
  }
  content_ += text;
  if (!out->parts.empty() && out->parts.back().kind == ResponseDelta::Kind::kContent) {
    out->parts.back().text += text;
  } else {
    ResponseDelta d;
    d.kind = ResponseDelta::Kind::kContent;
    d.text = text;
    out->parts.push_back(std::move(d));
  }
}

void SiblingDecoder::release_tokens(bool all, SiblingDelta* out) {
  size_t n = 0;
  if (stop_string_) {
    // Text up to the stop is released in full; tokens whose text starts past it are dropped.
    const size_t cut = spec_.include_stop_str_in_output ? stop_end_ : stop_offset_;
    while (n < pending_.size() && pending_[n].text_start < cut) ++n;
    pending_.resize(n);
  } else if (all || !detokenizer_) {
    n = pending_.size();
  } else {
    while (n < pending_.size() && pending_[n].text_end <= released_bytes_ && pending_[n].text_start < released_bytes_) ++n;
  }
  for (size_t i = 0; i < n; ++i) {
    kept_.push_back(pending_[i].token);
    out->tokens.push_back(std::move(pending_[i].token));
  }
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n));
}

namespace {

// The first `rows` rows of `width` values of `all` (all of it when shorter).
template <typename T>
std::vector<T> first_rows(const std::vector<T>& all, int64_t rows, int64_t width) {
  const auto keep = static_cast<size_t>(
      std::clamp<int64_t>(rows * width, 0, static_cast<int64_t>(all.size())));
  return std::vector<T>(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(keep));
}

}  // namespace

int64_t SiblingDecoder::kept_positions(const TokenEvent& engine_final) const {
  return engine_final.usage.prompt_tokens + static_cast<int64_t>(kept_.size()) - 1;
}

void SiblingDecoder::take_records(const TokenEvent& engine_final, SiblingResult* result) const {
  const bool kept = stop_string_.has_value();
  if (spec_.return_routed_experts)
    result->routed_experts =
        kept ? first_rows(engine_final.routed_experts,
                          kept_positions(engine_final) - spec_.routed_experts_start,
                          spec_.routed_experts_per_position)
             : engine_final.routed_experts;
  if (spec_.return_hidden_states)
    result->hidden_states = HiddenStateRows{
        kept ? first_rows(engine_final.hidden_states,
                          kept_positions(engine_final) - spec_.hidden_states_start,
                          spec_.hidden_size)
             : engine_final.hidden_states,
        spec_.hidden_size};
}

SiblingResult SiblingDecoder::finish(const TokenEvent* engine_final, SiblingDelta* out) {
  SiblingResult result;
  if (done_) return result;
  done_ = true;
  if (!stop_string_ && detokenizer_) {
    std::string tail = detokenizer_->finish();
    if (!tail.empty()) {
      text_bytes_ += tail.size();
      if (!pending_.empty()) pending_.back().text_end = text_bytes_;
      add_text(tail, out);
    }
    if (!stop_string_) release_text(stop_matcher_.flush(), out);
  }
  release_tokens(/*all=*/true, out);
  if (stream_) {
    result.parsed = stream_->finish(&out->parts);
  } else {
    result.parsed.content = content_;
  }
  if (stop_string_) {
    result.reason = FinishReason::kStop;
    result.stop_string = stop_string_;
    if (engine_final) take_records(*engine_final, &result);
  } else if (engine_final && engine_final->finish) {
    result.reason = *engine_final->finish;
    result.stop_token = engine_final->stop_token;
    result.error = engine_final->error;
    take_records(*engine_final, &result);
  } else {
    result.reason = FinishReason::kCancelled;
  }
  result.tokens = kept_;
  result.prompt_logprobs = std::move(prompt_logprobs_);
  result.completion_tokens = static_cast<int64_t>(kept_.size());
  result.retractions = engine_final ? engine_final->usage.retractions : retractions_;
  result.times = engine_final ? engine_final->usage.times : times_;
  if (engine_final) result.spec_verifications = engine_final->usage.spec_verifications;
  return result;
}

}  // namespace beam::server
