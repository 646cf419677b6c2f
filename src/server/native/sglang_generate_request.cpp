// SGLang /generate request parsing (see sglang_generate_request.h).
#include "server/native/sglang_generate_request.h"

#include <algorithm>
#include <set>
#include <string_view>

#include "server/api/endpoint_env.h"

namespace beam::server {
namespace {

// GenerateReqInput fields read below.
const std::set<std::string_view> kHandled = {"text",
                                             "input_ids",
                                             "sampling_params",
                                             "rid",
                                             "return_logprob",
                                             "return_entropy",
                                             "token_ids_logprob",
                                             "logprob_start_len",
                                             "top_logprobs_num",
                                             "return_text_in_logprobs",
                                             "stream",
                                             "return_routed_experts",
                                             "routed_experts_start_len",
                                             "return_hidden_states",
                                             "priority",
                                             "model",
                                             "extra_key",
                                             "cache_salt",
                                             "routed_dp_rank",
                                             "data_parallel_rank",
                                             "lora_path"};
// Fields that change nothing in the output (metrics labels, routing hints for sessions, routers
// or disaggregated prefill): accepted with any value and ignored.
const std::set<std::string_view> kIgnored = {
    "log_metrics",    "custom_labels",         "no_logs",
    "session_id",     "routing_key",           "conversation_id",
    "received_time",  "external_trace_header", "http_worker_ipc",
    "kv_router_hint", "disagg_prefill_dp_rank"};
// SamplingParams fields read below; `seed` is beamserve's alias of sampling_seed.
const std::set<std::string_view> kSamplingHandled = {"max_new_tokens",
                                                     "stop",
                                                     "stop_regex",
                                                     "stop_token_ids",
                                                     "temperature",
                                                     "top_p",
                                                     "top_k",
                                                     "min_p",
                                                     "frequency_penalty",
                                                     "presence_penalty",
                                                     "repetition_penalty",
                                                     "min_new_tokens",
                                                     "n",
                                                     "json_schema",
                                                     "regex",
                                                     "ebnf",
                                                     "structural_tag",
                                                     "ignore_eos",
                                                     "logprobs_mode",
                                                     "skip_special_tokens",
                                                     "no_stop_trim",
                                                     "logit_bias",
                                                     "sampling_seed",
                                                     "seed",
                                                     "stream_interval",
                                                     "spaces_between_special_tokens"};

// A field set to something other than its "off" value (null, false, empty).
bool is_set(const Json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_array() || v.is_object() || v.is_string()) return !v.empty();
  return true;
}

ApiError unsupported(const std::string& field) {
  return invalid_request("'" + field +
                             "' is not supported by beamserve's /generate (SGLang format); "
                             "docs/server.md lists what is",
                         field);
}

// The value of a per-item field for item i: the field itself, or its i-th element when the request
// is a batch and the field is a list (SGLang's per-prompt lists).
ApiExpected<const Json*> item_value(const Json& body, const char* key, size_t i, size_t batch_size,
                                    bool batch) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return static_cast<const Json*>(nullptr);
  if (!batch || !it->is_array()) return &*it;
  if (it->size() != batch_size)
    return invalid_request("'" + std::string(key) + "' has " + std::to_string(it->size()) +
                               " entries for a batch of " + std::to_string(batch_size),
                           key);
  const Json& e = (*it)[i];
  return e.is_null() ? nullptr : &e;
}

