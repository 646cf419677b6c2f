// Request parsing and prompt rendering never throw, whatever the types: every value of a rich,
// valid request of each API (the body, each member and each array element, recursively) is
// replaced in turn by values of every JSON type, and each member is removed in turn (~3,900
// variants). Each variant must parse, and for the chat APIs render with beam-nano's chat template
// (prepare_chat_prompt), or fail with a 400 (404 for an unknown model name) whose message is
// non-empty; a failure on a replaced value that names a field (param) names one under the same
// top-level field, or says that field's name in its message.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "server/anthropic/messages_request.h"
#include "server/api/chat_prompt.h"
#include "server/api/response_format.h"
#include "server/openai/chat_request.h"
#include "server/openai/completions.h"
#include "server/openai/responses_request.h"
#include "server/parsers/builtin_templates.h"

namespace beam::server {
namespace {

// What a parser says about one body: ok, or its error.
using Parse = std::function<ApiExpected<bool>(const Json&)>;

// beam-nano's text side (tokenizer, chat template, response template), served as "m".
// (A part that fails to load is left out, so the valid requests fail sweep's first check.)
const ServedModel& nano() {
  static const ServedModel model = [] {
    ServedModel m;
    m.name = "m";
    Expected<text::Tokenizer> tok = text::Tokenizer::load("models/beam-nano");
    Expected<text::ChatTemplate> tmpl = text::ChatTemplate::load("models/beam-nano");
    auto rt = load_hermes_response_template();
    if (tok.ok()) m.tokenizer.emplace(std::move(*tok));
    if (tmpl.ok()) m.chat_template.emplace(std::move(*tmpl));
    if (rt.ok()) m.response_template = *rt;
    if (tok.ok())
      m.structured_vocab = build_structured_vocab(*m.tokenizer, m.tokenizer->vocab_size());
    EXPECT_TRUE(tok.ok() && tmpl.ok() && rt.ok()) << "beam-nano's text side did not load";
    return m;
  }();
  return model;
}

// Parses with `parse_request`, then renders the prompt and builds the output constraint as the
// chat endpoints do.
template <typename Request, typename ParseRequest>
ApiExpected<bool> parse_and_render(const Json& body, ParseRequest parse_request) {
  API_ASSIGN_OR_RETURN(Request req, parse_request(body, format_caches(nano())));
  GenerationSpec spec;
  API_ASSIGN_OR_RETURN(RenderedPrompt rendered,
                       prepare_chat_prompt(nano(), req.model, req.tool_choice, &req.prompt, &spec));
  if (rendered.ids.empty()) return invalid_request("rendered to no tokens");
  API_ASSIGN_OR_RETURN(
      std::shared_ptr<const OutputConstraint> constraint,
      make_output_constraint(nano(), req.sampling.format, rendered.text, true, {}));
  (void)constraint;
  return true;
}

template <typename T>
ApiExpected<bool> as_bool(ApiExpected<T> r) {
  if (!r.ok()) return r.error();
  return true;
}

const std::vector<Json>& replacements() {
  static const std::vector<Json> values = {Json(nullptr),
                                           Json(true),
                                           Json(0),
                                           Json(-1),
                                           Json(2.5),
                                           Json(1e300),
                                           Json(""),
                                           Json("x"),
                                           Json::array(),
                                           Json::array({1}),
                                           Json::array({Json::array()}),
                                           Json::object(),
                                           Json{{"type", "text"}},
                                           Json(int64_t{1} << 40)};
  return values;
}

// Every path of `v` as JSON pointers ("" is the whole value).
void collect_paths(const Json& v, const Json::json_pointer& at,
                   std::vector<Json::json_pointer>* out) {
  out->push_back(at);
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) collect_paths(it.value(), at / it.key(), out);
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) collect_paths(v[i], at / i, out);
  }
}

// The top-level request field a JSON pointer lies under (/messages/0/content -> messages); "" for
// the whole body.
std::string top_field(const Json::json_pointer& p) {
  const std::string s = p.to_string();
  return s.empty() ? "" : s.substr(1, s.find('/', 1) - 1);
}

