// Logprobs JSON (see logprobs_json.h).
#include "server/openai/logprobs_json.h"

#include <cmath>
#include <utility>

namespace beam::server {
namespace {

Json bytes_array(const std::string& bytes) {
  Json a = Json::array();
  for (unsigned char c : bytes) a.push_back(static_cast<int>(c));
  return a;
}

Json alternative(const LogprobTokenNames& names, const TokenLogprob& lp) {
  const std::string b = names(lp.token);
  return Json{{"token", b}, {"logprob", json_logprob(lp.logprob)}, {"bytes", bytes_array(b)}};
}

Json empty_completion_logprobs() {
  return Json{{"tokens", Json::array()},
              {"token_logprobs", Json::array()},
              {"top_logprobs", Json::array()},
              {"text_offset", Json::array()}};
}

}  // namespace

const TokenLogprobs* prompt_entry(const std::vector<TokenLogprobs>& entries, int64_t start,
                                  int64_t p) {
  const int64_t i = p - start;
  if (p == 0 || i < 0 || i >= static_cast<int64_t>(entries.size())) return nullptr;
  return &entries[static_cast<size_t>(i)];
}

std::string token_bytes(const text::Tokenizer* tokenizer, int32_t id) {
  if (!tokenizer) return "";
  const text::TokenPiece* piece = tokenizer->piece(id);
  return piece ? piece->bytes : std::string();
}

double json_logprob(float logprob) {
  if (std::isnan(logprob) || std::isinf(logprob)) return -9999.0;
  return static_cast<double>(logprob);
}

std::string LogprobTokenNames::operator()(int32_t id) const {
  return as_ids ? "token_id:" + std::to_string(id) : token_bytes(tokenizer, id);
}

Json logprob_entries(const LogprobTokenNames& names, const std::vector<OutputToken>& tokens,
                     int64_t num_top) {
  Json out = Json::array();
  for (const OutputToken& t : tokens) {
    if (!t.logprobs) continue;
    Json entry = alternative(names, t.logprobs->chosen);
    Json top = Json::array();
    for (size_t i = 0; i < t.logprobs->top.size() && static_cast<int64_t>(i) < num_top; ++i) {
      top.push_back(alternative(names, t.logprobs->top[i]));
    }
    entry["top_logprobs"] = std::move(top);
    out.push_back(std::move(entry));
  }
  return out;
}

CompletionLogprobs::CompletionLogprobs(LogprobTokenNames names, int64_t num_top)
    : names_(names), num_top_(num_top), part_(empty_completion_logprobs()) {}

void CompletionLogprobs::append(int32_t id, const TokenLogprobs* logprobs) {
  part_["tokens"].push_back(names_(id));
  part_["text_offset"].push_back(offset_);
  offset_ += token_bytes(names_.tokenizer, id).size();
  if (!logprobs) {
    part_["token_logprobs"].push_back(nullptr);
    part_["top_logprobs"].push_back(nullptr);
    return;
  }
  part_["token_logprobs"].push_back(json_logprob(logprobs->chosen.logprob));
  if (num_top_ == 0) {
    part_["top_logprobs"].push_back(nullptr);
    return;
  }
  Json top = Json::object();
  for (size_t i = 0; i < logprobs->top.size() && static_cast<int64_t>(i) < num_top_; ++i) {
    top[names_(logprobs->top[i].token)] = json_logprob(logprobs->top[i].logprob);
  }
  part_["top_logprobs"].push_back(std::move(top));
}

void CompletionLogprobs::add_prompt(const std::vector<int32_t>& prompt, int64_t start,
                                    const std::vector<TokenLogprobs>& entries) {
  for (size_t p = 0; p < prompt.size(); ++p)
    append(prompt[p], prompt_entry(entries, start, static_cast<int64_t>(p)));
}

void CompletionLogprobs::add(const std::vector<OutputToken>& tokens) {
  for (const OutputToken& t : tokens) {
    if (t.logprobs) append(t.id, &*t.logprobs);
  }
}

Json CompletionLogprobs::take() {
  return std::exchange(part_, empty_completion_logprobs());
}

Json vllm_prompt_logprobs(const text::Tokenizer* tokenizer, const std::vector<int32_t>& prompt,
                          int64_t start, const std::vector<TokenLogprobs>& entries,
                          int64_t num_top) {
  Json out = Json::array();
  for (size_t p = 0; p < prompt.size(); ++p) {
    const TokenLogprobs* entry = prompt_entry(entries, start, static_cast<int64_t>(p));
    if (!entry) {
      out.push_back(nullptr);
      continue;
    }
    const TokenLogprobs& e = *entry;
    Json position = Json::object();
    auto put = [&](const TokenLogprob& lp, int64_t rank) {
      const std::string key = std::to_string(lp.token);
      if (position.contains(key)) return;
      position[key] = Json{{"logprob", json_logprob(lp.logprob)},
                           {"rank", rank},
                           {"decoded_token", token_bytes(tokenizer, lp.token)}};
    };
    put(e.chosen, e.chosen_rank);
    for (size_t k = 0; k < e.top.size() && static_cast<int64_t>(k) < num_top; ++k) {
      put(e.top[k], static_cast<int64_t>(k) + 1);
    }
    out.push_back(std::move(position));
  }
  return out;
}

Json token_entropies(const std::vector<OutputToken>& tokens) {
  Json out = Json::array();
  for (const OutputToken& t : tokens)
    if (t.entropy) out.push_back(*t.entropy);
  return out;
}

Json native_logprob_entry(const TokenLogprobs& logprobs, int64_t num_top) {
  Json top = Json::array();
  for (size_t i = 0; i < logprobs.top.size() && static_cast<int64_t>(i) < num_top; ++i) {
    top.push_back(Json{{"token_id", logprobs.top[i].token},
                       {"logprob", json_logprob(logprobs.top[i].logprob)}});
  }
  return Json{{"token_id", logprobs.chosen.token},
              {"logprob", json_logprob(logprobs.chosen.logprob)},
              {"rank", logprobs.chosen_rank},
              {"top_logprobs", std::move(top)}};
}

Json native_prompt_logprobs(int64_t prompt_tokens, int64_t first, int64_t start,
                            const std::vector<TokenLogprobs>& entries, int64_t num_top) {
  Json out = Json::array();
  for (int64_t p = first; p < prompt_tokens; ++p) {
    const TokenLogprobs* entry = prompt_entry(entries, start, p);
    out.push_back(entry ? native_logprob_entry(*entry, num_top) : Json(nullptr));
  }
  return out;
}

}  // namespace beam::server
