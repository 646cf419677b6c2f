// Sampling field parsing (see sampling_fields.h).
#include "server/api/sampling_fields.h"

#include <algorithm>
#include <limits>

namespace beam::server {
namespace {

void read_stop(FieldReader& r, const char* key, std::vector<std::string>* out) {
  const Json* v = r.get(key);
  if (!v) return;
  std::vector<std::string> stops;
  if (v->is_string()) {
    stops.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_string()) return r.fail(key, "expected an array of strings; element " + std::to_string(i) + " is a " + json_type_name((*v)[i]));
      stops.push_back((*v)[i].get<std::string>());
    }
  } else {
    return r.fail_type(key, "a string or an array of strings", *v);
  }
  if (stops.size() > kMaxStopStrings) return r.fail(key, "at most " + std::to_string(kMaxStopStrings) + " stop strings are allowed");
  for (const std::string& s : stops) {
    if (s.empty()) return r.fail(key, "stop strings must not be empty");
    if (s.size() > kMaxStopStringBytes) return r.fail(key, "a stop string is longer than " + std::to_string(kMaxStopStringBytes) + " bytes");
  }
  *out = std::move(stops);
}

void read_logit_bias(FieldReader& r, std::map<int32_t, double>* out) {
  const Json* v = r.get("logit_bias");
  if (!v) return;
  if (!v->is_object()) return r.fail_type("logit_bias", "an object mapping token ids to biases", *v);
  for (const auto& [key, bias] : v->items()) {
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(key, &used);
    } catch (...) {
      used = 0;
    }
    if (used != key.size() || key.empty() || id < 0 || id > std::numeric_limits<int32_t>::max())
      return r.fail("logit_bias", "key '" + key + "' is not a token id");
    if (!bias.is_number()) return r.fail("logit_bias", "the bias of token " + key + " is not a number");
    (*out)[static_cast<int32_t>(id)] = bias.get<double>();
  }
}

// A list of at most `max` non-empty strings of at most max_bytes each; `what` names one.
void read_strings(FieldReader& r, const char* key, size_t max, size_t max_bytes, const char* what,
                  std::vector<std::string>* out) {
  const Json* v = r.get(key);
  if (!v) return;
  if (!v->is_array()) return r.fail_type(key, "an array of strings", *v);
  if (v->size() > max)
    return r.fail(key, "at most " + std::to_string(max) + " " + what + "s are allowed");
  std::vector<std::string> strings;
  for (size_t i = 0; i < v->size(); ++i) {
    const Json& e = (*v)[i];
    if (!e.is_string())
      return r.fail(key, "element " + std::to_string(i) + " is a " + json_type_name(e) +
                             ", expected a string");
    strings.push_back(e.get<std::string>());
    if (strings.back().empty()) return r.fail(key, std::string(what) + "s must not be empty");
    if (strings.back().size() > max_bytes)
      return r.fail(key, std::string("a ") + what + " is longer than " + std::to_string(max_bytes) +
                             " bytes");
  }
  *out = std::move(strings);
}

}  // namespace

void read_token_ids(FieldReader& r, const char* key, std::vector<int32_t>* out) {
  const Json* v = r.get(key);
  if (!v) return;
  if (!v->is_array()) return r.fail_type(key, "an array of token ids", *v);
  for (size_t i = 0; i < v->size(); ++i) {
    const Json& e = (*v)[i];
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > std::numeric_limits<int32_t>::max())
      return r.fail(key, "element " + std::to_string(i) + " is not a non-negative token id");
    out->push_back(static_cast<int32_t>(e.get<int64_t>()));
  }
}

void read_priority(FieldReader& r, int32_t* out) {
  int64_t priority = *out;
  r.read("priority", &priority);
  if (priority < std::numeric_limits<int32_t>::min() || priority > std::numeric_limits<int32_t>::max())
    r.fail("priority", "is out of int32's range, got " + std::to_string(priority));
  else
    *out = static_cast<int32_t>(priority);
}