// Runs `parse` on `body` and checks the contract; `what` describes the variant for failures, `top`
// is the top-level field of the replaced value ("" when none was replaced).
void expect_clean(const Parse& parse, const Json& body, const std::string& what,
                  const std::string& top) {
  ApiExpected<bool> r = true;
  try {
    r = parse(body);
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": threw " << e.what();
    return;
  }
  if (r.ok()) return;
  const int status = http_status(r.error().kind);
  EXPECT_TRUE(status == 400 || status == 404) << what << ": " << status << " " << r.error().message;
  EXPECT_FALSE(r.error().message.empty()) << what;
  if (top.empty() || r.error().param.empty()) return;
  // The named field lies under the replaced value's top-level field, or (a check across fields,
  // e.g. tool_choice against tools) the message names that field.
  const std::string& param = r.error().param;
  const bool names_it =
      param.compare(0, top.size(), top) == 0 &&
      (param.size() == top.size() || param[top.size()] == '.' || param[top.size()] == '[');
  EXPECT_TRUE(names_it || r.error().message.find("'" + top + "'") != std::string::npos)
      << what << ": names '" << param << "' (" << r.error().message << ")";
}

void sweep(const Parse& parse, const Json& valid) {
  ASSERT_TRUE(parse(valid).ok()) << "the valid request must parse";
  std::vector<Json::json_pointer> paths;
  collect_paths(valid, Json::json_pointer(), &paths);
  int variants = 0;
  for (const Json::json_pointer& p : paths) {
    const std::string name = p.to_string().empty() ? "(body)" : p.to_string();
    for (const Json& value : replacements()) {
      Json body = valid;
      body[p] = value;
      expect_clean(parse, body, name + " = " + value.dump(), top_field(p));
      ++variants;
    }
    if (p.to_string().empty()) continue;
    Json body = valid;
    const Json::json_pointer parent = p.parent_pointer();
    if (body[parent].is_object()) {
      body[parent].erase(p.back());
      expect_clean(parse, body, name + " removed", "");
      ++variants;
    }
  }
  EXPECT_GT(variants, 100);
}

TEST(RequestTypeConfusion, Chat) {
  const Json valid = Json::parse(R"({
    "model": "m", "messages": [
      {"role": "developer", "content": [{"type": "text", "text": "be brief"}]},
      {"role": "user", "content": "weather?", "name": "u"},
      {"role": "assistant", "content": null, "reasoning_content": "think",
       "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
    "tools": [{"type": "function", "function": {"name": "w", "description": "d",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
    "tool_choice": {"type": "function", "function": {"name": "w"}},
    "max_completion_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 5, "min_p": 0.1, "seed": 3,
    "presence_penalty": 0.1, "frequency_penalty": 0.1, "logit_bias": {"5": 1.5},
    "stop": ["END"], "stop_token_ids": [4], "n": 2, "logprobs": true, "top_logprobs": 2,
    "stream": true, "stream_options": {"include_usage": true},
    "return_tokens_as_token_ids": true, "truncate_prompt_tokens": 64,
    "chat_template_kwargs": {"enable_thinking": false}, "reasoning_effort": "low",
    "response_format": {"type": "json_schema", "json_schema": {"name": "p", "strict": true, "schema": {
      "type": "object", "required": ["a"], "$defs": {"n": {"type": "null"}},
      "properties": {"a": {"type": "array", "items": {"enum": [1, "x"]}, "maxItems": 2},
                     "b": {"anyOf": [{"type": "string", "maxLength": 3}, {"$ref": "#/$defs/n"}]}}}}}})");
  sweep([](const Json& b) { return parse_and_render<ChatRequest>(b, parse_chat_request); }, valid);
}

TEST(RequestTypeConfusion, Completions) {
  const Json valid =
      Json::parse(R"({"model": "m", "prompt": [1, 2, 3], "max_tokens": 5, "temperature": 0.5,
    "stop": ["x"], "n": 2, "logprobs": 2, "seed": 1, "stream": true, "stream_options": {"include_usage": true},
    "return_tokens_as_token_ids": true, "truncate_prompt_tokens": 2,
    "response_format": {"type": "json_object"}})");
  sweep([](const Json& b) { return as_bool(parse_completion_request(b, {})); }, valid);
}

// GBNF grammars: vLLM's guided_grammar on completions, structured_outputs.grammar on chat.
TEST(RequestTypeConfusion, Grammars) {
  const Json completions = Json::parse(R"({"model": "m", "prompt": "Answer:", "max_tokens": 5,
    "temperature": 0.5, "n": 2, "seed": 1, "stop": ["x"],
    "guided_grammar": "root ::= (\"yes\" | \"no\") \" \" [0-9]{1,3}"})");
  sweep([](const Json& b) { return as_bool(parse_completion_request(b, {})); }, completions);
  const Json chat = Json::parse(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}],
    "max_tokens": 5, "chat_template_kwargs": {"enable_thinking": false},
    "structured_outputs": {"grammar": "root ::= \"(\" root \")\" | \"x\""}})");
  sweep([](const Json& b) { return parse_and_render<ChatRequest>(b, parse_chat_request); }, chat);
}

