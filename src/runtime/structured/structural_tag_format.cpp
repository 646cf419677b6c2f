// parse_structural_tag: one reader per format type; fields are named by their path inside the
// tag. The checks a grammar relies on happen here: which formats are unbounded free text and
// where they may stand, and which trigger each triggered tag belongs to.
#include "runtime/structured/structural_tag_format.h"

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "runtime/structured/ebnf_grammar.h"

namespace beam {
namespace {

using Json = nlohmann::ordered_json;
using Kind = StructuralFormat::Kind;

Error field_error(const std::string& path, const std::string& what) {
  return make_error("'" + path + "': " + what);
}

std::string child(const std::string& path, const char* key) {
  return path.empty() ? std::string(key) : path + "." + key;
}

std::string indexed(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

// The field, or nullptr when absent or null.
const Json* field(const Json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

Expected<std::string> string_field(const Json& object, const std::string& path, const char* key) {
  const Json* v = field(object, key);
  if (!v) return field_error(child(path, key), "is required");
  if (!v->is_string()) return field_error(child(path, key), "expected a string");
  return v->get<std::string>();
}

// An array of non-empty strings; absent: empty (or an error when required).
Expected<std::vector<std::string>> strings_field(const Json& object, const std::string& path,
                                                 const char* key, bool required) {
  const std::string at = child(path, key);
  const Json* v = field(object, key);
  if (!v) {
    if (required) return field_error(at, "is required");
    return std::vector<std::string>{};
  }
  if (!v->is_array() || (required && v->empty()))
    return field_error(
        at, required ? "expected a non-empty array of strings" : "expected an array of strings");
  std::vector<std::string> out;
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string() || (*v)[i].get<std::string>().empty())
      return field_error(indexed(at, i), "expected a non-empty string");
    out.push_back((*v)[i].get<std::string>());
  }
  return out;
}

Expected<bool> bool_field(const Json& object, const std::string& path, const char* key) {
  const Json* v = field(object, key);
  if (!v) return false;
  if (!v->is_boolean()) return field_error(child(path, key), "expected a boolean");
  return v->get<bool>();
}

// A JSON schema given as a value or as its JSON text.
Expected<std::shared_ptr<const JsonGrammar>> schema_field(const Json& object,
                                                          const std::string& path,
                                                          const char* key) {
  const std::string at = child(path, key);
  const Json* v = field(object, key);
  if (!v) return field_error(at, "is required");
  Json parsed;
  if (v->is_string()) {
    parsed = Json::parse(v->get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) return field_error(at, "the schema text is not valid JSON");
    v = &parsed;
  }
  if (!v->is_object() && !v->is_boolean())
    return field_error(at, "expected a JSON schema (an object or its text)");
  auto grammar = JsonGrammar::from_schema(*v);
  if (!grammar.ok()) return field_error(at, grammar.error().message);
  return grammar;
}

class TagReader {
 public:
  Expected<StructuralFormat> format(const Json& j, const std::string& path, int depth);
  Expected<StructuralFormat> tag(const Json& j, const std::string& path, int depth);
  Expected<StructuralFormat> legacy(const Json& tag);

 private:
  Expected<std::vector<StructuralFormat>> list(const Json& object, const std::string& path,
                                               const char* key, bool tags, int depth);
  Status read_type(const Json& j, const std::string& path, StructuralFormat& f, int depth);
  static Status check_triggers(const StructuralFormat& f);
  static Status set_unbounded(StructuralFormat& f);

