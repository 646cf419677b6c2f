// SGLang's /generate format: telling it from the native body, parsing every supported field (with
// SGLang's defaults), the 400s for what is not supported, and the response shapes (logprob
// triples, finish_reason objects, batch lists, streamed events' index).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/native/sglang_generate_observer.h"
#include "server/native/sglang_generate_request.h"
#include "tiny_chat_tokenizer.h"

namespace beam::server {
namespace {

SglangModelInfo model(bool with_tokenizer = true) {
  SglangModelInfo m;
  m.tokenizer = with_tokenizer ? &tiny_chat_tokenizer() : nullptr;
  m.vocab_size = 512;
  m.max_context_tokens = 100;
  return m;
}

SglangGenerateRequest parse_ok(const std::string& body, const SglangModelInfo& m = model()) {
  ApiExpected<SglangGenerateRequest> r = parse_sglang_generate_request(Json::parse(body), m);
  EXPECT_TRUE(r.ok()) << body << ": " << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : SglangGenerateRequest{};
}

ApiError parse_error(const std::string& body, const SglangModelInfo& m = model()) {
  ApiExpected<SglangGenerateRequest> r = parse_sglang_generate_request(Json::parse(body), m);
  EXPECT_FALSE(r.ok()) << body;
  if (r.ok()) return ApiError{};
  EXPECT_EQ(http_status(r.error().kind), 400);
  return r.error();
}

TEST(SglangGenerate, DetectsTheFormat) {
  EXPECT_TRUE(is_sglang_generate_body(Json::parse(R"({"input_ids": [1], "sampling_params": {}})")));
  EXPECT_TRUE(is_sglang_generate_body(Json::parse(R"({"text": "hi"})")));
  EXPECT_TRUE(
      is_sglang_generate_body(Json::parse(R"({"input_ids": [1], "return_logprob": false})")));
  EXPECT_TRUE(is_sglang_generate_body(Json::parse(R"({"input_ids": [1], "top_logprobs_num": 1})")));
  EXPECT_TRUE(
      is_sglang_generate_body(Json::parse(R"({"input_ids": [1], "return_text_in_logprobs": 1})")));
  // The native body, with its SGLang-named fields, stays native.
  EXPECT_FALSE(is_sglang_generate_body(Json::parse(
      R"({"input_ids": [1], "max_tokens": 2, "logprob_start_len": 0,
          "return_routed_experts": true})")));
  EXPECT_FALSE(is_sglang_generate_body(Json::parse("[1]")));
}

TEST(SglangGenerate, DefaultsAreSglangs) {
  SglangModelInfo big = model();
  big.max_context_tokens = 4096;
  SglangGenerateRequest r = parse_ok(R"({"input_ids": [5, 6, 7]})", big);
  ASSERT_EQ(r.items.size(), 1u);
  const SglangItem& it = r.items[0];
  EXPECT_EQ(it.prompt_ids, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(it.sampling.params.max_tokens, kSglangDefaultMaxNewTokens);
  EXPECT_EQ(it.sampling.params.temperature, 1.0);
  EXPECT_EQ(it.sampling.params.n, 1);
  EXPECT_TRUE(it.sampling.skip_special_tokens);
  EXPECT_FALSE(it.sampling.include_stop_str_in_output);
  EXPECT_FALSE(it.return_logprob);
  EXPECT_FALSE(it.rid.has_value());
  EXPECT_FALSE(r.batch);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.return_text_in_logprobs);
  // The default is capped by what the context leaves too (100 - 3).
  EXPECT_EQ(parse_ok(R"({"input_ids": [5, 6, 7]})").items[0].sampling.params.max_tokens, 97);
}

TEST(SglangGenerate, ReadsEverySamplingParam) {
  SglangGenerateRequest r = parse_ok(R"({"input_ids": [5, 6], "rid": "req-1", "stream": true,
      "return_text_in_logprobs": true, "priority": 3, "model": "m",
      "sampling_params": {"max_new_tokens": 9, "temperature": 0.5, "top_p": 0.9, "top_k": 7,
        "min_p": 0.1, "frequency_penalty": 0.2, "presence_penalty": 0.3,
        "repetition_penalty": 1.1, "min_new_tokens": 2, "stop": "END",
        "stop_token_ids": [4, 9], "ignore_eos": true, "skip_special_tokens": false,
        "no_stop_trim": true, "logit_bias": {"3": -1.5}, "sampling_seed": 42,
        "stream_interval": 4, "spaces_between_special_tokens": false}})");
  ASSERT_EQ(r.items.size(), 1u);
  const SglangItem& it = r.items[0];
  const SamplingParams& p = it.sampling.params;
  EXPECT_EQ(p.max_tokens, 9);
  EXPECT_EQ(p.temperature, 0.5);
  EXPECT_EQ(p.top_p, 0.9);
  EXPECT_EQ(p.top_k, 7);
  EXPECT_EQ(p.min_p, 0.1);
  EXPECT_EQ(p.frequency_penalty, 0.2);
  EXPECT_EQ(p.presence_penalty, 0.3);
  EXPECT_EQ(p.repetition_penalty, 1.1);
  EXPECT_EQ(p.min_tokens, 2);
  EXPECT_EQ(it.sampling.stop_strings, (std::vector<std::string>{"END"}));
  EXPECT_EQ(p.stop_token_ids, (std::vector<int32_t>{4, 9}));
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_FALSE(it.sampling.skip_special_tokens);
  EXPECT_TRUE(it.sampling.include_stop_str_in_output);  // no_stop_trim
  EXPECT_EQ(p.logit_bias.at(3), -1.5);
  EXPECT_EQ(p.seed, 42u);
  EXPECT_EQ(it.sampling.priority, 3);
  EXPECT_EQ(it.rid, "req-1");
  EXPECT_EQ(r.model, "m");
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.return_text_in_logprobs);
  // `seed` is accepted as beamserve's alias; a stop list and a regex constraint.
  SglangGenerateRequest s = parse_ok(R"({"input_ids": [5],
      "sampling_params": {"seed": 7, "stop": ["a", "b"], "regex": "[ab]+"}})");
  EXPECT_EQ(s.items[0].sampling.params.seed, 7u);
  EXPECT_EQ(s.items[0].sampling.stop_strings.size(), 2u);
  EXPECT_EQ(s.items[0].sampling.format.kind, ResponseFormat::Kind::kRegex);
  SglangGenerateRequest j = parse_ok(
      R"({"input_ids": [5], "sampling_params": {"json_schema": "{\"type\": \"object\"}"}})");
  EXPECT_EQ(j.items[0].sampling.format.kind, ResponseFormat::Kind::kJsonSchema);
  // SGLang's ebnf: a GBNF grammar the whole output matches, named by its SGLang path.
  SglangGenerateRequest g = parse_ok(R"({"input_ids": [5],
      "sampling_params": {"ebnf": "root ::= (\"yes\" | \"no\") \" \" [0-9]{1,3}"}})");
  EXPECT_EQ(g.items[0].sampling.format.kind, ResponseFormat::Kind::kGrammar);
  EXPECT_NE(g.items[0].sampling.format.ebnf, nullptr);
  EXPECT_EQ(g.items[0].sampling.format.path, "sampling_params.ebnf");
  // SGLang's structural_tag: the tag's JSON text (the legacy structures and triggers here).
  const std::string tag =
      R"({"structures": [{"begin": "<f>", "schema": {}, "end": "</f>"}], "triggers": ["<f>"]})";
  SglangGenerateRequest t =
      parse_ok(Json{{"input_ids", {5}}, {"sampling_params", {{"structural_tag", tag}}}}.dump());
  EXPECT_EQ(t.items[0].sampling.format.kind, ResponseFormat::Kind::kStructuralTag);
  EXPECT_NE(t.items[0].sampling.format.ebnf, nullptr);
  EXPECT_EQ(t.items[0].sampling.format.path, "sampling_params.structural_tag");
}

