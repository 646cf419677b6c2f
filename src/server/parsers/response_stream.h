// ResponseStream: one generation's text → what the HTTP layer sends: reasoning text deltas,
// content text deltas and tool calls (OpenAI style: id and name once the call is complete,
// arguments once they are valid JSON), from a response_template. Never fails: a tool call the
// model got wrong comes back as content text, and problems are reported as warnings.
// One owner thread per stream.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/parsers/response_parser.h"

namespace beam::server {

// Which template fields feed which part of the response (by field name). A "text" field in a
// reasoning/content role streams its (stripped) text; any other field given such a role adds
// its region verbatim (delimiters included) when it closes, e.g. tool calls kept as text.
struct FieldRoles {
  std::vector<std::string> reasoning = {"thinking", "reasoning_content", "reasoning"};
  std::vector<std::string> content = {"content"};
  std::vector<std::string> tool_calls = {"tool_calls"};
};

struct ResponseStreamOptions {
  Json tools;  // the request's OpenAI tools array (null: none); casts string tool arguments
  std::string tool_call_id_prefix = "call_";  // ids are prefix + index unless the call has one
  FieldRoles roles;
  // A tool-call open inside a reasoning region ends the reasoning (models often start a call
  // before </think>). Off: transformers' behaviour (the call stays reasoning text).
  bool tool_call_ends_reasoning = true;
};

struct ResponseDelta {
  enum class Kind { kReasoning, kContent, kToolCallStart, kToolCallArguments };
  Kind kind = Kind::kContent;
  std::string text;          // reasoning/content text, or the arguments JSON (whole)
  size_t tool_index = 0;     // tool-call deltas: position of the call in this response
  std::string tool_call_id;  // kToolCallStart
  std::string tool_name;     // kToolCallStart
};

struct ParsedToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // a JSON object, serialized
};

struct ParsedResponse {
  std::string reasoning;  // every reasoning delta, concatenated
  std::string content;    // every content delta, concatenated
  std::vector<ParsedToolCall> tool_calls;
  Json message;  // the template's message object (transformers' parse_response shape)
  std::vector<std::string> warnings;
};

class ResponseStream {
 public:
  // `prompt` is the rendered prompt (the parser keeps what follows its last start anchor).
  ResponseStream(std::shared_ptr<const ResponseTemplate> tmpl, std::string_view prompt,
                 ResponseStreamOptions options = {});

  // Appends the deltas this text produces (consecutive text of one kind is merged).
  void feed(std::string_view text, std::vector<ResponseDelta>* out);
  // Ends the generation: flushes held-back text, returns the whole response.
  ParsedResponse finish(std::vector<ResponseDelta>* out);

 private:
  enum class Role { kNone, kReasoning, kContent, kToolCalls };
  struct Region {
    size_t field = 0;
    Role role = Role::kNone;
    bool started = false;       // stripped text: a non-whitespace character was seen
    std::string pending_space;  // stripped text: trailing whitespace not yet known to be inner
    bool separator_checked = false;
    std::string raw;  // delimiter + body, returned as content if the region fails
  };

  void handle(const std::vector<ParseEvent>& events, bool emit, std::vector<ResponseDelta>* out);
  void on_chunk(const ParseEvent& e, bool emit, std::vector<ResponseDelta>* out);
  void on_close(const ParseEvent& e, bool emit, std::vector<ResponseDelta>* out);
  void emit_text(Role role, std::string_view text, bool emit, std::vector<ResponseDelta>* out);
  void emit_separator_once(bool emit, std::vector<ResponseDelta>* out);
  void emit_tool_calls(const Json& value, bool emit, std::vector<ResponseDelta>* out);
  bool streams_text(size_t field) const;
  void fall_back_to_raw(const Error& error);

  std::shared_ptr<const ResponseTemplate> template_;
  ResponseStreamOptions options_;
  std::vector<Role> roles_;  // per template field
  // Per field: the message holds a non-null value (decides whether a join string is due). Kept
  // from the events, since the parser runs ahead of the events this stream has handled.
  std::vector<bool> has_value_;
  std::optional<ResponseParser> parser_;  // absent after an unrecoverable parser failure
  std::optional<Region> region_;
  ParsedResponse result_;
  size_t call_start_ = 0;  // first delta appended by the current feed/finish call
  bool finished_ = false;
};

}  // namespace beam::server
