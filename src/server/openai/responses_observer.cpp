// ResponsesObserver and the /v1/responses endpoint (see responses_observer.h).
#include "server/openai/responses_observer.h"

#include "server/http/sse.h"
#include "server/openai/logprobs_json.h"

namespace beam::server {

ResponsesObserver::ResponsesObserver(std::shared_ptr<Exchange> exchange, const text::Tokenizer* tokenizer,
                                     IdSource* ids, ResponsesOptions options)
    : exchange_(std::move(exchange)), tokenizer_(tokenizer), ids_(ids), options_(std::move(options)) {}

ResponsesObserver::~ResponsesObserver() = default;

void ResponsesObserver::on_rejected(const ApiError& error) { exchange_->respond_error(error); }

Json ResponsesObserver::response_object(const std::string& status) const {
  Json r = {{"id", options_.id}, {"object", "response"}, {"created_at", options_.created}, {"status", status},
            {"error", nullptr}, {"incomplete_details", nullptr}};
  for (const auto& [k, v] : options_.echo.items()) r[k] = v;
  r["model"] = options_.model;
  r["output"] = status == "in_progress" ? Json::array() : output_;
  r["previous_response_id"] = nullptr;
  r["store"] = false;
  r["truncation"] = "disabled";
  r["usage"] = usage_;
  r["metadata"] = Json::object();
  return r;
}

void ResponsesObserver::emit(Json event) {
  if (!options_.stream) return;
  ensure_started();
  event["sequence_number"] = sequence_++;
  const std::string type = event["type"].get<std::string>();
  exchange_->send(http::sse_event(type, dump_json(event)));
}

void ResponsesObserver::ensure_started() {
  if (exchange_->stream_started()) return;
  exchange_->start_stream(std::string(http::kSseContentType));
  Json created = {{"type", "response.created"}, {"sequence_number", sequence_++}, {"response", response_object("in_progress")}};
  exchange_->send(http::sse_event("response.created", dump_json(created)));
  Json progress = {{"type", "response.in_progress"}, {"sequence_number", sequence_++}, {"response", response_object("in_progress")}};
  exchange_->send(http::sse_event("response.in_progress", dump_json(progress)));
}

void ResponsesObserver::open(ItemKind kind, const ResponseDelta* tool_start) {
  close_open_item();
  OpenItem o{kind, output_.size(), Json::object(), "", Json::array()};
  switch (kind) {
    case ItemKind::kReasoning:
      o.item = {{"id", ids_->next("rs_")}, {"type", "reasoning"}, {"summary", Json::array()}, {"content", Json::array()}};
      break;
    case ItemKind::kMessage:
      o.item = {{"id", ids_->next("msg_")}, {"type", "message"}, {"status", "in_progress"}, {"role", "assistant"},
                {"content", Json::array()}};
      break;
    case ItemKind::kFunctionCall:
      o.item = {{"id", ids_->next("fc_")}, {"type", "function_call"}, {"status", "in_progress"},
                {"call_id", tool_start->tool_call_id}, {"name", tool_start->tool_name}, {"arguments", ""}};
      break;
  }
  emit(Json{{"type", "response.output_item.added"}, {"output_index", o.output_index}, {"item", o.item}});
  const Json& id = o.item["id"];
  if (kind == ItemKind::kReasoning) {
    emit(Json{{"type", "response.content_part.added"}, {"item_id", id}, {"output_index", o.output_index},
              {"content_index", 0}, {"part", {{"type", "reasoning_text"}, {"text", ""}}}});
  } else if (kind == ItemKind::kMessage) {
    Json part = {{"type", "output_text"}, {"text", ""}, {"annotations", Json::array()}};
    if (options_.logprobs) part["logprobs"] = Json::array();
    emit(Json{{"type", "response.content_part.added"}, {"item_id", id}, {"output_index", o.output_index},
              {"content_index", 0}, {"part", std::move(part)}});
  }
  open_ = std::move(o);
}

void ResponsesObserver::close_open_item() {
  if (!open_) return;
  OpenItem& o = *open_;
  const Json id = o.item["id"];
  switch (o.kind) {
    case ItemKind::kReasoning: {
      Json part = {{"type", "reasoning_text"}, {"text", o.text}};
      emit(Json{{"type", "response.reasoning_text.done"}, {"item_id", id}, {"output_index", o.output_index},
                {"content_index", 0}, {"text", o.text}});
      emit(Json{{"type", "response.content_part.done"}, {"item_id", id}, {"output_index", o.output_index},
                {"content_index", 0}, {"part", part}});
      o.item["content"] = Json::array({part});
      break;
    }
    case ItemKind::kMessage: {
      Json part = {{"type", "output_text"}, {"text", o.text}, {"annotations", Json::array()}};
      if (options_.logprobs) part["logprobs"] = o.logprobs;
      Json done = {{"type", "response.output_text.done"}, {"item_id", id}, {"output_index", o.output_index},
                   {"content_index", 0}, {"text", o.text}};
      if (options_.logprobs) done["logprobs"] = o.logprobs;
      emit(std::move(done));
      emit(Json{{"type", "response.content_part.done"}, {"item_id", id}, {"output_index", o.output_index},
                {"content_index", 0}, {"part", part}});
      o.item["content"] = Json::array({part});
      o.item["status"] = "completed";
      break;
    }
    case ItemKind::kFunctionCall:
      emit(Json{{"type", "response.function_call_arguments.done"}, {"item_id", id}, {"output_index", o.output_index},
                {"name", o.item["name"]}, {"arguments", o.item["arguments"]}});
      o.item["status"] = "completed";
      break;
  }
  emit(Json{{"type", "response.output_item.done"}, {"output_index", o.output_index}, {"item", o.item}});
  output_.push_back(std::move(o.item));
  open_.reset();
}

void ResponsesObserver::add_text(const ResponseDelta& part, Json logprobs) {
  const bool reasoning = part.kind == ResponseDelta::Kind::kReasoning;
  const ItemKind kind = reasoning ? ItemKind::kReasoning : ItemKind::kMessage;
  if (!open_ || open_->kind != kind) open(kind, nullptr);
  OpenItem& o = *open_;
  o.text += part.text;
  Json event = {{"type", reasoning ? "response.reasoning_text.delta" : "response.output_text.delta"},
                {"item_id", o.item["id"]}, {"output_index", o.output_index}, {"content_index", 0}, {"delta", part.text}};
  if (!reasoning) {
    if (!logprobs.is_array()) logprobs = Json::array();
    for (const Json& lp : logprobs) o.logprobs.push_back(lp);
    event["logprobs"] = std::move(logprobs);
  }
  emit(std::move(event));
}

void ResponsesObserver::add_arguments(const ResponseDelta& part) {
  if (!open_ || open_->kind != ItemKind::kFunctionCall) return;
  OpenItem& o = *open_;
  o.item["arguments"] = o.item["arguments"].get<std::string>() + part.text;
  emit(Json{{"type", "response.function_call_arguments.delta"}, {"item_id", o.item["id"]},
            {"output_index", o.output_index}, {"delta", part.text}});
}

void ResponsesObserver::on_delta(int32_t /*sibling*/, SiblingDelta&& delta) {
  Json logprobs = options_.logprobs
                      ? logprob_entries({tokenizer_}, delta.tokens, options_.top_logprobs)
                      : Json(nullptr);
  for (const ResponseDelta& p : delta.parts) {
    switch (p.kind) {
      case ResponseDelta::Kind::kReasoning:
        add_text(p, nullptr);
        break;
      case ResponseDelta::Kind::kContent:
        add_text(p, std::move(logprobs));
        logprobs = nullptr;
        break;
      case ResponseDelta::Kind::kToolCallStart:
        open(ItemKind::kFunctionCall, &p);
        break;
      case ResponseDelta::Kind::kToolCallArguments:
        add_arguments(p);
        break;
    }
  }
}

void ResponsesObserver::on_sibling_done(int32_t /*sibling*/, SiblingResult&& result) { result_ = std::move(result); }

void ResponsesObserver::on_complete(const GenerationUsage& usage) {
  exchange_->note("completion_tokens", std::to_string(usage.completion_tokens));
  const bool failed = result_ && result_->reason == FinishReason::kError;
  if (failed && !exchange_->stream_started()) {
    exchange_->respond_error(api_error(ErrorKind::kServer, "the engine failed the request: " + result_->error));
    return;
  }
  close_open_item();
  usage_ = {{"input_tokens", usage.prompt_tokens},
            {"input_tokens_details", {{"cached_tokens", usage.cached_prompt_tokens}}},
            {"output_tokens", usage.completion_tokens},
            {"output_tokens_details", {{"reasoning_tokens", 0}}},
            {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
  const bool incomplete = result_ && result_->reason == FinishReason::kLength;
  // Aborted (/abort_request, a pause that aborts, a weight update): "cancelled", never
  // "completed", so that an RL loop does not take the partial output for a whole one.
  const bool cancelled = result_ && result_->reason == FinishReason::kCancelled;
  std::string status = failed ? "failed" : cancelled ? "cancelled" : incomplete ? "incomplete" : "completed";
  Json response = response_object(status);
  if (incomplete) response["incomplete_details"] = {{"reason", "max_output_tokens"}};
  if (failed) response["error"] = {{"code", "server_error"}, {"message", result_->error}};
  if (!options_.stream) {
    exchange_->respond_json(200, dump_json(response));
    return;
  }
  emit(Json{{"type", "response." + status}, {"response", std::move(response)}});
  exchange_->end_stream();
}

}  // namespace beam::server
