// Constrained decoding on the CPU (Google Benchmark): building the vocabulary index, one token
// mask at typical JSON, grammar, regex and structural-tag positions, compiling a structural tag,
// and determinizing a regex. The tokenizer comes from $BEAMSERVE_TOKENIZER_DIR (default
// models/beam-nano; a Qwen3 tokenizer.json gives Beam's 151K-token vocabulary).
// Run: build/<dir>/tools/bench/structured_bench
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include "runtime/structured/byte_dfa.h"
#include "runtime/structured/output_constraint.h"
#include "runtime/structured/regex_mask_cache.h"
#include "runtime/structured/structural_tag.h"
#include "server/api/response_format.h"
#include "text/tokenizer.h"

namespace beam {
namespace {

const text::Tokenizer& tokenizer() {
  static const text::Tokenizer t = [] {
    const char* dir = std::getenv("BEAMSERVE_TOKENIZER_DIR");
    auto loaded = text::Tokenizer::load(dir ? dir : "models/beam-nano");
    if (!loaded.ok()) {
      std::cerr << loaded.error().message << "\n";
      std::exit(1);
    }
    return std::move(loaded).value();
  }();
  return t;
}

const std::shared_ptr<const VocabIndex>& vocab() {
  static const auto v = server::build_structured_vocab(tokenizer(), tokenizer().vocab_size());
  return v;
}

constexpr const char* kSchema = R"({"type":"object","properties":{
    "name":{"type":"string"},"age":{"type":"integer"},"city":{"type":"string","maxLength":40},
    "tags":{"type":"array","items":{"enum":["red","green","blue"]}}},"required":["name","age"]})";

// Patterned strings: masks walk the trie with the string lexer and the pattern's DFA.
constexpr const char* kPatternSchema = R"({"type":"object","properties":{
    "code":{"type":"string","pattern":"^[A-Z]{2}-\\d{1,3}$"},
    "note":{"type":"string","pattern":"x"},
    "when":{"type":"string","format":"date-time"},
    "mail":{"type":"string","format":"email"}}})";

void BM_BuildVocabIndex(benchmark::State& state) {
  for (auto _ : state) {
    auto v = server::build_structured_vocab(tokenizer(), tokenizer().vocab_size());
    benchmark::DoNotOptimize(v);
  }
  state.counters["vocab"] = static_cast<double>(tokenizer().vocab_size());
}
BENCHMARK(BM_BuildVocabIndex)->Unit(benchmark::kMillisecond)->Iterations(3);

// One mask after `prefix` of JSON text of the schema (empty: any object); with `memo`, through a
// request's PatternMaskCache (the first iteration fills it, the rest hit it).
void BM_Mask(benchmark::State& state, const char* schema, const char* prefix, bool memo = false) {
  auto grammar = schema[0]
                     ? JsonGrammar::from_schema(nlohmann::ordered_json::parse(schema))
                     : Expected<std::shared_ptr<const JsonGrammar>>(JsonGrammar::any_object());
  const JsonMatcher m(*grammar);
  MatchState s = m.initial(), scratch;
  if (!m.advance_bytes(s, prefix, scratch)) state.SkipWithError("prefix does not match");
  std::vector<uint32_t> bits(allowed_mask_words(vocab()->vocab_size()));
  MaskScratch mask_scratch;
  PatternMaskCache patterns;
  for (auto _ : state) {
    std::fill(bits.begin(), bits.end(), 0u);
    vocab()->add_allowed(m, s, bits, mask_scratch, memo ? &patterns : nullptr);
    benchmark::DoNotOptimize(bits.data());
  }
  int64_t allowed = 0;
  for (uint32_t w : bits) allowed += __builtin_popcount(w);
  state.counters["allowed"] = static_cast<double>(allowed);
}
BENCHMARK_CAPTURE(BM_Mask, start, kSchema, "")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Mask, key, kSchema, "{\"name\": \"Ann\", ")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Mask, free_string, kSchema, "{\"name\": \"Ann")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Mask, bounded_string, kSchema, "{\"name\": \"A\", \"age\": 3, \"city\": \"Par")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Mask, number, kSchema, "{\"name\": \"A\", \"age\": 3")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Mask, enum_item, kSchema, "{\"name\": \"A\", \"age\": 3, \"tags\": [")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Mask, pattern_code, kPatternSchema, "{\"code\": \"AB")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Mask, pattern_unanchored, kPatternSchema, "{\"note\": \"ab")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Mask, format_date_time, kPatternSchema, "{\"when\": \"2026-12-")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Mask, format_email, kPatternSchema, "{\"mail\": \"ann")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Mask, pattern_unanchored_memo, kPatternSchema, "{\"note\": \"ab", true)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Mask, format_email_memo, kPatternSchema, "{\"mail\": \"ann", true)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Mask, any_object_key, "", "{\"a\": 1, \"")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Mask, any_object_value, "", "{\"a\": ")->Unit(benchmark::kMicrosecond);

