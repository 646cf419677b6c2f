// Property: however the generated text is split into deltas (1 byte at a time, also inside UTF-8
// sequences; random splits with fixed seeds; a split at every position; multi-token blocks), the
// parser produces the same message and the same event stream (chunks of one region merged) as
// the one-shot parse. Inputs: every golden case plus seeded random outputs built from each
// template's own delimiters, in transformers mode and in server mode.
#include <random>

#include "golden_corpus.h"
#include "parser_test_util.h"

namespace beam::server::testing {
namespace {

// The run's observable outcome: message or error, and the event stream with adjacent chunks of
// the same region merged (so only chunking-independent information remains).
std::string signature(const ParseRun& run) {
  std::string out = run.message ? json_text(*run.message) : "ERROR " + run.error;
  out += "\n";
  const ParseEvent* previous = nullptr;
  std::string pending_chunk;
  auto flush = [&] {
    if (!pending_chunk.empty()) out += "chunk " + pending_chunk + "\n";
    pending_chunk.clear();
  };
  for (const ParseEvent& e : run.events) {
    if (e.kind == ParseEvent::Kind::kRegionChunk) {
      if (previous && previous->kind == ParseEvent::Kind::kRegionChunk &&
          previous->field != e.field)
        flush();
      pending_chunk += e.text;
    } else {
      flush();
      out += (e.kind == ParseEvent::Kind::kRegionOpen ? "open " : "close ") +
             std::to_string(e.field) + " [" + e.text + "] " +
             (e.error ? "error" : json_text(e.value)) + "\n";
    }
    previous = &e;
  }
  flush();
  return out;
}

std::vector<std::vector<size_t>> chunkings(size_t n, uint32_t seed) {
  std::vector<std::vector<size_t>> out;
  std::vector<size_t> every;
  for (size_t i = 1; i < n; ++i) every.push_back(i);
  out.push_back(every);                       // all 1-byte deltas
  for (size_t step : {2, 3, 5, 7, 13, 31}) {  // multi-token blocks
    std::vector<size_t> cuts;
    for (size_t i = step; i < n; i += step) cuts.push_back(i);
    out.push_back(cuts);
  }
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 8; ++trial) {  // random splits
    std::vector<size_t> cuts;
    for (size_t i = 1; i < n; ++i) {
      if (rng() % 4 == 0) cuts.push_back(i);
    }
    out.push_back(cuts);
  }
  if (n <= 400) {
    for (size_t i = 1; i < n; ++i) out.push_back({i});  // one split at every position
  }
  return out;
}

ParserOptions server_mode(const ResponseTemplate& t, const Json& tools) {
  ParserOptions options;
  options.field_errors = ParserOptions::FieldErrors::kKeepRawText;
  options.tools = ToolSchemas::from_tools(tools);
  for (size_t f = 0; f < t.fields.size(); ++f) {
    if (t.fields[f].name == "thinking") options.interruptible_fields.push_back(f);
    if (t.fields[f].name == "tool_calls") options.interrupting_fields.push_back(f);
  }
  return options;
}

void check_invariance(const std::shared_ptr<const ResponseTemplate>& t, const std::string& prefix,
                      const std::string& output, const ParserOptions& options, uint32_t seed) {
  const std::string expected = signature(parse_once(t, prefix, output, options));
  for (const auto& cuts : chunkings(output.size(), seed)) {
    const std::string got = signature(parse_chunks(t, prefix, split_at(output, cuts), options));
    ASSERT_EQ(got, expected) << "output: " << py_quote(output) << "\ncuts: " << cuts.size();
  }
}

// Random outputs assembled from the template's delimiters, their prefixes, text and whitespace.
std::vector<std::string> random_outputs(const ResponseTemplate& t, const GoldenTemplate& golden,
                                        uint32_t seed, int count) {
  std::vector<std::string> atoms = {" ",    "\n", "\n\n", "x",  "hello", "é",         "日本",
                                    "🙂", "{",  "}",    "\"", ":",     "<",         ">",
                                    "|",    "[",  "]",    "1",  "true",  "{\"a\": 1}"};
  for (const TemplateField& f : t.fields) {
    for (const auto* d : {&f.open, &f.close}) {
      if (!*d) continue;
      for (const std::string& lit : (*d)->literals) {
        atoms.push_back(lit);
        atoms.push_back(lit.substr(0, lit.size() / 2));
      }
    }
  }
  std::mt19937 rng(seed);
  for (const GoldenCase& c : golden.cases) {  // pieces of realistic outputs (regex delimiters)
    for (size_t at = 0; at + 1 < c.output.size(); at += 1 + rng() % 24) {
      const size_t len = 1 + rng() % 24;
      std::string piece = c.output.substr(at, len);
      piece.resize(utf8_complete_prefix_bytes(piece));
      if (!piece.empty()) atoms.push_back(piece);
    }
  }
  std::vector<std::string> outputs;
  for (int k = 0; k < count; ++k) {
    std::string text;
    const int pieces = 1 + static_cast<int>(rng() % 14);
    for (int p = 0; p < pieces; ++p) text += atoms[rng() % atoms.size()];
    outputs.push_back(text);
  }
  return outputs;
}

TEST(ChunkingProperty, GoldenCasesTransformersMode) {
  for (const GoldenTemplate& golden : golden_corpus().templates) {
    auto t = *load_response_template(golden.spec);
    for (const GoldenCase& c : golden.cases) {
      SCOPED_TRACE(golden.name + "/" + c.name);
      ParserOptions options;
      options.tools = ToolSchemas::from_tools(c.tools);
      check_invariance(t, c.prefix, c.output, options, 7);
    }
  }
}

TEST(ChunkingProperty, GoldenCasesServerMode) {
  for (const GoldenTemplate& golden : golden_corpus().templates) {
    auto t = *load_response_template(golden.spec);
    for (const GoldenCase& c : golden.cases) {
      SCOPED_TRACE(golden.name + "/" + c.name);
      check_invariance(t, c.prefix, c.output, server_mode(*t, c.tools), 11);
    }
  }
}

TEST(ChunkingProperty, RandomOutputsFromTemplateDelimiters) {
  uint32_t seed = 1234;
  for (const GoldenTemplate& golden : golden_corpus().templates) {
    auto t = *load_response_template(golden.spec);
    for (const std::string& output : random_outputs(*t, golden, seed++, 25)) {
      SCOPED_TRACE(golden.name);
      check_invariance(t, "", output, ParserOptions{}, seed);
      check_invariance(t, "", output, server_mode(*t, Json()), seed + 1);
    }
  }
}

}  // namespace
}  // namespace beam::server::testing
