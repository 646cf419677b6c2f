// Where constrained output starts (make_output_constraint): a Hermes-style <think> model by what
// the rendered prompt left open, a channel template (Beam's layout) after its answer header.
#include "server/api/response_format.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "runtime/structured/ebnf_grammar.h"
#include "runtime/structured/ebnf_matcher.h"
#include "runtime/structured/json_matcher.h"
#include "server/api/served_model.h"
#include "server/parsers/builtin_templates.h"
#include "server/parsers/response_template.h"

namespace beam::server {
namespace {

ServedModel nano_with(std::shared_ptr<const ResponseTemplate> response_template) {
  ServedModel m;
  auto tok = text::Tokenizer::load("models/beam-nano");
  EXPECT_TRUE(tok.ok()) << tok.error().message;
  m.tokenizer.emplace(std::move(*tok));
  m.structured_vocab = build_structured_vocab(*m.tokenizer, m.tokenizer->vocab_size());
  m.response_template = std::move(response_template);
  return m;
}

std::shared_ptr<const ResponseTemplate> fixture_template(const std::string& name) {
  std::ifstream in("tests/data/response_templates/" + name + ".json");
  EXPECT_TRUE(in.good()) << name;
  auto t = load_response_template(Json::parse(in)["template"]);
  EXPECT_TRUE(t.ok()) << t.error().message;
  return t.ok() ? *t : nullptr;
}

ResponseFormat json_object() {
  ResponseFormat f;
  f.kind = ResponseFormat::Kind::kJsonObject;
  f.grammar = JsonGrammar::any_object();
  return f;
}

std::shared_ptr<const OutputConstraint> constraint(const ServedModel& m, std::string_view prompt,
                                                   bool chat = true) {
  auto c = make_output_constraint(m, json_object(), prompt, chat, {});
  EXPECT_TRUE(c.ok());
  return c.ok() ? *c : nullptr;
}

TEST(ResponseFormatPrelude, ThinkTokensFollowThePrompt) {
  auto hermes = load_hermes_response_template();
  ASSERT_TRUE(hermes.ok());
  const ServedModel m = nano_with(*hermes);
  const auto think = added_token_id(*m.tokenizer, "<think>");
  const auto unthink = added_token_id(*m.tokenizer, "</think>");
  ASSERT_TRUE(think && unthink);
  const std::string head = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n";
  auto closed = constraint(m, head + "<think>\n\n</think>\n\n");
  EXPECT_FALSE(closed->starts_in_reasoning);
  EXPECT_TRUE(closed->json_after.empty());
  auto open = constraint(m, head + "<think>\n");
  EXPECT_TRUE(open->starts_in_reasoning);
  EXPECT_EQ(open->json_after, std::vector<int32_t>{*unthink});
  auto either = constraint(m, head);
  EXPECT_FALSE(either->starts_in_reasoning);
  EXPECT_EQ(either->reasoning_open, think);
  EXPECT_EQ(either->json_after, std::vector<int32_t>{*unthink});
  auto raw = constraint(m, head, /*chat=*/false);  // completions: JSON from the first token
  EXPECT_FALSE(raw->reasoning_open.has_value());
  EXPECT_TRUE(raw->json_after.empty());
}

// Beam's channel layout (open_pattern) and gpt-oss's (a literal open): free until the answer
// header `<|channel|>final<|message|>`, in the tokenizer's tokens; JSON at once when the prompt
// already wrote it.
TEST(ResponseFormatPrelude, ChannelTemplatesStartTheJsonAfterTheAnswerHeader) {
  for (const char* name : {"beam_channel", "gpt_oss"}) {
    SCOPED_TRACE(name);
    const ServedModel m = nano_with(fixture_template(name));
    ASSERT_NE(m.response_template, nullptr);
    auto header = m.tokenizer->encode("<|channel|>final<|message|>", true);
    ASSERT_TRUE(header.ok());
    const std::string prompt = "<|start|>user<|message|>hi<|end|><|start|>assistant";
    auto c = constraint(m, prompt);
    EXPECT_TRUE(c->starts_in_reasoning);
    EXPECT_FALSE(c->reasoning_open.has_value());
    EXPECT_EQ(c->json_after, std::vector<int32_t>(header->begin(), header->end()));
    auto prefilled = constraint(m, prompt + "<|channel|>final<|message|>");
    EXPECT_FALSE(prefilled->starts_in_reasoning);
    EXPECT_TRUE(prefilled->json_after.empty());
    // An earlier turn's header (before the last start anchor) does not count.
    auto earlier =
        constraint(m, "<|start|>assistant<|channel|>final<|message|>x<|end|><|start|>assistant");
    EXPECT_TRUE(earlier->starts_in_reasoning);
  }
}

ResponseFormat request_format(const char* body) {
  auto f = parse_request_format(Json::parse(body), {});
  EXPECT_TRUE(f.ok()) << body << ": " << (f.ok() ? "" : f.error().message);
  return f.ok() ? *f : ResponseFormat{};
}

ApiError request_format_error(const char* body) {
  auto f = parse_request_format(Json::parse(body), {});
  EXPECT_FALSE(f.ok()) << body;
  return f.ok() ? ApiError{} : f.error();
}

// vLLM's and SGLang's structured-output fields: regexes and choices match the whole output,
// schemas as in response_format, each named in its errors.
TEST(RequestFormat, VllmAndSglangFieldsConstrainTheOutput) {
  for (const char* body : {R"j({"guided_regex": "[a-c]+x"})j", R"j({"regex": "[a-c]+x"})j",
                           R"j({"structured_outputs": {"regex": "[a-c]+x"}})j"}) {
    const ResponseFormat f = request_format(body);
    ASSERT_EQ(f.kind, ResponseFormat::Kind::kRegex) << body;
    EXPECT_TRUE(f.regex->matches("abcx"));
    EXPECT_FALSE(f.regex->matches("zabx"));
    EXPECT_FALSE(f.regex->matches("abxz"));
  }
  for (const char* body : {R"j({"guided_choice": ["yes", "no", "a.b (c)"]})j",
                           R"j({"structured_outputs": {"choice": ["yes", "no", "a.b (c)"]}})j"}) {
    const ResponseFormat f = request_format(body);
    ASSERT_EQ(f.kind, ResponseFormat::Kind::kRegex) << body;
    EXPECT_EQ(f.path, Json::parse(body).begin().key() == "guided_choice"
                          ? "guided_choice"
                          : "structured_outputs.choice");
    for (const char* s : {"yes", "no", "a.b (c)"}) EXPECT_TRUE(f.regex->matches(s)) << s;
    for (const char* s : {"yes!", "a.bx(c)", "", "n"}) EXPECT_FALSE(f.regex->matches(s)) << s;
  }
  for (const char* body : {R"j({"guided_json": {"type": "integer"}})j",
                           R"j({"guided_json": "{\"type\": \"integer\"}"})j",
                           R"j({"json_schema": "{\"type\": \"integer\"}"})j",
                           R"j({"structured_outputs": {"json": {"type": "integer"}}})j"}) {
    const ResponseFormat f = request_format(body);
    ASSERT_EQ(f.kind, ResponseFormat::Kind::kJsonSchema) << body;
    const JsonMatcher m(f.grammar);
    MatchState st = m.initial(), scratch;
    EXPECT_TRUE(m.advance_bytes(st, "42", scratch) && m.can_end(st)) << body;
    EXPECT_FALSE(m.advance_bytes(st, "\"", scratch)) << body;
  }
  EXPECT_EQ(request_format(R"j({"structured_outputs": {"json_object": true}})j").kind,
            ResponseFormat::Kind::kJsonObject);
  EXPECT_EQ(request_format(R"j({"guided_decoding_backend": "xgrammar"})j").kind,
            ResponseFormat::Kind::kText);
  EXPECT_EQ(request_format(R"j({"response_format": {"type": "json_object"}})j").kind,
            ResponseFormat::Kind::kJsonObject);
  // A regex format reaches the constraint.
  const ServedModel m = nano_with(nullptr);
  auto c = make_output_constraint(m, request_format(R"j({"guided_regex": "a+"})j"), "", false, {});
  ASSERT_TRUE(c.ok());
  EXPECT_NE((*c)->regex, nullptr);
  EXPECT_EQ((*c)->grammar, nullptr);
  EXPECT_EQ((*c)->ebnf, nullptr);
}