TEST(SglangGenerate, MaxNewTokensNullMeansTheContextAndLargeValuesAreCapped) {
  // null: up to the context (the engine's default); 500 > 100 - 3: capped, as SGLang does.
  EXPECT_FALSE(parse_ok(R"({"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": null}})")
                   .items[0]
                   .sampling.params.max_tokens.has_value());
  EXPECT_EQ(parse_ok(R"({"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 500}})")
                .items[0]
                .sampling.params.max_tokens,
            97);
  EXPECT_EQ(parse_ok(R"({"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 0}})")
                .items[0]
                .sampling.params.max_tokens,
            0);
}

TEST(SglangGenerate, ModelDefaultsFillAbsentSamplingParams) {
  SglangModelInfo m = model();
  m.sampling_defaults = Json{{"temperature", 0.25}, {"top_k", 20}};
  SglangGenerateRequest r =
      parse_ok(R"({"input_ids": [1], "sampling_params": {"temperature": 0.7}})", m);
  EXPECT_EQ(r.items[0].sampling.params.temperature, 0.7);
  EXPECT_EQ(r.items[0].sampling.params.top_k, 20);
}

TEST(SglangGenerate, BatchesTextAndPerItemLists) {
  SglangGenerateRequest r = parse_ok(R"({"input_ids": [[1, 2], [3, 4, 5]], "rid": "b",
      "return_logprob": [true, false], "logprob_start_len": [0, 1], "top_logprobs_num": 2,
      "sampling_params": [{"max_new_tokens": 3}, {"max_new_tokens": 4}]})");
  ASSERT_EQ(r.items.size(), 2u);
  EXPECT_TRUE(r.batch);
  EXPECT_EQ(r.items[1].prompt_ids, (std::vector<int32_t>{3, 4, 5}));
  EXPECT_EQ(r.items[0].sampling.params.max_tokens, 3);
  EXPECT_EQ(r.items[1].sampling.params.max_tokens, 4);
  EXPECT_TRUE(r.items[0].return_logprob);
  EXPECT_EQ(r.items[0].logprob_start, 0);
  EXPECT_EQ(r.items[0].top_logprobs_num, 2);
  EXPECT_FALSE(r.items[1].return_logprob);
  EXPECT_EQ(r.items[0].rid, "b_0");  // a string rid over a batch: rid_i
  EXPECT_EQ(r.items[1].rid, "b_1");
  // logprob_start_len -1 (the default): only the last prompt position.
  SglangGenerateRequest d = parse_ok(R"({"input_ids": [1, 2, 3], "return_logprob": true})");
  EXPECT_EQ(d.items[0].logprob_start, 2);
  // Text is tokenized; a list is a batch; n > 1 makes a single prompt's answer a list too.
  SglangGenerateRequest t = parse_ok(R"({"text": ["Hello", "Hello"], "rid": ["x", "y"]})");
  ASSERT_EQ(t.items.size(), 2u);
  EXPECT_EQ(t.items[0].prompt_ids, tiny_chat_tokenizer().encode("Hello", true, true).value());
  EXPECT_EQ(t.items[1].rid, "y");
  SglangGenerateRequest n =
      parse_ok(R"({"text": "Hello", "rid": "z", "sampling_params": {"n": 2}})");
  EXPECT_TRUE(n.batch);
  EXPECT_EQ(n.n, 2);
  EXPECT_FALSE(n.items[0].rid.has_value());  // SGLang gives each sample a new id
}

