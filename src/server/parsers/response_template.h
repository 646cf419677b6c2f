// ResponseTemplate: a validated, compiled `response_template` (the declarative output format
// Beam checkpoints ship in tokenizer_config.json; shared/spec/RESPONSE_TEMPLATE.md), loaded with
// exactly the checks transformers 5.x applies. Immutable once loaded; shared between requests.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "server/parsers/content_spec.h"
#include "server/parsers/pcre_regex.h"
#include "server/parsers/python_text.h"

namespace beam::server {

// An open/close/start anchor: a regex, or literal strings compiled to a longest-first
// alternation. A complete literal match can only grow when one literal prefixes another.
struct Delimiter {
  Regex regex;
  bool is_literal = false;
  bool literal_can_extend = false;
  std::vector<std::string> literals;  // deduplicated, as written (empty for a pattern)
  std::string pattern;                // the regex as written (empty for literals)
};

struct TemplateField {
  std::string name;
  std::optional<Delimiter> open;   // absent: the implicit (leftover) field
  std::optional<Delimiter> close;  // absent: the region runs to the end of the stream
  ContentSpec content;
  bool repeats = false;
  std::optional<std::string> join;  // with repeats: occurrences joined into one string
  bool optional = true;
  std::optional<Transform> transform;
  bool transform_each = false;

  bool streamable() const { return content_kind_streamable(content.kind); }
};

struct ResponseTemplate {
  Json defaults = Json::object();
  std::vector<TemplateField> fields;  // template order
  std::optional<size_t> implicit_field;
  Delimiter start_anchor;

  // The text after the last start-anchor match of `prefix` (all of it when there is none).
  Expected<std::string_view> truncate_past_last_anchor(std::string_view prefix) const;
  std::optional<size_t> field_index(std::string_view name) const;
};

// Validates and compiles a template. Errors carry transformers' wording ("Field 'x': ...").
Expected<std::shared_ptr<const ResponseTemplate>> load_response_template(const Json& spec);

// Parses a region body with the field's content parser, then applies its transform with the
// open delimiter's named captures in scope (transformers' process_field).
Expected<Json> process_field(std::string_view body, const TemplateField& field,
                             const NamedCaptures& captures);

}  // namespace beam::server