// Whether the grammar matches `text` whole.
bool grammar_matches(const std::shared_ptr<const EbnfGrammar>& grammar, std::string_view text) {
  const EbnfMatcher m(grammar);
  GrammarState state = m.initial(), scratch;
  return m.advance_bytes(state, text, scratch) && m.can_end(state);
}

// GBNF grammars: vLLM's guided_grammar / structured_outputs.grammar, SGLang's ebnf and
// llama.cpp's grammar each give a grammar the whole output matches, and it reaches the constraint.
TEST(RequestFormat, GrammarFieldsConstrainTheWholeOutput) {
  for (const char* body :
       {R"j({"guided_grammar": "root ::= (\"yes\" | \"no\") \" \" [0-9]{1,3}"})j",
        R"j({"structured_outputs": {"grammar": "root ::= (\"yes\" | \"no\") \" \" [0-9]{1,3}"}})j",
        R"j({"ebnf": "root ::= (\"yes\" | \"no\") \" \" [0-9]{1,3}"})j",
        R"j({"grammar": "root ::= (\"yes\" | \"no\") \" \" [0-9]{1,3}"})j"}) {
    SCOPED_TRACE(body);
    const ResponseFormat f = request_format(body);
    ASSERT_EQ(f.kind, ResponseFormat::Kind::kGrammar);
    ASSERT_NE(f.ebnf, nullptr);
    EXPECT_EQ(f.grammar, nullptr);
    EXPECT_EQ(f.regex, nullptr);
    const Json parsed = Json::parse(body);
    EXPECT_EQ(f.path, parsed.contains("structured_outputs") ? "structured_outputs.grammar"
                                                            : parsed.begin().key());
    for (const char* s : {"yes 7", "no 123", "yes 00"})
      EXPECT_TRUE(grammar_matches(f.ebnf, s)) << s;
    for (const char* s : {"yes", "no 1234", "maybe 1", "yes 7 ", " no 1"})
      EXPECT_FALSE(grammar_matches(f.ebnf, s)) << s;
  }
  // A recursive grammar: balanced parentheses around x.
  const ResponseFormat nested = request_format(R"j({"guided_grammar":
      "root ::= \"(\" root \")\" | \"x\""})j");
  ASSERT_EQ(nested.kind, ResponseFormat::Kind::kGrammar);
  for (const char* s : {"x", "(x)", "(((x)))"}) EXPECT_TRUE(grammar_matches(nested.ebnf, s)) << s;
  for (const char* s : {"", "(x", "((x)", "x)", "()"})
    EXPECT_FALSE(grammar_matches(nested.ebnf, s)) << s;
  // Lark (vLLM's other syntax: no `::=`), with left recursion and ignored whitespace.
  const ResponseFormat lark = request_format(R"j({"structured_outputs": {"grammar":
      "start: list\nlist: list \",\" NUMBER | NUMBER\n%import common (NUMBER, WS)\n%ignore WS"}})j");
  ASSERT_EQ(lark.kind, ResponseFormat::Kind::kGrammar);
  for (const char* s : {"1", "1, 2.5 ,3"}) EXPECT_TRUE(grammar_matches(lark.ebnf, s)) << s;
  for (const char* s : {"", "1,", "1 2"}) EXPECT_FALSE(grammar_matches(lark.ebnf, s)) << s;
  // A model's requests with the same grammar text share its compiled grammar and mask memo.
  {
    ServedModel cached = nano_with(nullptr);
    cached.grammars = std::make_shared<GrammarCache>();
    const ResponseFormat again = request_format(R"j({"guided_grammar":
        "root ::= \"(\" root \")\" | \"x\""})j");
    auto first = make_output_constraint(cached, nested, "", false, {});
    auto second = make_output_constraint(cached, again, "", false, {});
    auto other = make_output_constraint(cached, lark, "", false, {});
    ASSERT_TRUE(first.ok() && second.ok() && other.ok());
    EXPECT_EQ((*first)->ebnf, (*second)->ebnf);
    EXPECT_EQ((*first)->grammar_masks, (*second)->grammar_masks);
    EXPECT_NE((*first)->grammar_masks, (*other)->grammar_masks);
    EXPECT_EQ(cached.grammars->size(), 2u);
    // So do requests with the same JSON schema (its grammar and patterned strings' masks).
    cached.schemas = std::make_shared<SchemaCache>();
    const char* schema = R"j({"guided_json": {"type": "object", "properties":
        {"id": {"type": "string", "pattern": "^[a-z]+$"}}}})j";
    auto s1 = make_output_constraint(cached, request_format(schema), "", false, {});
    auto s2 = make_output_constraint(cached, request_format(schema), "", false, {});
    auto s3 =
        make_output_constraint(cached, request_format(R"j({"guided_json": {}})j"), "", false, {});
    ASSERT_TRUE(s1.ok() && s2.ok() && s3.ok());
    EXPECT_EQ((*s1)->grammar, (*s2)->grammar);
    EXPECT_EQ((*s1)->pattern_masks, (*s2)->pattern_masks);
    EXPECT_NE((*s1)->pattern_masks, (*s3)->pattern_masks);
  }
  // The constraint carries the grammar, and only it.
  const ServedModel m = nano_with(nullptr);
  auto c = make_output_constraint(m, nested, "", false, {});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->ebnf, nested.ebnf);
  EXPECT_EQ((*c)->regex, nullptr);
  EXPECT_EQ((*c)->grammar, nullptr);
  EXPECT_EQ((*c)->vocab, m.structured_vocab);
}

