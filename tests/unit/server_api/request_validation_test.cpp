// Request parsing: wrong types, missing fields and bad values become 400s that name the field;
// well-formed requests of each API map to the right conversation, tools and sampling.
#include <gtest/gtest.h>

#include "runtime/structured/json_matcher.h"
#include "server/anthropic/messages_request.h"
#include "server/api/sampling_fields.h"
#include "server/openai/chat_request.h"
#include "server/openai/completions.h"
#include "server/openai/responses_request.h"

namespace beam::server {
namespace {

Json parse(const std::string& text) { return Json::parse(text); }

ApiError chat_error(const std::string& body) {
  ApiExpected<ChatRequest> r = parse_chat_request(parse(body), {});
  EXPECT_FALSE(r.ok()) << body;
  return r.ok() ? ApiError{} : r.error();
}

TEST(RequestValidation, MalformedJson) {
  ApiExpected<Json> r = parse_json_body("{\"model\": ");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(http_status(r.error().kind), 400);
  EXPECT_NE(r.error().message.find("not valid JSON"), std::string::npos);
  EXPECT_FALSE(parse_json_body("").ok());
}

// Control endpoints whose fields are all optional take a blank body as {}; anything else must be
// a JSON object.
TEST(RequestValidation, OptionalJsonObjectBodies) {
  for (const char* blank : {"", " \r\n\t"})
    EXPECT_EQ(*parse_optional_json_object(blank), Json::object());
  EXPECT_EQ(*parse_optional_json_object(R"({"mode": "retract"})"), Json({{"mode", "retract"}}));
  EXPECT_EQ(parse_optional_json_object("[1]").error().message,
            "the request body is a JSON array; expected an object");
  EXPECT_FALSE(parse_optional_json_object("{").ok());
}

// A body whose JSON nests past the parse limit is a 400 naming it (its schema's 60,000-deep
// `default`, copied while reading the response format, killed the server); so is schema text.
TEST(RequestValidation, JsonNestedTooDeeplyIsA400) {
  const std::string deep = std::string(60'000, '[') + std::string(60'000, ']');
  ApiExpected<Json> r = parse_json_body(R"({"messages": [], "response_format": {"type": )"
                                        R"("json_schema", "json_schema": {"schema": {"type": )"
                                        R"("string", "default": )" +
                                        deep + "}}}}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(http_status(r.error().kind), 400);
  EXPECT_EQ(r.error().message,
            "the request body is refused: it nests arrays and objects more than 512 deep");
  ApiError e = chat_error(R"({"messages": [{"role": "user", "content": "hi"}], )"
                          R"("guided_json": "{\"default\": )" +
                          deep + "}\"}");
  EXPECT_EQ(e.param, "guided_json");
  EXPECT_EQ(e.message,
            "'guided_json': the schema text is refused: it nests arrays and objects "
            "more than 512 deep");
}

TEST(RequestValidation, WrongTypesNameTheField) {
  ApiError e = chat_error(R"({"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"})");
  EXPECT_EQ(e.param, "temperature");
  EXPECT_NE(e.message.find("expected a number, got string"), std::string::npos);
  e = chat_error(R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1.5})");
  EXPECT_EQ(e.param, "max_tokens");
  e = chat_error(R"({"messages": [{"role": "user", "content": 5}]})");
  EXPECT_EQ(e.param, "messages[0].content");
  e = chat_error(R"({"messages": "hi"})");
  EXPECT_EQ(e.param, "messages");
  e = chat_error(R"({"messages": [{"role": "wizard", "content": "x"}]})");
  EXPECT_EQ(e.param, "messages[0].role");
  e = chat_error(R"({"messages": [{"role": "user", "content": "x"}], "stop": [1]})");
  EXPECT_EQ(e.param, "stop");
  e = chat_error(R"({"messages": [{"role": "user", "content": "x"}], "stream": "yes"})");
  EXPECT_EQ(e.param, "stream");
  e = chat_error(R"({"messages": [{"role": "user", "content": "x"}], "logit_bias": {"abc": 1}})");
  EXPECT_EQ(e.param, "logit_bias");
  e = chat_error(R"({"model": "m"})");
  EXPECT_EQ(e.param, "messages");
  e = chat_error(R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})");
  EXPECT_EQ(e.param, "messages[0].content[0].type");
  e = chat_error(R"({"messages": [{"role": "user", "content": "x"}], "functions": []})");
  EXPECT_EQ(e.param, "functions");
}

TEST(RequestValidation, SamplingRangesAreCheckedAgainstTheVocabulary) {
  SamplingParams p;
  p.top_p = 1.5;
  ApiExpected<bool> r = validate_sampling(p, 512);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().param, "top_p");
  p = SamplingParams{};
  p.n = 129;
  EXPECT_EQ(validate_sampling(p, 512).error().param, "n");
  p = SamplingParams{};
  p.logit_bias[600] = 1;
  EXPECT_EQ(validate_sampling(p, 512).error().param, "logit_bias");
  p = SamplingParams{};
  p.temperature = -1;
  EXPECT_EQ(validate_sampling(p, 512).error().param, "temperature");
  EXPECT_TRUE(validate_sampling(SamplingParams{}, 512).ok());
}

TEST(RequestValidation, ResponseFormatsOfEachApi) {
  ApiExpected<ChatRequest> chat =
      parse_chat_request(parse(R"({"messages": [{"role": "user", "content": "x"}],
      "response_format": {"type": "json_schema",
                          "json_schema": {"name": "a", "strict": true, "schema": {"type": "integer"}}}})"),
                         {});
  ASSERT_TRUE(chat.ok()) << chat.error().message;
  EXPECT_EQ(chat->sampling.format.kind, ResponseFormat::Kind::kJsonSchema);
  ASSERT_NE(chat->sampling.format.grammar, nullptr);  // the schema's: an integer, nothing else
  const JsonMatcher integer(chat->sampling.format.grammar);
  MatchState state = integer.initial(), scratch;
  EXPECT_TRUE(integer.advance_bytes(state, "42", scratch) && integer.can_end(state));
  state = integer.initial();
  EXPECT_FALSE(integer.advance_bytes(state, "\"x\"", scratch));
  EXPECT_EQ(chat->sampling.format.path, "response_format.json_schema.schema");
  chat = parse_chat_request(parse(R"({"messages": [{"role": "user", "content": "x"}],
                                      "response_format": {"type": "json_object"}})"),
                            {});
  ASSERT_TRUE(chat.ok());
  EXPECT_EQ(chat->sampling.format.kind, ResponseFormat::Kind::kJsonObject);
  chat = parse_chat_request(parse(R"({"messages": [{"role": "user", "content": "x"}],
                                      "response_format": {"type": "text"}})"),
                            {});
  ASSERT_TRUE(chat.ok());
  EXPECT_EQ(chat->sampling.format.kind, ResponseFormat::Kind::kText);
  // The Responses API writes the schema flat under text.format.
  ApiExpected<ResponsesRequest> resp = parse_responses_request(parse(R"({"input": "x",
      "text": {"format": {"type": "json_schema", "name": "a", "schema": {"enum": [1, 2]}}}})"),
                                                               {});
  ASSERT_TRUE(resp.ok()) << resp.error().message;
  EXPECT_EQ(resp->sampling.format.kind, ResponseFormat::Kind::kJsonSchema);
  EXPECT_EQ(resp->sampling.format.path, "text.format.schema");
  EXPECT_EQ(resp->text_format["name"], "a");
  // Anthropic's structured outputs: output_format, json_schema only, no name.
  ApiExpected<MessagesRequest> msg = parse_messages_request(parse(R"({"max_tokens": 5,
      "messages": [{"role": "user", "content": "x"}],
      "output_format": {"type": "json_schema", "schema": {"type": "boolean"}}})"),
                                                            false, {});
  ASSERT_TRUE(msg.ok()) << msg.error().message;
  EXPECT_EQ(msg->sampling.format.kind, ResponseFormat::Kind::kJsonSchema);
  EXPECT_EQ(msg->sampling.format.path, "output_format.schema");
  ApiExpected<CompletionRequest> completion = parse_completion_request(
      parse(R"({"prompt": "x", "response_format": {"type": "json_object"}})"), {});
  ASSERT_TRUE(completion.ok());
  EXPECT_EQ(completion->sampling.format.kind, ResponseFormat::Kind::kJsonObject);
}

