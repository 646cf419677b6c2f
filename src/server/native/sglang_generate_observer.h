// SGLang's /generate response: per sample {"text", "output_ids", "meta_info"} (one object, or a
// list for a batch or n > 1), logprobs as [logprob, token id, text] triples, finish reasons as
// objects; streamed as cumulative `data:` events ending with `data: [DONE]`.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/api/exchange.h"
#include "server/api/served_model.h"
#include "server/generation/generation_job.h"
#include "server/native/sglang_generate_request.h"

namespace beam::server {

// [logprob | null, token id, text | null]; `text` null: no text.
Json sglang_logprob_triple(std::optional<float> logprob, int32_t id, const text::Tokenizer* text);

// meta_info.output_token_logprobs: one triple per output token that carries logprobs.
Json sglang_output_token_logprobs(const std::vector<OutputToken>& tokens,
                                  const text::Tokenizer* text);
// meta_info.output_top_logprobs: per output token, its `num_top` most likely as triples.
Json sglang_output_top_logprobs(const std::vector<OutputToken>& tokens, int64_t num_top,
                                const text::Tokenizer* text);
// meta_info.input_token_logprobs: prompt positions [start, prompt length), the logprob null at
// `start` (SGLang pads it), entries[p - start - 1] at p > start.
Json sglang_input_token_logprobs(const std::vector<int32_t>& prompt, int64_t start,
                                 const std::vector<TokenLogprobs>& entries,
                                 const text::Tokenizer* text);
// meta_info.input_top_logprobs: the same positions, null at `start`, else the top `num_top`.
Json sglang_input_top_logprobs(const std::vector<int32_t>& prompt, int64_t start,
                               const std::vector<TokenLogprobs>& entries, int64_t num_top,
                               const text::Tokenizer* text);

// {"type": "length", "length": tokens} | {"type": "stop", "matched": id | stop string | stop
// regex pattern | null} |
// {"type": "abort", "message": ...}.
Json sglang_finish_reason(const SiblingResult& result, const std::vector<std::string>& stops,
                          const std::vector<StopRegex>& regexes);

// SGLang's request timing fields (its meta_info with --enable-metrics, which verl logs), in
// seconds; the *_ts / *_time instants as Unix times. Engine times that never came (a request
// ended before its first step) are absent.
struct SglangTimings {
  double e2e_latency = 0;                        // received → finished
  double request_received_ts = 0;                // the server received it
  double request_finished_ts = 0;                // it finished
  std::optional<double> queue_time;              // the engine took it in → its first step
  std::optional<double> forward_entry_time;      // its first step began
  std::optional<double> prefill_launch_latency;  // its first step → its first token sampled
  std::optional<double> prefill_finished_time;   // its first token was sampled
  std::optional<double> inference_time;          // its first step → finished
  std::optional<double> decode_throughput;       // tokens / (first token sampled → finished)
};

// The timings of a sample received at `received` and finished at `finished` (steady clock),
// with the engine's times and `completion_tokens` tokens; `now_unix` / `now`: one instant on
// both clocks, to date the steady ones.
SglangTimings sglang_timings(std::chrono::steady_clock::time_point received,
                             std::chrono::steady_clock::time_point finished,
                             const SequenceTimes& engine, int64_t completion_tokens,
                             std::chrono::system_clock::time_point now_unix,
                             std::chrono::steady_clock::time_point now);

// One sample's output so far.
struct SglangSample {
  std::string id;
  std::string text;
  std::vector<OutputToken> tokens;
  std::vector<TokenLogprobs> prompt_logprobs;  // positions logprob_start + 1 ...
  std::optional<SiblingResult> result;         // set when the sample is done
  int64_t cached_tokens = 0;
  int64_t retractions = 0;  // the sibling's so far (the result's once done)
  std::optional<SglangTimings> timings;  // set when the sample is done
};

struct SglangOutputOptions {
  bool with_text = true;                          // the model has a tokenizer
  const text::Tokenizer* logprob_text = nullptr;  // return_text_in_logprobs: texts in triples
  std::optional<int64_t> index;  // a batch's streamed events carry the sample's index
  std::string weight_version = "default";  // the weights served as it is written (ServedWeights)
};

// {"text"?, "output_ids", "meta_info": {"id", "finish_reason", "prompt_tokens", "weight_version",
// "total_retractions", logprobs...,
// "completion_tokens", "cached_tokens", "routed_experts"?, "e2e_latency"? and the other
// SglangTimings once done}} ("index" first when set).
Json sglang_output_json(const SglangSample& sample, const SglangItem& item,
                        const SglangOutputOptions& options);

class SglangGenerateObserver : public GenerationObserver {
 public:
  // `ids`: meta_info.id of each sample (item i's sample j at i * n + j). `tokenizer` may be null;
  // `weights` (may be null: "default") gives meta_info.weight_version as each output is written
  // (a request paused through a weight update reports the new version, as SGLang does).
  SglangGenerateObserver(std::shared_ptr<Exchange> exchange, SglangGenerateRequest request,
                         std::vector<std::string> ids, const text::Tokenizer* tokenizer,
                         std::shared_ptr<const ServedWeights> weights);

  void on_rejected(const ApiError& error) override;
  void on_delta(int32_t sibling, SiblingDelta&& delta) override;
  void on_sibling_done(int32_t sibling, SiblingResult&& result) override;
  void on_job_usage(int32_t first_sibling, const GenerationUsage& usage) override;
  void on_complete(const GenerationUsage& usage) override;

 private:
  Json output(size_t sample) const;
  void send(const Json& event);

  std::shared_ptr<Exchange> exchange_;
  SglangGenerateRequest request_;
  const text::Tokenizer* tokenizer_;
  std::shared_ptr<const ServedWeights> weights_;
  std::vector<SglangSample> samples_;
  std::vector<bool> job_done_;  // per item: its usage arrived (streams then send its finals)
  std::optional<std::string> error_;
};

}  // namespace beam::server
