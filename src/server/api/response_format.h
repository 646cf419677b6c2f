// response_format (chat completions) / text.format (responses): text, json_object, json_schema or
// (chat) structural_tag, and vLLM's / SGLang's regex, choice, grammar, schema and structural tag
// extensions, turned into the engine's OutputConstraint (constrained decoding,
// docs/structured_output.md).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/structured/compiled_cache.h"
#include "runtime/structured/json_grammar.h"
#include "runtime/structured/output_constraint.h"
#include "server/api/api_error.h"
#include "server/api/json_fields.h"
#include "text/tokenizer.h"

namespace beam::server {

struct ServedModel;

struct ResponseFormat {
  enum class Kind { kText, kJsonObject, kJsonSchema, kRegex, kGrammar, kStructuralTag };
  Kind kind = Kind::kText;
  std::shared_ptr<const JsonGrammar> grammar;  // kJsonObject / kJsonSchema: compiled when read
  std::shared_ptr<const ByteDfa> regex;        // kRegex: the whole output matches it
  std::shared_ptr<const EbnfGrammar> ebnf;  // kGrammar, kStructuralTag: the whole output matches it
  std::string grammar_text;  // kGrammar, kStructuralTag: ServedModel::grammars' key (its text)
  std::string schema_text;  // kJsonSchema: the schema as JSON text (ServedModel::schemas' key)
  std::string regex_text;   // kRegex: the pattern (ServedModel::regexes' key)
  std::string path;  // where the format sat in the request, for errors
  // A tool call's delimiter tokens (OutputConstraint::call_close / call_open, tool_call_format.h).
  std::optional<int32_t> call_close;
  std::optional<int32_t> call_open;
  bool reasoning_prelude = true;  // chat output may reason first (make_output_constraint)
};

// The id of the added token spelled `text`, if the tokenizer has one.
std::optional<int32_t> added_token_id(const text::Tokenizer& tokenizer, std::string_view text);

// Where a format object comes from, which decides its shape.
enum class FormatShape {
  kChat,  // response_format: {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}
          // or a structural tag {"type": "structural_tag", "format"} (or "structures", "triggers")
  kResponses,  // text.format: {"type": "json_schema", "name", "schema", "strict"}
  kAnthropic,  // output_format: {"type": "json_schema", "schema"} (json_schema only)
};

// The served model's compiled constraints by text (ServedModel::grammars / schemas / regexes): a
// grammar, schema, structural tag, regex or choice sent before is taken from them instead of
// compiled again (RL rollouts and agents send the same one with every request), and one refused
// before is refused again at once with the same error. Null members: every format compiles.
struct FormatCaches {
  GrammarCache* grammars = nullptr;
  SchemaCache* schemas = nullptr;
  RegexCache* regexes = nullptr;
};
FormatCaches format_caches(const ServedModel& model);

// A JSON schema's compiled grammar: the one `caches` holds under `text` (the schema's dump), else
// compiled now. An error names the schema keyword it cannot honour (a text refused before: the
// error remembered).
Expected<std::shared_ptr<const JsonGrammar>> schema_grammar(const Json& schema,
                                                            const std::string& text,
                                                            const FormatCaches& caches);

// Reads a format object of the given shape ("text" and "json_object" too, except Anthropic's)
// and compiles its schema (a 400 naming the schema keyword it cannot honour; `caches` first).
// Null or absent: text.
ApiExpected<ResponseFormat> parse_response_format(const Json* format, const std::string& path,
                                                  FormatShape shape, const FormatCaches& caches);

// The output format of a chat or completions request: `response_format`, or one of the
// structured-output extensions vLLM, SGLang and llama.cpp clients send: `structured_outputs`
// ({"json": schema} | {"regex": r} | {"choice": [strings]} | {"grammar": gbnf} |
// {"json_object": true} | {"structural_tag": tag text}), `guided_json`, `guided_regex`,
// `guided_choice`, `guided_grammar`, SGLang's `regex`, `json_schema` (schema text), `ebnf` and
// `structural_tag` (tag text), llama.cpp's `grammar`. A regex, a choice, a GBNF grammar
// (EbnfGrammar, root rule `root`) or a structural tag (structural_tag.h) constrains the whole
// output (full match). More than one of them, or one that does not compile, is a 400 naming the
// field. Compiled forms come from `caches` when they hold the text.
ApiExpected<ResponseFormat> parse_request_format(const Json& body, const FormatCaches& caches);

// The model's text tokens for constraint masks: every token id of the tokenizer below vocab_size
// that writes text, its added tokens included (a `<tool_call>` token may open a structural tag's
// call, as the model writes it); a request leaves out those its output does not show
// (hidden_special_tokens).
std::shared_ptr<const VocabIndex> build_structured_vocab(const text::Tokenizer& tokenizer,
                                                         int64_t vocab_size);

// The special tokens a request's output text leaves out, which its constrained text therefore
// never uses: with skip_special, every special added token but `shown` (the response template's
// delimiters, kept for parsing); none without.
std::vector<int32_t> hidden_special_tokens(const text::Tokenizer& tokenizer, bool skip_special,
                                           std::span<const int32_t> shown);

// The constraint for a format (null for text): its grammar, and, for chat output (`chat`: parsed
// with the response template) of models that think between single <think> / </think> tokens, a
// reasoning prelude decided by the rendered prompt: JSON from the first token when the prompt
// already closed the reasoning, free text until </think> when the prompt left it open, else the
// model may open <think> or start the JSON. Raw completions are JSON from the first token.
// hidden: tokens the output does not show (hidden_special_tokens; OutputConstraint::hidden_tokens).
ApiExpected<std::shared_ptr<const OutputConstraint>> make_output_constraint(
    const ServedModel& model, const ResponseFormat& format, std::string_view prompt_text, bool chat,
    std::vector<int32_t> hidden);

}  // namespace beam::server
