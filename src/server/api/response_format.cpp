// response_format parsing and the OutputConstraint it asks for (see response_format.h).
#include "server/api/response_format.h"

#include <initializer_list>
#include <optional>
#include <string>
#include <utility>

#include "runtime/structured/ebnf_grammar.h"
#include "runtime/structured/json_grammar.h"
#include "runtime/structured/structural_tag.h"
#include "server/api/served_model.h"
#include "server/api/think_tags.h"
#include "server/parsers/bounded_json.h"
#include "server/parsers/response_stream.h"
#include "server/parsers/response_template.h"

namespace beam::server {
namespace {

// The compiled form `cache` (may be null) holds under `key`; else the error it remembers for that
// key; else compile(), whose error the cache then remembers.
template <typename Cache, typename Compile>
auto cached_or_compiled(Cache* cache, const std::string& key, Compile&& compile)
    -> decltype(compile()) {
  if (cache) {
    if (auto hit = cache->find(key)) return hit->compiled;
    if (std::optional<std::string> refused = cache->refusal(key)) return make_error(*refused);
  }
  auto compiled = compile();
  if (cache && !compiled.ok()) cache->refuse(key, compiled.error().message);
  return compiled;
}

// The text a regex matches when it matches exactly one text (only literal characters and
// escaped punctuation, as `<\|channel\|>final<\|message\|>`); nullopt otherwise.
std::optional<std::string> regex_literal(std::string_view pattern) {
  constexpr std::string_view kMeta = ".^$*+?()[]{}|";
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\') {
      if (i + 1 == pattern.size()) return std::nullopt;
      const char e = pattern[++i];
      const bool punctuation = (e >= '!' && e <= '/') || (e >= ':' && e <= '@') ||
                               (e >= '[' && e <= '`') || (e >= '{' && e <= '~');
      if (!punctuation) return std::nullopt;  // \d, \n, \b, ...: not a plain character
      out += e;
    } else if (kMeta.find(c) != std::string_view::npos) {
      return std::nullopt;
    } else {
      out += c;
    }
  }
  return out;
}

// The one text that opens the template's content field, when it has one (a single literal, or
// a pattern that matches one text); nullopt for an implicit content field or several openings.
std::optional<std::string> content_open_text(const ResponseTemplate& t) {
  for (const std::string& name : FieldRoles{}.content) {
    const std::optional<size_t> index = t.field_index(name);
    if (!index) continue;
    const std::optional<Delimiter>& open = t.fields[*index].open;
    if (!open) return std::nullopt;
    if (open->is_literal) {
      if (open->literals.size() != 1) return std::nullopt;
      return open->literals[0];
    }
    return regex_literal(open->pattern);
  }
  return std::nullopt;
}

// Where the rendered prompt leaves the reasoning; the text after the template's last start
// anchor decides. Single <think> / </think> tokens: an empty <think></think> block closes it, a
// lone <think> leaves it open, neither lets the first token choose. A content field opened by a
// header (a channel template's `<|channel|>final<|message|>`): the output is free until it writes
// that header, unless the prompt already did.
void set_reasoning_prelude(const ServedModel& model, std::string_view prompt_text,
                           OutputConstraint& c) {
  if (!model.tokenizer || !model.response_template) return;
  std::string_view tail = prompt_text;
  if (auto t = model.response_template->truncate_past_last_anchor(prompt_text); t.ok()) tail = *t;
  if (const std::optional<std::string> header = content_open_text(*model.response_template)) {
    if (tail.find(*header) != std::string_view::npos) return;  // JSON from the first token
    auto ids = model.tokenizer->encode(*header, /*allow_special=*/true);
    if (!ids.ok() || ids->empty()) return;
    c.json_after.assign(ids->begin(), ids->end());
    c.starts_in_reasoning = true;
    return;
  }
  const std::optional<ThinkTags> tags = think_tags(model, prompt_text);
  if (!tags || tags->after == ThinkTags::After::kClosed) return;  // JSON from the first token
  c.reasoning_open = tags->open;
  c.json_after = {tags->close};
  c.starts_in_reasoning = tags->after == ThinkTags::After::kOpen;
}

ResponseFormat json_object_format(const std::string& path) {
  ResponseFormat out;
  out.kind = ResponseFormat::Kind::kJsonObject;
  out.grammar = JsonGrammar::any_object();
  out.path = path;
  return out;
}

ApiExpected<ResponseFormat> schema_format(const Json& schema, const std::string& path,
                                          const FormatCaches& caches) {
  std::string text = schema.dump();
  auto grammar = schema_grammar(schema, text, caches);
  if (!grammar.ok())
    return invalid_request("'" + path + "' cannot be enforced: " + grammar.error().message, path,
                           "unsupported_parameter");
  ResponseFormat out;
  out.kind = ResponseFormat::Kind::kJsonSchema;
  out.grammar = std::move(grammar).value();
  out.schema_text = std::move(text);
  out.path = path;
  return out;
}