// llama.cpp's json.gbnf: a recursive grammar whose strings and numbers are terminals.
constexpr const char* kJsonGbnf = R"g(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
)g";

// How a GBNF mask bench uses a request's GrammarMaskCache: none (every mask walks from scratch);
// a state met before (the first iteration fills the memo, the rest hit it); a new state whose
// terminal states were met before (each iteration a fresh memo that has seen `warm_prefix`, a
// text whose stack tops are the same terminal states under other frames).
enum class GrammarMemo { kNone, kState, kTerminals };

// One mask of a compiled grammar after `prefix`.
void grammar_mask(benchmark::State& state,
                  const Expected<std::shared_ptr<const EbnfGrammar>>& grammar, const char* prefix,
                  GrammarMemo memo, const char* warm_prefix) {
  if (!grammar.ok()) {
    state.SkipWithError(grammar.error().message.c_str());
    return;
  }
  const EbnfMatcher m(*grammar);
  GrammarState s = m.initial(), warm = m.initial(), scratch;
  if (!m.advance_bytes(s, prefix, scratch) || !m.advance_bytes(warm, warm_prefix, scratch))
    state.SkipWithError("prefix does not match");
  std::vector<uint32_t> bits(allowed_mask_words(vocab()->vocab_size()));
  MaskScratch mask_scratch;
  auto masks = std::make_unique<GrammarMaskCache>();
  for (auto _ : state) {
    if (memo == GrammarMemo::kTerminals) {
      state.PauseTiming();
      masks = std::make_unique<GrammarMaskCache>();
      vocab()->add_allowed(m, warm, bits, mask_scratch, masks.get());
      state.ResumeTiming();
    }
    std::fill(bits.begin(), bits.end(), 0u);
    vocab()->add_allowed(m, s, bits, mask_scratch,
                         memo == GrammarMemo::kNone ? nullptr : masks.get());
    benchmark::DoNotOptimize(bits.data());
  }
  int64_t allowed = 0;
  for (uint32_t w : bits) allowed += __builtin_popcount(w);
  state.counters["allowed"] = static_cast<double>(allowed);
  state.counters["stacks"] = static_cast<double>(s.ends.size());
}

// One GBNF mask after `prefix`.
void BM_GrammarMask(benchmark::State& state, const char* gbnf, const char* prefix,
                    GrammarMemo memo = GrammarMemo::kNone, const char* warm_prefix = "") {
  grammar_mask(state, EbnfGrammar::compile(gbnf), prefix, memo, warm_prefix);
}
BENCHMARK_CAPTURE(BM_GrammarMask, json_start, kJsonGbnf, "")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_GrammarMask, json_key, kJsonGbnf, "{\"name\": \"Ann\", ")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_GrammarMask, json_value, kJsonGbnf, "{\"a\": ")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_GrammarMask, json_free_string, kJsonGbnf, "{\"name\": \"Ann")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_GrammarMask, json_number, kJsonGbnf, "{\"a\": [1, 23")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_GrammarMask, json_free_string_memo, kJsonGbnf, "{\"name\": \"Ann",
                  GrammarMemo::kState)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_GrammarMask, json_free_string_new_context, kJsonGbnf, "{\"name\": \"Ann",
                  GrammarMemo::kTerminals, "{\"a\": [{\"b\": \"xyz")
    ->Unit(benchmark::kMicrosecond);

// A structural tag of `tools` tool calls in free text (Llama's `<function=NAME>` layout), each
// tool's arguments a schema of six properties: strings, an enum, bounded integers and numbers,
// an array and a nested object.
nlohmann::ordered_json tool_tag(int tools) {
  nlohmann::ordered_json tags = nlohmann::ordered_json::array();
  for (int i = 0; i < tools; ++i) {
    const std::string n = std::to_string(i);
    tags.push_back(nlohmann::ordered_json::parse(R"({"begin": "<function=tool_)" + n +
                                                 R"(>", "end": "</function>", "content": {
        "type": "json_schema", "json_schema": {"type": "object", "properties": {
        "query_)" + n + R"(": {"type": "string", "maxLength": 64},
        "unit": {"enum": ["celsius", "fahrenheit", "kelvin"]},
        "count": {"type": "integer", "minimum": 1, "maximum": )" +
                                                 std::to_string(10 + 7 * i) + R"(},
        "ratio": {"type": "number", "minimum": 0, "maximum": 1},
        "ids": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
        "where": {"type": "object", "properties": {"lat": {"type": "number"},
                  "lon": {"type": "number"}}, "required": ["lat", "lon"]}},
        "required": ["query_)" + n + R"(", "count"]}}})"));
  }
  return {{"type", "structural_tag"},
          {"format",
           {{"type", "triggered_tags"}, {"triggers", {"<function="}}, {"tags", std::move(tags)}}}};
}

