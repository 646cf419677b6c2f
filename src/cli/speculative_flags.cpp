// speculative_from_args: vLLM's --speculative-config and SGLang's --speculative-* flags.
#include "cli/speculative_flags.h"

#include <algorithm>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace beam::cli {
namespace {

using nlohmann::json;

// A non-negative integer member of the --speculative-config object, if present.
Expected<std::optional<int64_t>> int_member(const json& j, const std::string& key) {
  if (!j.contains(key) || j[key].is_null()) return std::optional<int64_t>();
  if (!j[key].is_number_integer() || j[key].get<int64_t>() < 0)
    return make_error("--speculative-config: '" + key + "' must be a non-negative integer, got " +
                      j[key].dump());
  return std::optional<int64_t>(j[key].get<int64_t>());
}

Expected<NgramSpeculation> from_vllm_config(const std::string& text) {
  const std::string flag = "--speculative-config";
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return make_error(flag + ": '" + text + "' is not a JSON object");
  for (const auto& [key, value] : j.items())
    if (key != "method" && key != "num_speculative_tokens" && key != "prompt_lookup_min" &&
        key != "prompt_lookup_max" && key != "disable_by_batch_size")
      return make_error(flag + ": unknown key '" + key +
                        "' (the keys are method, num_speculative_tokens, prompt_lookup_min, "
                        "prompt_lookup_max, disable_by_batch_size)");
  const std::string method = j.value("method", "");
  if (method != "ngram")
    return make_error(
        flag + ": method '" + method +
        "' is not served: beamserve drafts with n-grams only (\"method\": \"ngram\"); "
        "other methods need a draft model");
  BEAM_ASSIGN_OR_RETURN(std::optional<int64_t> k, int_member(j, "num_speculative_tokens"));
  if (!k || *k < 1) return make_error(flag + ": 'num_speculative_tokens' (>= 1) is required");
  BEAM_ASSIGN_OR_RETURN(std::optional<int64_t> lo, int_member(j, "prompt_lookup_min"));
  BEAM_ASSIGN_OR_RETURN(std::optional<int64_t> hi, int_member(j, "prompt_lookup_max"));
  BEAM_ASSIGN_OR_RETURN(std::optional<int64_t> batch, int_member(j, "disable_by_batch_size"));
  NgramSpeculation s;
  s.num_draft_tokens = *k;
  s.min_match = lo.value_or(hi.value_or(5));
  s.max_match = hi.value_or(lo.value_or(5));
  s.max_batch = batch.value_or(0);
  return s;
}

Expected<NgramSpeculation> from_sglang_flags(const Args& a) {
  const std::string algorithm = a.get_or("speculative-algorithm", "");
  if (algorithm != "NGRAM" && algorithm != "ngram")
    return make_error("--speculative-algorithm " + algorithm +
                      " is not served: beamserve drafts with n-grams only (NGRAM); other "
                      "algorithms need a draft model");
  BEAM_ASSIGN_OR_RETURN(int64_t block, a.get_int("speculative-num-draft-tokens", 8));
  if (block < 2)
    return make_error(
        "--speculative-num-draft-tokens counts the last token and the drafts: at "
        "least 2, got " +
        std::to_string(block));
  NgramSpeculation s;
  s.num_draft_tokens = block - 1;
  BEAM_ASSIGN_OR_RETURN(s.min_match, a.get_int("speculative-ngram-min-match-window-size", 1));
  BEAM_ASSIGN_OR_RETURN(s.max_match, a.get_int("speculative-ngram-max-match-window-size", 12));
  BEAM_ASSIGN_OR_RETURN(s.corpus_tokens, a.get_int("speculative-ngram-capacity", 10'000'000));
  if (s.corpus_tokens < 0 || s.corpus_tokens > kMaxCorpusTokens)
    return make_error("--speculative-ngram-capacity " + std::to_string(s.corpus_tokens) +
                      " is outside [0, " + std::to_string(kMaxCorpusTokens) + "] tokens");
  return s;
}

}  // namespace

Expected<NgramSpeculation> speculative_from_args(const Args& a) {
  const bool vllm = a.has("speculative-config");
  const bool sglang = std::any_of(std::begin(kSpeculativeFlags) + 1, std::end(kSpeculativeFlags),
                                  [&](const char* flag) { return a.has(flag); });
  if (vllm && sglang)
    return make_error(
        "--speculative-config (vLLM's) and --speculative-algorithm / --speculative-* (SGLang's) "
        "are one setting: give one form");
  if (!vllm && !sglang) return NgramSpeculation{};
  if (sglang && !a.has("speculative-algorithm"))
    return make_error(
        "--speculative-num-draft-tokens and --speculative-ngram-* need "
        "--speculative-algorithm NGRAM");
  BEAM_ASSIGN_OR_RETURN(NgramSpeculation s, vllm ? from_vllm_config(*a.get("speculative-config"))
                                                 : from_sglang_flags(a));
  if (Status st = s.validate(); !st.ok())
    return make_error((vllm ? "--speculative-config: " : "--speculative-*: ") + st.error().message);
  return s;
}

}  // namespace beam::cli
