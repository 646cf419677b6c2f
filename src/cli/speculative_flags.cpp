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

// {"method": "dflash", "model": DIR, "num_speculative_tokens": K (optional: the drafter's
// block_size - 1), "disable_by_batch_size"}.
Expected<Speculation> dflash2_from_vllm(const json& j) {
  const std::string flag = "--speculative-config";
  for (const char* key : {"prompt_lookup_min", "prompt_lookup_max"})
    if (j.contains(key))
      return make_error(flag + ": '" + key + "' is an n-gram setting; a DFlash2 drafter has none");
  if (!j.contains("model") || !j["model"].is_string() || j["model"].get<std::string>().empty())
    return make_error(flag + ": method '" + j["method"].get<std::string>() +
                      "' needs \"model\": the DFlash2 drafter's directory");
  BEAM_ASSIGN_OR_RETURN(std::optional<int64_t> k, int_member(j, "num_speculative_tokens"));
  if (k && *k < 1) return make_error(flag + ": 'num_speculative_tokens' must be >= 1");
  BEAM_ASSIGN_OR_RETURN(std::optional<int64_t> batch, int_member(j, "disable_by_batch_size"));
  Speculation s;
  s.dflash2_drafter = j["model"].get<std::string>();
  s.num_draft_tokens = k.value_or(0);
  s.max_batch = batch.value_or(0);
  return s;
}

Expected<Speculation> from_vllm_config(const std::string& text) {
  const std::string flag = "--speculative-config";
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return make_error(flag + ": '" + text + "' is not a JSON object");
  for (const auto& [key, value] : j.items())
    if (key != "method" && key != "num_speculative_tokens" && key != "prompt_lookup_min" &&
        key != "prompt_lookup_max" && key != "disable_by_batch_size" && key != "model")
      return make_error(flag + ": unknown key '" + key +
                        "' (the keys are method, model, num_speculative_tokens, "
                        "prompt_lookup_min, prompt_lookup_max, disable_by_batch_size)");
  const std::string method = j.contains("method") && j["method"].is_string()
                                 ? j["method"].get<std::string>()
                                 : std::string();
  if (method == "dflash" || method == "dflash2") return dflash2_from_vllm(j);
  if (method != "ngram")
    return make_error(flag + ": method '" + method +
                      "' is not served: beamserve drafts with n-grams (\"method\": \"ngram\") "
                      "or a DFlash2 drafter (\"method\": \"dflash\", \"model\": DIR)");
  if (j.contains("model"))
    return make_error(flag + ": 'model' names a draft model, which the ngram method has none of");
  BEAM_ASSIGN_OR_RETURN(std::optional<int64_t> k, int_member(j, "num_speculative_tokens"));
  if (!k || *k < 1) return make_error(flag + ": 'num_speculative_tokens' (>= 1) is required");
  BEAM_ASSIGN_OR_RETURN(std::optional<int64_t> lo, int_member(j, "prompt_lookup_min"));
  BEAM_ASSIGN_OR_RETURN(std::optional<int64_t> hi, int_member(j, "prompt_lookup_max"));
  BEAM_ASSIGN_OR_RETURN(std::optional<int64_t> batch, int_member(j, "disable_by_batch_size"));
  Speculation s;
  s.num_draft_tokens = *k;
  s.min_match = lo.value_or(hi.value_or(5));
  s.max_match = hi.value_or(lo.value_or(5));
  s.max_batch = batch.value_or(0);
  return s;
}

Expected<Speculation> from_sglang_flags(const Args& a) {
  const std::string algorithm = a.get_or("speculative-algorithm", "");
  const bool dflash = algorithm == "DFLASH" || algorithm == "dflash";
  if (algorithm != "NGRAM" && algorithm != "ngram" && !dflash)
    return make_error("--speculative-algorithm " + algorithm +
                      " is not served: beamserve drafts with n-grams (NGRAM) or a DFlash2 "
                      "drafter (DFLASH with --speculative-draft-model-path)");
  const std::string drafter = a.get_or("speculative-draft-model-path", "");
  if (dflash != !drafter.empty())
    return make_error(dflash ? "--speculative-algorithm DFLASH needs --speculative-draft-model-path"
                             : "--speculative-draft-model-path needs --speculative-algorithm "
                               "DFLASH (NGRAM drafts without a model)");
  BEAM_ASSIGN_OR_RETURN(int64_t block, a.get_int("speculative-num-draft-tokens", dflash ? 0 : 8));
  if (block == 1 || block < 0 || (block == 0 && !dflash))
    return make_error(
        "--speculative-num-draft-tokens counts the last token and the drafts: at "
        "least 2, got " +
        std::to_string(block));
  Speculation s;
  s.num_draft_tokens = block == 0 ? 0 : block - 1;  // DFLASH without it: the drafter's block
  s.dflash2_drafter = drafter;
  if (dflash) {
    for (const char* flag :
         {"speculative-ngram-min-match-window-size", "speculative-ngram-max-match-window-size",
          "speculative-ngram-capacity"})
      if (a.has(flag))
        return make_error(std::string("--") + flag + " is an NGRAM setting; DFLASH has none");
    return s;
  }
  BEAM_ASSIGN_OR_RETURN(s.min_match, a.get_int("speculative-ngram-min-match-window-size", 1));
  BEAM_ASSIGN_OR_RETURN(s.max_match, a.get_int("speculative-ngram-max-match-window-size", 12));
  BEAM_ASSIGN_OR_RETURN(s.corpus_tokens, a.get_int("speculative-ngram-capacity", 10'000'000));
  if (s.corpus_tokens < 0 || s.corpus_tokens > kMaxCorpusTokens)
    return make_error("--speculative-ngram-capacity " + std::to_string(s.corpus_tokens) +
                      " is outside [0, " + std::to_string(kMaxCorpusTokens) + "] tokens");
  return s;
}

}  // namespace

Expected<Speculation> speculative_from_args(const Args& a) {
  const bool vllm = a.has("speculative-config");
  const bool sglang = std::any_of(std::begin(kSpeculativeFlags) + 1, std::end(kSpeculativeFlags),
                                  [&](const char* flag) { return a.has(flag); });
  if (vllm && sglang)
    return make_error(
        "--speculative-config (vLLM's) and --speculative-algorithm / --speculative-* (SGLang's) "
        "are one setting: give one form");
  if (!vllm && !sglang) return Speculation{};
  if (sglang && !a.has("speculative-algorithm"))
    return make_error(
        "--speculative-num-draft-tokens and --speculative-ngram-* need "
        "--speculative-algorithm NGRAM");
  BEAM_ASSIGN_OR_RETURN(Speculation s, vllm ? from_vllm_config(*a.get("speculative-config"))
                                                 : from_sglang_flags(a));
  if (Status st = s.validate(); !st.ok())
    return make_error((vllm ? "--speculative-config: " : "--speculative-*: ") + st.error().message);
  return s;
}

}  // namespace beam::cli
