// MessagesObserver (see messages_observer.h).
#include "server/anthropic/messages_observer.h"

#include "server/http/sse.h"
#include "server/parsers/bounded_json.h"

namespace beam::server {

std::string anthropic_stop_reason(const SiblingResult& result) {
  switch (result.reason) {
    case FinishReason::kStop:
      if (!result.parsed.tool_calls.empty()) return "tool_use";
      return result.stop_string ? "stop_sequence" : "end_turn";
    case FinishReason::kLength: return "max_tokens";
    case FinishReason::kCancelled: return "end_turn";
    case FinishReason::kError: return "end_turn";
  }
  return "end_turn";
}

MessagesObserver::MessagesObserver(std::shared_ptr<Exchange> exchange, MessagesOptions options, int64_t prompt_tokens)
    : exchange_(std::move(exchange)), options_(std::move(options)), prompt_tokens_(prompt_tokens) {}

void MessagesObserver::on_rejected(const ApiError& error) { exchange_->respond_error(error); }

void MessagesObserver::emit(const char* type, Json event) {
  if (!options_.stream) return;
  ensure_started();
  Json e = {{"type", type}};
  for (auto& [k, v] : event.items()) e[k] = std::move(v);
  exchange_->send(http::sse_event(type, dump_json(e)));
}

void MessagesObserver::ensure_started() {
  if (!options_.stream || exchange_->stream_started()) return;
  exchange_->start_stream(std::string(http::kSseContentType));
  Json message = {{"id", options_.id}, {"type", "message"}, {"role", "assistant"}, {"model", options_.model},
                  {"content", Json::array()}, {"stop_reason", nullptr}, {"stop_sequence", nullptr},
                  {"usage", {{"input_tokens", prompt_tokens_}, {"output_tokens", 0},
                             {"cache_creation_input_tokens", 0}, {"cache_read_input_tokens", 0}}}};
  Json start = {{"type", "message_start"}, {"message", std::move(message)}};
  exchange_->send(http::sse_event("message_start", dump_json(start)));
  exchange_->send(http::sse_event("ping", "{\"type\": \"ping\"}"));
}

void MessagesObserver::open(BlockKind kind, const ResponseDelta* tool_start) {
  close_block();
  Json block;
  switch (kind) {
    case BlockKind::kThinking: block = {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}; break;
    case BlockKind::kText: block = {{"type", "text"}, {"text", ""}}; break;
    case BlockKind::kToolUse:
      block = {{"type", "tool_use"}, {"id", tool_start->tool_call_id}, {"name", tool_start->tool_name}, {"input", Json::object()}};
      tool_input_.clear();
      break;
  }
  emit("content_block_start", Json{{"index", blocks_.size()}, {"content_block", block}});
  blocks_.push_back(std::move(block));
  open_kind_ = kind;
}

void MessagesObserver::close_block() {
  if (!open_kind_) return;
  Json& block = blocks_.back();
  if (*open_kind_ == BlockKind::kToolUse) {
    Expected<Json> input = parse_bounded_json(tool_input_.empty() ? "{}" : tool_input_);
    block["input"] = input.ok() && input->is_object() ? std::move(input).value() : Json::object();
  }
  emit("content_block_stop", Json{{"index", blocks_.size() - 1}});
  open_kind_.reset();
}

void MessagesObserver::add_text(BlockKind kind, const std::string& text) {
  if (open_kind_ != kind) open(kind, nullptr);
  Json& block = blocks_.back();
  const char* field = kind == BlockKind::kThinking ? "thinking" : "text";
  block[field] = block[field].get<std::string>() + text;
  Json delta = kind == BlockKind::kThinking ? Json{{"type", "thinking_delta"}, {"thinking", text}}
                                            : Json{{"type", "text_delta"}, {"text", text}};
  emit("content_block_delta", Json{{"index", blocks_.size() - 1}, {"delta", std::move(delta)}});
}

void MessagesObserver::on_delta(int32_t /*sibling*/, SiblingDelta&& delta) {
  for (const ResponseDelta& p : delta.parts) {
    switch (p.kind) {
      case ResponseDelta::Kind::kReasoning: add_text(BlockKind::kThinking, p.text); break;
      case ResponseDelta::Kind::kContent: add_text(BlockKind::kText, p.text); break;
      case ResponseDelta::Kind::kToolCallStart: open(BlockKind::kToolUse, &p); break;
      case ResponseDelta::Kind::kToolCallArguments:
        if (open_kind_ == BlockKind::kToolUse) {
          tool_input_ += p.text;
          emit("content_block_delta", Json{{"index", blocks_.size() - 1},
                                           {"delta", {{"type", "input_json_delta"}, {"partial_json", p.text}}}});
        }
        break;
    }
  }
}

void MessagesObserver::on_sibling_done(int32_t /*sibling*/, SiblingResult&& result) { result_ = std::move(result); }

void MessagesObserver::on_complete(const GenerationUsage& usage) {
  exchange_->note("completion_tokens", std::to_string(usage.completion_tokens));
  const bool failed = result_ && result_->reason == FinishReason::kError;
  // Anthropic's API has no stop reason for an abort (/abort_request, a pause that aborts, a weight
  // update that aborts requests): an error, so that no client takes the partial message for a
  // whole one (as end_turn would say).
  const bool aborted = result_ && result_->reason == FinishReason::kCancelled;
  const ApiError error =
      failed ? api_error(ErrorKind::kServer, "the engine failed the request: " + result_->error)
             : request_aborted("it finished");
  if ((failed || aborted) && !exchange_->stream_started()) {
    exchange_->respond_error(error);
    return;
  }
  close_block();
  const std::string stop_reason = result_ ? anthropic_stop_reason(*result_) : "end_turn";
  Json stop_sequence = nullptr;
  if (result_ && result_->stop_string && *result_->stop_string < options_.stop_sequences.size())
    stop_sequence = options_.stop_sequences[*result_->stop_string];
  Json u = {{"input_tokens", usage.prompt_tokens - usage.cached_prompt_tokens},
            {"output_tokens", usage.completion_tokens},
            {"cache_creation_input_tokens", 0},
            {"cache_read_input_tokens", usage.cached_prompt_tokens}};
  if (!options_.stream) {
    Json body = {{"id", options_.id}, {"type", "message"}, {"role", "assistant"}, {"model", options_.model},
                 {"content", blocks_}, {"stop_reason", stop_reason}, {"stop_sequence", stop_sequence}, {"usage", u}};
    exchange_->respond_json(200, dump_json(body));
    return;
  }
  ensure_started();
  if (failed || aborted) exchange_->send(http::sse_event("error", anthropic_error_body(error)));
  emit("message_delta", Json{{"delta", {{"stop_reason", stop_reason}, {"stop_sequence", stop_sequence}}}, {"usage", u}});
  emit("message_stop", Json::object());
  exchange_->end_stream();
}

}  // namespace beam::server
