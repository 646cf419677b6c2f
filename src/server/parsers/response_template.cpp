// Loading and validation of response_template dicts (transformers' response_templates.py rules).
#include "server/parsers/response_template.h"

#include <algorithm>
#include <set>

namespace beam::server {
namespace {

std::string python_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t k = 0; k < items.size(); ++k) out += (k ? ", " : "") + py_quote(items[k]);
  return out + "]";
}

std::string json_type_name(const Json& v) {
  if (v.is_string()) return "str";
  if (v.is_boolean()) return "bool";
  if (v.is_number_float()) return "float";
  if (v.is_number()) return "int";
  if (v.is_array()) return "list";
  if (v.is_object()) return "dict";
  return "NoneType";
}

// `raw` is a literal string or a non-empty list of them.
Expected<std::vector<std::string>> read_literals(const Json& raw, const std::string& scope,
                                                 const std::string& key) {
  std::vector<std::string> literals;
  if (raw.is_string()) {
    literals.push_back(raw.get<std::string>());
  } else if (raw.is_array()) {
    if (raw.empty())
      return make_error(scope + ": '" + key + "' list must contain at least one literal");
    for (const Json& item : raw) {
      if (!item.is_string())
        return make_error(scope + ": '" + key + "' list must contain only strings");
      const std::string& s = item.get_ref<const std::string&>();
      if (std::find(literals.begin(), literals.end(), s) == literals.end()) literals.push_back(s);
    }
  } else {
    return make_error(scope + ": '" + key + "' must be a string or list of strings, got " +
                      json_type_name(raw));
  }
  if (std::find(literals.begin(), literals.end(), "") != literals.end()) {
    return make_error(scope + ": '" + key + "' literals cannot be empty strings");
  }
  return literals;
}

// transformers' _compile_anchor: nullopt when neither key is present.
Expected<std::optional<Delimiter>> compile_anchor(const std::string& scope, const Json& object,
                                                  const std::string& literal_key,
                                                  const std::string& pattern_key) {
  const bool has_literal = object.contains(literal_key);
  const bool has_pattern = object.contains(pattern_key);
  if (has_literal && has_pattern) {
    return make_error(scope + ": cannot specify both '" + literal_key + "' and '" + pattern_key +
                      "'");
  }
  if (has_literal) {
    BEAM_ASSIGN_OR_RETURN(std::vector<std::string> literals,
                          read_literals(object[literal_key], scope, literal_key));
    std::vector<std::string> ordered = literals;  // longest (in code points) first, stable
    std::stable_sort(
        ordered.begin(), ordered.end(),
        [](const std::string& a, const std::string& b) { return utf8_length(a) > utf8_length(b); });
    bool can_extend = false;
    for (const auto& a : literals) {
      for (const auto& b : literals) can_extend |= a != b && a.compare(0, b.size(), b) == 0;
    }
    BEAM_ASSIGN_OR_RETURN(Regex regex, Regex::literal_alternation(ordered));
    return std::optional<Delimiter>(
        Delimiter{std::move(regex), true, can_extend, std::move(literals), {}});
  }
  if (has_pattern) {
    const Json& pattern = object[pattern_key];
    if (!pattern.is_string()) {
      return make_error(scope + ": invalid " + pattern_key + " regex: must be a string, got " +
                        json_type_name(pattern));
    }
    Expected<Regex> regex = Regex::compile(pattern.get<std::string>());
    if (!regex.ok())
      return make_error(scope + ": invalid " + pattern_key + " regex: " + regex.error().message);
    return std::optional<Delimiter>(
        Delimiter{std::move(regex).value(), false, false, {}, pattern.get<std::string>()});
  }
  return std::optional<Delimiter>();
}

