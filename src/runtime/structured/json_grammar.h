// JsonGrammar: a JSON schema compiled into the node graph JsonMatcher walks byte by byte
// (constrained decoding, docs/structured_output.md). Immutable once built; shared by every
// sequence of the requests that use it.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/structured/byte_dfa.h"

namespace beam {

using GrammarNodeId = int32_t;  // index into JsonGrammar::nodes()
using LiteralId = int32_t;      // index into JsonGrammar::literals()

enum class GrammarKind : uint8_t {
  kAny,      // any JSON value
  kObject,   // '{' properties in declared order (optional ones may be skipped), then extra keys
  kArray,    // '[' items ']'
  kString,   // '"' ... '"' with an optional length range (code points)
  kNumber,   // JSON number
  kInteger,  // JSON number without fraction or exponent
  kLiteral,  // one of a set of JSON texts (enum, const, true, false, null)
  kAnyOf,    // any of the alternatives (anyOf, oneOf, type lists)
};

// The largest |bound| an integer's minimum / maximum may have: the matcher keeps the magnitude
// read so far saturated at 2^31, which decides every comparison with such bounds.
inline constexpr int64_t kMaxIntegerBound = (int64_t{1} << 31) - 1;
// The most decimals a number's bound may have (`"maximum": 0.000001`).
inline constexpr int32_t kMaxBoundDecimals = 6;

struct GrammarProperty {
  LiteralId key = -1;  // the key's JSON text after its opening quote (closing quote included)
  GrammarNodeId value = -1;
  bool required = false;
};

struct GrammarNode {
  GrammarKind kind = GrammarKind::kAny;
  std::vector<GrammarProperty> properties = {};  // kObject, declared order
  GrammarNodeId additional = -1;                 // kObject: value node of extra keys; -1: none
  std::vector<GrammarNodeId> prefix_items = {};  // kArray: items by position
  GrammarNodeId items = -1;                      // kArray: items after the prefix; -1: none
  int64_t min_items = 0, max_items = -1;         // kArray; -1: unbounded
  int64_t min_length = 0, max_length = -1;       // kString, in code points; -1: unbounded
  int32_t pattern = -1;  // kString: its value matches JsonGrammar::pattern(pattern); -1: none
  // kInteger / kNumber bounds (minimum / maximum / exclusive*) in units of 10^-bound_decimals
  // (integers: 0; numbers: the most decimals a bound has, <= kMaxBoundDecimals), within
  // +-kMaxIntegerBound, the int64 limits when unbounded. Integers hold them inclusive; numbers
  // keep exclusive ones as flags (and write no exponent when bounded).
  int64_t min_value = std::numeric_limits<int64_t>::min();
  int64_t max_value = std::numeric_limits<int64_t>::max();
  bool min_exclusive = false, max_exclusive = false;
  int32_t bound_decimals = 0;
  bool bounded() const {
    return min_value != std::numeric_limits<int64_t>::min() ||
           max_value != std::numeric_limits<int64_t>::max();
  }
  std::vector<LiteralId> literals = {};          // kLiteral
  std::vector<GrammarNodeId> alternatives = {};  // kAnyOf
};

class JsonGrammar {
 public:
  // Compiles a JSON schema (draft 2020-12 subset, docs/structured_output.md). Property order is
  // the schema's (ordered_json keeps it). An error names the first unsupported or invalid
  // keyword by its JSON pointer inside the schema.
  static Expected<std::shared_ptr<const JsonGrammar>> from_schema(
      const nlohmann::ordered_json& schema);
  // Any JSON object (response_format json_object).
  static std::shared_ptr<const JsonGrammar> any_object();

  GrammarNodeId root() const { return root_; }
  const GrammarNode& node(GrammarNodeId id) const { return nodes_[static_cast<size_t>(id)]; }
  const std::string& literal(LiteralId id) const { return literals_[static_cast<size_t>(id)]; }
  const ByteDfa& pattern(int32_t id) const { return *patterns_[static_cast<size_t>(id)]; }
  // Where a node's schema sits: its JSON pointer inside the schema ("" for the root and the
  // built-in nodes), for errors about the node.
  const std::string& pointer(GrammarNodeId id) const { return pointers_[static_cast<size_t>(id)]; }
  size_t num_nodes() const { return nodes_.size(); }

  // The built-in nodes every grammar has (kAny's values dispatch to them by their first byte).
  GrammarNodeId any_value() const { return 0; }
  GrammarNodeId any_object_node() const { return 1; }
  GrammarNodeId any_array_node() const { return 2; }
  GrammarNodeId any_string_node() const { return 3; }
  GrammarNodeId any_number_node() const { return 4; }
  GrammarNodeId true_node() const { return 5; }
  GrammarNodeId false_node() const { return 6; }
  GrammarNodeId null_node() const { return 7; }

 private:
  friend class SchemaCompiler;
  JsonGrammar();

  GrammarNodeId add_node(GrammarNode node, std::string pointer = {});
  LiteralId add_literal(std::string text);

  std::vector<GrammarNode> nodes_;
  std::vector<std::string> pointers_;  // [node]
  std::vector<std::string> literals_;
  std::vector<std::shared_ptr<const ByteDfa>> patterns_;
  GrammarNodeId root_ = 0;
};

}  // namespace beam