  DfaBuildBudget dfa_budget_;  // what the tag's regex elements may take and hold together
  // The tag's grammar texts, each read once (lowered with the whole tag's grammar).
  std::map<std::string, std::shared_ptr<const ParsedGrammar>> grammars_;
};

Expected<std::vector<StructuralFormat>> TagReader::list(const Json& object, const std::string& path,
                                                        const char* key, bool tags, int depth) {
  const std::string at = child(path, key);
  const Json* v = field(object, key);
  if (!v) return field_error(at, "is required");
  if (!v->is_array() || v->empty())
    return field_error(
        at, tags ? "expected a non-empty array of tags" : "expected a non-empty array of formats");
  std::vector<StructuralFormat> out;
  for (size_t i = 0; i < v->size(); ++i) {
    BEAM_ASSIGN_OR_RETURN(StructuralFormat item, tags ? tag((*v)[i], indexed(at, i), depth + 1)
                                                      : format((*v)[i], indexed(at, i), depth + 1));
    out.push_back(std::move(item));
  }
  return out;
}

Expected<StructuralFormat> TagReader::tag(const Json& j, const std::string& path, int depth) {
  if (depth > kMaxStructuralTagDepth)
    return field_error(path, "formats nest deeper than " + std::to_string(kMaxStructuralTagDepth));
  if (!j.is_object()) return field_error(path, "expected a tag object {begin, content, end}");
  if (const Json* type = field(j, "type"); type && *type != Json("tag"))
    return field_error(path + ".type", "expected \"tag\"");
  StructuralFormat f{.kind = Kind::kTag, .path = path};
  BEAM_ASSIGN_OR_RETURN(f.text, string_field(j, path, "begin"));
  const Json* content = field(j, "content");
  if (!content) return field_error(path + ".content", "is required");
  BEAM_ASSIGN_OR_RETURN(StructuralFormat inner, format(*content, path + ".content", depth + 1));
  f.items.push_back(std::move(inner));
  const Json* end = field(j, "end");
  if (!end) return field_error(path + ".end", "is required");
  if (end->is_string()) {
    f.ends = {end->get<std::string>()};
  } else if (end->is_array() && !end->empty()) {
    for (size_t i = 0; i < end->size(); ++i) {
      if (!(*end)[i].is_string())
        return field_error(indexed(path + ".end", i), "expected a string");
      f.ends.push_back((*end)[i].get<std::string>());
    }
  } else {
    return field_error(path + ".end", "expected a string or a non-empty array of strings");
  }
  BEAM_RETURN_IF_ERROR(set_unbounded(f));
  return f;
}

Expected<StructuralFormat> TagReader::format(const Json& j, const std::string& path, int depth) {
  if (depth > kMaxStructuralTagDepth)
    return field_error(path, "formats nest deeper than " + std::to_string(kMaxStructuralTagDepth));
  if (!j.is_object()) return field_error(path, "expected a format object with a \"type\"");
  BEAM_ASSIGN_OR_RETURN(const std::string type, string_field(j, path, "type"));
  if (type == "tag") return tag(j, path, depth);
  StructuralFormat f{.path = path};
  if (type == "const_string") {
    f.kind = Kind::kConstString;
    BEAM_ASSIGN_OR_RETURN(f.text, string_field(j, path, "value"));
  } else if (type == "json_schema") {
    f.kind = Kind::kJsonSchema;
    BEAM_ASSIGN_OR_RETURN(f.schema, schema_field(j, path, "json_schema"));
    f.path = child(path, "json_schema");
  } else if (type == "grammar") {
    f.kind = Kind::kGrammar;
    f.path = child(path, "grammar");
    BEAM_ASSIGN_OR_RETURN(const std::string text, string_field(j, path, "grammar"));
    std::shared_ptr<const ParsedGrammar>& parsed = grammars_[text];
    if (!parsed) {
      auto read = EbnfGrammar::parse_gbnf_or_lark(text);
      if (!read.ok()) return field_error(f.path, read.error().message);
      parsed = std::make_shared<const ParsedGrammar>(std::move(read).value());
    }
    f.grammar = parsed;
  } else if (type == "regex") {
    f.kind = Kind::kRegex;
    BEAM_ASSIGN_OR_RETURN(const std::string pattern, string_field(j, path, "pattern"));
    auto dfa = ByteDfa::from_full_match(pattern, &dfa_budget_);
    if (!dfa.ok()) return field_error(path + ".pattern", dfa.error().message);
    f.regex = std::move(dfa).value();
  } else if (type == "sequence" || type == "or") {
    f.kind = type == "or" ? Kind::kOr : Kind::kSequence;
    BEAM_ASSIGN_OR_RETURN(f.items, list(j, path, "elements", /*tags=*/false, depth));
  } else if (type == "any_text") {
    f.kind = Kind::kAnyText;
    BEAM_ASSIGN_OR_RETURN(f.excluded, strings_field(j, path, "excluded_str", false));
  } else if (type == "triggered_tags") {
    f.kind = Kind::kTriggeredTags;
    BEAM_ASSIGN_OR_RETURN(f.triggers, strings_field(j, path, "triggers", true));
    BEAM_ASSIGN_OR_RETURN(f.excluded, strings_field(j, path, "excludes", false));
    BEAM_ASSIGN_OR_RETURN(f.items, list(j, path, "tags", /*tags=*/true, depth));
  } else if (type == "tags_with_separator") {
    f.kind = Kind::kTagsWithSeparator;
    BEAM_ASSIGN_OR_RETURN(f.text, string_field(j, path, "separator"));
    BEAM_ASSIGN_OR_RETURN(f.items, list(j, path, "tags", /*tags=*/true, depth));
  } else if (type == "qwen_xml_parameter") {
    return field_error(path + ".type",
                       "\"qwen_xml_parameter\" is not supported (write the parameters as a "
                       "json_schema, or a grammar)");
  } else {
    return field_error(path + ".type",
                       "unknown format \"" + type +
                           "\" (expected const_string, json_schema, grammar, regex, sequence, "
                           "or, tag, any_text, triggered_tags or tags_with_separator)");
  }
  if (f.kind == Kind::kTriggeredTags || f.kind == Kind::kTagsWithSeparator) {
    BEAM_ASSIGN_OR_RETURN(f.at_least_one, bool_field(j, path, "at_least_one"));
    BEAM_ASSIGN_OR_RETURN(f.stop_after_first, bool_field(j, path, "stop_after_first"));
  }
  if (f.kind == Kind::kTriggeredTags) BEAM_RETURN_IF_ERROR(check_triggers(f));
  BEAM_RETURN_IF_ERROR(set_unbounded(f));
  return f;
}

// Each tag's begin starts with exactly one trigger, and each trigger begins some tag.
Status TagReader::check_triggers(const StructuralFormat& f) {
  std::vector<uint8_t> used(f.triggers.size(), 0);
  for (const StructuralFormat& t : f.items) {
    std::optional<size_t> found;
    for (size_t k = 0; k < f.triggers.size(); ++k) {
      if (!std::string_view(t.text).starts_with(f.triggers[k])) continue;
      if (found)
        return field_error(t.path + ".begin", "\"" + t.text + "\" starts with two triggers, \"" +
                                                  f.triggers[*found] + "\" and \"" + f.triggers[k] +
                                                  "\"");
      found = k;
    }
    if (!found)
      return field_error(t.path + ".begin", "\"" + t.text + "\" starts with none of the triggers");
    used[*found] = 1;
  }
  for (size_t k = 0; k < f.triggers.size(); ++k)
    if (!used[k])
      return field_error(indexed(child(f.path, "triggers"), k),
                         "no tag's begin starts with \"" + f.triggers[k] + "\"");
  return ok_status();
}

// Unbounded free text may only end a sequence, and a tag around it needs end strings to stop it.
Status TagReader::set_unbounded(StructuralFormat& f) {
  switch (f.kind) {
    case Kind::kAnyText:
    case Kind::kTriggeredTags:
      f.unbounded = true;
      break;
    case Kind::kSequence:
      for (size_t i = 0; i + 1 < f.items.size(); ++i)
        if (f.items[i].unbounded)
          return field_error(f.items[i].path,
                             "free text (any_text, triggered_tags) runs to the end of what holds "
                             "it, so only the last element of a sequence may be one");
      f.unbounded = f.items.back().unbounded;
      break;
    case Kind::kOr:
      for (const StructuralFormat& item : f.items) f.unbounded = f.unbounded || item.unbounded;
      break;
    case Kind::kTag:
      if (f.items[0].unbounded)
        for (const std::string& end : f.ends)
          if (end.empty())
            return field_error(f.path + ".end",
                               "a tag whose content is free text needs non-empty end strings "
                               "(they end the text)");
      break;
    case Kind::kConstString:
    case Kind::kJsonSchema:
    case Kind::kGrammar:
    case Kind::kRegex:
    case Kind::kTagsWithSeparator:
      break;
  }
  return ok_status();
}

// {"structures": [{"begin", "schema", "end"}], "triggers": [...]}: triggered tags of schemas.
Expected<StructuralFormat> TagReader::legacy(const Json& tag) {
  StructuralFormat f{.kind = Kind::kTriggeredTags};
  BEAM_ASSIGN_OR_RETURN(f.triggers, strings_field(tag, "", "triggers", true));
  const Json* structures = field(tag, "structures");
  if (!structures->is_array() || structures->empty())
    return field_error("structures", "expected a non-empty array of {begin, schema, end}");
  for (size_t i = 0; i < structures->size(); ++i) {
    const Json& s = (*structures)[i];
    const std::string at = indexed("structures", i);
    if (!s.is_object()) return field_error(at, "expected an object {begin, schema, end}");
    StructuralFormat t{.kind = Kind::kTag, .path = at};
    BEAM_ASSIGN_OR_RETURN(t.text, string_field(s, at, "begin"));
    StructuralFormat content{.kind = Kind::kJsonSchema, .path = at + ".schema"};
    BEAM_ASSIGN_OR_RETURN(content.schema, schema_field(s, at, "schema"));
    t.items.push_back(std::move(content));
    BEAM_ASSIGN_OR_RETURN(std::string end, string_field(s, at, "end"));
    t.ends = {std::move(end)};
    f.items.push_back(std::move(t));
  }
  BEAM_RETURN_IF_ERROR(check_triggers(f));
  BEAM_RETURN_IF_ERROR(set_unbounded(f));
  return f;
}

}  // namespace

Expected<StructuralFormat> parse_structural_tag(const Json& tag) {
  if (!tag.is_object()) return make_error("a structural tag must be a JSON object");
  if (const Json* type = field(tag, "type"); type && *type != Json("structural_tag"))
    return field_error("type", "expected \"structural_tag\"");
  const Json* format = field(tag, "format");
  const bool legacy = field(tag, "structures") != nullptr;
  if (format && legacy)
    return make_error("give either 'format' or the legacy 'structures' and 'triggers', not both");
  TagReader reader;
  if (legacy) return reader.legacy(tag);
  if (!format)
    return field_error("format", "is required (or the legacy 'structures' and 'triggers')");
  return reader.format(*format, "format", 0);
}

}  // namespace beam