TEST(SglangGenerate, ReadsEachItemsLoraPath) {
  // An adapter by name per item (the served model resolves it); a batch may list one each.
  EXPECT_EQ(parse_ok(R"({"input_ids": [1], "lora_path": "adapter"})").items[0].lora_path,
            "adapter");
  const SglangGenerateRequest batch =
      parse_ok(R"({"input_ids": [[1], [2]], "lora_path": ["a", null]})");
  EXPECT_EQ(batch.items[0].lora_path, "a");
  EXPECT_EQ(batch.items[1].lora_path, "");
  EXPECT_EQ(parse_error(R"({"input_ids": [1], "lora_path": 3})").param, "lora_path");
  EXPECT_EQ(parse_error(R"({"input_ids": [[1], [2]], "lora_path": ["a"]})").param, "lora_path");
}

TEST(SglangGenerate, RefusesWhatItCannotHonour) {
  EXPECT_EQ(parse_error(R"({"input_ids": [1], "image_data": "x.png"})").param, "image_data");
  EXPECT_EQ(parse_error(R"({"input_ids": [1], "custom_logit_processor": "p"})").param,
            "custom_logit_processor");
  // return_hidden_states is served (the server flag is checked later); malformed is a 400.
  EXPECT_TRUE(parse_ok(R"({"input_ids": [1], "return_hidden_states": true})")
                  .items[0]
                  .sampling.return_hidden_states);
  EXPECT_EQ(parse_error(R"({"input_ids": [1], "return_hidden_states": 3})").param,
            "return_hidden_states");
  EXPECT_EQ(parse_error(R"({"input_ids": [1], "return_prompt_token_ids": true})").param,
            "return_prompt_token_ids");
  // token_ids_logprob is served (with return_logprob); malformed lists are 400s naming it.
  EXPECT_EQ(parse_error(R"({"input_ids": [1], "token_ids_logprob": 3})").param,
            "token_ids_logprob");
  EXPECT_EQ(parse_error(R"({"input_ids": [[1], [2]], "token_ids_logprob": [[3]]})").param,
            "token_ids_logprob");
  EXPECT_EQ(parse_error(R"({"input_ids": [1], "return_entropy": "yes"})").param, "return_entropy");
  EXPECT_EQ(parse_error(R"({"input_ids": [1], "input_embeds": [[0.5]]})").param, "input_embeds");
  // Unset (null / false) and result-neutral fields pass.
  parse_ok(R"({"input_ids": [1], "lora_path": null, "return_hidden_states": false,
               "log_metrics": true, "custom_labels": {"a": "b"}, "session_id": "s"})");
  EXPECT_EQ(parse_error(R"({"input_ids": [1], "sampling_params": {"structural_tag": "{}"}})").param,
            "sampling_params.structural_tag");  // a tag without a format
  EXPECT_EQ(parse_error(R"({"input_ids": [1], "sampling_params": {"stop_regex": "(a"}})").param,
            "sampling_params.stop_regex");
  EXPECT_EQ(
      parse_error(R"({"input_ids": [1], "sampling_params": {"stop_regex": ["b", "a?"]}})").param,
      "sampling_params.stop_regex");  // matches the empty text
  EXPECT_EQ(parse_error(R"({"input_ids": [1], "cache_salt": ""})").param, "cache_salt");
  // stop_regex and the cache isolation keys are honoured (per prompt for the keys).
  SglangGenerateRequest r = parse_ok(R"({"input_ids": [[1], [2]], "cache_salt": ["s", "t"],
      "extra_key": "k", "sampling_params": {"stop_regex": ["a+b", "[0-9]"]}})");
  ASSERT_EQ(r.items.size(), 2u);
  ASSERT_EQ(r.items[0].sampling.stop_regexes.size(), 2u);
  EXPECT_EQ(r.items[0].sampling.stop_regexes[1].pattern, "[0-9]");
  EXPECT_TRUE(r.items[0].sampling.stop_regexes[0].dfa->matches("aab"));
  EXPECT_NE(r.items[0].sampling.cache_salt, r.items[1].sampling.cache_salt);
  EXPECT_EQ(parse_ok(R"({"input_ids": [1], "cache_salt": "s"})").items[0].sampling.cache_salt, "s");
  EXPECT_EQ(
      parse_error(R"({"input_ids": [1], "sampling_params": {"custom_params": {"a": 1}}})").param,
      "sampling_params.custom_params");
  EXPECT_EQ(parse_error(R"({"input_ids": [1], "sampling_params": {"max_tokens": 3}})").param,
            "sampling_params.max_tokens");
}