// Reads one SamplingParams object into `item`.
ApiExpected<bool> read_sampling_params(const Json& sp, const std::string& path,
                                       const SglangModelInfo& model, SglangItem* item) {
  if (!sp.is_object())
    return invalid_request("'" + path + "': expected an object, got " + json_type_name(sp), path);
  for (const auto& [key, value] : sp.items()) {
    const std::string field = path + "." + key;
    if (!kSamplingHandled.contains(key)) {
      // custom_params and unknown names (SGLang rejects those).
      if (key == "custom_params") {
        if (is_set(value)) return unsupported(field);
        continue;
      }
      return invalid_request("'" + field + "' is not a SGLang sampling parameter", field);
    }
  }
  Json with_defaults = sp;
  for (const auto& [key, value] : model.sampling_defaults.items()) {
    if (!with_defaults.contains(key) || with_defaults[key].is_null()) with_defaults[key] = value;
  }
  FieldReader r(with_defaults, path);
  SamplingFields& f = item->sampling;
  read_sampling_fields(r, "stop", &f);
  read_stop_regexes(r, "stop_regex", &f.stop_regexes);
  r.read("min_new_tokens", &f.params.min_tokens);
  std::optional<int64_t> seed;
  r.read("sampling_seed", &seed);
  if (seed) {
    if (*seed < 0)
      r.fail("sampling_seed", "must be a non-negative integer");
    else
      f.params.seed = static_cast<uint64_t>(*seed);
  }
  r.read("no_stop_trim", &f.include_stop_str_in_output);
  bool spaces = true;  // the detokenizer never adds spaces between special tokens
  r.read("spaces_between_special_tokens", &spaces);
  std::optional<int64_t> interval;  // chunking of the stream only
  r.read("stream_interval", &interval);
  const auto max_new = with_defaults.find("max_new_tokens");
  if (max_new == with_defaults.end()) {
    f.params.max_tokens = kSglangDefaultMaxNewTokens;
  } else if (!max_new->is_null()) {  // null: up to the context, as SGLang
    std::optional<int64_t> m;
    r.read("max_new_tokens", &m);
    if (m && *m < 0) r.fail("max_new_tokens", "must be >= 0, got " + std::to_string(*m));
    f.params.max_tokens = m;
  }
  if (r.failed()) return r.take_error();
  ApiExpected<ResponseFormat> format = parse_request_format(with_defaults, model.format_caches);
  if (!format.ok()) {
    ApiError e = format.error();
    if (!e.param.empty()) e.param = path + "." + e.param;
    return e;
  }
  f.format = std::move(format).value();
  if (!f.format.path.empty()) f.format.path = path + "." + f.format.path;
  return true;
}

// The prompts: `input_ids` (a list of ids or a list of lists) or `text` (a string or a list).
ApiExpected<std::vector<std::vector<int32_t>>> read_prompts(const Json& body,
                                                            const SglangModelInfo& model,
                                                            bool* batch) {
  const auto text = body.find("text");
  const auto ids = body.find("input_ids");
  const bool has_text = text != body.end() && !text->is_null();
  const bool has_ids = ids != body.end() && !ids->is_null();
  if (has_text && has_ids) return invalid_request("give either 'text' or 'input_ids', not both");
  if (!has_text && !has_ids) return invalid_request("'text' or 'input_ids' is required", "text");
  std::vector<std::vector<int32_t>> prompts;
  if (has_text) {
    if (!model.tokenizer)
      return invalid_request(
          "'text' needs the model's tokenizer; this model has none (send 'input_ids')", "text");
    std::vector<std::string> texts;
    *batch = text->is_array();
    if (text->is_string()) {
      texts.push_back(text->get<std::string>());
    } else if (text->is_array() && !text->empty()) {
      for (size_t i = 0; i < text->size(); ++i) {
        if (!(*text)[i].is_string())
          return invalid_request("'" + indexed_path("text", i) + "': expected a string", "text");
        texts.push_back((*text)[i].get<std::string>());
      }
    } else {
      return invalid_request("'text': expected a string or a non-empty array of strings", "text");
    }
    for (const std::string& t : texts) {
      Expected<std::vector<text::TokenId>> enc = model.tokenizer->encode(t, true, true);
      if (!enc.ok())
        return invalid_request("'text' could not be tokenized: " + enc.error().message, "text");
      prompts.push_back(std::move(enc).value());
    }
  } else {
    if (!ids->is_array() || ids->empty())
      return invalid_request("'input_ids': expected a non-empty array of token ids (or of arrays)",
                             "input_ids");
    *batch = (*ids)[0].is_array();
    const auto read_one = [&](const Json& list, const std::string& path,
                              std::vector<int32_t>* out) -> ApiExpected<bool> {
      if (!list.is_array() || list.empty())
        return invalid_request("'" + path + "': expected a non-empty array of token ids",
                               "input_ids");
      for (size_t i = 0; i < list.size(); ++i) {
        const Json& t = list[i];
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= model.vocab_size)
          return invalid_request("'" + indexed_path(path, i) + "': not a token id in [0, " +
                                     std::to_string(model.vocab_size) + ")",
                                 "input_ids");
        out->push_back(static_cast<int32_t>(t.get<int64_t>()));
      }
      return true;
    };
    if (*batch) {
      for (size_t i = 0; i < ids->size(); ++i) {
        prompts.emplace_back();
        API_ASSIGN_OR_RETURN(bool ok,
                             read_one((*ids)[i], indexed_path("input_ids", i), &prompts.back()));
        (void)ok;
      }
    } else {
      prompts.emplace_back();
      API_ASSIGN_OR_RETURN(bool ok, read_one(*ids, "input_ids", &prompts.back()));
      (void)ok;
    }
  }
  for (const auto& p : prompts) {
    if (p.empty())
      return invalid_request("a prompt has no tokens", has_text ? "text" : "input_ids");
  }
  return prompts;
}