TEST(RequestFormat, ConflictsBadGrammarsAndBadPatternsAreClear400s) {
  ApiError e = request_format_error(
      R"j({"response_format": {"type": "json_object"}, "guided_regex": "a"})j");
  EXPECT_EQ(e.param, "guided_regex");
  EXPECT_NE(e.message.find("'response_format' and 'guided_regex'"), std::string::npos);
  e = request_format_error(R"j({"structured_outputs": {"regex": "a", "choice": ["b"]}})j");
  EXPECT_NE(e.message.find("'structured_outputs.regex' and 'structured_outputs.choice'"),
            std::string::npos)
      << e.message;
  EXPECT_EQ(e.param, "structured_outputs.choice");
  // A grammar joins the one-format rule: the second field read is named.
  e = request_format_error(R"j({"guided_regex": "a", "guided_grammar": "root ::= \"a\""})j");
  EXPECT_EQ(e.param, "guided_grammar");
  EXPECT_NE(e.message.find("'guided_regex' and 'guided_grammar'"), std::string::npos) << e.message;
  e = request_format_error(R"j({"ebnf": "root ::= \"a\"", "regex": "a"})j");
  EXPECT_EQ(e.param, "ebnf");
  e = request_format_error(
      R"j({"structured_outputs": {"grammar": "root ::= \"a\"", "regex": "a"}})j");
  EXPECT_EQ(e.param, "structured_outputs.grammar");
  // A grammar that does not compile is a 400 naming the field and quoting the problem.
  for (const char* field : {"guided_grammar", "ebnf", "grammar"}) {
    SCOPED_TRACE(field);
    e = request_format_error(Json{{field, "root ::= \"a\" undefined-rule"}}.dump().c_str());
    EXPECT_EQ(e.code, "unsupported_parameter");
    EXPECT_EQ(e.param, field);
    EXPECT_EQ(e.message.rfind("'" + std::string(field) + "' cannot be enforced: ", 0), 0u)
        << e.message;
    EXPECT_NE(e.message.find("undefined-rule"), std::string::npos) << e.message;
  }
  e = request_format_error(R"j({"guided_grammar": "root ::= (\"a\""})j");
  EXPECT_EQ(e.param, "guided_grammar");
  EXPECT_NE(e.message.find("1:"), std::string::npos) << e.message;  // line:column
  e = request_format_error(R"j({"structured_outputs": {"grammar": "start ::= \"a\""}})j");
  EXPECT_EQ(e.param, "structured_outputs.grammar");
  EXPECT_NE(e.message.find("root"), std::string::npos) << e.message;
  // llama.cpp's clients send its default `grammar: ""`: no grammar (the other fields refuse it).
  EXPECT_EQ(request_format(R"j({"grammar": ""})j").kind, ResponseFormat::Kind::kText);
  EXPECT_EQ(request_format(R"j({"grammar": "", "guided_regex": "a"})j").kind,
            ResponseFormat::Kind::kRegex);
  EXPECT_EQ(request_format_error(R"j({"ebnf": ""})j").param, "ebnf");
  // A grammar must be text.
  for (const char* body : {R"j({"guided_grammar": 3})j", R"j({"ebnf": ["root ::= x"]})j",
                           R"j({"structured_outputs": {"grammar": {"root": "x"}}})j"}) {
    e = request_format_error(body);
    EXPECT_NE(e.message.find("expected a grammar string (GBNF or Lark)"), std::string::npos)
        << e.message;
  }
  e = request_format_error(R"j({"guided_regex": "a(?=b)"})j");
  EXPECT_EQ(e.param, "guided_regex");
  EXPECT_NE(e.message.find("lookaround"), std::string::npos) << e.message;
  e = request_format_error(R"j({"guided_choice": []})j");
  EXPECT_EQ(e.param, "guided_choice");
  e = request_format_error(R"j({"guided_choice": ["a", 3]})j");
  EXPECT_NE(e.message.find("guided_choice[1]"), std::string::npos) << e.message;
  e = request_format_error(R"j({"json_schema": "{not json"})j");
  EXPECT_NE(e.message.find("not valid JSON"), std::string::npos) << e.message;
  e = request_format_error(R"j({"guided_json": {"type": "string", "pattern": "\\1"}})j");
  EXPECT_EQ(e.code, "unsupported_parameter");
}

