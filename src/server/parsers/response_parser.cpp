// Streaming response_template parser (see response_parser.h). The control flow mirrors
// transformers' ResponseParser._process/_scan so results match it; searches are cached per
// delimiter so a long stream is scanned once rather than once per delta.
#include "server/parsers/response_parser.h"

#include <algorithm>
#include <tuple>

#include "core/check.h"

namespace beam::server {
namespace {

constexpr size_t kCompactAfterBytes = 64 * 1024;

const char* json_kind(const Json& v) {
  if (v.is_array()) return "list";
  if (v.is_object()) return "dict";
  if (v.is_string()) return "str";
  if (v.is_boolean()) return "bool";
  if (v.is_number_float()) return "float";
  if (v.is_number()) return "int";
  return "NoneType";
}

}  // namespace

ResponseParser::ResponseParser(std::shared_ptr<const ResponseTemplate> tmpl, ParserOptions options)
    : template_(std::move(tmpl)), options_(std::move(options)) {
  const size_t n = template_->fields.size();
  interruptible_.assign(n, false);
  for (size_t f : options_.interruptible_fields) {
    if (f < n) interruptible_[f] = true;
  }
  scratch_.resize(2 * n);
  cache_.resize(2 * n);
  for (const TemplateField& field : template_->fields) {
    for (const auto* d : {&field.open, &field.close}) {
      if (*d) context_bytes_ = std::max(context_bytes_, (*d)->regex.lookbehind_bytes());
    }
  }
  output_ = template_->defaults;
  current_ = template_->implicit_field;
}

Expected<ResponseParser> ResponseParser::create(std::shared_ptr<const ResponseTemplate> tmpl,
                                                std::string_view prefix, ParserOptions options) {
  BEAM_CHECK(tmpl != nullptr);
  ResponseParser parser(std::move(tmpl), std::move(options));
  std::string text;  // the prompt as valid UTF-8 (a cut-off sequence at its end stays pending)
  const size_t complete = utf8_complete_prefix_bytes(prefix);
  append_valid_utf8(&text, prefix.substr(0, complete));
  BEAM_ASSIGN_OR_RETURN(std::string_view tail, parser.template_->truncate_past_last_anchor(text));
  parser.buffer_.assign(tail);
  parser.utf8_tail_.assign(prefix.substr(complete));
  if (!parser.buffer_.empty()) BEAM_RETURN_IF_ERROR(parser.process(false, &parser.initial_events_));
  return parser;
}

Status ResponseParser::fail(Error error) {
  failure_ = error;
  return error;
}

Status ResponseParser::feed(std::string_view delta, std::vector<ParseEvent>* events) {
  if (failure_) return *failure_;
  if (finalized_) return make_error("ResponseParser already finalized");
  utf8_tail_.append(delta);
  const size_t complete = utf8_complete_prefix_bytes(utf8_tail_);
  append_valid_utf8(&buffer_, std::string_view(utf8_tail_).substr(0, complete));
  utf8_tail_.erase(0, complete);
  return process(false, events);
}

Expected<Json> ResponseParser::finalize(std::vector<ParseEvent>* events) {
  if (failure_) return *failure_;
  if (finalized_) return make_error("ResponseParser already finalized");
  append_valid_utf8(&buffer_, utf8_tail_);  // a sequence cut off at the very end → U+FFFD
  utf8_tail_.clear();
  BEAM_RETURN_IF_ERROR(process(true, events));
  finalized_ = true;
  std::string missing;
  for (const TemplateField& field : template_->fields) {
    if (!field.optional && !output_.contains(field.name)) {
      missing += (missing.empty() ? "" : ", ") + py_quote(field.name);
    }
  }
  if (!missing.empty()) {
    failure_ = make_error("Required response_template fields missing from parsed output: [" +
                          missing + "]");
    return *failure_;
  }
  Json message = Json::object();
  for (auto it = output_.begin(); it != output_.end(); ++it) {
    const Json& v = it.value();
    const bool empty =
        !py_truthy(v) && (v.is_null() || v.is_string() || v.is_array() || v.is_object());
    if (template_->defaults.contains(it.key()) || !empty) message[it.key()] = v;
  }
  output_ = message;
  return message;
}

Status ResponseParser::process(bool eos, std::vector<ParseEvent>* events) {
  while (true) {
    std::optional<Hit> best;
    size_t hold_start = 0;
    if (Status s = scan(watchlist(), eos, &best, &hold_start); !s.ok()) return fail(s.error());
    if (best) {
      if (best->start == best->end) {
        // transformers loops forever when zero-width delimiters keep firing at one position
        // (e.g. a zero-width open and close of the same field); stop this pass instead.
        zero_width_repeats_ = last_zero_width_at_ == best->start ? zero_width_repeats_ + 1 : 1;
        last_zero_width_at_ = best->start;
        if (zero_width_repeats_ > 2 * template_->fields.size() + 2) break;
      }
      accumulate(base_ + pos_, best->start, events);
      const std::string delimiter_text(text(best->start, best->end));
      pos_ = best->end - base_;
      if (best->role == DelimiterRole::kOpen) {
        if (Status s = close_current("", events); !s.ok()) return fail(s.error());
        open_explicit(*best, events);
      } else {
        const bool had_content = opened_;
        if (Status s = close_current(delimiter_text, events); !s.ok()) return fail(s.error());
        // A zero-width close of an empty region would fire again at once: stop this pass.
        if (!had_content && best->start == best->end) break;
      }
      continue;
    }
    if (eos) {
      accumulate(base_ + pos_, base_ + buffer_.size(), events);
      pos_ = buffer_.size();
      if (Status s = close_current("", events); !s.ok()) return fail(s.error());
      break;
    }
    accumulate(base_ + pos_, hold_start, events);
    pos_ = std::max(pos_, hold_start - base_);
    compact();
    break;
  }
  return ok_status();
}

std::vector<ResponseParser::Watch> ResponseParser::watchlist() const {
  std::vector<Watch> watch;
  const auto& fields = template_->fields;
  if (current_ && current_ != template_->implicit_field) {
    if (fields[*current_].close) watch.push_back({DelimiterRole::kClose, *current_});
    if (interruptible_[*current_]) {
      for (size_t f : options_.interrupting_fields) {
        if (f < fields.size() && f != *current_ && fields[f].open) {
          watch.push_back({DelimiterRole::kOpen, f});
        }
      }
    }
    return watch;
  }
  for (size_t f = 0; f < fields.size(); ++f) {
    if (fields[f].open) watch.push_back({DelimiterRole::kOpen, f});
  }
  if (template_->implicit_field && fields[*template_->implicit_field].close) {
    watch.push_back({DelimiterRole::kClose, *template_->implicit_field});
  }
  return watch;
}

const Delimiter& ResponseParser::delimiter(const Watch& w) const {
  const TemplateField& field = template_->fields[w.field];
  return w.role == DelimiterRole::kOpen ? *field.open : *field.close;
}

Expected<Regex::Match> ResponseParser::search(const Watch& w, bool eos) {
  CachedSearch& cached = cache_[slot(w)];
  const Regex& regex = delimiter(w).regex;
  const size_t at = base_ + pos_;
  const size_t end = base_ + buffer_.size();
  if (cached.valid && !regex.depends_on_search_start() && cached.from <= at) {
    const Regex::Match& m = cached.match;
    const bool settled = m.outcome == Regex::Outcome::kComplete && m.end < cached.buffer_end;
    const bool same_input = cached.buffer_end == end && cached.eos == eos;
    const bool ahead = m.outcome == Regex::Outcome::kNone || at <= m.start;
    if (ahead && (settled || same_input)) return m;
  }
  const Regex::Mode mode = eos ? Regex::Mode::kFull : Regex::Mode::kPartial;
  MatchScratch& scratch = scratch_[slot(w)];
  BEAM_ASSIGN_OR_RETURN(Regex::Match m, regex.search(buffer_, pos_, mode, base_ == 0, &scratch));
  scanned_bytes_ += (m.outcome == Regex::Outcome::kComplete ? m.end : buffer_.size()) - pos_;
  cached.captures.clear();
  if (m.outcome == Regex::Outcome::kComplete && w.role == DelimiterRole::kOpen) {
    cached.captures = regex.named_captures(buffer_, scratch);
  }
  if (m.outcome != Regex::Outcome::kNone) {
    m.start += base_;
    m.end += base_;
  }
  cached.valid = true;
  cached.eos = eos;
  cached.from = at;
  cached.buffer_end = end;
  cached.match = m;
  return m;
}

bool ResponseParser::can_grow(const Watch& w, const Regex::Match& m) const {
  if (m.end != base_ + buffer_.size()) return false;
  if (m.start == m.end) return true;
  const Delimiter& d = delimiter(w);
  return !d.is_literal || d.literal_can_extend;
}

Status ResponseParser::scan(const std::vector<Watch>& watch, bool eos, std::optional<Hit>* best,
                            size_t* hold_start) {
  *hold_start = base_ + buffer_.size();
  auto key = [this](const Hit& h) {
    return std::make_tuple(h.start, -static_cast<long long>(h.end - h.start),
                           h.role == DelimiterRole::kOpen ? 0 : 1,
                           std::string_view(template_->fields[h.field].name));
  };
  for (const Watch& w : watch) {
    BEAM_ASSIGN_OR_RETURN(Regex::Match m, search(w, eos));
    if (m.outcome == Regex::Outcome::kNone) continue;
    if (!eos && (m.outcome == Regex::Outcome::kPartial || can_grow(w, m))) {
      *hold_start = std::min(*hold_start, m.start);  // pending: may still change with more input
      continue;
    }
    const Hit hit{w.role, w.field, m.start, m.end};
    if (!*best || key(hit) < key(**best)) *best = hit;
  }
  // A complete match at or after a pending one waits: the pending one may be the real one.
  if (*best && (*best)->start >= *hold_start) best->reset();
  return ok_status();
}

std::string_view ResponseParser::text(size_t from, size_t to) const {
  return std::string_view(buffer_).substr(from - base_, to - from);
}

void ResponseParser::accumulate(size_t from, size_t to, std::vector<ParseEvent>* events) {
  if (from >= to || !current_) return;
  const TemplateField& field = template_->fields[*current_];
  if (!opened_) {
    events->push_back(ParseEvent{ParseEvent::Kind::kRegionOpen, *current_, {}, false, {}, {}});
    opened_ = true;
  }
  const std::string_view chunk = text(from, to);
  body_.append(chunk);
  events->push_back(ParseEvent{
      ParseEvent::Kind::kRegionChunk, *current_, std::string(chunk), !field.streamable(), {}, {}});
}

void ResponseParser::open_explicit(const Hit& hit, std::vector<ParseEvent>* events) {
  current_ = hit.field;
  captures_ = cache_[slot({DelimiterRole::kOpen, hit.field})].captures;
  body_.clear();
  opened_ = true;
  events->push_back(ParseEvent{ParseEvent::Kind::kRegionOpen,
                               hit.field,
                               std::string(text(hit.start, hit.end)),
                               false,
                               {},
                               {}});
}

Status ResponseParser::close_current(std::string delimiter_text, std::vector<ParseEvent>* events) {
  if (!current_ || !opened_) {
    reset_to_implicit();
    return ok_status();
  }
  const size_t index = *current_;
  const TemplateField& field = template_->fields[index];
  Expected<Json> value = process_field(body_, field, captures_);
  Status stored = ok_status();
  if (value.ok()) {
    if (!options_.tools.empty()) options_.tools.coerce_tool_calls(*value);
    stored = store_value(field, *value);
    if (stored.ok()) {
      events->push_back(ParseEvent{ParseEvent::Kind::kRegionClose,
                                   index,
                                   std::move(delimiter_text),
                                   false,
                                   std::move(value).value(),
                                   {}});
      reset_to_implicit();
      return ok_status();
    }
  }
  Error error = value.ok() ? stored.error() : value.error();
  if (options_.field_errors == ParserOptions::FieldErrors::kFail) return error;
  events->push_back(ParseEvent{ParseEvent::Kind::kRegionClose, index, std::move(delimiter_text),
                               false, nullptr, std::move(error.message)});
  reset_to_implicit();
  return ok_status();
}

Status ResponseParser::store_value(const TemplateField& field, Json value) {
  auto previous = output_.find(field.name);
  if (field.join) {
    if (!value.is_string()) {
      return make_error("Field '" + field.name +
                        "': 'join' requires each match to parse to a "
                        "string, got " +
                        json_kind(value) + ".");
    }
    if (previous == output_.end() || previous->is_null()) {
      output_[field.name] = std::move(value);
    } else if (previous->is_string()) {
      *previous = previous->get<std::string>() + *field.join + value.get<std::string>();
    } else {
      return make_error(std::string("can only concatenate ") + json_kind(*previous) +
                        " (not \"str\") to " + json_kind(*previous));
    }
  } else if (field.repeats) {
    if (previous == output_.end()) {
      output_[field.name] = Json::array({std::move(value)});
    } else if (previous->is_array()) {
      previous->push_back(std::move(value));
    } else {
      return make_error(std::string("'") + json_kind(*previous) +
                        "' object has no attribute 'append' (field '" + field.name + "')");
    }
  } else {
    output_[field.name] = std::move(value);
  }
  return ok_status();
}

void ResponseParser::reset_to_implicit() {
  current_ = template_->implicit_field;
  captures_.clear();
  body_.clear();
  opened_ = false;
}

void ResponseParser::compact() {
  if (pos_ < kCompactAfterBytes || pos_ < buffer_.size() / 2) return;
  size_t cut = pos_ - std::min(pos_, context_bytes_);
  while (cut > 0 && (static_cast<unsigned char>(buffer_[cut]) & 0xC0) == 0x80) --cut;
  if (cut == 0) return;
  buffer_.erase(0, cut);
  base_ += cut;
  pos_ -= cut;
}

}  // namespace beam::server