// Item i's prefix-cache salt from SGLang's isolation keys `extra_key` and `cache_salt` (strings,
// or per-item lists): cache_salt alone when only it is set (the OpenAI endpoints' namespace).
ApiExpected<std::string> read_cache_salt(const Json& body, size_t i, size_t batch_size,
                                         bool batch) {
  std::string keys[2];
  const char* names[2] = {"extra_key", "cache_salt"};
  for (int k = 0; k < 2; ++k) {
    API_ASSIGN_OR_RETURN(const Json* v, item_value(body, names[k], i, batch_size, batch));
    if (!v) continue;
    if (!v->is_string() || v->get<std::string>().empty() ||
        v->get<std::string>().size() > kMaxCacheSaltBytes)
      return invalid_request("'" + std::string(names[k]) +
                                 "': expected a non-empty string of at most " +
                                 std::to_string(kMaxCacheSaltBytes) + " bytes",
                             names[k]);
    keys[k] = v->get<std::string>();
  }
  if (keys[0].empty()) return keys[1];
  return "extra_key " + std::to_string(keys[0].size()) + ":" + keys[0] + keys[1];
}

// return_logprob, return_entropy, logprob_start_len and top_logprobs_num of item i.
ApiExpected<bool> read_logprob_fields(const Json& body, size_t i, size_t batch_size, bool batch,
                                      SglangItem* item) {
  API_ASSIGN_OR_RETURN(const Json* ret, item_value(body, "return_logprob", i, batch_size, batch));
  if (ret && !ret->is_boolean())
    return invalid_request("'return_logprob': expected a boolean", "return_logprob");
  item->return_logprob = ret && ret->get<bool>();
  API_ASSIGN_OR_RETURN(const Json* entropy, item_value(body, "return_entropy", i, batch_size, batch));
  if (entropy && !entropy->is_boolean())
    return invalid_request("'return_entropy': expected a boolean", "return_entropy");
  item->return_entropy = entropy && entropy->get<bool>();
  API_ASSIGN_OR_RETURN(const Json* start,
                       item_value(body, "logprob_start_len", i, batch_size, batch));
  if (start && !start->is_number_integer())
    return invalid_request("'logprob_start_len': expected an integer", "logprob_start_len");
  API_ASSIGN_OR_RETURN(const Json* top, item_value(body, "top_logprobs_num", i, batch_size, batch));
  if (top && !top->is_number_integer())
    return invalid_request("'top_logprobs_num': expected an integer", "top_logprobs_num");
  const int64_t k = top ? top->get<int64_t>() : 0;
  if (k < 0 || k > kMaxTopLogprobs)
    return invalid_request("'top_logprobs_num' must be in [0, 20], got " + std::to_string(k),
                           "top_logprobs_num");
  const auto prompt = static_cast<int64_t>(item->prompt_ids.size());
  const int64_t s = start ? start->get<int64_t>() : -1;
  if (!item->return_logprob) return true;  // SGLang reads these only with return_logprob
  if (s < -1)
    return invalid_request("'logprob_start_len' must be -1 or >= 0, got " + std::to_string(s),
                           "logprob_start_len");
  if (s >= prompt)
    return invalid_request("'logprob_start_len' (" + std::to_string(s) +
                               ") must be less than the prompt's length (" +
                               std::to_string(prompt) + ")",
                           "logprob_start_len");
  item->logprob_start = s == -1 ? prompt - 1 : s;
  item->top_logprobs_num = k;
  return true;
}