TEST(RequestValidation, MalformedResponseFormatsNameTheField) {
  const std::string head =
      R"({"messages": [{"role": "user", "content": "x"}], "response_format": )";
  EXPECT_EQ(chat_error(head + R"({"type": "yaml"}})").param, "response_format.type");
  EXPECT_EQ(chat_error(head + R"("json"})").param, "response_format");
  EXPECT_EQ(chat_error(head + R"({"type": "json_schema"}})").param, "response_format.json_schema");
  EXPECT_EQ(chat_error(head + R"({"type": "json_schema", "json_schema": {"schema": {}}}})").param,
            "response_format.json_schema.name");
  ApiExpected<ResponsesRequest> resp = parse_responses_request(
      parse(R"({"input": "x", "text": {"format": {"type": "json_schema", "schema": {}}}})"), {});
  ASSERT_FALSE(resp.ok());
  EXPECT_EQ(resp.error().param, "text.format.name");
  const std::string msg_head =
      R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}], )";
  for (const auto& [format, param] : std::vector<std::pair<std::string, std::string>>{
           {R"({"type": "json_object"})", "output_format.type"},
           {R"({"type": "json_schema"})", "output_format.schema"}}) {
    ApiExpected<MessagesRequest> m =
        parse_messages_request(parse(msg_head + R"("output_format": )" + format + "}"), false, {});
    ASSERT_FALSE(m.ok()) << format;
    EXPECT_EQ(m.error().param, param);
  }
}