TEST(SglangGenerate, BadValuesAre400sNamingTheField) {
  EXPECT_EQ(parse_error(R"({"text": "hi"})", model(false)).param, "text");
  EXPECT_EQ(parse_error(R"({"input_ids": [1], "text": "hi"})").message,
            "give either 'text' or 'input_ids', not both");
  EXPECT_EQ(parse_error(R"({"sampling_params": {}})").param, "text");
  EXPECT_EQ(parse_error(R"({"input_ids": []})").param, "input_ids");
  EXPECT_EQ(parse_error(R"({"input_ids": [600]})").param, "input_ids");
  EXPECT_EQ(parse_error(R"({"input_ids": [[1], []]})").param, "input_ids");
  EXPECT_EQ(parse_error(R"({"text": 5})").param, "text");
  EXPECT_EQ(parse_error(R"({"input_ids": [1], "sampling_params": 3})").param, "sampling_params");
  EXPECT_EQ(parse_error(R"({"input_ids": [1], "sampling_params": {"temperature": "hot"}})").param,
            "sampling_params.temperature");
  EXPECT_EQ(parse_error(R"({"input_ids": [1], "sampling_params": {"max_new_tokens": -1}})").param,
            "sampling_params.max_new_tokens");
  EXPECT_EQ(parse_error(R"({"input_ids": [1], "sampling_params": {"stop": 4}})").param,
            "sampling_params.stop");
  EXPECT_EQ(
      parse_error(R"({"input_ids": [1], "sampling_params": {"stop": "x"}})", model(false)).param,
      "sampling_params.stop");
  EXPECT_EQ(parse_error(R"j({"input_ids": [1], "sampling_params": {"regex": "(?=a)"}})j").param,
            "sampling_params.regex");
  EXPECT_EQ(parse_error(R"({"input_ids": [1], "sampling_params": {"ebnf": "root ::= ("}})").param,
            "sampling_params.ebnf");
  EXPECT_EQ(parse_error(R"({"input_ids": [1], "sampling_params": {"ebnf": 3}})").param,
            "sampling_params.ebnf");
  EXPECT_EQ(parse_error(R"({"input_ids": [1], "sampling_params": {"regex": "a",
                            "ebnf": "root ::= \"a\""}})")
                .param,
            "sampling_params.ebnf");
  EXPECT_EQ(
      parse_error(R"({"input_ids": [1, 2], "return_logprob": true, "logprob_start_len": 2})").param,
      "logprob_start_len");
  EXPECT_EQ(parse_error(R"({"input_ids": [1, 2], "return_logprob": true, "logprob_start_len": -3})")
                .param,
            "logprob_start_len");
  EXPECT_EQ(
      parse_error(R"({"input_ids": [1], "return_logprob": true, "top_logprobs_num": 21})").param,
      "top_logprobs_num");
  EXPECT_EQ(parse_error(R"({"input_ids": [1], "return_logprob": "yes"})").param, "return_logprob");
  EXPECT_EQ(parse_error(R"({"input_ids": [[1], [2]], "return_logprob": [true]})").param,
            "return_logprob");
  EXPECT_EQ(parse_error(R"({"input_ids": [[1], [2]], "rid": ["a"]})").param, "rid");
  EXPECT_EQ(parse_error(R"({"input_ids": [[1], [2]], "rid": ["a", "a"]})").param, "rid");
  EXPECT_EQ(parse_error(R"({"input_ids": [[1], [2]],
                            "sampling_params": [{"n": 1}, {"n": 2}]})")
                .param,
            "sampling_params.n");
  EXPECT_EQ(parse_error(R"({"input_ids": [1], "stream": "yes"})").param, "stream");
}