// token_ids_logprob of item i: a list of token ids for every prompt, or (a batch) a list of such
// lists, one a prompt.
ApiExpected<std::vector<int32_t>> read_token_ids_logprob(const Json& body, size_t i,
                                                         size_t batch_size, bool batch) {
  auto it = body.find("token_ids_logprob");
  std::vector<int32_t> ids;
  if (it == body.end() || it->is_null()) return ids;
  const Json* list = &*it;
  std::string path = "token_ids_logprob";
  if (batch && it->is_array() && !it->empty() && (*it)[0].is_array()) {
    if (it->size() != batch_size)
      return invalid_request("'token_ids_logprob' has " + std::to_string(it->size()) +
                                 " lists for a batch of " + std::to_string(batch_size),
                             "token_ids_logprob");
    list = &(*it)[i];
    path = indexed_path("token_ids_logprob", i);
  }
  if (!list->is_array())
    return invalid_request("'" + path + "': expected a list of token ids", "token_ids_logprob");
  for (const Json& id : *list) {
    if (!id.is_number_integer())
      return invalid_request("'" + path + "': expected a list of token ids", "token_ids_logprob");
    ids.push_back(static_cast<int32_t>(std::clamp<int64_t>(id.get<int64_t>(), -1, INT32_MAX)));
  }
  return ids;
}

ApiExpected<bool> read_rid(const Json& body, size_t batch_size, bool batch, int64_t n,
                           std::vector<SglangItem>* items) {
  auto it = body.find("rid");
  if (it == body.end() || it->is_null() || n > 1) return true;  // n > 1: SGLang makes new ids
  if (it->is_string()) {
    const std::string rid = it->get<std::string>();
    for (size_t i = 0; i < items->size(); ++i)
      (*items)[i].rid = batch ? rid + "_" + std::to_string(i) : rid;
    return true;
  }
  if (!batch || !it->is_array())
    return invalid_request("'rid': expected a string" + std::string(batch ? " or a list" : ""),
                           "rid");
  if (it->size() != batch_size)
    return invalid_request("'rid' has " + std::to_string(it->size()) + " ids for a batch of " +
                               std::to_string(batch_size),
                           "rid");
  std::set<std::string> seen;
  for (size_t i = 0; i < batch_size; ++i) {
    if (!(*it)[i].is_string())
      return invalid_request("'" + indexed_path("rid", i) + "': expected a string", "rid");
    if (!seen.insert((*it)[i].get<std::string>()).second)
      return invalid_request("'rid' holds a duplicate id", "rid");
    (*items)[i].rid = (*it)[i].get<std::string>();
  }
  return true;
}

}  // namespace

bool is_sglang_generate_body(const Json& body) {
  if (!body.is_object()) return false;
  for (const char* key : {"sampling_params", "text", "return_logprob", "top_logprobs_num",
                          "return_text_in_logprobs"}) {
    if (body.contains(key)) return true;
  }
  return false;
}

