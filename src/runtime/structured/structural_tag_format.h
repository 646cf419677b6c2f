// A structural tag's format tree (xgrammar's `structural_tag`: free text mixed with constrained
// pieces), read from its JSON and checked, for structural_tag.h to lower into a grammar.
// docs/structured_output.md ("Structural tags") gives the formats and their semantics.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/structured/byte_dfa.h"
#include "runtime/structured/ebnf_grammar.h"
#include "runtime/structured/json_grammar.h"

namespace beam {

// Deepest nesting of formats in one tag.
inline constexpr int kMaxStructuralTagDepth = 64;

struct StructuralFormat {
  enum class Kind : uint8_t {
    kConstString,        // `text` exactly
    kJsonSchema,         // JSON text of `schema`
    kGrammar,            // text the GBNF (or Lark) grammar `grammar` matches whole
    kRegex,              // text `regex` matches whole
    kSequence,           // `items` one after another
    kOr,                 // one of `items`
    kTag,                // `text` (the begin), items[0] (the content), then one of `ends`
    kAnyText,            // any text without the `excluded` strings
    kTriggeredTags,      // free text with `items` (tags) where one of `triggers` is written
    kTagsWithSeparator,  // `items` (tags) separated by `text`, nothing else
  };
  Kind kind = Kind::kConstString;
  // Where it sits in the tag ("format.elements[1]"; a schema's own field), for errors.
  std::string path = {};
  std::string text = {};
  std::shared_ptr<const JsonGrammar> schema = {};  // kJsonSchema
  // kGrammar: its rules (equal grammar texts of one tag share them).
  std::shared_ptr<const ParsedGrammar> grammar = {};
  std::shared_ptr<const ByteDfa> regex = {};       // kRegex
  std::vector<StructuralFormat> items = {};
  std::vector<std::string> ends = {};      // kTag
  std::vector<std::string> triggers = {};  // kTriggeredTags
  std::vector<std::string> excluded = {};  // kAnyText (excluded_str), kTriggeredTags (excludes)
  bool at_least_one = false, stop_after_first = false;  // kTriggeredTags, kTagsWithSeparator
  // Free text that runs until an end string of the tag around it, or to the output's end: any
  // text, triggered tags, and a sequence or an `or` that ends with one.
  bool unbounded = false;
};

// Reads a structural tag: {"type": "structural_tag", "format": {...}} (xgrammar's shape; "type"
// may be left out) or the legacy {"structures": [{"begin", "schema", "end"}], "triggers": [...]}
// (triggered tags of JSON schemas). JSON schemas and regexes are compiled here; grammars are read
// and their rule names checked (compile_structural_tag lowers them with the rest of the tag, once).
// An error names the field by its path inside the tag ("'format.tags[1].begin': ...").
Expected<StructuralFormat> parse_structural_tag(const nlohmann::ordered_json& tag);

}  // namespace beam
