// ResponseParser: streaming parse of one generation with a response_template (transformers'
// ResponseParser semantics): text deltas in any chunking → region events → the message object.
// One owner thread per parser; the template it reads is immutable and shared.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "server/parsers/pcre_regex.h"
#include "server/parsers/response_template.h"
#include "server/parsers/tool_arg_coercion.h"

namespace beam::server {

struct ParseEvent {
  enum class Kind { kRegionOpen, kRegionChunk, kRegionClose };
  Kind kind = Kind::kRegionChunk;
  size_t field = 0;  // index into ResponseTemplate::fields
  // kRegionChunk: the region text. kRegionOpen / kRegionClose: the delimiter text that opened or
  // closed the region (empty for the implicit field's first byte, end of stream, interruption).
  std::string text;
  bool dirty = false;  // kRegionChunk of a non-streamable field (json, xml-inline, kv-lines)
  Json value;          // kRegionClose: the parsed value (null when `error` is set)
  std::optional<std::string> error;  // kRegionClose under kKeepRawText: why the body failed
};

struct ParserOptions {
  // How a region body that its content parser or transform rejects is handled.
  enum class FieldErrors {
    kFail,         // the parse fails (transformers raises)
    kKeepRawText,  // the region closes with `error` set and no value; parsing continues
  };
  FieldErrors field_errors = FieldErrors::kFail;
  // Opens of these fields are also watched inside regions of `interruptible_fields`, and end
  // them (so a tool call that starts before </think> is still a tool call). Empty: transformers
  // behaviour (an explicit region watches only its own close).
  std::vector<size_t> interruptible_fields;
  std::vector<size_t> interrupting_fields;
  // Tools whose parameter types cast string tool-call arguments (empty: no casting).
  ToolSchemas tools;
};

class ResponseParser {
 public:
  // Runs the prompt prefix (after its last start-anchor match) through the parser; the events
  // that produces are initial_events(). Fails when a region closed inside the prefix fails.
  static Expected<ResponseParser> create(std::shared_ptr<const ResponseTemplate> tmpl,
                                         std::string_view prefix, ParserOptions options = {});

  const std::vector<ParseEvent>& initial_events() const { return initial_events_; }

  // Feeds a text delta (any split, also inside a UTF-8 sequence; bytes that are not valid UTF-8
  // become U+FFFD, as text in Python is always valid); appends the events it causes.
  // Text that could still be the start of a delimiter is held back until later input decides.
  Status feed(std::string_view delta, std::vector<ParseEvent>* events);

  // Ends the stream: closes the current region, checks required fields, drops empty non-default
  // values, returns the message object. The parser accepts no input afterwards.
  Expected<Json> finalize(std::vector<ParseEvent>* events);

  // The message built so far (defaults plus closed regions).
  const Json& output() const { return output_; }
  const ResponseTemplate& response_template() const { return *template_; }
  // Bytes received but not yet routed to a region (held-back delimiter candidates).
  size_t held_back_bytes() const { return buffer_.size() - pos_ + utf8_tail_.size(); }
  // Text the regex engine had to look at so far (each search counts from its start to the end
  // of its match, or to the end of the buffer): stays proportional to the input however it is
  // chunked.
  size_t scanned_bytes() const { return scanned_bytes_; }

 private:
  enum class DelimiterRole { kOpen, kClose };
  struct Watch {
    DelimiterRole role;
    size_t field;
  };
  struct Hit {
    DelimiterRole role;
    size_t field;
    size_t start;  // absolute stream offsets
    size_t end;
  };
  // Last search result of one delimiter, reused while still valid (keeps scanning linear).
  struct CachedSearch {
    bool valid = false;
    bool eos = false;
    size_t from = 0;        // absolute offset the search started at
    size_t buffer_end = 0;  // absolute end of the buffer when searched
    Regex::Match match;     // absolute offsets
    NamedCaptures captures;
  };

  ResponseParser(std::shared_ptr<const ResponseTemplate> tmpl, ParserOptions options);
  Status process(bool eos, std::vector<ParseEvent>* events);
  std::vector<Watch> watchlist() const;
  Status scan(const std::vector<Watch>& watch, bool eos, std::optional<Hit>* best,
              size_t* hold_start);
  Expected<Regex::Match> search(const Watch& w, bool eos);
  bool can_grow(const Watch& w, const Regex::Match& m) const;
  void accumulate(size_t from, size_t to, std::vector<ParseEvent>* events);
  void open_explicit(const Hit& hit, std::vector<ParseEvent>* events);
  Status close_current(std::string delimiter_text, std::vector<ParseEvent>* events);
  Status store_value(const TemplateField& field, Json value);
  void reset_to_implicit();
  void compact();
  const Delimiter& delimiter(const Watch& w) const;
  size_t slot(const Watch& w) const { return 2 * w.field + (w.role == DelimiterRole::kClose); }
  std::string_view text(size_t from, size_t to) const;
  Status fail(Error error);

  std::shared_ptr<const ResponseTemplate> template_;
  ParserOptions options_;
  std::vector<bool> interruptible_;
  std::vector<MatchScratch> scratch_;  // per delimiter slot
  std::vector<CachedSearch> cache_;    // per delimiter slot
  std::string buffer_;                 // complete UTF-8 text from base_ on
  size_t base_ = 0;                    // absolute offset of buffer_[0]
  size_t pos_ = 0;                     // index in buffer_: bytes before it are routed
  size_t context_bytes_ = 16;          // kept before pos_ on compaction (lookbehind)
  std::string utf8_tail_;              // an incomplete UTF-8 sequence at the input's end
  std::optional<size_t> current_;      // field of the current region
  bool opened_ = false;                // current region emitted its region_open
  std::string body_;
  NamedCaptures captures_;
  Json output_ = Json::object();
  std::vector<ParseEvent> initial_events_;
  std::optional<size_t> last_zero_width_at_;  // loop guard for zero-width opens
  size_t zero_width_repeats_ = 0;
  size_t scanned_bytes_ = 0;
  bool finalized_ = false;
  std::optional<Error> failure_;
};

}  // namespace beam::server