// A schema given as JSON text (SGLang's json_schema, vLLM's guided_json as a string) or a value.
ApiExpected<ResponseFormat> schema_field(const Json& value, const std::string& path,
                                         const FormatCaches& caches) {
  if (!value.is_string()) {
    if (!value.is_object() && !value.is_boolean())
      return invalid_request("'" + path + "': expected a JSON schema (an object or its text)",
                             path);
    return schema_format(value, path, caches);
  }
  Expected<Json> parsed = parse_bounded_json(value.get<std::string>());
  if (!parsed.ok())
    return invalid_request("'" + path + "': the schema text is " + parsed.error().message, path);
  return schema_format(*parsed, path, caches);
}

// The whole-output automaton format of `dfa` (a 400 when it did not compile), kept in the model's
// RegexCache under `key`.
ApiExpected<ResponseFormat> dfa_format(Expected<std::shared_ptr<const ByteDfa>> dfa,
                                       const std::string& path, std::string key) {
  if (!dfa.ok())
    return invalid_request("'" + path + "' cannot be enforced: " + dfa.error().message, path,
                           "unsupported_parameter");
  ResponseFormat out;
  out.kind = ResponseFormat::Kind::kRegex;
  out.path = path;
  out.regex = std::move(dfa).value();
  out.regex_text = std::move(key);
  return out;
}

ApiExpected<ResponseFormat> regex_format(const Json& value, const std::string& path,
                                         const FormatCaches& caches) {
  if (!value.is_string())
    return invalid_request("'" + path + "': expected a regular expression string", path);
  std::string text = value.get<std::string>();
  auto dfa =
      cached_or_compiled(caches.regexes, text, [&] { return ByteDfa::from_full_match(text); });
  return dfa_format(std::move(dfa), path, std::move(text));
}

// A grammar the whole output must match: GBNF (start rule `root`), or Lark (start rule `start`)
// when it defines no `name ::=` rule, as vLLM tells them apart.
ApiExpected<ResponseFormat> grammar_format(const Json& value, const std::string& path,
                                           const FormatCaches& caches) {
  if (!value.is_string())
    return invalid_request("'" + path + "': expected a grammar string (GBNF or Lark)", path);
  std::string text = value.get<std::string>();
  auto grammar = cached_or_compiled(caches.grammars, text,
                                    [&] { return EbnfGrammar::compile_gbnf_or_lark(text); });
  if (!grammar.ok())
    return invalid_request("'" + path + "' cannot be enforced: " + grammar.error().message, path,
                           "unsupported_parameter");
  ResponseFormat out;
  out.kind = ResponseFormat::Kind::kGrammar;
  out.path = path;
  out.grammar_text = std::move(text);
  out.ebnf = std::move(grammar).value();
  return out;
}

// A structural tag (structural_tag.h): the grammar it compiles to, shared through the model's
// GrammarCache under its JSON text with a prefix no grammar text can compile with.
ApiExpected<ResponseFormat> structural_tag_format(const Json& tag, const std::string& path,
                                                  const FormatCaches& caches) {
  std::string key = std::string("\0structural_tag\0", 16) + tag.dump();
  auto grammar =
      cached_or_compiled(caches.grammars, key, [&] { return compile_structural_tag(tag); });
  if (!grammar.ok())
    return invalid_request("'" + path + "' cannot be enforced: " + grammar.error().message, path,
                           "unsupported_parameter");
  ResponseFormat out;
  out.kind = ResponseFormat::Kind::kStructuralTag;
  out.path = path;
  out.grammar_text = std::move(key);
  out.ebnf = std::move(grammar).value();
  return out;
}

// A structural tag given as an object or as its JSON text (vLLM's structured_outputs and SGLang
// send the text).
ApiExpected<ResponseFormat> structural_tag_field(const Json& value, const std::string& path,
                                                 const FormatCaches& caches) {
  if (!value.is_string()) {
    if (!value.is_object())
      return invalid_request("'" + path + "': expected a structural tag (an object or its text)",
                             path);
    return structural_tag_format(value, path, caches);
  }
  Expected<Json> parsed = parse_bounded_json(value.get<std::string>());
  if (!parsed.ok())
    return invalid_request("'" + path + "': the structural tag text is " + parsed.error().message,
                           path);
  if (!parsed->is_object())
    return invalid_request("'" + path + "': the structural tag text is not a JSON object", path);
  return structural_tag_format(*parsed, path, caches);
}

