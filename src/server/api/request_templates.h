// Chat templates sent with requests (vLLM's chat_template field, served with
// --trust-request-chat-template): each distinct source compiled once and kept among the most
// recently used, with the model's special tokens (bos_token, eos_token, ...). Thread-safe.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "server/api/api_error.h"
#include "text/chat_template.h"

namespace beam::server {

class RequestTemplates {
 public:
  static constexpr size_t kCapacity = 32;  // compiled templates kept

  // `model_template`: the model's own (its special tokens), or none.
  explicit RequestTemplates(std::optional<text::ChatTemplate> model_template);

  // The compiled template of `source`; a syntax error is a 400 naming chat_template.
  ApiExpected<std::shared_ptr<const text::ChatTemplate>> get(const std::string& source);

 private:
  text::ChatTemplate base_;  // special tokens only, when the model has no template
  std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<const text::ChatTemplate>>> recent_;  // MRU first
};

}  // namespace beam::server
