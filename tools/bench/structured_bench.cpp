// Constrained decoding on the CPU (Google Benchmark): building the vocabulary index and one token
// mask at typical JSON positions. The tokenizer comes from $BEAMSERVE_TOKENIZER_DIR (default
// models/beam-nano; a Qwen3 tokenizer.json gives Beam's 151K-token vocabulary).
// Run: build/<dir>/tools/bench/structured_bench
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include "runtime/structured/output_constraint.h"
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

// One GBNF mask after `prefix`; with `memo`, through a request's GrammarMaskCache (the first
// iteration fills it, the rest hit it).
void BM_GrammarMask(benchmark::State& state, const char* gbnf, const char* prefix,
                    bool memo = false) {
  auto grammar = EbnfGrammar::compile(gbnf);
  if (!grammar.ok()) {
    state.SkipWithError(grammar.error().message.c_str());
    return;
  }
  const EbnfMatcher m(*grammar);
  GrammarState s = m.initial(), scratch;
  if (!m.advance_bytes(s, prefix, scratch)) state.SkipWithError("prefix does not match");
  std::vector<uint32_t> bits(allowed_mask_words(vocab()->vocab_size()));
  MaskScratch mask_scratch;
  GrammarMaskCache masks;
  for (auto _ : state) {
    std::fill(bits.begin(), bits.end(), 0u);
    vocab()->add_allowed(m, s, bits, mask_scratch, memo ? &masks : nullptr);
    benchmark::DoNotOptimize(bits.data());
  }
  int64_t allowed = 0;
  for (uint32_t w : bits) allowed += __builtin_popcount(w);
  state.counters["allowed"] = static_cast<double>(allowed);
  state.counters["stacks"] = static_cast<double>(s.ends.size());
}
BENCHMARK_CAPTURE(BM_GrammarMask, json_start, kJsonGbnf, "")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_GrammarMask, json_key, kJsonGbnf, "{\"name\": \"Ann\", ")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_GrammarMask, json_value, kJsonGbnf, "{\"a\": ")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_GrammarMask, json_free_string, kJsonGbnf, "{\"name\": \"Ann")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_GrammarMask, json_number, kJsonGbnf, "{\"a\": [1, 23")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_GrammarMask, json_free_string_memo, kJsonGbnf, "{\"name\": \"Ann", true)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace beam

BENCHMARK_MAIN();