Status validate_template_shape(const Json& spec) {
  if (!spec.is_object()) {
    return make_error("response_template must be a dict, got " + json_type_name(spec));
  }
  if (auto it = spec.find("version"); it != spec.end()) {
    const Json& v = *it;
    const bool is_one =
        (v.is_boolean() && v.get<bool>()) || (v.is_number() && v.get<double>() == 1.0);
    if (!is_one) {
      return make_error("Unsupported response_template version: " +
                        (v.is_null() ? std::string("None") : json_text(v)));
    }
  }
  static const std::set<std::string> kTopKeys = {"version", "defaults", "fields", "start_anchor",
                                                 "start_anchor_pattern"};
  std::vector<std::string> unknown;
  for (auto it = spec.begin(); it != spec.end(); ++it) {
    if (!kTopKeys.count(it.key())) unknown.push_back(it.key());
  }
  std::sort(unknown.begin(), unknown.end());
  if (!unknown.empty())
    return make_error("Unknown keys in response_template: " + python_list(unknown));
  if (spec.contains("defaults") && !spec["defaults"].is_object()) {
    return make_error("response_template.defaults must be a dict");
  }
  if (!spec.contains("fields") || !spec["fields"].is_object() || spec["fields"].empty()) {
    return make_error("response_template.fields must be a non-empty dict");
  }
  return ok_status();
}

Status check_transform(const std::string& scope, const Json& raw, TemplateField* field) {
  auto each = raw.find("transform_each");
  if (each != raw.end()) {
    if (!each->is_boolean()) {
      return make_error(scope + ": transform_each must be a bool, got " + json_type_name(*each));
    }
    field->transform_each = each->get<bool>();
  }
  auto transform = raw.find("transform");
  const bool has_transform = transform != raw.end() && !transform->is_null();
  if (field->transform_each && !has_transform) {
    return make_error(scope + ": transform_each is set but no transform was provided");
  }
  if (has_transform) {
    BEAM_ASSIGN_OR_RETURN(field->transform, Transform::compile(*transform, scope));
    return ok_status();
  }
  // Named captures only reach the output through a transform.
  std::vector<std::string> names;
  for (const auto* delimiter : {&field->open, &field->close}) {
    if (*delimiter) {
      for (auto& name : (*delimiter)->regex.group_names()) names.push_back(name);
    }
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  if (!names.empty()) {
    return make_error(scope + ": open_pattern/close_pattern declares named group(s) " +
                      python_list(names) +
                      ", but the field has no 'transform'. Named captures "
                      "are only surfaced through a 'transform' template (where they appear "
                      "alongside 'content'). Either add a 'transform' that uses the captures, or "
                      "remove the named groups from the pattern.");
  }
  return ok_status();
}

Expected<TemplateField> build_field(const std::string& name, const Json& raw) {
  static const std::set<std::string> kFieldKeys = {
      "open",    "open_pattern", "close",    "close_pattern", "content",       "content_args",
      "repeats", "join",         "optional", "transform",     "transform_each"};
  const std::string scope = "Field '" + name + "'";
  if (!raw.is_object()) return make_error(scope + " must be a dict");
  std::vector<std::string> unknown;
  for (auto it = raw.begin(); it != raw.end(); ++it) {
    if (!kFieldKeys.count(it.key())) unknown.push_back(it.key());
  }
  std::sort(unknown.begin(), unknown.end());
  if (!unknown.empty()) return make_error(scope + ": unknown keys " + python_list(unknown));
  TemplateField field;
  field.name = name;
  const Json content_name = raw.contains("content") ? raw["content"] : Json("text");
  std::optional<ContentKind> kind;
  if (content_name.is_string()) kind = content_kind_from_name(content_name.get<std::string>());
  if (!kind) {
    return make_error(
        scope + ": unknown content parser '" +
        (content_name.is_string() ? content_name.get<std::string>() : json_text(content_name)) +
        "'. Available: " + python_list(content_kind_names()));
  }
  BEAM_ASSIGN_OR_RETURN(field.open, compile_anchor(scope, raw, "open", "open_pattern"));
  BEAM_ASSIGN_OR_RETURN(field.close, compile_anchor(scope, raw, "close", "close_pattern"));
  field.repeats = raw.contains("repeats") && py_truthy(raw["repeats"]);
  field.optional = !raw.contains("optional") || py_truthy(raw["optional"]);
  if (auto join = raw.find("join"); join != raw.end() && !join->is_null()) {
    if (!join->is_string())
      return make_error(scope + ": 'join' must be a string, got " + json_type_name(*join));
    if (!field.repeats) return make_error(scope + ": 'join' requires 'repeats': true");
    field.join = join->get<std::string>();
  }
  BEAM_RETURN_IF_ERROR(check_transform(scope, raw, &field));
  field.content =
      make_content_spec(*kind, raw.contains("content_args") ? raw["content_args"] : Json::object());
  return field;
}

}  // namespace