TokenLogprobs lp(int32_t id, float logprob, std::vector<TokenLogprob> top) {
  return TokenLogprobs{TokenLogprob{id, logprob}, 1, std::move(top), {}};
}

TEST(SglangGenerateJson, LogprobTriplesAndTheirNulls) {
  const std::vector<int32_t> prompt = {511, 40, 41};
  // Engine entries for positions 1 and 2 (logprob_start 0 → the engine scores from 1).
  const std::vector<TokenLogprobs> entries = {lp(40, -2.0f, {{7, -0.5f}, {40, -2.0f}}),
                                              lp(41, -0.25f, {{41, -0.25f}, {9, -3.0f}})};
  EXPECT_EQ(sglang_input_token_logprobs(prompt, 0, entries, nullptr),
            Json::parse("[[null, 511, null], [-2.0, 40, null], [-0.25, 41, null]]"));
  EXPECT_EQ(sglang_input_top_logprobs(prompt, 0, entries, 1, nullptr),
            Json::parse("[null, [[-0.5, 7, null]], [[-0.25, 41, null]]]"));
  // From position 1: its own logprob is null too (SGLang pads the first entry).
  EXPECT_EQ(sglang_input_token_logprobs(prompt, 1, {entries[1]}, nullptr),
            Json::parse("[[null, 40, null], [-0.25, 41, null]]"));
  // With text: the token's text.
  EXPECT_EQ(sglang_logprob_triple(-1.0f, 511, &tiny_chat_tokenizer()),
            Json::parse(R"([-1.0, 511, "Hello"])"));
  std::vector<OutputToken> out = {{41, lp(41, -0.5f, {{41, -0.5f}, {3, -1.0f}}), std::nullopt, {}},
                                  {42, std::nullopt, std::nullopt, {}}};
  EXPECT_EQ(sglang_output_token_logprobs(out, nullptr), Json::parse("[[-0.5, 41, null]]"));
  EXPECT_EQ(sglang_output_top_logprobs(out, 2, nullptr),
            Json::parse("[[[-0.5, 41, null], [-1.0, 3, null]]]"));
}

