// POST /v1/chat/completions: parse, apply tool_choice, render the chat template, start the
// generation with a ChatObserver.
#pragma once

#include <memory>

#include "server/api/endpoint_env.h"

namespace beam::server {

void handle_chat_completions(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange);

}  // namespace beam::server