// A tool call in free text: `<f=get>` then JSON of the schema, then `</f>`.
constexpr const char* kToolTag = R"j({"type": "structural_tag", "format": {"type":
    "triggered_tags", "triggers": ["<f="], "tags": [{"begin": "<f=get>", "content": {"type":
    "json_schema", "json_schema": {"type": "object", "properties": {"id": {"type": "integer"}},
    "required": ["id"]}}, "end": "</f>"}]}})j";

// Structural tags: OpenAI-style response_format (xgrammar's shape and the legacy one), vLLM's
// structured_outputs.structural_tag (its text, or an object) and SGLang's structural_tag text
// each give a grammar the whole output matches, shared by requests with the same tag.
TEST(RequestFormat, StructuralTagFieldsConstrainTheWholeOutput) {
  const Json tag = Json::parse(kToolTag);
  const Json legacy = Json::parse(R"j({"type": "structural_tag", "structures": [{"begin":
      "<f=get>", "schema": {"type": "object", "properties": {"id": {"type": "integer"}},
      "required": ["id"]}, "end": "</f>"}], "triggers": ["<f="]})j");
  const std::vector<std::pair<Json, std::string>> bodies = {
      {Json{{"response_format", tag}}, "response_format"},
      {Json{{"response_format", legacy}}, "response_format"},
      {Json{{"structured_outputs", {{"structural_tag", tag.dump()}}}},
       "structured_outputs.structural_tag"},
      {Json{{"structured_outputs", {{"structural_tag", legacy}}}},
       "structured_outputs.structural_tag"},
      {Json{{"structural_tag", legacy.dump()}}, "structural_tag"},
  };
  for (const auto& [body, path] : bodies) {
    SCOPED_TRACE(body.dump());
    const ResponseFormat f = request_format(body.dump().c_str());
    ASSERT_EQ(f.kind, ResponseFormat::Kind::kStructuralTag);
    EXPECT_EQ(f.path, path);
    ASSERT_NE(f.ebnf, nullptr);
    for (const char* s : {"", "no call", R"(a <f=get>{"id": 7}</f> b <f=get>{"id":1}</f>)"})
      EXPECT_TRUE(grammar_matches(f.ebnf, s)) << s;
    for (const char* s : {"<f=put>{}</f>", R"(<f=get>{"id": "7"}</f>)", R"(<f=get>{"id": 7})"})
      EXPECT_FALSE(grammar_matches(f.ebnf, s)) << s;
  }
  // Requests with the same tag share the compiled grammar and its masks (in the model's grammar
  // cache, beside grammars).
  ServedModel cached = nano_with(nullptr);
  cached.grammars = std::make_shared<GrammarCache>();
  const std::string body = Json{{"structural_tag", tag.dump()}}.dump();
  auto first = make_output_constraint(cached, request_format(body.c_str()), "", false, {});
  auto second = make_output_constraint(cached, request_format(body.c_str()), "", false, {});
  auto grammar = make_output_constraint(cached, request_format(R"j({"ebnf": "root ::= \"x\""})j"),
                                        "", false, {});
  ASSERT_TRUE(first.ok() && second.ok() && grammar.ok());
  EXPECT_EQ((*first)->ebnf, (*second)->ebnf);
  EXPECT_EQ((*first)->grammar_masks, (*second)->grammar_masks);
  EXPECT_NE((*first)->grammar_masks, (*grammar)->grammar_masks);
  EXPECT_EQ(cached.grammars->size(), 2u);
}