// One of the strings, exactly: their trie (ByteDfa::from_literals; thousands of long choices fit),
// shared through the model's RegexCache under the list's JSON with a prefix no pattern has.
ApiExpected<ResponseFormat> choice_format(const Json& value, const std::string& path,
                                          const FormatCaches& caches) {
  if (!value.is_array() || value.empty())
    return invalid_request("'" + path + "': expected a non-empty array of strings", path);
  std::vector<std::string> choices;
  for (size_t i = 0; i < value.size(); ++i) {
    if (!value[i].is_string())
      return invalid_request("'" + path + "[" + std::to_string(i) + "]': expected a string", path);
    choices.push_back(value[i].get<std::string>());
  }
  std::string key = std::string("\0choice\0", 8) + value.dump();
  auto dfa =
      cached_or_compiled(caches.regexes, key, [&] { return ByteDfa::from_literals(choices); });
  return dfa_format(std::move(dfa), path, std::move(key));
}

// Reads the value of format field `path` (its name is the part after the last '.').
using FormatReader = ApiExpected<ResponseFormat> (*)(const Json& value, const std::string& path,
                                                     const FormatCaches& caches);

// The one format among `fields` of `object` (null, false and a top-level "grammar" of "" count as
// absent), read by its reader; text when none. Two present is a 400 naming the second.
ApiExpected<ResponseFormat> one_format(
    const Json& object, const std::string& prefix, const FormatCaches& caches,
    std::initializer_list<std::pair<const char*, FormatReader>> fields) {
  // llama.cpp's top-level `grammar` defaults to "" (its clients send it): no grammar.
  auto present = [&](const char* key) {
    const auto it = object.find(key);
    return it != object.end() && !it->is_null() && *it != Json(false) &&
           !(prefix.empty() && std::string_view(key) == "grammar" && *it == Json(""));
  };
  const char* found = nullptr;
  FormatReader read = nullptr;
  for (const auto& [key, reader] : fields) {
    if (!present(key)) continue;
    if (found)
      return invalid_request("'" + prefix + found + "' and '" + prefix + key +
                                 "' both ask for an output format; give one",
                             prefix + key);
    found = key;
    read = reader;
  }
  if (!found) return ResponseFormat{};
  return read(object[found], prefix + found, caches);
}

ApiExpected<ResponseFormat> chat_response_format(const Json& value, const std::string& path,
                                                 const FormatCaches& caches) {
  return parse_response_format(&value, path, FormatShape::kChat, caches);
}

ApiExpected<ResponseFormat> json_object_field(const Json&, const std::string& path,
                                              const FormatCaches&) {
  return json_object_format(path);
}

// vLLM's structured_outputs object: one of json / regex / choice / grammar / json_object /
// structural_tag.
ApiExpected<ResponseFormat> structured_outputs_format(const Json& value, const std::string& path,
                                                      const FormatCaches& caches) {
  if (!value.is_object()) return invalid_request("'" + path + "': expected an object", path);
  return one_format(value, path + ".", caches,
                    {{"json", schema_field},
                     {"regex", regex_format},
                     {"choice", choice_format},
                     {"grammar", grammar_format},
                     {"json_object", json_object_field},
                     {"structural_tag", structural_tag_field}});
}

}  // namespace

FormatCaches format_caches(const ServedModel& model) {
  return {model.grammars.get(), model.schemas.get(), model.regexes.get()};
}

Expected<std::shared_ptr<const JsonGrammar>> schema_grammar(const Json& schema,
                                                            const std::string& text,
                                                            const FormatCaches& caches) {
  return cached_or_compiled(caches.schemas, text, [&] { return JsonGrammar::from_schema(schema); });
}

std::optional<int32_t> added_token_id(const text::Tokenizer& tokenizer, std::string_view text) {
  std::optional<text::TokenId> id = tokenizer.token_to_id(text);
  if (!id) return std::nullopt;
  const text::TokenPiece* piece = tokenizer.piece(*id);
  if (!piece || !piece->added) return std::nullopt;
  return static_cast<int32_t>(*id);
}

