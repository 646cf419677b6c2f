// ContentSpec and Transform: how one response_template field turns its region body into a value
// (content parser + content_args, then an optional transform template), and running them.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "server/parsers/pcre_regex.h"
#include "server/parsers/python_text.h"

namespace beam::server {

enum class ContentKind { kText, kInt, kFloat, kBool, kJson, kXmlInline, kKvLines };

// "text" → kText etc.; nullopt for unknown names.
std::optional<ContentKind> content_kind_from_name(std::string_view name);
std::string_view content_kind_name(ContentKind kind);
// Kinds whose raw body streams as the value itself (region chunks are not "dirty").
bool content_kind_streamable(ContentKind kind);
// All content parser names, sorted (for error messages).
const std::vector<std::string>& content_kind_names();

// A content parser with its content_args read up front. transformers reads content_args only
// when a region is parsed, so problems in them (a bad tag_pattern, an unknown value_parser) are
// kept here as `deferred_error` and reported when a region of the field is closed.
struct ContentSpec {
  ContentKind kind = ContentKind::kText;
  bool strip = true;  // all kinds: strip whitespace (text, keys, values)
  std::vector<std::pair<std::string, std::string>> string_delims;  // json
  bool unquoted_keys = false;                                      // json
  bool allow_non_json = false;                                     // json
  std::shared_ptr<const Regex> tag_pattern;                        // xml-inline
  bool merge_duplicates = false;                                   // xml-inline
  std::string line_sep = "\n";                                     // kv-lines
  std::string kv_sep = ":";                                        // kv-lines
  std::shared_ptr<const ContentSpec> value_parser;                 // xml-inline, kv-lines
  std::optional<std::string> deferred_error;
};

// Reads content_args (any JSON; transformers expects an object) for `kind`.
ContentSpec make_content_spec(ContentKind kind, const Json& content_args);

// Runs the content parser over a region body.
Expected<Json> parse_content(std::string_view body, const ContentSpec& spec);

// A transform template compiled once: JSON literals, whole-string "{name.path}" placeholders,
// and objects/arrays of those.
class Transform {
 public:
  // Errors when a string mixes a placeholder with literal text. `scope` prefixes messages.
  static Expected<Transform> compile(const Json& transform, std::string_view scope);
  // Instantiates the template against a scope object ({content, captures...}).
  Expected<Json> apply(const Json& scope) const;

 private:
  enum class NodeKind { kLiteral, kPlaceholder, kObject, kArray };
  struct Node {
    NodeKind kind = NodeKind::kLiteral;
    Json literal;
    std::vector<std::string> path;                    // placeholder: root then keys
    std::vector<std::pair<std::string, Node>> items;  // object (key, node) / array ("", node)
  };
  static Expected<Node> compile_node(const Json& value, std::string_view scope);
  static Expected<Json> apply_node(const Node& node, const Json& scope);
  Node root_;
};

}  // namespace beam::server
