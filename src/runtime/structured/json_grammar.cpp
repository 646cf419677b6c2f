// JSON schema → JsonGrammar. Supported keywords and how each one is read:
// docs/structured_output.md ("Schemas").
#include "runtime/structured/json_grammar.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>

#include "core/check.h"
#include "runtime/structured/string_formats.h"

namespace beam {
namespace {

using Json = nlohmann::ordered_json;

// Assertions this compiler cannot enforce: a schema using one is refused, never half-honoured.
constexpr std::array<std::string_view, 19> kUnsupported = {"multipleOf",
                                                           "patternProperties",
                                                           "propertyNames",
                                                           "minProperties",
                                                           "maxProperties",
                                                           "uniqueItems",
                                                           "contains",
                                                           "minContains",
                                                           "maxContains",
                                                           "not",
                                                           "if",
                                                           "then",
                                                           "else",
                                                           "dependentRequired",
                                                           "dependentSchemas",
                                                           "dependencies",
                                                           "unevaluatedProperties",
                                                           "unevaluatedItems",
                                                           "additionalItems"};

// Numeric bounds (compile_bounded); refused on schemas without a numeric type.
constexpr std::array<const char*, 4> kBoundKeywords = {"minimum", "maximum", "exclusiveMinimum",
                                                       "exclusiveMaximum"};

// Keywords that shape a value of one type; beside anyOf / oneOf they are refused (not merged).
constexpr std::array<std::string_view, 15> kTypeKeywords = {
    "type",      "properties",       "required",        "additionalProperties",
    "items",     "prefixItems",      "minItems",        "maxItems",
    "minLength", "maxLength",        "pattern",         "minimum",
    "maximum",   "exclusiveMinimum", "exclusiveMaximum"};

// Keywords that only describe (JSON Schema annotations); they may stand beside $ref / allOf.
constexpr std::array<std::string_view, 14> kAnnotations = {
    "title",  "description", "default",  "examples",  "$schema", "$id",         "$comment",
    "format", "deprecated",  "readOnly", "writeOnly", "$defs",   "definitions", "$anchor"};

bool is_annotation(std::string_view key) {
  for (std::string_view a : kAnnotations)
    if (key == a) return true;
  return false;
}

std::string pointer_child(const std::string& pointer, std::string_view key) {
  std::string escaped;
  for (char c : key) {
    if (c == '~')
      escaped += "~0";
    else if (c == '/')
      escaped += "~1";
    else
      escaped += c;
  }
  return pointer + "/" + escaped;
}

std::string where(const std::string& pointer) {
  return pointer.empty() ? "the schema's root" : "'" + pointer + "'";
}

}  // namespace

// Walks a schema document once, memoizing $ref targets (so recursive schemas become cycles).
class SchemaCompiler {
 public:
  SchemaCompiler(JsonGrammar& grammar, const Json& root) : g_(grammar), root_(root) {}

  Expected<GrammarNodeId> compile(const Json& schema, const std::string& pointer, int depth);

 private:
  Expected<GrammarNodeId> compile_ref(const Json& schema, const std::string& pointer, int depth);
  Expected<GrammarNodeId> compile_type(const Json& schema, std::string_view type,
                                       const std::string& pointer, int depth);
  Expected<GrammarNodeId> compile_object(const Json& schema, const std::string& pointer, int depth);
  Expected<GrammarNodeId> compile_array(const Json& schema, const std::string& pointer, int depth);
  Expected<GrammarNodeId> compile_string(const Json& schema, const std::string& pointer);
  Expected<GrammarNodeId> compile_bounded(const Json& schema, const std::string& pointer,
                                          GrammarKind kind);
  Expected<GrammarNodeId> compile_literals(const Json& values, const std::string& pointer);
  Expected<GrammarNodeId> compile_alternatives(const Json& list, const std::string& pointer,
                                               int depth);
  Expected<int64_t> read_count(const Json& schema, const char* key, const std::string& pointer);
  Status only_annotations_beside(const Json& schema, std::string_view keyword,
                                 const std::string& pointer);