ApiExpected<ResponseFormat> parse_response_format(const Json* format, const std::string& path,
                                                  FormatShape shape, const FormatCaches& caches) {
  ResponseFormat out;
  out.path = path;
  if (!format) return out;
  if (!format->is_object()) return invalid_request("'" + path + "': expected an object", path);
  FieldReader r(*format, path);
  std::string type;
  r.require("type", &type);
  if (r.failed()) return r.take_error();
  if (shape == FormatShape::kAnthropic && type != "json_schema")
    return invalid_request("'" + path + ".type': expected \"json_schema\", got \"" + type + "\"",
                           path + ".type");
  if (type == "text") return out;
  if (type == "json_object") return json_object_format(path);
  if (type == "structural_tag" && shape == FormatShape::kChat)
    return structural_tag_format(*format, path, caches);
  if (type != "json_schema")
    return invalid_request("'" + path + ".type': unknown format \"" + type +
                               "\" (expected \"text\", \"json_object\"" +
                               (shape == FormatShape::kChat ? ", \"json_schema\" or "
                                                              "\"structural_tag\")"
                                                            : " or \"json_schema\")"),
                           path + ".type");
  const Json* holder = format;
  std::string holder_path = path;
  if (shape == FormatShape::kChat) {
    holder = r.get("json_schema");
    holder_path = path + ".json_schema";
    if (!holder) return invalid_request("'" + holder_path + "' is required", holder_path);
    if (!holder->is_object())
      return invalid_request("'" + holder_path + "': expected an object", holder_path);
  }
  FieldReader h(*holder, holder_path);
  if (shape != FormatShape::kAnthropic) {
    std::string name;
    h.require("name", &name);
    bool strict = false;
    h.read("strict", &strict);  // every schema is enforced exactly; strict changes nothing
  }
  if (h.failed()) return h.take_error();
  const Json* schema = h.get("schema");
  if (!schema && shape == FormatShape::kAnthropic)
    return invalid_request("'" + holder_path + ".schema' is required", holder_path + ".schema");
  return schema_format(schema ? *schema : Json::object(), holder_path + ".schema",  // none: any
                       caches);
}

ApiExpected<ResponseFormat> parse_request_format(const Json& body, const FormatCaches& caches) {
  return one_format(body, "", caches,
                    {{"response_format", chat_response_format},
                     {"structured_outputs", structured_outputs_format},
                     {"guided_json", schema_field},
                     {"guided_regex", regex_format},
                     {"guided_choice", choice_format},
                     {"guided_grammar", grammar_format},
                     {"regex", regex_format},
                     {"json_schema", schema_field},
                     {"ebnf", grammar_format},
                     {"structural_tag", structural_tag_field},
                     {"grammar", grammar_format}});
}

std::shared_ptr<const VocabIndex> build_structured_vocab(const text::Tokenizer& tokenizer,
                                                         int64_t vocab_size) {
  std::vector<VocabToken> tokens;
  const int32_t end = static_cast<int32_t>(std::min<int64_t>(tokenizer.vocab_size(), vocab_size));
  for (int32_t id = 0; id < end; ++id) {
    const text::TokenPiece* piece = tokenizer.piece(id);
    if (piece && piece->exists && !piece->bytes.empty()) tokens.push_back({id, piece->bytes});
  }
  return std::make_shared<const VocabIndex>(vocab_size, std::move(tokens));
}

std::vector<int32_t> hidden_special_tokens(const text::Tokenizer& tokenizer, bool skip_special,
                                           std::span<const int32_t> shown) {
  std::vector<int32_t> hidden;
  if (!skip_special) return hidden;
  for (const text::AddedToken& t : tokenizer.added_tokens())
    if (t.special && std::find(shown.begin(), shown.end(), t.id) == shown.end())
      hidden.push_back(t.id);
  return hidden;
}

ApiExpected<std::shared_ptr<const OutputConstraint>> make_output_constraint(
    const ServedModel& model, const ResponseFormat& format, std::string_view prompt_text, bool chat,
    std::vector<int32_t> hidden) {
  if (format.kind == ResponseFormat::Kind::kText) return std::shared_ptr<const OutputConstraint>();
  if (!model.structured_vocab)
    return invalid_request("'" + format.path + "': structured output needs the model's tokenizer",
                           format.path);
  auto c = std::make_shared<OutputConstraint>();
  c->vocab = model.structured_vocab;
  c->hidden_tokens = std::move(hidden);
  c->grammar = format.grammar;
  c->regex = format.regex;
  c->ebnf = format.ebnf;
  if (format.ebnf && model.grammars) {  // a grammar sent before shares its masks
    GrammarCache::Entry shared = model.grammars->share(format.grammar_text, format.ebnf);
    c->ebnf = shared.compiled;
    c->grammar_masks = shared.memo;
  }
  if (format.grammar && !format.schema_text.empty() && model.schemas) {  // likewise a schema
    SchemaCache::Entry shared = model.schemas->share(format.schema_text, format.grammar);
    c->grammar = shared.compiled;
    c->pattern_masks = shared.memo;
  }
  if (format.regex && !format.regex_text.empty() && model.regexes) {  // likewise a regex
    RegexCache::Entry shared = model.regexes->share(format.regex_text, format.regex);
    c->regex = shared.compiled;
    c->regex_masks = shared.memo;
  }
  c->call_close = format.call_close;
  c->call_open = format.call_open;
  if (chat && format.reasoning_prelude) set_reasoning_prelude(model, prompt_text, *c);
  return std::shared_ptr<const OutputConstraint>(std::move(c));
}

}  // namespace beam::server