TEST(RequestValidation, ChatRequestMapsEveryField) {
  ApiExpected<ChatRequest> r = parse_chat_request(parse(R"({
    "model": "m", "messages": [
      {"role": "developer", "content": [{"type": "text", "text": "be brief"}]},
      {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": null, "reasoning_content": "think",
       "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
    "tools": [{"type": "function", "function": {"name": "w", "parameters": {"type": "object"}}}],
    "tool_choice": {"type": "function", "function": {"name": "w"}},
    "max_completion_tokens": 7, "max_tokens": 99, "temperature": 0, "top_k": 5, "min_p": 0.1, "seed": 3,
    "stop": "END", "stop_token_ids": [4], "n": 2, "logprobs": true, "top_logprobs": 2,
    "stream": true, "stream_options": {"include_usage": true},
    "chat_template_kwargs": {"enable_thinking": false}, "reasoning_effort": "low"})"),
                                                  {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const ChatRequest& c = *r;
  EXPECT_EQ(c.prompt.messages[0]["role"], "system");
  EXPECT_EQ(c.prompt.messages[0]["content"], "be brief");
  EXPECT_EQ(c.prompt.messages[2]["content"], "");
  EXPECT_EQ(c.prompt.messages[2]["reasoning_content"], "think");
  EXPECT_EQ(c.prompt.messages[2]["tool_calls"][0]["function"]["arguments"]["city"], "Paris");
  EXPECT_EQ(c.prompt.messages[3]["tool_call_id"], "c1");
  EXPECT_EQ(c.tool_choice.mode, ToolChoice::Mode::kNamed);
  EXPECT_EQ(c.tool_choice.name, "w");
  EXPECT_EQ(*c.sampling.params.max_tokens, 7);
  EXPECT_STREQ(c.max_tokens_field, "max_completion_tokens");
  EXPECT_EQ(c.sampling.params.top_k, 5);
  EXPECT_EQ(*c.sampling.params.seed, 3u);
  EXPECT_EQ(c.sampling.stop_strings, std::vector<std::string>{"END"});
  EXPECT_EQ(c.sampling.params.stop_token_ids, std::vector<int32_t>{4});
  EXPECT_EQ(c.sampling.params.n, 2);
  EXPECT_TRUE(c.sampling.params.logprobs);
  EXPECT_EQ(c.sampling.params.top_logprobs, 2);
  EXPECT_TRUE(c.stream);
  EXPECT_TRUE(c.output.include_usage);
  EXPECT_FALSE(c.output.continuous_usage);
  EXPECT_FALSE(c.output.return_token_ids);
  EXPECT_EQ(c.prompt.variables["enable_thinking"], false);
  EXPECT_EQ(c.prompt.variables["reasoning_effort"], "low");
}

// stream_options (include_usage; vLLM's continuous_usage_stats, which needs include_usage) and
// vLLM's return_token_ids, shared by chat and completions.
TEST(RequestValidation, OutputFields) {
  const auto read = [](const char* body) {
    const Json j = parse(body);
    FieldReader r(j, "");
    OutputFields out;
    ApiExpected<bool> nested = read_output_fields(r, &out);
    std::string param = !nested.ok() ? nested.error().param : r.failed() ? r.error().param : "";
    return std::make_pair(out, param);
  };
  auto [all, none] = read(R"({"return_token_ids": true,
      "stream_options": {"include_usage": true, "continuous_usage_stats": true}})");
  EXPECT_EQ(none, "");
  EXPECT_TRUE(all.return_token_ids && all.include_usage && all.continuous_usage);
  EXPECT_FALSE(read(R"({"stream_options": {"continuous_usage_stats": true}})").first.continuous_usage);
  EXPECT_EQ(read(R"({"return_token_ids": 1})").second, "return_token_ids");
  EXPECT_EQ(read(R"({"stream_options": []})").second, "stream_options");
  EXPECT_EQ(read(R"({"stream_options": {"include_usage": "y"}})").second,
            "stream_options.include_usage");
  EXPECT_EQ(read(R"({"stream_options": {"continuous_usage_stats": 0}})").second,
            "stream_options.continuous_usage_stats");
}

TEST(RequestValidation, ToolChoiceForms) {
  for (const char* s : {"\"none\"", "\"auto\"", "\"required\""}) {
    Json v = parse(s);
    EXPECT_TRUE(parse_openai_tool_choice(&v, "tool_choice").ok()) << s;
  }
  Json bad = parse("\"sometimes\"");
  EXPECT_EQ(parse_openai_tool_choice(&bad, "tool_choice").error().param, "tool_choice");
  Json flat = parse(R"({"type": "function", "name": "f"})");
  EXPECT_EQ(parse_openai_tool_choice(&flat, "tool_choice")->name, "f");
}

TEST(RequestValidation, CompletionPrompts) {
  ApiExpected<CompletionRequest> r =
      parse_completion_request(parse(R"({"prompt": [1, 2, 3], "logprobs": 2})"), {});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->prompts.size(), 1u);
  EXPECT_EQ(r->prompts[0].ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_FALSE(r->prompts[0].text);
  EXPECT_EQ(*r->sampling.params.max_tokens, 16);  // OpenAI's default
  EXPECT_TRUE(r->sampling.params.logprobs);
  EXPECT_EQ(r->sampling.params.top_logprobs, 2);
  EXPECT_FALSE(r->echo);
  EXPECT_EQ(parse_completion_request(parse(R"({"prompt": "a", "logprobs": 21})"), {}).error().param,
            "logprobs");
  EXPECT_EQ(parse_completion_request(parse(R"({})"), {}).error().param, "prompt");
}

// A list of prompts is a batch (text or token ids, mixed); each element is checked by its path.
TEST(RequestValidation, CompletionPromptLists) {
  ApiExpected<CompletionRequest> r =
      parse_completion_request(parse(R"({"prompt": ["a", [5, 6], "b c"], "n": 2})"), {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->prompts.size(), 3u);
  EXPECT_EQ(*r->prompts[0].text, "a");
  EXPECT_EQ(r->prompts[1].ids, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(*r->prompts[2].text, "b c");
  ApiExpected<CompletionRequest> one = parse_completion_request(parse(R"({"prompt": [[7]]})"), {});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->prompts.size(), 1u);
  for (const char* body : {R"({"prompt": []})", R"({"prompt": [[]]})", R"({"prompt": ["a", ""]})",
                           R"({"prompt": ["a", 1]})", R"({"prompt": [[1, "x"]]})",
                           R"({"prompt": [1, -2]})", R"({"prompt": {"a": 1}})"}) {
    ApiExpected<CompletionRequest> bad = parse_completion_request(parse(body), {});
    ASSERT_FALSE(bad.ok()) << body;
    EXPECT_EQ(bad.error().param, "prompt") << body;
  }
  EXPECT_NE(parse_completion_request(parse(R"({"prompt": ["a", 1]})"), {})
                .error()
                .message.find("prompt[1]"),
            std::string::npos);
  Json many = {{"prompt", Json::array()}};
  for (size_t i = 0; i <= kMaxCompletionPrompts; ++i) many["prompt"].push_back("x");
  EXPECT_EQ(parse_completion_request(many, {}).error().param, "prompt");
}

// echo, vLLM's prompt_logprobs, and max_tokens 0 (only with one of them).
TEST(RequestValidation, CompletionEchoAndPromptLogprobs) {
  ApiExpected<CompletionRequest> r = parse_completion_request(
      parse(
          R"({"prompt": "a", "echo": true, "max_tokens": 0, "logprobs": 1, "prompt_logprobs": 3})"),
      {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->echo);
  EXPECT_EQ(*r->sampling.params.max_tokens, 0);
  EXPECT_EQ(*r->prompt_logprobs, 3);
  EXPECT_TRUE(parse_completion_request(
                  parse(R"({"prompt": "a", "prompt_logprobs": 0, "max_tokens": 0})"), {})
                  .ok());
  EXPECT_TRUE(parse_completion_request(parse(R"({"prompt": "a", "echo": true, "n": 3})"), {}).ok());
  auto param = [](const char* body) {
    ApiExpected<CompletionRequest> bad = parse_completion_request(parse(body), {});
    EXPECT_FALSE(bad.ok()) << body;
    return bad.ok() ? std::string() : bad.error().param;
  };
  EXPECT_EQ(param(R"({"prompt": "a", "max_tokens": 0})"), "max_tokens");
  EXPECT_EQ(param(R"({"prompt": "a", "echo": true, "max_tokens": -1})"), "max_tokens");
  EXPECT_EQ(param(R"({"prompt": "a", "prompt_logprobs": 21})"), "prompt_logprobs");
  EXPECT_EQ(param(R"({"prompt": "a", "prompt_logprobs": -1})"), "prompt_logprobs");
  EXPECT_EQ(param(R"({"prompt": "a", "prompt_logprobs": true})"), "prompt_logprobs");
  EXPECT_EQ(param(R"({"prompt": "a", "echo": "yes"})"), "echo");
  EXPECT_EQ(param(R"({"prompt": "a", "echo": true, "suffix": "z"})"), "suffix");
}

// vLLM's prompt_logprobs on chat: non-streaming only; the output limit may then be 0.
TEST(RequestValidation, ChatPromptLogprobs) {
  ApiExpected<ChatRequest> r =
      parse_chat_request(parse(R"({"messages": [{"role": "user", "content": "hi"}], )"
                               R"("prompt_logprobs": 2, "max_tokens": 0})"),
                         {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r->prompt_logprobs, 2);
  EXPECT_EQ(*r->sampling.params.max_tokens, 0);
  EXPECT_EQ(
      chat_error(R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0})").param,
      "max_tokens");
  EXPECT_EQ(
      chat_error(R"({"messages": [{"role": "user", "content": "hi"}], "prompt_logprobs": 21})")
          .param,
      "prompt_logprobs");
  ApiError stream = chat_error(
      R"({"messages": [{"role": "user", "content": "hi"}], "prompt_logprobs": 1, "stream": true})");
  EXPECT_EQ(stream.param, "prompt_logprobs");
  EXPECT_NE(stream.message.find("stream"), std::string::npos);
}

TEST(RequestValidation, ResponsesInputItems) {
  ApiExpected<ResponsesRequest> r = parse_responses_request(parse(R"({
    "model": "m", "instructions": "be brief", "max_output_tokens": 9,
    "input": [{"role": "user", "content": [{"type": "input_text", "text": "weather?"}]},
              {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "hmm"}]},
              {"type": "function_call", "call_id": "c1", "name": "w", "arguments": "{\"city\": \"Paris\"}"},
              {"type": "function_call_output", "call_id": "c1", "output": "sunny"}],
    "tools": [{"type": "function", "name": "w", "parameters": {"type": "object"}}],
    "reasoning": {"effort": "high"}})"),
                                                            {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const Json& m = r->prompt.messages;
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_EQ(m[1]["content"], "weather?");
  EXPECT_EQ(m[2]["role"], "assistant");
  EXPECT_EQ(m[2]["reasoning_content"], "hmm");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["name"], "w");
  EXPECT_EQ(m[3]["role"], "tool");
  EXPECT_EQ((*r->prompt.tools)[0]["function"]["name"], "w");
  EXPECT_EQ(r->prompt.variables["reasoning_effort"], "high");
  EXPECT_EQ(*r->sampling.params.max_tokens, 9);
  EXPECT_EQ(parse_responses_request(parse(R"({"input": "x", "previous_response_id": "r"})"), {})
                .error()
                .param,
            "previous_response_id");
  EXPECT_EQ(parse_responses_request(parse(R"({"input": [{"type": "web_search_call"}]})"), {})
                .error()
                .param,
            "input[0].type");
}

TEST(RequestValidation, AnthropicMessages) {
  ApiExpected<MessagesRequest> r = parse_messages_request(parse(R"({
    "model": "m", "max_tokens": 10, "system": [{"type": "text", "text": "sys"}],
    "messages": [{"role": "user", "content": "weather?"},
                 {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": ""},
                                                   {"type": "tool_use", "id": "tu1", "name": "w", "input": {"city": "Paris"}}]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "sunny"}]}],
    "tools": [{"name": "w", "description": "d", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "any"}, "stop_sequences": ["X"], "top_k": 3,
    "thinking": {"type": "enabled", "budget_tokens": 100}})"),
                                                          false, {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const Json& m = r->prompt.messages;
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0]["content"], "sys");
  EXPECT_EQ(m[2]["reasoning_content"], "t");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"]["city"], "Paris");
  EXPECT_EQ(m[3]["role"], "tool");
  EXPECT_EQ(m[3]["tool_call_id"], "tu1");
  EXPECT_EQ(r->tool_choice.mode, ToolChoice::Mode::kRequired);
  EXPECT_EQ(r->sampling.stop_strings, std::vector<std::string>{"X"});
  EXPECT_EQ(r->prompt.variables["enable_thinking"], true);
  EXPECT_EQ((*r->prompt.tools)[0]["function"]["parameters"]["type"], "object");
  // max_tokens is required for /v1/messages but not for count_tokens.
  const Json no_max = parse(R"({"messages": [{"role": "user", "content": "x"}]})");
  EXPECT_EQ(parse_messages_request(no_max, false, {}).error().param, "max_tokens");
  EXPECT_TRUE(parse_messages_request(no_max, true, {}).ok());
  EXPECT_EQ(parse_messages_request(
                parse(R"({"max_tokens": 5, "messages": [{"role": "system", "content": "x"}]})"),
                false, {})
                .error()
                .param,
            "messages[0].role");
}

TEST(RequestValidation, ErrorBodies) {
  ApiError e = invalid_request("bad", "temperature");
  EXPECT_EQ(Json::parse(openai_error_body(e))["error"]["param"], "temperature");
  EXPECT_EQ(Json::parse(openai_error_body(e))["error"]["type"], "invalid_request_error");
  Json a = Json::parse(anthropic_error_body(api_error(ErrorKind::kNotFound, "no")));
  EXPECT_EQ(a["type"], "error");
  EXPECT_EQ(a["error"]["type"], "not_found_error");
  EXPECT_EQ(http_status(ErrorKind::kAuthentication), 401);
  EXPECT_EQ(http_status(ErrorKind::kRequestTooLarge), 413);
}

}  // namespace
}  // namespace beam::server