  JsonGrammar& g_;
  const Json& root_;
  std::map<std::string, GrammarNodeId> refs_;  // $ref target pointer → its node
  DfaBuildBudget dfa_budget_;  // what the schema's patterns may take and hold together
};

JsonGrammar::JsonGrammar() {
  const LiteralId t = add_literal("true"), f = add_literal("false"), n = add_literal("null");
  add_node({.kind = GrammarKind::kAny});
  add_node({.kind = GrammarKind::kObject, .additional = any_value()});
  add_node({.kind = GrammarKind::kArray, .items = any_value()});
  add_node({.kind = GrammarKind::kString});
  add_node({.kind = GrammarKind::kNumber});
  add_node({.kind = GrammarKind::kLiteral, .literals = {t}});
  add_node({.kind = GrammarKind::kLiteral, .literals = {f}});
  add_node({.kind = GrammarKind::kLiteral, .literals = {n}});
}

GrammarNodeId JsonGrammar::add_node(GrammarNode node, std::string pointer) {
  nodes_.push_back(std::move(node));
  pointers_.push_back(std::move(pointer));
  return static_cast<GrammarNodeId>(nodes_.size() - 1);
}

LiteralId JsonGrammar::add_literal(std::string text) {
  literals_.push_back(std::move(text));
  return static_cast<LiteralId>(literals_.size() - 1);
}

std::shared_ptr<const JsonGrammar> JsonGrammar::any_object() {
  std::shared_ptr<JsonGrammar> g(new JsonGrammar());
  g->root_ = g->any_object_node();
  return g;
}

namespace {

// A node on a cycle of anyOf alternatives (`{"$ref": "#"}`, definitions that only refer to each
// other): such a schema names no value, and the matcher would expand it forever. The walk follows
// alternatives only, whose nesting compile() bounds.
std::optional<GrammarNodeId> alternative_cycle(const JsonGrammar& g) {
  std::vector<uint8_t> color(g.num_nodes(), 0);  // 0 new, 1 on the path, 2 done
  std::function<std::optional<GrammarNodeId>(GrammarNodeId)> visit =
      [&](GrammarNodeId n) -> std::optional<GrammarNodeId> {
    color[static_cast<size_t>(n)] = 1;
    for (GrammarNodeId a : g.node(n).alternatives) {
      if (color[static_cast<size_t>(a)] == 1) return a;
      if (color[static_cast<size_t>(a)] == 0)
        if (std::optional<GrammarNodeId> c = visit(a)) return c;
    }
    color[static_cast<size_t>(n)] = 2;
    return std::nullopt;
  };
  for (size_t n = 0; n < g.num_nodes(); ++n)
    if (color[n] == 0)
      if (std::optional<GrammarNodeId> c = visit(static_cast<GrammarNodeId>(n))) return c;
  return std::nullopt;
}

}  // namespace

Expected<std::shared_ptr<const JsonGrammar>> JsonGrammar::from_schema(const Json& schema) {
  std::shared_ptr<JsonGrammar> g(new JsonGrammar());
  SchemaCompiler compiler(*g, schema);
  BEAM_ASSIGN_OR_RETURN(g->root_, compiler.compile(schema, "", 0));
  if (const std::optional<GrammarNodeId> n = alternative_cycle(*g))
    return make_error(where(g->pointer(*n)) +
                      ": the schema refers to itself with no object or array in between (an "
                      "endless expansion)");
  return std::shared_ptr<const JsonGrammar>(std::move(g));
}

Expected<GrammarNodeId> SchemaCompiler::compile(const Json& schema, const std::string& pointer,
                                                int depth) {
  if (depth > 128) return make_error(where(pointer) + ": the schema nests deeper than 128 levels");
  if (schema.is_boolean()) {
    if (schema.get<bool>()) return g_.any_value();
    return make_error(where(pointer) + ": the schema `false` accepts no value");
  }
  if (!schema.is_object())
    return make_error(where(pointer) + ": a schema must be an object or a boolean");
  for (std::string_view key : kUnsupported) {
    if (schema.contains(key))
      return make_error(pointer_child(pointer, key) + ": the keyword \"" + std::string(key) +
                        "\" is not supported by constrained decoding");
  }
  if (schema.contains("$ref")) return compile_ref(schema, pointer, depth);
  if (const auto it = schema.find("allOf"); it != schema.end()) {
    BEAM_RETURN_IF_ERROR(only_annotations_beside(schema, "allOf", pointer));
    if (!it->is_array() || it->size() != 1)
      return make_error(pointer_child(pointer, "allOf") +
                        ": only an allOf of exactly one schema is supported");
    return compile((*it)[0], pointer_child(pointer_child(pointer, "allOf"), "0"), depth + 1);
  }
  if (const auto it = schema.find("const"); it != schema.end())
    return compile_literals(Json::array({*it}), pointer_child(pointer, "const"));
  if (const auto it = schema.find("enum"); it != schema.end())
    return compile_literals(*it, pointer_child(pointer, "enum"));
  for (const char* key : {"anyOf", "oneOf"}) {
    if (const auto it = schema.find(key); it != schema.end()) {
      for (std::string_view other : kTypeKeywords)
        if (schema.contains(other))
          return make_error(pointer_child(pointer, key) + ": " + key + " beside \"" +
                            std::string(other) +
                            "\" is not supported; move it into each alternative");
      return compile_alternatives(*it, pointer_child(pointer, key), depth);
    }
  }
  const auto type = schema.find("type");
  if (type == schema.end()) {
    if (schema.contains("properties") || schema.contains("required") ||
        schema.contains("additionalProperties"))
      return compile_object(schema, pointer, depth);
    if (schema.contains("items") || schema.contains("prefixItems") || schema.contains("minItems") ||
        schema.contains("maxItems"))
      return compile_array(schema, pointer, depth);
    if (schema.contains("minLength") || schema.contains("maxLength") || schema.contains("pattern"))
      return compile_string(schema, pointer);
    for (const char* key : kBoundKeywords)
      if (schema.contains(key))
        return make_error(pointer_child(pointer, key) + ": \"" + key +
                          "\" needs \"type\": \"integer\" or \"number\" beside it");
    return g_.any_value();
  }
  if (type->is_string()) return compile_type(schema, type->get<std::string>(), pointer, depth);
  if (!type->is_array() || type->empty())
    return make_error(pointer_child(pointer, "type") +
                      ": expected a type name or a non-empty array of them");
  GrammarNode any_of{.kind = GrammarKind::kAnyOf};
  for (size_t i = 0; i < type->size(); ++i) {
    const Json& t = (*type)[i];
    if (!t.is_string())
      return make_error(pointer_child(pointer_child(pointer, "type"), std::to_string(i)) +
                        ": expected a type name");
    BEAM_ASSIGN_OR_RETURN(GrammarNodeId alt,
                          compile_type(schema, t.get<std::string>(), pointer, depth));
    any_of.alternatives.push_back(alt);
  }
  return g_.add_node(std::move(any_of), pointer);
}

Expected<GrammarNodeId> SchemaCompiler::compile_ref(const Json& schema, const std::string& pointer,
                                                    int depth) {
  BEAM_RETURN_IF_ERROR(only_annotations_beside(schema, "$ref", pointer));
  const Json& ref = schema["$ref"];
  if (!ref.is_string() || ref.get<std::string>().rfind('#', 0) != 0)
    return make_error(pointer_child(pointer, "$ref") +
                      ": only references inside the schema (\"#...\") are supported");
  const std::string target = ref.get<std::string>().substr(1);
  if (const auto it = refs_.find(target); it != refs_.end()) return it->second;
  const Json* resolved = nullptr;
  try {
    resolved = &root_.at(Json::json_pointer(target));
  } catch (const Json::exception&) {
    return make_error(pointer_child(pointer, "$ref") + ": \"" + ref.get<std::string>() +
                      "\" names nothing in the schema");
  }
  // Reserve the node first so a reference back to this target (recursion) finds it.
  const GrammarNodeId slot = g_.add_node({.kind = GrammarKind::kAnyOf}, target);
  refs_[target] = slot;
  BEAM_ASSIGN_OR_RETURN(GrammarNodeId body, compile(*resolved, target, depth + 1));
  g_.nodes_[static_cast<size_t>(slot)].alternatives = {body};
  return slot;
}

Expected<GrammarNodeId> SchemaCompiler::compile_type(const Json& schema, std::string_view type,
                                                     const std::string& pointer, int depth) {
  if (type == "object") return compile_object(schema, pointer, depth);
  if (type == "array") return compile_array(schema, pointer, depth);
  if (type == "string") return compile_string(schema, pointer);
  if (type == "number" || type == "integer") {
    const GrammarKind kind = type == "number" ? GrammarKind::kNumber : GrammarKind::kInteger;
    for (const char* key : kBoundKeywords)
      if (schema.contains(key)) return compile_bounded(schema, pointer, kind);
    return kind == GrammarKind::kNumber ? g_.any_number_node()
                                        : g_.add_node({.kind = kind}, pointer);
  }
  if (type == "boolean")
    return g_.add_node(
        {.kind = GrammarKind::kLiteral,
         .literals = {g_.node(g_.true_node()).literals[0], g_.node(g_.false_node()).literals[0]}});
  if (type == "null") return g_.null_node();
  return make_error(pointer_child(pointer, "type") + ": unknown type \"" + std::string(type) +
                    "\"");
}

Expected<GrammarNodeId> SchemaCompiler::compile_object(const Json& schema,
                                                       const std::string& pointer, int depth) {
  GrammarNode node{.kind = GrammarKind::kObject};
  std::set<std::string> required;
  if (const auto it = schema.find("required"); it != schema.end()) {
    if (!it->is_array())
      return make_error(pointer_child(pointer, "required") + ": expected an array of names");
    for (const Json& name : *it) {
      if (!name.is_string())
        return make_error(pointer_child(pointer, "required") + ": expected an array of names");
      required.insert(name.get<std::string>());
    }
  }
  const auto props = schema.find("properties");
  if (props != schema.end()) {
    if (!props->is_object())
      return make_error(pointer_child(pointer, "properties") + ": expected an object");
    for (const auto& [name, sub] : props->items()) {
      const std::string sub_pointer = pointer_child(pointer_child(pointer, "properties"), name);
      BEAM_ASSIGN_OR_RETURN(GrammarNodeId value, compile(sub, sub_pointer, depth + 1));
      const std::string key_text = Json(name).dump().substr(1);  // after the opening quote
      node.properties.push_back({g_.add_literal(key_text), value, required.erase(name) > 0});
    }
  }
  if (!required.empty())
    return make_error(pointer_child(pointer, "required") + ": \"" + *required.begin() +
                      "\" is required but not among the properties");
  // Strict by default (as OpenAI's strict mode and xgrammar): declared properties close the object
  // unless additionalProperties says otherwise; an object without properties takes any keys.
  const auto extra = schema.find("additionalProperties");
  if (extra == schema.end()) {
    node.additional = props == schema.end() ? g_.any_value() : -1;
  } else if (!(extra->is_boolean() && !extra->get<bool>())) {
    BEAM_ASSIGN_OR_RETURN(
        node.additional,
        compile(*extra, pointer_child(pointer, "additionalProperties"), depth + 1));
  }
  return g_.add_node(std::move(node), pointer);
}

Expected<GrammarNodeId> SchemaCompiler::compile_array(const Json& schema,
                                                      const std::string& pointer, int depth) {
  GrammarNode node{.kind = GrammarKind::kArray, .items = g_.any_value()};
  if (const auto it = schema.find("prefixItems"); it != schema.end()) {
    if (!it->is_array())
      return make_error(pointer_child(pointer, "prefixItems") + ": expected an array of schemas");
    for (size_t i = 0; i < it->size(); ++i) {
      BEAM_ASSIGN_OR_RETURN(
          GrammarNodeId item,
          compile((*it)[i], pointer_child(pointer_child(pointer, "prefixItems"), std::to_string(i)),
                  depth + 1));
      node.prefix_items.push_back(item);
    }
  }
  if (const auto it = schema.find("items"); it != schema.end()) {
    if (it->is_boolean() && !it->get<bool>()) {
      node.items = -1;
    } else {
      BEAM_ASSIGN_OR_RETURN(node.items, compile(*it, pointer_child(pointer, "items"), depth + 1));
    }
  }
  BEAM_ASSIGN_OR_RETURN(node.min_items, read_count(schema, "minItems", pointer));
  BEAM_ASSIGN_OR_RETURN(node.max_items, read_count(schema, "maxItems", pointer));
  const int64_t most = node.items < 0 ? static_cast<int64_t>(node.prefix_items.size()) : -1;
  if (most >= 0 && (node.max_items < 0 || node.max_items > most)) node.max_items = most;
  if (node.max_items >= 0 && node.min_items > node.max_items)
    return make_error(where(pointer) + ": no array has at least " + std::to_string(node.min_items) +
                      " and at most " + std::to_string(node.max_items) + " items");
  return g_.add_node(std::move(node), pointer);
}

namespace {

// The decimals of a bound: the fewest d <= kMaxBoundDecimals with v * 10^d a whole number (as
// the double the schema's text parsed to); nullopt past them.
std::optional<int32_t> bound_decimals(double v) {
  double unit = 1;
  for (int32_t d = 0; d <= kMaxBoundDecimals; ++d, unit *= 10) {
    if (std::nearbyint(v * unit) / unit == v) return d;
  }
  return std::nullopt;
}

}  // namespace

// minimum / maximum / exclusiveMinimum / exclusiveMaximum of an integer (as one inclusive range)
// or a number (in units of 10^-decimals, exclusive ones kept as flags).
Expected<GrammarNodeId> SchemaCompiler::compile_bounded(const Json& schema,
                                                        const std::string& pointer,
                                                        GrammarKind kind) {
  GrammarNode node{.kind = kind};
  const bool integer = kind == GrammarKind::kInteger;
  for (const char* key : kBoundKeywords) {
    const auto it = schema.find(key);
    if (it == schema.end()) continue;
    if (!it->is_number()) return make_error(pointer_child(pointer, key) + ": expected a number");
    if (integer) continue;
    const std::optional<int32_t> d = bound_decimals(it->get<double>());
    if (!d)
      return make_error(pointer_child(pointer, key) + ": a number's bounds may have at most " +
                        std::to_string(kMaxBoundDecimals) + " decimals");
    node.bound_decimals = std::max(node.bound_decimals, *d);
  }
  double unit = 1;
  for (int32_t d = 0; d < node.bound_decimals; ++d) unit *= 10;
  for (const char* key : kBoundKeywords) {
    const auto it = schema.find(key);
    if (it == schema.end()) continue;
    const double v = it->get<double>() * unit;
    if (!(std::fabs(v) <= static_cast<double>(kMaxIntegerBound)))
      return make_error(pointer_child(pointer, key) + ": bounds beyond +-(2^31 - 1)" +
                        (node.bound_decimals > 0 ? " / 10^" + std::to_string(node.bound_decimals)
                                                 : std::string()) +
                        " are not supported");
    const std::string_view k(key);
    const bool exclusive = k.starts_with("exclusive");
    // Numbers: v is whole (nearbyint only drops the product's rounding error).
    const double whole = integer ? v : std::nearbyint(v);
    if (k == "minimum" || k == "exclusiveMinimum") {
      const auto b = static_cast<int64_t>(std::ceil(whole)) +
                     (integer && exclusive && whole == std::floor(whole));
      if (b > node.min_value || (b == node.min_value && exclusive)) {
        node.min_value = b;
        node.min_exclusive = !integer && exclusive;
      }
    } else {
      const auto b = static_cast<int64_t>(std::floor(whole)) -
                     (integer && exclusive && whole == std::floor(whole));
      if (b < node.max_value || (b == node.max_value && exclusive)) {
        node.max_value = b;
        node.max_exclusive = !integer && exclusive;
      }
    }
  }
  const bool empty =
      node.min_value > node.max_value ||
      (node.min_value == node.max_value && (node.min_exclusive || node.max_exclusive));
  if (empty) return make_error(where(pointer) + ": no value lies between its minimum and maximum");
  return g_.add_node(std::move(node), pointer);
}

Expected<GrammarNodeId> SchemaCompiler::compile_string(const Json& schema,
                                                       const std::string& pointer) {
  GrammarNode node{.kind = GrammarKind::kString};
  BEAM_ASSIGN_OR_RETURN(node.min_length, read_count(schema, "minLength", pointer));
  BEAM_ASSIGN_OR_RETURN(node.max_length, read_count(schema, "maxLength", pointer));
  if (node.max_length >= 0 && node.min_length > node.max_length)
    return make_error(where(pointer) + ": minLength is larger than maxLength");
  std::shared_ptr<const ByteDfa> dfa;
  if (const auto it = schema.find("pattern"); it != schema.end()) {
    const std::string at = pointer_child(pointer, "pattern");
    if (!it->is_string()) return make_error(at + ": expected a regular expression string");
    auto compiled = ByteDfa::from_pattern(it->get<std::string>(), &dfa_budget_);
    if (!compiled.ok()) return make_error(at + ": " + compiled.error().message);
    dfa = std::move(*compiled);
  }
  if (const auto it = schema.find("format"); it != schema.end() && it->is_string()) {
    if (const std::optional<std::string> regex = format_regex(it->get<std::string>())) {
      auto format = ByteDfa::from_pattern(*regex, &dfa_budget_);
      if (!format.ok())  // a format's own regex builds alone; here only the budget can be spent
        return make_error(pointer_child(pointer, "format") + ": " + format.error().message);
      if (dfa) {
        auto both = ByteDfa::intersect(*dfa, **format);
        if (!both.ok())
          return make_error(where(pointer) +
                            ": \"pattern\" and \"format\" together: " + both.error().message);
        dfa = std::move(*both);
      } else {
        dfa = std::move(*format);
      }
    }
  }
  if (dfa) {
    node.pattern = static_cast<int32_t>(g_.patterns_.size());
    g_.patterns_.push_back(std::move(dfa));
  }
  if (node.min_length == 0 && node.max_length < 0 && node.pattern < 0) return g_.any_string_node();
  return g_.add_node(std::move(node), pointer);
}

Expected<GrammarNodeId> SchemaCompiler::compile_literals(const Json& values,
                                                         const std::string& pointer) {
  if (!values.is_array() || values.empty())
    return make_error(pointer + ": expected a non-empty array of values");
  GrammarNode node{.kind = GrammarKind::kLiteral};
  std::set<std::string> seen;
  for (const Json& v : values) {
    std::string text = v.dump();  // compact, as the model must write it
    if (seen.insert(text).second) node.literals.push_back(g_.add_literal(std::move(text)));
  }
  return g_.add_node(std::move(node), pointer);
}

Expected<GrammarNodeId> SchemaCompiler::compile_alternatives(const Json& list,
                                                             const std::string& pointer,
                                                             int depth) {
  if (!list.is_array() || list.empty())
    return make_error(pointer + ": expected a non-empty array of schemas");
  if (list.size() == 1) return compile(list[0], pointer_child(pointer, "0"), depth + 1);
  GrammarNode node{.kind = GrammarKind::kAnyOf};
  for (size_t i = 0; i < list.size(); ++i) {
    BEAM_ASSIGN_OR_RETURN(GrammarNodeId alt,
                          compile(list[i], pointer_child(pointer, std::to_string(i)), depth + 1));
    node.alternatives.push_back(alt);
  }
  return g_.add_node(std::move(node), pointer);
}

Expected<int64_t> SchemaCompiler::read_count(const Json& schema, const char* key,
                                             const std::string& pointer) {
  const auto it = schema.find(key);
  const int64_t absent = std::string_view(key).starts_with("max") ? -1 : 0;
  if (it == schema.end()) return absent;
  if (!it->is_number_integer() || it->get<int64_t>() < 0)
    return make_error(pointer_child(pointer, key) + ": expected a non-negative integer");
  return it->get<int64_t>();
}

Status SchemaCompiler::only_annotations_beside(const Json& schema, std::string_view keyword,
                                               const std::string& pointer) {
  for (const auto& [key, value] : schema.items()) {
    if (key != keyword && !is_annotation(key))
      return make_error(pointer_child(pointer, key) + ": \"" + key + "\" beside \"" +
                        std::string(keyword) + "\" is not supported");
  }
  return ok_status();
}

}  // namespace beam