// Added tokens write their text into constrained output where the output shows them: a structural
// tag's `<tool_call>` begin may be the model's one <tool_call> token (beam-nano marks it special; a
// chat request keeps the template's delimiters), never where the output skips it; an end token
// never stands for its text, only for the end.
TEST(RequestFormat, AddedTokensWriteTheirTextWhereTheOutputShowsThem) {
  const ServedModel m = nano_with(nullptr);
  const text::Tokenizer& tok = *m.tokenizer;
  const auto call = added_token_id(tok, "<tool_call>");
  const auto close = added_token_id(tok, "</tool_call>");
  const auto eos = added_token_id(tok, "<|endoftext|>");
  ASSERT_TRUE(call && close && eos);
  const std::vector<int32_t> delimiters = {*call, *close};
  const std::vector<int32_t> hidden = hidden_special_tokens(tok, /*skip_special=*/true, delimiters);
  EXPECT_EQ(hidden.size(), tok.added_tokens().size() - 2);  // beam-nano's are all special
  EXPECT_EQ(std::count(hidden.begin(), hidden.end(), *call), 0);
  EXPECT_EQ(std::count(hidden.begin(), hidden.end(), *eos), 1);
  EXPECT_TRUE(hidden_special_tokens(tok, /*skip_special=*/false, {}).empty());

  const auto token_of = [&](std::string_view text) {
    auto ids = tok.encode(text, /*allow_special=*/false);
    EXPECT_TRUE(ids.ok() && ids->size() == 1u) << text;
    return ids.ok() && !ids->empty() ? ids->front() : -1;
  };
  const int32_t lt = token_of("<");
  const ResponseFormat tag = request_format(R"j({"structural_tag": {"type": "structural_tag",
      "format": {"type": "tag", "begin": "<tool_call>", "content": {"type": "json_schema",
      "json_schema": {"type": "object"}}, "end": "</tool_call>"}}})j");
  std::vector<uint32_t> bits(allowed_mask_words(m.structured_vocab->vocab_size()));
  MaskScratch scratch;
  const std::vector<int32_t> ends = {*eos};
  auto shown = make_output_constraint(m, tag, "", false, hidden);
  ASSERT_TRUE(shown.ok());
  ConstraintState s(*shown);
  ASSERT_TRUE(s.fill_allowed(bits, ends, scratch));
  EXPECT_TRUE(mask_bit(bits, *call));
  EXPECT_TRUE(mask_bit(bits, lt));  // or spelled out
  EXPECT_FALSE(mask_bit(bits, *eos));
  ASSERT_TRUE(s.accept(*call, false));
  for (const char* text : {"{", "}"}) {
    ASSERT_TRUE(s.fill_allowed(bits, ends, scratch));
    EXPECT_FALSE(mask_bit(bits, *close)) << text;
    ASSERT_TRUE(s.accept(token_of(text), false)) << text;
  }
  ASSERT_TRUE(s.fill_allowed(bits, ends, scratch));
  EXPECT_TRUE(mask_bit(bits, *close));
  EXPECT_FALSE(mask_bit(bits, *eos));
  ASSERT_TRUE(s.accept(*close, false));
  ASSERT_TRUE(s.fill_allowed(bits, ends, scratch));
  EXPECT_TRUE(mask_bit(bits, *eos));
  EXPECT_TRUE(s.accept(*eos, true));

  // Output that skips every special token spells the tag out.
  auto skipped = make_output_constraint(m, tag, "", false, hidden_special_tokens(tok, true, {}));
  ASSERT_TRUE(skipped.ok());
  ConstraintState spelled(*skipped);
  ASSERT_TRUE(spelled.fill_allowed(bits, ends, scratch));
  EXPECT_FALSE(mask_bit(bits, *call));
  EXPECT_TRUE(mask_bit(bits, lt));
  EXPECT_FALSE(spelled.accept(*call, false));

  // "<|endoftext|>" as text is spelled out while the end token ends the output; a request whose
  // ends leave it out (ignore_eos) may write it as text.
  auto regex = make_output_constraint(
      m, request_format(R"j({"guided_regex": "<\\|endoftext\\|>a"})j"), "", false, {});
  ASSERT_TRUE(regex.ok());
  ConstraintState r(*regex);
  ASSERT_TRUE(r.fill_allowed(bits, ends, scratch));
  EXPECT_FALSE(mask_bit(bits, *eos));
  EXPECT_TRUE(mask_bit(bits, lt));
  ASSERT_TRUE(r.fill_allowed(bits, {}, scratch));
  EXPECT_TRUE(mask_bit(bits, *eos));
  EXPECT_TRUE(r.accept(*eos, false));
}