// Scoring: a prompt list, echo, vLLM's prompt_logprobs and max_tokens 0.
TEST(RequestTypeConfusion, CompletionsScoring) {
  const Json valid = Json::parse(R"({"model": "m", "prompt": [[1, 2, 3], "two words"],
    "max_tokens": 0, "temperature": 0, "logprobs": 1, "echo": true, "prompt_logprobs": 2})");
  sweep([](const Json& b) { return as_bool(parse_completion_request(b, {})); }, valid);
}

TEST(RequestTypeConfusion, ChatPromptLogprobs) {
  const Json valid = Json::parse(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}],
    "max_tokens": 0, "prompt_logprobs": 3, "logprobs": true, "top_logprobs": 1})");
  sweep([](const Json& b) { return parse_and_render<ChatRequest>(b, parse_chat_request); }, valid);
}

TEST(RequestTypeConfusion, Responses) {
  const Json valid = Json::parse(R"({
    "model": "m", "instructions": "be brief", "max_output_tokens": 9, "temperature": 0.5, "top_p": 0.9,
    "input": [{"role": "user", "content": [{"type": "input_text", "text": "weather?"}]},
              {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "hmm"}]},
              {"type": "function_call", "call_id": "c1", "name": "w", "arguments": "{\"city\": \"Paris\"}"},
              {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
              {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}],
    "tools": [{"type": "function", "name": "w", "parameters": {"type": "object"}}],
    "tool_choice": "auto", "stream": true, "reasoning": {"effort": "high"},
    "text": {"format": {"type": "json_schema", "name": "p", "schema": {"type": ["integer", "null"]}}}})");
  sweep(
      [](const Json& b) { return parse_and_render<ResponsesRequest>(b, parse_responses_request); },
      valid);
}

TEST(RequestTypeConfusion, AnthropicMessages) {
  const Json valid = Json::parse(R"({
    "model": "m", "max_tokens": 10, "system": [{"type": "text", "text": "sys"}],
    "messages": [{"role": "user", "content": "weather?"},
                 {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": ""},
                                                   {"type": "text", "text": "checking"},
                                                   {"type": "tool_use", "id": "tu1", "name": "w", "input": {"city": "Paris"}}]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1",
                                               "content": [{"type": "text", "text": "sunny"}]}]}],
    "tools": [{"name": "w", "description": "d", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "tool", "name": "w"}, "stop_sequences": ["X"], "top_k": 3, "top_p": 0.9,
    "temperature": 0.5, "stream": true, "metadata": {"user_id": "u"},
    "thinking": {"type": "enabled", "budget_tokens": 100}})");
  for (const bool count_only : {false, true}) {
    sweep(
        [count_only](const Json& b) {
          return parse_and_render<MessagesRequest>(
              b, [count_only](const Json& j, const FormatCaches& c) {
                return parse_messages_request(j, count_only, c);
              });
        },
        valid);
  }
}

}  // namespace
}  // namespace beam::server