Expected<std::string_view> ResponseTemplate::truncate_past_last_anchor(
    std::string_view prefix) const {
  BEAM_ASSIGN_OR_RETURN(auto matches, start_anchor.regex.find_all(prefix));
  if (matches.empty()) return prefix;
  return prefix.substr(matches.back().end);
}

std::optional<size_t> ResponseTemplate::field_index(std::string_view name) const {
  for (size_t k = 0; k < fields.size(); ++k) {
    if (fields[k].name == name) return k;
  }
  return std::nullopt;
}

Expected<std::shared_ptr<const ResponseTemplate>> load_response_template(const Json& spec) {
  BEAM_RETURN_IF_ERROR(validate_template_shape(spec));
  std::vector<TemplateField> fields;
  std::vector<std::string> implicit_names;
  std::optional<size_t> implicit;
  const Json& raw_fields = spec["fields"];
  for (auto it = raw_fields.begin(); it != raw_fields.end(); ++it) {
    BEAM_ASSIGN_OR_RETURN(TemplateField field, build_field(it.key(), it.value()));
    if (!field.open) {
      implicit_names.push_back(field.name);
      implicit = fields.size();
    }
    fields.push_back(std::move(field));
  }
  if (implicit_names.size() > 1) {
    std::string names;
    for (size_t k = 0; k < implicit_names.size(); ++k) names += (k ? ", " : "") + implicit_names[k];
    return make_error(
        "At most one field may omit 'open'/'open_pattern' (that field becomes the "
        "implicit-open / leftover sink). Found: " +
        names);
  }
  BEAM_ASSIGN_OR_RETURN(
      std::optional<Delimiter> anchor,
      compile_anchor("response_template", spec, "start_anchor", "start_anchor_pattern"));
  if (!anchor)
    return make_error("response_template must define 'start_anchor' or 'start_anchor_pattern'.");
  return std::make_shared<const ResponseTemplate>(
      ResponseTemplate{spec.contains("defaults") ? spec["defaults"] : Json::object(),
                       std::move(fields), implicit, *std::move(anchor)});
}

Expected<Json> process_field(std::string_view body, const TemplateField& field,
                             const NamedCaptures& captures) {
  BEAM_ASSIGN_OR_RETURN(Json value, parse_content(body, field.content));
  if (!field.transform) return value;
  Json scope = Json::object();
  for (const auto& [name, text] : captures) scope[name] = text;
  if (!field.transform_each) {
    scope["content"] = std::move(value);
    return field.transform->apply(scope);
  }
  if (!value.is_array()) {
    return make_error("Field '" + field.name +
                      "': transform_each requires the parsed content to "
                      "be a list, got " +
                      json_type_name(value) + ".");
  }
  Json out = Json::array();
  for (const Json& item : value) {
    if (!item.is_object()) {
      return make_error("Field '" + field.name +
                        "': transform_each requires each list element to "
                        "be a dict, got " +
                        json_type_name(item) + ".");
    }
    Json item_scope = scope;
    for (auto it = item.begin(); it != item.end(); ++it) item_scope[it.key()] = it.value();
    BEAM_ASSIGN_OR_RETURN(Json applied, field.transform->apply(item_scope));
    out.push_back(std::move(applied));
  }
  return out;
}

}  // namespace beam::server