// A grammar whose parse stacks multiply with every token (nullable rules inside recursion) costs
// a named error within the mask's parse budget, not seconds to minutes of a stalled engine (its
// first mask over beam-nano's vocabulary took 11 s before the budget).
TEST(RequestFormat, GrammarsTooAmbiguousToEnforceAreNamedErrors) {
  const ServedModel m = nano_with(nullptr);
  auto c = make_output_constraint(m, request_format(R"j({"guided_grammar":
      "root ::= x\nx ::= y y y y\ny ::= \"a\" x? | [a-z] x? | \"\""})j"),
                                  "", false, {});
  ASSERT_TRUE(c.ok());
  ConstraintState state(*c);
  std::vector<uint32_t> bits(allowed_mask_words(m.structured_vocab->vocab_size()));
  MaskScratch scratch;
  const Status st = state.fill_allowed(bits, std::vector<int32_t>{0}, scratch);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message,
            "the grammar is too ambiguous to enforce: one token's mask needs more than " +
                std::to_string(kMaxMaskParseSteps) + " parse steps");
}

TEST(RequestFormat, BadStructuralTagsAre400sNamingTheField) {
  ApiError e = request_format_error(R"j({"structured_outputs": {"structural_tag": "{}"}})j");
  EXPECT_EQ(e.code, "unsupported_parameter");
  EXPECT_EQ(e.param, "structured_outputs.structural_tag");
  EXPECT_EQ(e.message,
            "'structured_outputs.structural_tag' cannot be enforced: 'format': is required (or "
            "the legacy 'structures' and 'triggers')");
  e = request_format_error(R"j({"response_format": {"type": "structural_tag", "format": {"type":
      "triggered_tags", "triggers": ["<f="], "tags": [{"begin": "<g>", "content": {"type":
      "any_text"}, "end": "</g>"}]}}})j");
  EXPECT_EQ(e.param, "response_format");
  EXPECT_EQ(e.message,
            "'response_format' cannot be enforced: 'format.tags[0].begin': \"<g>\" starts with "
            "none of the triggers");
  e = request_format_error(R"j({"structural_tag": "{not json"})j");
  EXPECT_EQ(e.param, "structural_tag");
  EXPECT_EQ(e.message.rfind("'structural_tag': the structural tag text is not valid JSON: ", 0), 0u)
      << e.message;
  e = request_format_error(R"j({"structural_tag": "[1]"})j");
  EXPECT_EQ(e.message, "'structural_tag': the structural tag text is not a JSON object");
  e = request_format_error(R"j({"structured_outputs": {"structural_tag": 3}})j");
  EXPECT_EQ(e.param, "structured_outputs.structural_tag");
  e = request_format_error(R"j({"structural_tag": "{}", "regex": "a"})j");
  EXPECT_EQ(e.param, "structural_tag");
  EXPECT_NE(e.message.find("both ask for an output format"), std::string::npos) << e.message;
  e = request_format_error(R"j({"response_format": {"type": "structural_tag", "format": {"type":
      "qwen_xml_parameter", "json_schema": {}}}})j");
  EXPECT_NE(e.message.find("'format.type': \"qwen_xml_parameter\" is not supported"),
            std::string::npos)
      << e.message;
  // Responses' text.format takes no structural tag.
  const Json tag = Json::parse(kToolTag);
  auto f = parse_response_format(&tag, "text.format", FormatShape::kResponses, {});
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().param, "text.format.type");
}

// Random walks over the masks with beam-nano's real vocabulary: every token a mask allows is
// accepted, and each walk ends in a complete output within its budget (patterns, formats, a
// whole-output regex, a choice, GBNF grammars and a structural tag).
TEST(RequestFormat, RandomWalksOverRealMasksStayInsideTheConstraint) {
  const ServedModel m = nano_with(nullptr);
  const int32_t eos = 0;
  for (const char* body : {
           R"j({"guided_json": {"type": "object", "properties": {
                "code": {"type": "string", "pattern": "^[A-Z]{2}-\\d{1,3}$"},
                "when": {"type": "string", "format": "date-time"},
                "mail": {"type": "string", "format": "email", "maxLength": 24},
                "note": {"type": "string", "pattern": "x", "maxLength": 8}},
                "required": ["code", "when", "mail", "note"]}})j",
           R"j({"guided_regex": "[A-Z]{3}-\\d{2}( ok)?"})j",
           R"j({"guided_choice": ["red", "green", "light blue"]})j",
           R"j({"guided_grammar": "root ::= (\"yes\" | \"no\") \" \" [0-9]{1,3}"})j",
           R"j({"ebnf": "root ::= \"(\" root \")\" | \"x\""})j",
           R"j({"structural_tag": {"type": "structural_tag", "format": {"type": "triggered_tags",
                "triggers": ["<f="], "at_least_one": true, "tags": [{"begin": "<f=a>", "content":
                {"type": "json_schema", "json_schema": {"type": "object", "properties": {"x":
                {"type": "integer", "minimum": -5, "maximum": 5}}, "required": ["x"]}},
                "end": "</f>"}]}}})j"}) {
    SCOPED_TRACE(body);
    auto c = make_output_constraint(m, request_format(body), "", false, {});
    ASSERT_TRUE(c.ok());
    std::mt19937 rng(11);
    for (int walk = 0; walk < 50; ++walk) {
      ConstraintState state(*c);
      std::vector<uint32_t> bits(allowed_mask_words(m.structured_vocab->vocab_size()));
      MaskScratch scratch;
      std::string text;
      bool ended = false;
      for (int step = 0; step < 400 && !ended; ++step) {
        ASSERT_TRUE(state.fill_allowed(bits, std::vector<int32_t>{eos}, scratch)) << text;
        std::vector<int32_t> allowed;
        for (int32_t t = 0; t < m.structured_vocab->vocab_size(); ++t)
          if (mask_bit(bits, t)) allowed.push_back(t);
        // Prefer ending once allowed, half the time, so walks finish.
        const bool end = mask_bit(bits, eos) && rng() % 2 == 0;
        const int32_t t = end ? eos : allowed[rng() % allowed.size()];
        ASSERT_TRUE(state.accept(t, t == eos))
            << "token " << t << " ('" << m.structured_vocab->bytes(t) << "') after '" << text
            << "'";
        ended = t == eos;
        text += m.structured_vocab->bytes(t);
      }
    }
  }
}