void BM_StructuralTagCompile(benchmark::State& state) {
  const nlohmann::ordered_json tag = tool_tag(static_cast<int>(state.range(0)));
  size_t terminals = 0, rules = 0;
  for (auto _ : state) {
    auto grammar = compile_structural_tag(tag);
    if (!grammar.ok()) {
      state.SkipWithError(grammar.error().message.c_str());
      return;
    }
    terminals = (*grammar)->num_terminals();
    rules = (*grammar)->rules().size();
  }
  state.counters["terminals"] = static_cast<double>(terminals);
  state.counters["rules"] = static_cast<double>(rules);
}
BENCHMARK(BM_StructuralTagCompile)->Arg(1)->Arg(20)->Unit(benchmark::kMillisecond);

// Determinizing one regex (ByteDfa): what a request's pattern or guided_regex costs before its
// first mask, and what refusing one past the build's step bound costs.
void BM_RegexCompile(benchmark::State& state, const char* pattern, bool refused) {
  size_t states = 0;
  for (auto _ : state) {
    auto dfa = ByteDfa::from_full_match(pattern);
    if (dfa.ok() == refused) {
      state.SkipWithError(dfa.ok() ? "built a pattern meant to be refused"
                                   : dfa.error().message.c_str());
      return;
    }
    states = dfa.ok() ? (*dfa)->num_states() : 0;
  }
  state.counters["states"] = static_cast<double>(states);
}
BENCHMARK_CAPTURE(BM_RegexCompile, email, "[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\\.[A-Za-z0-9-]+)+",
                  false)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_RegexCompile, optional_1000, "([a-z]?){1000}", false)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_RegexCompile, nested_refused, "(([a-z]?){100}){100}", true)
    ->Unit(benchmark::kMillisecond);

// One mask of a whole-output regex (guided_regex) after `prefix`: a walk of the vocabulary's
// trie with the DFA, or with `memo` through a RegexMaskCache (the first iteration fills it, the
// rest copy its words).
void BM_RegexMask(benchmark::State& state, const char* pattern, const char* prefix, bool memo) {
  auto dfa = ByteDfa::from_full_match(pattern);
  if (!dfa.ok()) {
    state.SkipWithError(dfa.error().message.c_str());
    return;
  }
  const int32_t at = (*dfa)->walk((*dfa)->start(), prefix);
  if (at == ByteDfa::kDead) state.SkipWithError("prefix does not match");
  std::vector<uint32_t> bits(allowed_mask_words(vocab()->vocab_size()));
  RegexMaskCache masks;
  for (auto _ : state) {
    std::fill(bits.begin(), bits.end(), 0u);
    if (memo)
      masks.add_allowed(*vocab(), **dfa, at, bits);
    else
      vocab()->add_allowed(**dfa, at, bits);
    benchmark::DoNotOptimize(bits.data());
  }
  int64_t allowed = 0;
  for (uint32_t w : bits) allowed += __builtin_popcount(w);
  state.counters["allowed"] = static_cast<double>(allowed);
}
BENCHMARK_CAPTURE(BM_RegexMask, free_words, "[a-z ,.]+", "hello", false)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_RegexMask, free_words_memo, "[a-z ,.]+", "hello", true)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_RegexMask, choice, "(positive)|(negative)|(neutral)", "ne", false)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_RegexMask, choice_memo, "(positive)|(negative)|(neutral)", "ne", true)
    ->Unit(benchmark::kMicrosecond);

// One mask of the 20-tool structural tag after `prefix`.
void BM_TagMask(benchmark::State& state, const char* prefix, GrammarMemo memo = GrammarMemo::kNone,
                const char* warm_prefix = "") {
  static const auto grammar = compile_structural_tag(tool_tag(20));
  grammar_mask(state, grammar, prefix, memo, warm_prefix);
}
BENCHMARK_CAPTURE(BM_TagMask, free_text, "Let me check")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_TagMask, free_text_memo, "Let me check", GrammarMemo::kState)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_TagMask, trigger_prefix, "Let me check <func")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_TagMask, tool_name, "Let me check <function=tool_1")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_TagMask, arguments_key, "<function=tool_3>{\"query_3\": \"rain\", ")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_TagMask, arguments_string, "<function=tool_3>{\"query_3\": \"rai")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_TagMask, arguments_string_new_context, "<function=tool_3>{\"query_3\": \"rai",
                  GrammarMemo::kTerminals, "<function=tool_5>{\"query_5\": \"abc")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_TagMask, arguments_number,
                  "<function=tool_3>{\"query_3\": \"r\", \"count\": 2")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_TagMask, after_call,
                  "<function=tool_3>{\"query_3\": \"r\", \"count\": 2}</function> ")
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace beam

BENCHMARK_MAIN();