TEST(SglangGenerateJson, FinishReasonObjects) {
  SiblingResult r;
  r.reason = FinishReason::kLength;
  r.completion_tokens = 8;
  EXPECT_EQ(sglang_finish_reason(r, {}, {}), Json::parse(R"({"type": "length", "length": 8})"));
  r.reason = FinishReason::kStop;
  r.stop_token = 2;
  EXPECT_EQ(sglang_finish_reason(r, {}, {}), Json::parse(R"({"type": "stop", "matched": 2})"));
  r.stop_string = 1;
  EXPECT_EQ(sglang_finish_reason(r, {"a", "END"}, {}),
            Json::parse(R"({"type": "stop", "matched": "END"})"));
  r.stop_string = 2;  // past the strings: a regex, named by its pattern
  const std::vector<StopRegex> regexes = {{"[0-9]+!", ByteDfa::from_full_match("[0-9]+!").value()}};
  EXPECT_EQ(sglang_finish_reason(r, {"a", "END"}, regexes),
            Json::parse(R"({"type": "stop", "matched": "[0-9]+!"})"));
  r.reason = FinishReason::kError;
  r.error = "boom";
  EXPECT_EQ(sglang_finish_reason(r, {}, {}),
            Json::parse(R"({"type": "abort", "message": "boom"})"));
}