// A format whose text the model's caches already hold takes the cached compiled form (the same
// object, no compile): JSON schemas as a value or as text in every field and shape that carries
// one, grammars, structural tags, regexes and choices; the model's own caches through
// format_caches, whose regex entries also share their masks. Without caches, or for another
// text, the format compiles its own.
TEST(RequestFormat, FormatsSentBeforeComeFromTheCaches) {
  GrammarCache grammars;
  SchemaCache schemas;
  RegexCache regexes;
  const FormatCaches caches{&grammars, &schemas, &regexes};
  const Json schema =
      Json::parse(R"({"type": "object", "properties": {"a": {"type": "integer"}}})");
  const auto cached_schema =
      schemas.share(schema.dump(), *JsonGrammar::from_schema(schema)).compiled;
  const std::string gbnf = R"(root ::= "yes" | "no")";
  const auto cached_grammar =
      grammars.share(gbnf, *EbnfGrammar::compile_gbnf_or_lark(gbnf)).compiled;
  const Json tag = Json::parse(kToolTag);
  const ResponseFormat compiled_tag = request_format(Json{{"structural_tag", tag}}.dump().c_str());
  const auto cached_tag = grammars.share(compiled_tag.grammar_text, compiled_tag.ebnf).compiled;

  const Json json_schema = {{"type", "json_schema"},
                            {"json_schema", {{"name", "a"}, {"schema", schema}}}};
  for (const Json& body :
       {Json{{"response_format", json_schema}}, Json{{"guided_json", schema}},
        Json{{"guided_json", schema.dump()}}, Json{{"json_schema", schema.dump()}},
        Json{{"structured_outputs", {{"json", schema}}}}}) {
    SCOPED_TRACE(body.dump());
    auto f = parse_request_format(body, caches);
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_EQ(f->grammar, cached_schema);
    EXPECT_EQ(f->schema_text, schema.dump());
    auto own = parse_request_format(body, {});
    ASSERT_TRUE(own.ok());
    EXPECT_NE(own->grammar, cached_schema);
  }
  const Json responses = {{"type", "json_schema"}, {"name", "a"}, {"schema", schema}};
  EXPECT_EQ(
      parse_response_format(&responses, "text.format", FormatShape::kResponses, caches)->grammar,
      cached_schema);
  const Json anthropic = {{"type", "json_schema"}, {"schema", schema}};
  EXPECT_EQ(
      parse_response_format(&anthropic, "output_format", FormatShape::kAnthropic, caches)->grammar,
      cached_schema);
  const Json other = {{"guided_json", {{"type", "integer"}}}};
  EXPECT_NE(parse_request_format(other, caches)->grammar, cached_schema);

  for (const Json& body : {Json{{"guided_grammar", gbnf}}, Json{{"ebnf", gbnf}},
                           Json{{"structured_outputs", {{"grammar", gbnf}}}}}) {
    SCOPED_TRACE(body.dump());
    EXPECT_EQ(parse_request_format(body, caches)->ebnf, cached_grammar);
    EXPECT_NE(parse_request_format(body, {})->ebnf, cached_grammar);
  }
  for (const Json& body : {Json{{"structural_tag", tag.dump()}}, Json{{"response_format", tag}},
                           Json{{"structured_outputs", {{"structural_tag", tag}}}}}) {
    SCOPED_TRACE(body.dump());
    EXPECT_EQ(parse_request_format(body, caches)->ebnf, cached_tag);
    EXPECT_NE(parse_request_format(body, {})->ebnf, cached_tag);
  }

  const auto cached_regex = regexes.share("[a-c]+x", *ByteDfa::from_full_match("[a-c]+x")).compiled;
  const std::vector<std::string> yes_no = {"yes", "no"};
  const auto cached_choice = regexes
                                 .share(std::string("\0choice\0", 8) + Json(yes_no).dump(),
                                        *ByteDfa::from_literals(yes_no))
                                 .compiled;
  for (const Json& body : {Json{{"guided_regex", "[a-c]+x"}}, Json{{"regex", "[a-c]+x"}},
                           Json{{"structured_outputs", {{"regex", "[a-c]+x"}}}}}) {
    SCOPED_TRACE(body.dump());
    EXPECT_EQ(parse_request_format(body, caches)->regex, cached_regex);
    EXPECT_NE(parse_request_format(body, {})->regex, cached_regex);
  }
  for (const Json& body : {Json{{"guided_choice", {"yes", "no"}}},
                           Json{{"structured_outputs", {{"choice", {"yes", "no"}}}}}}) {
    SCOPED_TRACE(body.dump());
    EXPECT_EQ(parse_request_format(body, caches)->regex, cached_choice);
  }
  EXPECT_NE(parse_request_format(Json{{"guided_choice", {"no", "yes"}}}, caches)->regex,
            cached_choice);

  ServedModel m = nano_with(nullptr);
  m.schemas = std::make_shared<SchemaCache>();
  m.grammars = std::make_shared<GrammarCache>();
  m.regexes = std::make_shared<RegexCache>();
  const Json body = {{"guided_json", schema}};
  auto first = parse_request_format(body, format_caches(m));
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(make_output_constraint(m, *first, "", false, {}).ok());  // kept in m.schemas
  EXPECT_EQ(parse_request_format(body, format_caches(m))->grammar, first->grammar);
  const Json regex_body = {{"guided_regex", "[0-9]+"}};
  std::shared_ptr<const OutputConstraint> constraints[2];
  for (auto& c : constraints) {
    auto f = parse_request_format(regex_body, format_caches(m));
    ASSERT_TRUE(f.ok());
    auto made = make_output_constraint(m, *f, "", false, {});
    ASSERT_TRUE(made.ok());
    c = *made;
  }
  EXPECT_EQ(constraints[0]->regex, constraints[1]->regex);
  EXPECT_EQ(constraints[0]->regex_masks, constraints[1]->regex_masks);
  EXPECT_EQ(m.regexes->size(), 1u);
}

