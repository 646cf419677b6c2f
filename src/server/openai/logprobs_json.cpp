// Logprobs JSON (see logprobs_json.h).
#include "server/openai/logprobs_json.h"

#include <cmath>

namespace beam::server {
namespace {

Json bytes_array(const std::string& bytes) {
  Json a = Json::array();
  for (unsigned char c : bytes) a.push_back(static_cast<int>(c));
  return a;
}

Json alternative(const text::Tokenizer* tokenizer, const TokenLogprob& lp) {
  const std::string b = token_bytes(tokenizer, lp.token);
  return Json{{"token", b}, {"logprob", json_logprob(lp.logprob)}, {"bytes", bytes_array(b)}};
}

}  // namespace

std::string token_bytes(const text::Tokenizer* tokenizer, int32_t id) {
  if (!tokenizer) return "";
  const text::TokenPiece* piece = tokenizer->piece(id);
  return piece ? piece->bytes : std::string();
}

double json_logprob(float logprob) {
  if (std::isnan(logprob) || std::isinf(logprob)) return -9999.0;
  return static_cast<double>(logprob);
}

Json logprob_entries(const text::Tokenizer* tokenizer, const std::vector<OutputToken>& tokens, int64_t num_top) {
  Json out = Json::array();
  for (const OutputToken& t : tokens) {
    if (!t.logprobs) continue;
    Json entry = alternative(tokenizer, t.logprobs->chosen);
    Json top = Json::array();
    for (size_t i = 0; i < t.logprobs->top.size() && static_cast<int64_t>(i) < num_top; ++i) {
      top.push_back(alternative(tokenizer, t.logprobs->top[i]));
    }
    entry["top_logprobs"] = std::move(top);
    out.push_back(std::move(entry));
  }
  return out;
}

CompletionLogprobs::CompletionLogprobs(const text::Tokenizer* tokenizer, int64_t num_top, size_t text_offset_start)
    : tokenizer_(tokenizer), num_top_(num_top), offset_(text_offset_start) {
  total_ = Json{{"tokens", Json::array()}, {"token_logprobs", Json::array()},
                {"top_logprobs", Json::array()}, {"text_offset", Json::array()}};
}

Json CompletionLogprobs::add(const std::vector<OutputToken>& tokens) {
  Json part{{"tokens", Json::array()}, {"token_logprobs", Json::array()},
            {"top_logprobs", Json::array()}, {"text_offset", Json::array()}};
  for (const OutputToken& t : tokens) {
    if (!t.logprobs) continue;
    const std::string b = token_bytes(tokenizer_, t.id);
    part["tokens"].push_back(b);
    part["token_logprobs"].push_back(json_logprob(t.logprobs->chosen.logprob));
    if (num_top_ > 0) {
      Json top = Json::object();
      for (size_t i = 0; i < t.logprobs->top.size() && static_cast<int64_t>(i) < num_top_; ++i) {
        top[token_bytes(tokenizer_, t.logprobs->top[i].token)] = json_logprob(t.logprobs->top[i].logprob);
      }
      part["top_logprobs"].push_back(std::move(top));
    } else {
      part["top_logprobs"].push_back(nullptr);
    }
    part["text_offset"].push_back(offset_);
    offset_ += b.size();
  }
  for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
    for (const Json& v : part[key]) total_[key].push_back(v);
  }
  return part;
}

}  // namespace beam::server
