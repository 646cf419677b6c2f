// MessagesObserver: engine output → an Anthropic `message` with thinking / text / tool_use
// content blocks in the order the model produced them; streamed as message_start,
// content_block_start / _delta / _stop, message_delta and message_stop events. Streaming and
// non-streaming build the blocks with the same state machine.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/api/endpoint_env.h"
#include "server/generation/generation_job.h"

namespace beam::server {

struct MessagesOptions {
  std::string id;
  std::string model;
  bool stream = false;
  std::vector<std::string> stop_sequences;
};

class MessagesObserver : public GenerationObserver {
 public:
  MessagesObserver(std::shared_ptr<Exchange> exchange, MessagesOptions options, int64_t prompt_tokens);

  void on_rejected(const ApiError& error) override;
  void on_delta(int32_t sibling, SiblingDelta&& delta) override;
  void on_sibling_done(int32_t sibling, SiblingResult&& result) override;
  void on_complete(const GenerationUsage& usage) override;

 private:
  enum class BlockKind { kThinking, kText, kToolUse };

  void emit(const char* type, Json event);
  void ensure_started();
  void open(BlockKind kind, const ResponseDelta* tool_start);
  void close_block();
  void add_text(BlockKind kind, const std::string& text);

  std::shared_ptr<Exchange> exchange_;
  MessagesOptions options_;
  int64_t prompt_tokens_;
  Json blocks_ = Json::array();
  std::optional<BlockKind> open_kind_;
  std::string tool_input_;  // JSON text of the open tool_use block
  std::optional<SiblingResult> result_;
};

// "end_turn" / "max_tokens" / "stop_sequence" / "tool_use".
std::string anthropic_stop_reason(const SiblingResult& result);

void handle_messages(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);
void handle_count_tokens(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);

}  // namespace beam::server
