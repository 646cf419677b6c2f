// ResponseStream: region events → reasoning / content / tool-call deltas (see response_stream.h).
#include "server/parsers/response_stream.h"

#include <algorithm>

namespace beam::server {
namespace {

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// One tool call read from a region value, or nullopt when it is not a usable call.
std::optional<ParsedToolCall> read_tool_call(const Json& call) {
  if (!call.is_object()) return std::nullopt;
  auto function = call.find("function");
  const Json& fn = function != call.end() && function->is_object() ? *function : call;
  auto name = fn.find("name");
  if (name == fn.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return std::nullopt;
  }
  ParsedToolCall parsed;
  parsed.name = name->get<std::string>();
  auto arguments = fn.find("arguments");
  if (arguments == fn.end() || arguments->is_null()) {
    parsed.arguments = "{}";
  } else if (arguments->is_object()) {
    parsed.arguments = json_text(*arguments);
  } else if (arguments->is_string()) {
    std::optional<Json> decoded = py_json_loads(arguments->get_ref<const std::string&>());
    if (!decoded || !decoded->is_object()) return std::nullopt;
    parsed.arguments = json_text(*decoded);
  } else {
    return std::nullopt;
  }
  auto id = call.find("id");
  if (id != call.end() && id->is_string()) parsed.id = id->get<std::string>();
  return parsed;
}

}  // namespace

ResponseStream::ResponseStream(std::shared_ptr<const ResponseTemplate> tmpl,
                               std::string_view prompt, ResponseStreamOptions options)
    : template_(std::move(tmpl)), options_(std::move(options)) {
  ParserOptions parser_options;
  parser_options.field_errors = ParserOptions::FieldErrors::kKeepRawText;
  parser_options.tools = ToolSchemas::from_tools(options_.tools);
  for (size_t f = 0; f < template_->fields.size(); ++f) {
    const std::string& name = template_->fields[f].name;
    Role role = Role::kNone;
    if (contains(options_.roles.reasoning, name)) role = Role::kReasoning;
    if (contains(options_.roles.content, name)) role = Role::kContent;
    if (contains(options_.roles.tool_calls, name)) role = Role::kToolCalls;
    roles_.push_back(role);
    auto default_value = template_->defaults.find(name);
    has_value_.push_back(default_value != template_->defaults.end() && !default_value->is_null());
    if (!options_.tool_call_ends_reasoning) continue;
    if (role == Role::kReasoning) parser_options.interruptible_fields.push_back(f);
    if (role == Role::kToolCalls) parser_options.interrupting_fields.push_back(f);
  }
  auto parser = ResponseParser::create(template_, prompt, std::move(parser_options));
  if (!parser.ok()) {
    result_.warnings.push_back("response parser failed on the prompt (" + parser.error().message +
                               "); the output is returned as content");
    return;
  }
  parser_.emplace(std::move(parser).value());
  handle(parser_->initial_events(), /*emit=*/false, nullptr);
}

void ResponseStream::feed(std::string_view text, std::vector<ResponseDelta>* out) {
  call_start_ = out->size();
  if (finished_) return;
  if (!parser_) {
    emit_text(Role::kContent, text, true, out);
    return;
  }
  std::vector<ParseEvent> events;
  const Status status = parser_->feed(text, &events);
  handle(events, true, out);
  if (!status.ok()) fall_back_to_raw(status.error());
}

ParsedResponse ResponseStream::finish(std::vector<ResponseDelta>* out) {
  call_start_ = out->size();
  if (finished_) return result_;
  finished_ = true;
  if (!parser_) return result_;
  std::vector<ParseEvent> events;
  Expected<Json> message = parser_->finalize(&events);
  handle(events, true, out);
  if (message.ok()) {
    result_.message = std::move(message).value();
  } else {
    result_.warnings.push_back(message.error().message);
    result_.message = parser_->output();
  }
  return result_;
}

void ResponseStream::fall_back_to_raw(const Error& error) {
  result_.warnings.push_back("response parser failed (" + error.message +
                             "); the rest of the output is returned as content");
  parser_.reset();
  region_.reset();
}

bool ResponseStream::streams_text(size_t field) const {
  return template_->fields[field].content.kind == ContentKind::kText;
}

void ResponseStream::handle(const std::vector<ParseEvent>& events, bool emit,
                            std::vector<ResponseDelta>* out) {
  for (const ParseEvent& e : events) {
    switch (e.kind) {
      case ParseEvent::Kind::kRegionOpen:
        region_ = Region{e.field, roles_[e.field], false, {}, false, e.text};
        break;
      case ParseEvent::Kind::kRegionChunk:
        if (region_) on_chunk(e, emit, out);
        break;
      case ParseEvent::Kind::kRegionClose:
        if (region_) on_close(e, emit, out);
        if (!e.error) has_value_[e.field] = true;
        region_.reset();
        break;
    }
  }
}

void ResponseStream::on_chunk(const ParseEvent& e, bool emit, std::vector<ResponseDelta>* out) {
  Region& r = *region_;
  if (r.role == Role::kNone) return;
  if (r.role == Role::kToolCalls || !streams_text(r.field)) {
    r.raw += e.text;  // parsed (or returned as text) when the region closes
    return;
  }
  std::string_view text = e.text;
  if (!template_->fields[r.field].content.strip) {
    if (!text.empty()) emit_separator_once(emit, out);
    r.started = true;
    emit_text(r.role, text, emit, out);
    return;
  }
  // Stream what strip() will keep: skip leading whitespace, hold trailing whitespace back.
  const std::string_view core = py_strip(text);
  if (core.empty()) {
    if (r.started) r.pending_space.append(text);
    return;
  }
  const size_t core_start = static_cast<size_t>(core.data() - text.data());
  if (!r.started) {
    text.remove_prefix(core_start);
    r.started = true;
    emit_separator_once(emit, out);
  }
  const size_t core_end = static_cast<size_t>(core.data() + core.size() - text.data());
  std::string piece = std::move(r.pending_space);
  piece.append(text.substr(0, core_end));
  r.pending_space.assign(text.substr(core_end));
  emit_text(r.role, piece, emit, out);
}

void ResponseStream::on_close(const ParseEvent& e, bool emit, std::vector<ResponseDelta>* out) {
  Region& r = *region_;
  switch (r.role) {
    case Role::kNone:
      return;
    case Role::kReasoning:
    case Role::kContent:
      if (streams_text(r.field)) {
        emit_separator_once(emit, out);  // an empty occurrence still adds the join string
        return;
      }
      // A structured field given a text role contributes the text the model wrote, verbatim.
      emit_separator_once(emit, out);
      emit_text(r.role, r.raw + e.text, emit, out);
      return;
    case Role::kToolCalls:
      if (e.error) {
        if (emit) {
          result_.warnings.push_back("a tool call could not be parsed (" + *e.error +
                                     "); it is returned as content");
        }
        emit_text(Role::kContent, r.raw + e.text, emit, out);
        return;
      }
      r.raw += e.text;
      emit_tool_calls(e.value, emit, out);
      return;
  }
}

void ResponseStream::emit_tool_calls(const Json& value, bool emit,
                                     std::vector<ResponseDelta>* out) {
  std::vector<ParsedToolCall> calls;
  const std::vector<Json> items =
      value.is_array() ? value.get<std::vector<Json>>() : std::vector<Json>{value};
  for (const Json& item : items) {
    std::optional<ParsedToolCall> call = read_tool_call(item);
    if (!call) {
      if (emit) {
        result_.warnings.push_back("a tool call has no usable name/arguments (" + json_text(item) +
                                   "); it is returned as content");
      }
      emit_text(Role::kContent, region_->raw, emit, out);
      return;
    }
    calls.push_back(*std::move(call));
  }
  if (!emit) return;  // calls written by the prompt itself are not part of this response
  for (ParsedToolCall& call : calls) {
    const size_t index = result_.tool_calls.size();
    if (call.id.empty()) call.id = options_.tool_call_id_prefix + std::to_string(index);
    out->push_back({ResponseDelta::Kind::kToolCallStart, {}, index, call.id, call.name});
    out->push_back({ResponseDelta::Kind::kToolCallArguments, call.arguments, index, {}, {}});
    result_.tool_calls.push_back(std::move(call));
  }
}

void ResponseStream::emit_separator_once(bool emit, std::vector<ResponseDelta>* out) {
  Region& r = *region_;
  if (r.separator_checked) return;
  r.separator_checked = true;
  const TemplateField& field = template_->fields[r.field];
  if (field.join && has_value_[r.field]) emit_text(r.role, *field.join, emit, out);
}

void ResponseStream::emit_text(Role role, std::string_view text, bool emit,
                               std::vector<ResponseDelta>* out) {
  if (!emit || text.empty() || role == Role::kNone || role == Role::kToolCalls) return;
  const auto kind =
      role == Role::kReasoning ? ResponseDelta::Kind::kReasoning : ResponseDelta::Kind::kContent;
  (role == Role::kReasoning ? result_.reasoning : result_.content).append(text);
  if (out->size() > call_start_ && out->back().kind == kind) {
    out->back().text.append(text);
  } else {
    out->push_back({kind, std::string(text), 0, {}, {}});
  }
}

}  // namespace beam::server
