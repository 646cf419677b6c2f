// Content parsers (text/int/float/bool/json/xml-inline/kv-lines) and transform templates,
// matching transformers.utils.chat_parsing.content_parsers value for value.
#include "server/parsers/content_spec.h"

#include <algorithm>

namespace beam::server {
namespace {

constexpr char kLaxOpen = '\x01';  // sentinels of json string_delims pre-extraction
constexpr char kLaxClose = '\x02';

std::string python_type_name(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null:
    case Json::value_t::discarded:
      return "NoneType";
    case Json::value_t::boolean:
      return "bool";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "int";
    case Json::value_t::number_float:
      return "float";
    case Json::value_t::string:
      return "str";
    case Json::value_t::array:
    case Json::value_t::binary:
      return "list";
    case Json::value_t::object:
      return "dict";
  }
  return "object";
}

std::string strip_if(std::string_view text, const ContentSpec& spec) {
  return std::string(spec.strip ? py_strip(text) : text);
}

// Python's `str(sorted(keys))` for messages.
std::string sorted_key_list(const Json& object) {
  std::vector<std::string> keys;
  for (auto it = object.begin(); it != object.end(); ++it) keys.push_back(it.key());
  std::sort(keys.begin(), keys.end());
  std::string out = "[";
  for (size_t k = 0; k < keys.size(); ++k) out += (k ? ", " : "") + py_quote(keys[k]);
  return out + "]";
}

Expected<Json> parse_json_content(std::string_view text, const ContentSpec& spec) {
  if (!spec.string_delims.empty() &&
      text.find_first_of(std::string_view("\x01\x02", 2)) != std::string_view::npos) {
    return make_error(
        "json: input contains reserved sentinel characters (\\x01/\\x02); cannot parse safely.");
  }
  std::string working(text);
  std::vector<std::string> captured;
  for (const auto& [open, close] : spec.string_delims) {
    BEAM_ASSIGN_OR_RETURN(
        Regex delims,
        Regex::compile(escape_regex_literal(open) + "(?P<body>.*?)" + escape_regex_literal(close)));
    BEAM_ASSIGN_OR_RETURN(
        working, delims.substitute(working, [&](std::string_view, const Regex::FoundMatch& m) {
          std::string body = m.captures.empty() ? std::string() : m.captures.front().second;
          captured.push_back(std::move(body));
          return std::string(1, kLaxOpen) + std::to_string(captured.size() - 1) + kLaxClose;
        }));
  }
  if (spec.unquoted_keys) {
    BEAM_ASSIGN_OR_RETURN(Regex bare_key, Regex::compile(R"((?<=[{,])(?P<key>\w+):)"));
    BEAM_ASSIGN_OR_RETURN(
        working, bare_key.substitute(working, [](std::string_view, const Regex::FoundMatch& m) {
          return "\"" + m.captures.front().second + "\":";
        }));
  }
  if (!captured.empty()) {
    std::string restored;
    for (size_t i = 0; i < working.size(); ++i) {
      if (working[i] == kLaxOpen) {
        const size_t close = working.find(kLaxClose, i);
        const std::string index = working.substr(i + 1, close - i - 1);
        restored += json_text(Json(captured[std::stoul(index)]));
        i = close;
      } else {
        restored += working[i];
      }
    }
    working = std::move(restored);
  }
  if (std::optional<Json> value = py_json_loads(working)) return *std::move(value);
  if (spec.allow_non_json) return Json(strip_if(text, spec));
  if (working == text) {
    return make_error("json parser could not parse region as JSON. Content: " + py_quote(text));
  }
  return make_error("json: could not parse after dialect transforms. Original: " + py_quote(text) +
                    " Transformed: " + py_quote(working));
}

Expected<Json> sub_parse(std::optional<std::string_view> raw, const ContentSpec& spec) {
  if (spec.value_parser == nullptr) return raw ? Json(std::string(*raw)) : Json(nullptr);
  if (!raw) return make_error("value_parser got None (the 'value' group did not participate)");
  return parse_content(*raw, *spec.value_parser);
}

Expected<Json> parse_xml_inline(std::string_view text, const ContentSpec& spec) {
  const Regex& pattern = *spec.tag_pattern;
  const bool has_value_group = pattern.has_group("value");
  BEAM_ASSIGN_OR_RETURN(auto matches, pattern.find_all(text));
  Json out = Json::object();
  for (const Regex::FoundMatch& m : matches) {
    const std::string* key = nullptr;
    std::optional<std::string_view> value;
    for (const auto& [name, captured] : m.captures) {
      if (name == "key") key = &captured;
      if (name == "value") value = captured;
    }
    if (key == nullptr) {
      return make_error("xml-inline: tag_pattern must have a named group 'key'. Pattern: " +
                        pattern.pattern());
    }
    if (!has_value_group) value = std::string_view();
    BEAM_ASSIGN_OR_RETURN(Json parsed, sub_parse(value, spec));
    auto it = out.find(*key);
    if (it != out.end() && spec.merge_duplicates) {
      if (!it->is_array()) *it = Json::array({*it});
      it->push_back(std::move(parsed));
    } else {
      out[*key] = std::move(parsed);
    }
  }
  return out;
}

// Python str.split(sep) for a non-empty separator.
std::vector<std::string_view> split(std::string_view text, std::string_view sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t at = text.find(sep); at != std::string_view::npos; at = text.find(sep, start)) {
    parts.push_back(text.substr(start, at - start));
    start = at + sep.size();
  }
  parts.push_back(text.substr(start));
  return parts;
}