ApiExpected<SglangGenerateRequest> parse_sglang_generate_request(const Json& body,
                                                                 const SglangModelInfo& model) {
  if (!body.is_object()) return invalid_request("the request body must be a JSON object");
  for (const auto& [key, value] : body.items()) {
    if (!kHandled.contains(key) && !kIgnored.contains(key) && is_set(value))
      return unsupported(key);
  }
  SglangGenerateRequest req;
  FieldReader r(body, "");
  r.read("model", &req.model);
  r.read("stream", &req.stream);
  r.read("return_text_in_logprobs", &req.return_text_in_logprobs);
  int64_t priority = 0;
  r.read("priority", &priority);
  SamplingFields routing;
  read_routed_experts_fields(r, &routing);
  read_data_parallel_rank(r, &routing.data_parallel_rank);
  if (r.failed()) return r.take_error();
  bool batch = false;
  API_ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> prompts,
                       read_prompts(body, model, &batch));
  const size_t batch_size = prompts.size();
  for (size_t i = 0; i < batch_size; ++i) {
    SglangItem item;
    item.prompt_ids = std::move(prompts[i]);
    API_ASSIGN_OR_RETURN(const Json* sp, item_value(body, "sampling_params", i, batch_size, batch));
    const std::string path = batch && body["sampling_params"].is_array()
                                 ? indexed_path("sampling_params", i)
                                 : std::string("sampling_params");
    API_ASSIGN_OR_RETURN(bool ok,
                         read_sampling_params(sp ? *sp : Json::object(), path, model, &item));
    API_ASSIGN_OR_RETURN(ok, read_logprob_fields(body, i, batch_size, batch, &item));
    (void)ok;
    API_ASSIGN_OR_RETURN(item.token_ids_logprob,
                         read_token_ids_logprob(body, i, batch_size, batch));
    item.sampling.priority =
        static_cast<int32_t>(std::clamp<int64_t>(priority, INT32_MIN, INT32_MAX));
    API_ASSIGN_OR_RETURN(item.sampling.cache_salt, read_cache_salt(body, i, batch_size, batch));
    API_ASSIGN_OR_RETURN(const Json* lora, item_value(body, "lora_path", i, batch_size, batch));
    if (lora && !lora->is_string())
      return invalid_request(std::string("'lora_path': expected a loaded LoRA adapter's name (or "
                                         "a list of them for a batch), got ") +
                                 json_type_name(*lora),
                             "lora_path");
    if (lora) item.lora_path = lora->get<std::string>();
    item.sampling.return_routed_experts = routing.return_routed_experts;
    item.sampling.routed_experts_start = routing.routed_experts_start;
    item.sampling.return_hidden_states = routing.return_hidden_states;
    item.sampling.data_parallel_rank = routing.data_parallel_rank;
    if (!model.tokenizer && !item.sampling.stop_strings.empty())
      return invalid_request("'" + path +
                                 ".stop': stop strings need a tokenizer; this model has "
                                 "none (use stop_token_ids)",
                             path + ".stop");
    if (!model.tokenizer && !item.sampling.stop_regexes.empty())
      return invalid_request("'" + path +
                                 ".stop_regex': stop regexes need a tokenizer; this "
                                 "model has none (use stop_token_ids)",
                             path + ".stop_regex");
    // SGLang caps max_new_tokens at what the context leaves (a prompt too long is still a 400).
    const auto left = model.max_context_tokens - static_cast<int64_t>(item.prompt_ids.size());
    auto& max_tokens = item.sampling.params.max_tokens;
    if (model.max_context_tokens > 0 && left >= 1 && max_tokens && *max_tokens > left)
      max_tokens = left;
    if (i == 0) req.n = item.sampling.params.n;
    if (item.sampling.params.n != req.n)
      return invalid_request("'sampling_params.n' must be the same for every prompt",
                             "sampling_params.n");
    req.items.push_back(std::move(item));
  }
  req.batch = batch || req.n > 1;
  API_ASSIGN_OR_RETURN(bool ok, read_rid(body, batch_size, batch, req.n, &req.items));
  (void)ok;
  return req;
}

ApiExpected<GenerationSpec> sglang_generation_spec(const ServedModel& model,
                                                   const SglangItem& item) {
  GenerationSpec spec;
  spec.rid = item.rid.value_or("");
  spec.prompt_ids = item.prompt_ids;
  spec.detokenize = model.tokenizer.has_value();
  const auto prompt = static_cast<int64_t>(item.prompt_ids.size());
  SamplingFields fields = item.sampling;
  fields.params.return_entropy = item.return_entropy;
  if (item.return_logprob) {
    fields.params.logprobs = true;
    fields.params.top_logprobs = item.top_logprobs_num;
    fields.params.token_ids_logprob = item.token_ids_logprob;  // SGLang: with return_logprob
    // Position logprob_start itself is reported as null (SGLang pads the first entry).
    if (item.logprob_start + 1 < prompt)
      spec.prompt_logprobs = PromptLogprobsOptions{item.logprob_start + 1, item.top_logprobs_num,
                                                   item.token_ids_logprob};
  }
  ApiExpected<bool> ok = finish_spec(model, fields, "sampling_params.max_new_tokens", &spec);
  if (!ok.ok()) {
    // Sampling checks name beamserve's fields; name SGLang's.
    ApiError e = ok.error();
    if (e.param == "max_tokens")
      e.param = "sampling_params.max_new_tokens";
    else if (e.param == "min_tokens")
      e.param = "sampling_params.min_new_tokens";
    else if (kSamplingHandled.contains(e.param))
      e.param = "sampling_params." + e.param;
    return e;
  }
  return spec;
}

}  // namespace beam::server