// A guided_choice is the trie of its strings, not a determinized alternation: 3,000 labels of ~20
// bytes (~40,000 states, ten times the regex state limit) compile, match each label whole and
// nothing else.
TEST(RequestFormat, AChoiceOfThousandsOfLabelsCompiles) {
  Json labels = Json::array();
  for (int i = 0; i < 3000; ++i)
    labels.push_back("label-" + std::to_string(i * 7919) + "-category");
  const ResponseFormat f = request_format(Json{{"guided_choice", labels}}.dump().c_str());
  ASSERT_EQ(f.kind, ResponseFormat::Kind::kRegex);
  EXPECT_GT(f.regex->num_states(), static_cast<size_t>(kMaxPatternDfaStates));
  for (const Json& l : labels) EXPECT_TRUE(f.regex->matches(l.get<std::string>())) << l;
  for (const char* s : {"label-", "label-0-category!", "label-1-category", "", "x"})
    EXPECT_FALSE(f.regex->matches(s)) << s;
}

// A format whose text failed to compile is refused at once the next time, with the same error
// (the caches remember it: a text they say was refused is refused even if it would compile), for
// schemas, grammars, structural tags and regexes; without caches each compiles again.
TEST(RequestFormat, FormatsRefusedBeforeAreRefusedFromTheCaches) {
  GrammarCache grammars;
  SchemaCache schemas;
  RegexCache regexes;
  const FormatCaches caches{&grammars, &schemas, &regexes};
  const Json bad_schema = {{"guided_json", {{"type", "string"}, {"pattern", "(a"}}}};
  const ApiError first = parse_request_format(bad_schema, caches).error();
  EXPECT_EQ(parse_request_format(bad_schema, caches).error().message, first.message);
  EXPECT_EQ(parse_request_format(bad_schema, caches).error().param, "guided_json");
  EXPECT_TRUE(schemas.refusal(bad_schema["guided_json"].dump()).has_value());

  const Json schema = {{"type", "integer"}};
  schemas.refuse(schema.dump(), "remembered");
  const ApiError remembered = parse_request_format(Json{{"guided_json", schema}}, caches).error();
  EXPECT_EQ(remembered.message, "'guided_json' cannot be enforced: remembered");
  EXPECT_TRUE(parse_request_format(Json{{"guided_json", schema}}, {}).ok());
  grammars.refuse(R"(root ::= "a")", "remembered");
  EXPECT_FALSE(parse_request_format(Json{{"ebnf", R"(root ::= "a")"}}, caches).ok());
  regexes.refuse("a+", "remembered");
  EXPECT_EQ(parse_request_format(Json{{"regex", "a+"}}, caches).error().message,
            "'regex' cannot be enforced: remembered");
  const Json tag = Json::parse(kToolTag);
  grammars.refuse(request_format(Json{{"structural_tag", tag}}.dump().c_str()).grammar_text,
                  "remembered");
  EXPECT_FALSE(parse_request_format(Json{{"structural_tag", tag}}, caches).ok());
}

}  // namespace
}  // namespace beam::server