Expected<Json> parse_kv_lines(std::string_view text, const ContentSpec& spec) {
  if (spec.line_sep.empty()) return make_error("kv-lines: empty separator (line_sep)");
  Json out = Json::object();
  for (std::string_view raw_line : split(text, spec.line_sep)) {
    const std::string line = strip_if(raw_line, spec);
    if (line.empty()) continue;
    if (spec.kv_sep.empty()) return make_error("kv-lines: empty separator (kv_sep)");
    const size_t at = line.find(spec.kv_sep);
    if (at == std::string::npos) continue;
    const std::string key = strip_if(std::string_view(line).substr(0, at), spec);
    const std::string value =
        strip_if(std::string_view(line).substr(at + spec.kv_sep.size()), spec);
    BEAM_ASSIGN_OR_RETURN(out[key], sub_parse(std::string_view(value), spec));
  }
  return out;
}

}  // namespace

std::optional<ContentKind> content_kind_from_name(std::string_view name) {
  static constexpr std::pair<std::string_view, ContentKind> kKinds[] = {
      {"text", ContentKind::kText},       {"int", ContentKind::kInt},
      {"float", ContentKind::kFloat},     {"bool", ContentKind::kBool},
      {"json", ContentKind::kJson},       {"xml-inline", ContentKind::kXmlInline},
      {"kv-lines", ContentKind::kKvLines}};
  for (const auto& [kind_name, kind] : kKinds) {
    if (kind_name == name) return kind;
  }
  return std::nullopt;
}

std::string_view content_kind_name(ContentKind kind) {
  switch (kind) {
    case ContentKind::kText:
      return "text";
    case ContentKind::kInt:
      return "int";
    case ContentKind::kFloat:
      return "float";
    case ContentKind::kBool:
      return "bool";
    case ContentKind::kJson:
      return "json";
    case ContentKind::kXmlInline:
      return "xml-inline";
    case ContentKind::kKvLines:
      return "kv-lines";
  }
  return "text";
}

bool content_kind_streamable(ContentKind kind) {
  switch (kind) {
    case ContentKind::kText:
    case ContentKind::kInt:
    case ContentKind::kFloat:
    case ContentKind::kBool:
      return true;
    case ContentKind::kJson:
    case ContentKind::kXmlInline:
    case ContentKind::kKvLines:
      return false;
  }
  return false;
}

const std::vector<std::string>& content_kind_names() {
  static const std::vector<std::string> kNames = {"bool",     "float", "int",       "json",
                                                  "kv-lines", "text",  "xml-inline"};
  return kNames;
}

Expected<Json> parse_content(std::string_view body, const ContentSpec& spec) {
  if (spec.deferred_error) return make_error(*spec.deferred_error);
  switch (spec.kind) {
    case ContentKind::kText:
      return Json(strip_if(body, spec));
    case ContentKind::kInt: {
      const std::string text = strip_if(body, spec);
      if (std::optional<Json> value = py_int(text)) return *value;
      return make_error("invalid literal for int() with base 10: " + py_quote(text));
    }
    case ContentKind::kFloat: {
      const std::string text = strip_if(body, spec);
      if (std::optional<double> value = py_float(text)) return Json(*value);
      return make_error("could not convert string to float: " + py_quote(text));
    }
    case ContentKind::kBool: {
      const std::string text = ascii_lower(strip_if(body, spec));
      return Json(text == "true" || text == "1");
    }
    case ContentKind::kJson:
      return parse_json_content(body, spec);
    case ContentKind::kXmlInline:
      return parse_xml_inline(body, spec);
    case ContentKind::kKvLines:
      return parse_kv_lines(body, spec);
  }
  return make_error("unknown content parser");
}

