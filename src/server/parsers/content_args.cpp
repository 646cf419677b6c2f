// make_content_spec: reads a field's content_args into a ContentSpec. transformers reads them
// lazily (dict.get at parse time), so anything it would raise on is kept as a deferred error.
#include <string>

#include "server/parsers/content_spec.h"

namespace beam::server {
namespace {

// args.get(key) for an object, or nullptr when the key is absent.
const Json* arg(const Json& args, const char* key) {
  auto it = args.find(key);
  return it == args.end() ? nullptr : &*it;
}

bool truthy_arg(const Json& args, const char* key, bool default_value) {
  const Json* value = arg(args, key);
  return value == nullptr ? default_value : py_truthy(*value);
}

// A pair from one string_delims entry: [open, close] (a 2-character string also unpacks).
std::optional<std::pair<std::string, std::string>> delimiter_pair(const Json& entry) {
  if (entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_string()) {
    return std::make_pair(entry[0].get<std::string>(), entry[1].get<std::string>());
  }
  if (entry.is_string() && utf8_length(entry.get_ref<const std::string&>()) == 2) {
    const std::string& s = entry.get_ref<const std::string&>();
    size_t second = 1;  // byte offset of the second code point
    while (second < s.size() && (static_cast<unsigned char>(s[second]) & 0xC0) == 0x80) ++second;
    return std::make_pair(s.substr(0, second), s.substr(second));
  }
  return std::nullopt;
}

void read_value_parser(const Json& args, ContentSpec* spec) {
  const Json* vp = arg(args, "value_parser");
  if (vp == nullptr || vp->is_null()) return;
  auto sub = std::make_shared<ContentSpec>();
  if (!vp->is_object()) {
    sub->deferred_error = "value_parser must be a dict with 'name' and 'args'";
    spec->value_parser = std::move(sub);
    return;
  }
  const Json* name = arg(*vp, "name");
  std::optional<ContentKind> kind = ContentKind::kText;
  if (name != nullptr) {
    kind = name->is_string() ? content_kind_from_name(name->get<std::string>()) : std::nullopt;
  }
  if (!kind) {
    sub->deferred_error =
        "KeyError: value_parser name " + json_text(*name) + " is not a content parser";
    spec->value_parser = std::move(sub);
    return;
  }
  const Json* sub_args = arg(*vp, "args");
  *sub = make_content_spec(*kind, sub_args == nullptr ? Json::object() : *sub_args);
  spec->value_parser = std::move(sub);
}

void read_json_args(const Json& args, ContentSpec* spec) {
  spec->unquoted_keys = truthy_arg(args, "unquoted_keys", false);
  spec->allow_non_json = truthy_arg(args, "allow_non_json", false);
  const Json* delims = arg(args, "string_delims");
  if (delims == nullptr) return;
  if (!delims->is_array()) {
    spec->deferred_error = "json: 'string_delims' must be a list of [open, close] pairs";
    return;
  }
  for (const Json& entry : *delims) {
    auto pair = delimiter_pair(entry);
    if (!pair) {
      spec->deferred_error =
          "json: each 'string_delims' entry must be an [open, close] pair of "
          "strings, got " +
          json_text(entry);
      return;
    }
    spec->string_delims.push_back(*std::move(pair));
  }
}

void read_xml_args(const Json& args, ContentSpec* spec) {
  spec->merge_duplicates = truthy_arg(args, "merge_duplicates", false);
  read_value_parser(args, spec);
  const Json* pattern = arg(args, "tag_pattern");
  if (pattern == nullptr || pattern->is_null()) {
    spec->deferred_error = "xml-inline: 'tag_pattern' content_arg is required";
    return;
  }
  if (!pattern->is_string()) {
    spec->deferred_error = "xml-inline: 'tag_pattern' must be a string";
    return;
  }
  Expected<Regex> compiled = Regex::compile(pattern->get<std::string>());
  if (!compiled.ok()) {
    spec->deferred_error = "xml-inline: invalid tag_pattern: " + compiled.error().message;
    return;
  }
  spec->tag_pattern = std::make_shared<const Regex>(std::move(compiled).value());
}

void read_kv_args(const Json& args, ContentSpec* spec) {
  read_value_parser(args, spec);
  const std::pair<const char*, std::string*> separators[] = {{"line_sep", &spec->line_sep},
                                                             {"kv_sep", &spec->kv_sep}};
  for (const auto& [key, target] : separators) {
    const Json* value = arg(args, key);
    if (value == nullptr) continue;
    if (!value->is_string()) {
      spec->deferred_error = std::string("kv-lines: '") + key + "' must be a string";
      return;
    }
    *target = value->get<std::string>();
  }
}

}  // namespace

ContentSpec make_content_spec(ContentKind kind, const Json& content_args) {
  ContentSpec spec;
  spec.kind = kind;
  if (!content_args.is_object()) {
    spec.deferred_error = "content_args must be a dict, got " + json_text(content_args);
    return spec;
  }
  spec.strip = truthy_arg(content_args, "strip", true);
  switch (kind) {
    case ContentKind::kText:
    case ContentKind::kInt:
    case ContentKind::kFloat:
    case ContentKind::kBool:
      break;
    case ContentKind::kJson:
      read_json_args(content_args, &spec);
      break;
    case ContentKind::kXmlInline:
      read_xml_args(content_args, &spec);
      break;
    case ContentKind::kKvLines:
      read_kv_args(content_args, &spec);
      break;
  }
  return spec;
}

}  // namespace beam::server
