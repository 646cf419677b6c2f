// ResponsesObserver: engine output → a Responses API `response` object whose output items
// (reasoning, message, function_call) follow the order the model produced them; streamed as the
// typed events (response.created … response.completed) with sequence numbers. Streaming and
// non-streaming build the items with the same state machine, so both give the same output.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "server/api/endpoint_env.h"
#include "server/generation/generation_job.h"
#include "server/openai/responses_request.h"

namespace beam::server {

struct ResponsesOptions {
  std::string id;
  std::string model;
  int64_t created = 0;
  bool stream = false;
  bool logprobs = false;
  int64_t top_logprobs = 0;
  Json echo;  // request fields echoed in the response object (instructions, tools, ...)
};

class ResponsesObserver : public GenerationObserver {
 public:
  ResponsesObserver(std::shared_ptr<Exchange> exchange, const text::Tokenizer* tokenizer, IdSource* ids,
                    ResponsesOptions options);
  ~ResponsesObserver() override;

  void on_rejected(const ApiError& error) override;
  void on_delta(int32_t sibling, SiblingDelta&& delta) override;
  void on_sibling_done(int32_t sibling, SiblingResult&& result) override;
  void on_complete(const GenerationUsage& usage) override;

 private:
  enum class ItemKind { kReasoning, kMessage, kFunctionCall };
  struct OpenItem {
    ItemKind kind;
    size_t output_index = 0;
    Json item;         // the item as it will be when done
    std::string text;  // reasoning / output text so far
    Json logprobs = Json::array();
  };

  Json response_object(const std::string& status) const;
  void emit(Json event);
  void ensure_started();
  void open(ItemKind kind, const ResponseDelta* tool_start);
  void close_open_item();
  void add_text(const ResponseDelta& part, Json logprobs);
  void add_arguments(const ResponseDelta& part);

  std::shared_ptr<Exchange> exchange_;
  const text::Tokenizer* tokenizer_;
  IdSource* ids_;
  ResponsesOptions options_;
  int64_t sequence_ = 0;
  Json output_ = Json::array();  // finished items
  std::optional<OpenItem> open_;
  std::optional<SiblingResult> result_;
  Json usage_ = nullptr;
};

void handle_responses(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);

}  // namespace beam::server