TEST(SglangGenerateJson, SampleObjectHasSglangsKeysInOrder) {
  SglangItem item;
  item.prompt_ids = {511, 40};
  item.return_logprob = true;
  item.logprob_start = 1;
  item.top_logprobs_num = 1;
  SglangSample s;
  s.id = "r1";
  s.text = "partial";
  s.tokens = {{41, lp(41, -0.5f, {{41, -0.5f}}), std::nullopt, {}}};
  s.cached_tokens = 0;
  SglangOutputOptions o;
  // Streamed, unfinished: finish_reason null, no e2e_latency.
  EXPECT_EQ(sglang_output_json(s, item, o), Json::parse(R"({"text": "partial", "output_ids": [41],
      "meta_info": {"id": "r1", "finish_reason": null, "prompt_tokens": 2,
        "weight_version": "default", "total_retractions": 0, "input_token_logprobs": [[null, 40, null]], "output_token_logprobs": [[-0.5, 41, null]],
        "input_top_logprobs": [null], "output_top_logprobs": [[[-0.5, 41, null]]],
        "completion_tokens": 1, "cached_tokens": 0, "spec_verify_ct": 0}})"));
  // Finished: the result's tokens and text, the finish reason, the latency; "index" in batches;
  // no "text" without a tokenizer.
  SiblingResult r;
  r.reason = FinishReason::kStop;
  r.stop_token = 0;
  r.tokens = {{41, lp(41, -0.5f, {{41, -0.5f}}), std::nullopt, {}},
              {0, lp(0, -0.1f, {{0, -0.1f}}), std::nullopt, {}}};
  r.completion_tokens = 2;
  r.retractions = 1;
  r.spec_verifications = 5;
  r.parsed.content = "done";
  r.routed_experts = std::vector<int32_t>{1};
  s.result = r;
  s.cached_tokens = 16;
  SglangTimings t;
  t.e2e_latency = 0.5;
  t.request_received_ts = 1000.0;
  t.request_finished_ts = 1000.5;
  t.queue_time = 0.125;
  t.forward_entry_time = 1000.25;
  t.inference_time = 0.25;
  s.timings = t;  // the request ended before its first token: no prefill or decode fields
  item.return_logprob = false;
  o.index = 3;
  o.with_text = false;
  o.weight_version = "step-7";
  const Json j = sglang_output_json(s, item, o);
  EXPECT_EQ(j, Json::parse(R"({"index": 3, "output_ids": [41, 0],
      "meta_info": {"id": "r1", "finish_reason": {"type": "stop", "matched": 0},
        "prompt_tokens": 2, "weight_version": "step-7", "total_retractions": 1,
        "completion_tokens": 2, "cached_tokens": 16, "spec_verify_ct": 5,
        "routed_experts": "AQAAAA==", "e2e_latency": 0.5, "request_received_ts": 1000.0,
        "request_finished_ts": 1000.5, "queue_time": 0.125, "forward_entry_time": 1000.25,
        "inference_time": 0.25}})"));
}

// The timing fields from the server's and the engine's instants: durations between them, the
// instants as Unix times, the decode rate past the first token; engine times that never came
// are absent.
TEST(SglangGenerateJson, TimingsFromTheEnginesInstants) {
  using std::chrono::milliseconds;
  const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  const auto unix0 = std::chrono::system_clock::time_point{} + std::chrono::seconds(1'700'000'000);
  SequenceTimes e;
  e.queued = t0 + milliseconds(10);
  e.scheduled = t0 + milliseconds(30);
  e.prefilled = t0 + milliseconds(80);
  const auto finished = t0 + milliseconds(580);
  const SglangTimings t = sglang_timings(t0, finished, e, 11, unix0, t0);
  EXPECT_DOUBLE_EQ(t.e2e_latency, 0.58);
  EXPECT_DOUBLE_EQ(t.request_received_ts, 1'700'000'000.0);
  EXPECT_DOUBLE_EQ(t.request_finished_ts, 1'700'000'000.58);
  EXPECT_DOUBLE_EQ(t.queue_time.value(), 0.02);
  EXPECT_DOUBLE_EQ(t.forward_entry_time.value(), 1'700'000'000.03);
  EXPECT_DOUBLE_EQ(t.prefill_launch_latency.value(), 0.05);
  EXPECT_DOUBLE_EQ(t.prefill_finished_time.value(), 1'700'000'000.08);
  EXPECT_DOUBLE_EQ(t.inference_time.value(), 0.55);
  EXPECT_DOUBLE_EQ(t.decode_throughput.value(), 22.0);  // 11 tokens in 0.5 s
  // Cancelled while waiting: the engine never ran it.
  SequenceTimes waiting;
  waiting.queued = e.queued;
  const SglangTimings w = sglang_timings(t0, finished, waiting, 0, unix0, t0);
  EXPECT_FALSE(w.queue_time || w.forward_entry_time || w.prefill_launch_latency ||
               w.prefill_finished_time || w.inference_time || w.decode_throughput);
}

}  // namespace
}  // namespace beam::server
