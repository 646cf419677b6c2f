// Legacy completions request parsing (see completion_request.h).
#include "server/openai/completion_request.h"

#include <limits>

#include "server/api/prompt_truncation.h"

namespace beam::server {
namespace {

constexpr int64_t kDefaultCompletionMaxTokens = 16;  // OpenAI's default for /v1/completions

// One prompt: a string or an array of token ids; `path` names it in errors, `key` the field.
ApiExpected<CompletionPrompt> read_one_prompt(const Json& p, const std::string& path,
                                              const std::string& key) {
  CompletionPrompt out;
  if (p.is_string()) {
    out.text = p.get<std::string>();
    if (out.text->empty()) return invalid_request("'" + path + "' must not be empty", key);
    return out;
  }
  if (!p.is_array()) {
    return invalid_request(
        "'" + path + "': expected a string or an array of token ids, got " + json_type_name(p),
        key);
  }
  for (size_t i = 0; i < p.size(); ++i) {
    const Json& e = p[i];
    if (!e.is_number_integer() || e.get<int64_t>() < 0 ||
        e.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return invalid_request("'" + indexed_path(path, i) + "': expected a token id", key);
    }
    out.ids.push_back(static_cast<int32_t>(e.get<int64_t>()));
  }
  if (out.ids.empty()) return invalid_request("'" + path + "' must not be empty", key);
  return out;
}

}  // namespace

ApiExpected<std::vector<CompletionPrompt>> read_prompts(const Json* value, const std::string& key) {
  if (!value) return invalid_request("'" + key + "' is required", key);
  std::vector<CompletionPrompt> out;
  const bool batch = value->is_array() && !value->empty() &&
                     ((*value)[0].is_string() || (*value)[0].is_array());
  if (!batch) {
    API_ASSIGN_OR_RETURN(CompletionPrompt p, read_one_prompt(*value, key, key));
    out.push_back(std::move(p));
    return out;
  }
  if (value->size() > kMaxCompletionPrompts) {
    return invalid_request("'" + key + "': at most " + std::to_string(kMaxCompletionPrompts) +
                               " prompts a request, got " + std::to_string(value->size()),
                           key);
  }
  for (size_t i = 0; i < value->size(); ++i) {
    const Json& p = (*value)[i];
    if (!p.is_string() && !p.is_array()) {
      return invalid_request("'" + indexed_path(key, i) +
                                 "': expected a string or an array of token ids, got " +
                                 json_type_name(p),
                             key);
    }
    API_ASSIGN_OR_RETURN(CompletionPrompt one, read_one_prompt(p, indexed_path(key, i), key));
    out.push_back(std::move(one));
  }
  return out;
}

namespace {

void read_logprob_fields(FieldReader& r, CompletionRequest* req) {
  std::optional<int64_t> logprobs;
  r.read("logprobs", &logprobs);
  if (logprobs) {
    if (*logprobs < 0 || *logprobs > kMaxTopLogprobs)
      r.fail("logprobs", "must be in [0, 20], got " + std::to_string(*logprobs));
    req->sampling.params.logprobs = true;
    req->sampling.params.top_logprobs = *logprobs;
  }
  r.read("echo", &req->echo);
  r.read("return_tokens_as_token_ids", &req->tokens_as_ids);
  r.read("prompt_logprobs", &req->prompt_logprobs);
  if (req->prompt_logprobs &&
      (*req->prompt_logprobs < 0 || *req->prompt_logprobs > kMaxTopLogprobs))
    r.fail("prompt_logprobs", "must be in [0, 20] (alternatives per prompt token), got " +
                                  std::to_string(*req->prompt_logprobs));
}

void read_max_tokens(FieldReader& r, CompletionRequest* req) {
  std::optional<int64_t> max_tokens = kDefaultCompletionMaxTokens;
  r.read("max_tokens", &max_tokens);
  req->sampling.params.max_tokens = max_tokens;
  if (*max_tokens < 0) {
    r.fail("max_tokens", "must be >= 0, got " + std::to_string(*max_tokens));
  } else if (*max_tokens == 0 && !req->echo && !req->prompt_logprobs) {
    r.fail("max_tokens",
           "must be >= 1; 0 (no output: the prompt alone) needs 'echo' or 'prompt_logprobs'");
  }
}

}  // namespace

ApiExpected<CompletionRequest> parse_completion_request(const Json& body,
                                                        const FormatCaches& caches) {
  if (!body.is_object()) return invalid_request("the request body must be a JSON object");
  CompletionRequest req;
  FieldReader r(body, "");
  r.read("model", &req.model);
  read_sampling_fields(r, "stop", &req.sampling);
  read_routed_experts_fields(r, &req.sampling);
  read_logprob_fields(r, &req);
  read_max_tokens(r, &req);
  read_truncate_prompt_tokens(r, &req.truncate_prompt_tokens);
  if (r.has("suffix")) r.fail("suffix", "is not supported by beamserve");
  std::optional<int64_t> best_of;
  r.read("best_of", &best_of);
  if (best_of && *best_of != req.sampling.params.n)
    r.fail("best_of", "is not supported (only best_of == n)");
  r.read("stream", &req.stream);
  read_beam_search_fields(r, &req.beam);
  API_ASSIGN_OR_RETURN(bool output, read_output_fields(r, &req.output));
  (void)output;
  if (r.failed()) return r.take_error();
  API_ASSIGN_OR_RETURN(req.prompts, read_prompts(r.get("prompt"), "prompt"));
  // vLLM's extension: the chat format's response_format on completions too, and vLLM's / SGLang's
  // structured-output fields (parse_request_format).
  API_ASSIGN_OR_RETURN(req.sampling.format, parse_request_format(body, caches));
  return req;
}

}  // namespace beam::server