void read_sampling_fields(FieldReader& r, const char* stop_key, SamplingFields* out) {
  SamplingParams& p = out->params;
  r.read("temperature", &p.temperature);
  r.read("top_p", &p.top_p);
  r.read("top_k", &p.top_k);
  r.read("min_p", &p.min_p);
  r.read("presence_penalty", &p.presence_penalty);
  r.read("frequency_penalty", &p.frequency_penalty);
  r.read("repetition_penalty", &p.repetition_penalty);
  std::optional<int64_t> seed;
  r.read("seed", &seed);
  if (seed) {
    if (*seed < 0) r.fail("seed", "must be a non-negative integer, got " + std::to_string(*seed));
    p.seed = static_cast<uint64_t>(*seed);
  }
  read_logit_bias(r, &p.logit_bias);
  read_stop(r, stop_key, &out->stop_strings);
  read_token_ids(r, "stop_token_ids", &p.stop_token_ids);
  r.read("min_tokens", &p.min_tokens);
  r.read("ignore_eos", &p.ignore_eos);
  std::optional<std::string> logprobs_mode;
  r.read("logprobs_mode", &logprobs_mode);
  if (logprobs_mode) {
    if (std::optional<LogprobsMode> mode = parse_logprobs_mode(*logprobs_mode))
      p.logprobs_mode = *mode;
    else
      r.fail("logprobs_mode",
             "expected \"scaled\" (logprobs of the logits divided by the "
             "temperature) or \"raw\" (of the logits as they are), got \"" +
                 *logprobs_mode + "\"");
  }
  r.read("n", &p.n);
  r.read("include_stop_str_in_output", &out->include_stop_str_in_output);
  r.read("skip_special_tokens", &out->skip_special_tokens);
  read_priority(r, &out->priority);
  read_cache_salt(r, "cache_salt", &out->cache_salt);
  read_data_parallel_rank(r, &out->data_parallel_rank);
  if (r.get("allowed_token_ids")) {
    read_token_ids(r, "allowed_token_ids", &p.allowed_token_ids);
    if (p.allowed_token_ids.empty()) r.fail("allowed_token_ids", "must not be empty");
    std::sort(p.allowed_token_ids.begin(), p.allowed_token_ids.end());
    p.allowed_token_ids.erase(std::unique(p.allowed_token_ids.begin(), p.allowed_token_ids.end()),
                              p.allowed_token_ids.end());
  }
  read_strings(r, "bad_words", kMaxBadWords, kMaxBadWordBytes, "bad word", &out->bad_words);
}

void read_stop_regexes(FieldReader& r, const char* key, std::vector<StopRegex>* out) {
  std::vector<std::string> patterns;
  read_stop(r, key, &patterns);
  DfaBuildBudget budget;  // the list's automata together
  for (std::string& pattern : patterns) {
    auto dfa = ByteDfa::from_full_match(pattern, &budget);
    if (!dfa.ok()) return r.fail(key, "'" + pattern + "': " + dfa.error().message);
    if ((*dfa)->accepting((*dfa)->start()))
      return r.fail(key, "'" + pattern + "' matches the empty text (it would stop at once)");
    out->push_back(StopRegex{std::move(pattern), std::move(*dfa)});
  }
}

void read_thinking_budget(FieldReader& r, SamplingFields* out) {
  for (const char* key : {"thinking_token_budget", "thinking_budget"}) {
    std::optional<int64_t> budget;
    r.read(key, &budget);
    if (!budget || *budget == -1) continue;
    if (*budget < 0) return r.fail(key, "must be >= 0 tokens, or -1 for no limit");
    if (out->thinking_budget)
      return r.fail(key, "set either thinking_token_budget or thinking_budget, not both");
    out->thinking_budget = budget;
    out->thinking_budget_field = key;
  }
}

void read_data_parallel_rank(FieldReader& r, std::optional<int>* out) {
  for (const char* key : {"data_parallel_rank", "routed_dp_rank"}) {
    std::optional<int64_t> rank;
    r.read(key, &rank);
    if (!rank) continue;
    if (*rank < 0 || *rank > std::numeric_limits<int32_t>::max())
      return r.fail(key, "must be a data-parallel replica's index (>= 0), got " +
                             std::to_string(*rank));
    if (*out && **out != *rank)
      return r.fail(key, "differs from data_parallel_rank (" + std::to_string(**out) +
                             "); give one of the two");
    *out = static_cast<int>(*rank);
  }
}

void read_cache_salt(FieldReader& r, const char* key, std::string* out) {
  std::optional<std::string> salt;
  r.read(key, &salt);
  if (!salt) return;
  if (salt->empty()) return r.fail(key, "must be a non-empty string");
  if (salt->size() > kMaxCacheSaltBytes)
    return r.fail(key, "is longer than " + std::to_string(kMaxCacheSaltBytes) + " bytes");
  *out = std::move(*salt);
}

void read_routed_experts_fields(FieldReader& r, SamplingFields* out) {
  r.read("return_routed_experts", &out->return_routed_experts);
  r.read("routed_experts_start_len", &out->routed_experts_start);
  if (out->routed_experts_start < 0) r.fail("routed_experts_start_len", "must be >= 0");
  r.read("return_hidden_states", &out->return_hidden_states);
}

ApiExpected<bool> validate_sampling(const SamplingParams& params, int64_t vocab_size) {
  Status st = params.validate(vocab_size);
  if (st.ok()) return true;
  // Messages read "sampling parameter 'top_p' must be ..."; the quoted name is the field.
  const std::string& m = st.error().message;
  std::string param;
  const size_t q = m.find('\'');
  if (q != std::string::npos) {
    const size_t q2 = m.find('\'', q + 1);
    if (q2 != std::string::npos) param = m.substr(q + 1, q2 - q - 1);
  }
  return invalid_request(m, param);
}

}  // namespace beam::server