Expected<Transform> Transform::compile(const Json& transform, std::string_view scope) {
  Transform compiled;
  BEAM_ASSIGN_OR_RETURN(compiled.root_, compile_node(transform, scope));
  return compiled;
}

Expected<Transform::Node> Transform::compile_node(const Json& value, std::string_view scope) {
  Node node;
  if (value.is_object() || value.is_array()) {
    node.kind = value.is_object() ? NodeKind::kObject : NodeKind::kArray;
    for (auto it = value.begin(); it != value.end(); ++it) {
      BEAM_ASSIGN_OR_RETURN(Node child, compile_node(*it, scope));
      node.items.emplace_back(value.is_object() ? it.key() : std::string(), std::move(child));
    }
    return node;
  }
  node.literal = value;
  if (!value.is_string()) return node;
  const std::string& text = value.get_ref<const std::string&>();
  std::string valid;
  append_valid_utf8(&valid, text);
  if (valid != text)
    return make_error(std::string(scope) + ": transform string is not valid UTF-8");
  BEAM_ASSIGN_OR_RETURN(Regex placeholder, Regex::compile(R"(\{(?P<path>\w+(?:\.\w+)*)\})"));
  MatchScratch scratch;
  BEAM_ASSIGN_OR_RETURN(Regex::Match m,
                        placeholder.search(text, 0, Regex::Mode::kFull, true, &scratch));
  if (m.outcome != Regex::Outcome::kComplete) return node;
  if (m.start != 0 || m.end != text.size()) {
    return make_error(std::string(scope) + ": transform string " + py_quote(text) +
                      " mixes a {placeholder} with literal text. Use either a whole-string "
                      "placeholder (e.g. \"{content}\") or a plain literal; string interpolation "
                      "is not supported.");
  }
  node.kind = NodeKind::kPlaceholder;
  const std::string path = text.substr(1, text.size() - 2);
  size_t start = 0;
  for (size_t dot = path.find('.'); dot != std::string::npos; dot = path.find('.', start)) {
    node.path.push_back(path.substr(start, dot - start));
    start = dot + 1;
  }
  node.path.push_back(path.substr(start));
  return node;
}

Expected<Json> Transform::apply(const Json& scope) const {
  return apply_node(root_, scope);
}

Expected<Json> Transform::apply_node(const Node& node, const Json& scope) {
  switch (node.kind) {
    case NodeKind::kLiteral:
      return node.literal;
    case NodeKind::kObject: {
      Json out = Json::object();
      for (const auto& [key, child] : node.items) {
        BEAM_ASSIGN_OR_RETURN(out[key], apply_node(child, scope));
      }
      return out;
    }
    case NodeKind::kArray: {
      Json out = Json::array();
      for (const auto& item : node.items) {
        BEAM_ASSIGN_OR_RETURN(Json value, apply_node(item.second, scope));
        out.push_back(std::move(value));
      }
      return out;
    }
    case NodeKind::kPlaceholder:
      break;
  }
  std::string shown = "{" + node.path.front();
  for (size_t k = 1; k < node.path.size(); ++k) shown += "." + node.path[k];
  shown += "}";
  auto root = scope.find(node.path.front());
  if (root == scope.end()) {
    return make_error("KeyError: transform placeholder '" + shown +
                      "' is not defined. Available: " + sorted_key_list(scope));
  }
  const Json* value = &*root;
  for (size_t k = 1; k < node.path.size(); ++k) {
    if (!value->is_object()) {
      return make_error("transform placeholder '" + shown + "' cannot index into " +
                        python_type_name(*value) + " at '" + node.path[k] + "'");
    }
    auto it = value->find(node.path[k]);
    if (it == value->end()) {
      return make_error("transform placeholder '" + shown + "' is missing key '" + node.path[k] +
                        "'. Available: " + sorted_key_list(*value));
    }
    value = &*it;
  }
  return *value;
}

}  // namespace beam::server
