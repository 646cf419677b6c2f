// compile_structural_tag: the format tree (structural_tag_format.h) lowered into rules built in
// code. Free text is one automaton per place it can stop (free_text_dfa.h): before each trigger
// (the trigger included, so the text holds it nowhere else) and before the end strings of the
// tag around it, or the output's end. JSON schemas become rules (json_schema_rules.h), embedded
// grammars keep their rules under a prefix.
#include "runtime/structured/structural_tag.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/large_stack.h"
#include "runtime/structured/ebnf_syntax.h"
#include "runtime/structured/free_text_dfa.h"
#include "runtime/structured/json_schema_rules.h"
#include "runtime/structured/structural_tag_format.h"

namespace beam {
namespace {

using Kind = StructuralFormat::Kind;

// One of the strings; none: the empty text (the output's end follows).
EbnfExpr one_of(const std::vector<std::string>& strings) {
  std::vector<EbnfExpr> alts;
  for (const std::string& s : strings) alts.push_back(ebnf_text(s));
  return alts.empty() ? EbnfExpr{} : ebnf_alt(std::move(alts));
}

void prefix_refs(EbnfExpr& e, const std::string& prefix) {
  if (e.kind == EbnfExpr::Kind::kRef) e.name = prefix + e.name;
  for (EbnfExpr& c : e.children) prefix_refs(c, prefix);
}

class TagLowering {
 public:
  Expected<std::shared_ptr<const EbnfGrammar>> run(const StructuralFormat& format) {
    const std::vector<std::string> output_end;  // unbounded text at the top runs to the end
    BEAM_ASSIGN_OR_RETURN(EbnfExpr root, lower(format, format.unbounded ? &output_end : nullptr));
    rules_.push_back(EbnfRule{.name = "structural_tag", .body = std::move(root)});
    auto grammar =
        EbnfGrammar::compile_rules(std::move(rules_), "structural_tag", std::move(automata_));
    if (!grammar.ok()) return make_error("the tag's grammar: " + grammar.error().message);
    return grammar;
  }

 private:
  // The expression of `f`. `ends` (unbounded formats only): the strings that end its free text,
  // part of the expression; empty: the text runs to the output's end.
  Expected<EbnfExpr> lower(const StructuralFormat& f, const std::vector<std::string>* ends) {
    switch (f.kind) {
      case Kind::kConstString:
        return ebnf_text(f.text);
      case Kind::kJsonSchema: {
        Expected<std::string> root = json_.add(f.schema, "json" + std::to_string(++count_));
        if (!root.ok()) return make_error("'" + f.path + "': " + root.error().message);
        return ebnf_ref(*root);
      }
      case Kind::kGrammar:
        return grammar(f);
      case Kind::kRegex:
        return automaton(f.regex, f);
      case Kind::kSequence: {
        std::vector<EbnfExpr> items;
        for (size_t i = 0; i < f.items.size(); ++i) {
          const bool last = i + 1 == f.items.size();
          BEAM_ASSIGN_OR_RETURN(EbnfExpr item, lower(f.items[i], last ? ends : nullptr));
          items.push_back(std::move(item));
        }
        return ebnf_seq(std::move(items));
      }
      case Kind::kOr: {  // with ends, a bounded alternative is followed by them
        std::vector<EbnfExpr> alts;
        for (const StructuralFormat& item : f.items) {
          BEAM_ASSIGN_OR_RETURN(EbnfExpr a, lower(item, item.unbounded ? ends : nullptr));
          alts.push_back(f.unbounded && !item.unbounded ? ebnf_seq({std::move(a), one_of(*ends)})
                                                        : std::move(a));
        }
        return ebnf_alt(std::move(alts));
      }
      case Kind::kTag: {
        BEAM_ASSIGN_OR_RETURN(const std::string after_begin, tag_body(f));
        return ebnf_seq({ebnf_text(f.text), ebnf_ref(after_begin)});
      }
      case Kind::kAnyText:
        return free_text(f, {.stops = *ends, .barriers = {}, .excluded = f.excluded});
      case Kind::kTriggeredTags:
        return triggered_tags(f, *ends);
      case Kind::kTagsWithSeparator:
        return tags_with_separator(f);
    }
    return EbnfExpr{};
  }

  // A kDfa item for `dfa`; an error once the automata pass the grammar's bytes.
  Expected<EbnfExpr> automaton(std::shared_ptr<const ByteDfa> dfa, const StructuralFormat& f) {
    automata_.push_back(std::move(dfa));
    if (Status s = check_automata_bytes(automata_); !s.ok())
      return make_error("'" + f.path + "': " + s.error().message);
    return EbnfExpr{.kind = EbnfExpr::Kind::kDfa,
                    .dfa = static_cast<int32_t>(automata_.size() - 1)};
  }

  Expected<EbnfExpr> free_text(const StructuralFormat& f, const FreeTextStrings& strings) {
    auto dfa = free_text_dfa(strings);
    if (!dfa.ok()) return make_error("'" + f.path + "': " + dfa.error().message);
    return automaton(std::move(dfa).value(), f);
  }

  std::string new_rule(EbnfExpr body) {
    std::string name = "structural_tag." + std::to_string(++count_);
    rules_.push_back(EbnfRule{.name = name, .body = std::move(body)});
    return name;
  }

  // A reference to an embedded grammar's start rule. Its rules join the tag's once, under a prefix
  // naming where it first appears ("format.elements[2].grammar."), which errors of the tag's
  // grammar (left recursion, a rule that never finishes, the limits) then name.
  EbnfExpr grammar(const StructuralFormat& f) {
    auto [it, first] = grammar_prefixes_.try_emplace(f.grammar.get(), f.path + ".");
    const std::string& prefix = it->second;
    if (first)
      for (EbnfRule rule : f.grammar->rules) {
        rule.name = prefix + rule.name;
        rule.offset = 0;
        prefix_refs(rule.body, prefix);
        rules_.push_back(std::move(rule));
      }
    return ebnf_ref(prefix + f.grammar->root);
  }

  // A rule for what follows a tag's begin: its content, then an end string (within the content
  // when that is free text, which stops at them).
  Expected<std::string> tag_body(const StructuralFormat& tag) {
    const StructuralFormat& content = tag.items[0];
    BEAM_ASSIGN_OR_RETURN(EbnfExpr inside, lower(content, content.unbounded ? &tag.ends : nullptr));
    return new_rule(content.unbounded ? std::move(inside)
                                      : ebnf_seq({std::move(inside), one_of(tag.ends)}));
  }

  // Any one of the tags, whole; `after`: each tag's rule past its begin.
  static EbnfExpr any_tag(const StructuralFormat& f, const std::vector<std::string>& after) {
    std::vector<EbnfExpr> alts;
    for (size_t j = 0; j < f.items.size(); ++j)
      alts.push_back(ebnf_seq({ebnf_text(f.items[j].text), ebnf_ref(after[j])}));
    return ebnf_alt(std::move(alts));
  }

  // Free text, and where it writes trigger k the rest of one of trigger k's tags, again and again,
  // until `ends` (or the output's end). at_least_one: a tag first, with no text before it;
  // stop_after_first: `ends` right after the first tag.
  Expected<EbnfExpr> triggered_tags(const StructuralFormat& f,
                                    const std::vector<std::string>& ends) {
    std::vector<std::string> after;
    for (const StructuralFormat& tag : f.items) {
      BEAM_ASSIGN_OR_RETURN(std::string body, tag_body(tag));
      after.push_back(std::move(body));
    }
    // Free text up to trigger k, and the rest of each tag it begins.
    std::vector<EbnfExpr> dispatch;
    for (size_t k = 0; k < f.triggers.size(); ++k) {
      FreeTextStrings strings{.stops = {f.triggers[k]}, .barriers = ends, .excluded = f.excluded};
      for (size_t other = 0; other < f.triggers.size(); ++other)
        if (other != k) strings.barriers.push_back(f.triggers[other]);
      BEAM_ASSIGN_OR_RETURN(EbnfExpr text, free_text(f, strings));
      std::vector<EbnfExpr> rests;
      for (size_t j = 0; j < f.items.size(); ++j)
        if (std::string_view(f.items[j].text).starts_with(f.triggers[k]))
          rests.push_back(ebnf_seq(
              {ebnf_text(f.items[j].text.substr(f.triggers[k].size())), ebnf_ref(after[j])}));
      dispatch.push_back(ebnf_seq({std::move(text), ebnf_alt(std::move(rests))}));
    }
    // The last free text: up to an end string, or to the output's end.
    BEAM_ASSIGN_OR_RETURN(
        EbnfExpr last,
        free_text(f, {.stops = ends, .barriers = f.triggers, .excluded = f.excluded}));
    if (f.stop_after_first) {
      if (f.at_least_one) return ebnf_seq({any_tag(f, after), one_of(ends)});
      std::vector<EbnfExpr> alts;
      for (EbnfExpr& d : dispatch) alts.push_back(ebnf_seq({std::move(d), one_of(ends)}));
      alts.push_back(std::move(last));
      return ebnf_alt(std::move(alts));
    }
    // loop ::= dispatch_k loop | last
    const std::string loop = "structural_tag." + std::to_string(++count_);
    std::vector<EbnfExpr> alts;
    for (EbnfExpr& d : dispatch) alts.push_back(ebnf_seq({std::move(d), ebnf_ref(loop)}));
    alts.push_back(std::move(last));
    rules_.push_back(EbnfRule{.name = loop, .body = ebnf_alt(std::move(alts))});
    if (f.at_least_one) return ebnf_seq({any_tag(f, after), ebnf_ref(loop)});
    return ebnf_ref(loop);
  }

  // Tags separated by the separator and nothing else: at least one with at_least_one, at most
  // one with stop_after_first.
  Expected<EbnfExpr> tags_with_separator(const StructuralFormat& f) {
    std::vector<std::string> after;
    for (const StructuralFormat& tag : f.items) {
      BEAM_ASSIGN_OR_RETURN(std::string body, tag_body(tag));
      after.push_back(std::move(body));
    }
    const EbnfExpr one = ebnf_ref(new_rule(any_tag(f, after)));
    const EbnfExpr some =
        f.stop_after_first
            ? one
            : ebnf_seq({one, ebnf_repeat(ebnf_seq({ebnf_text(f.text), one}), 0, -1)});
    return f.at_least_one ? some : ebnf_repeat(some, 0, 1);
  }

  std::vector<EbnfRule> rules_;
  std::vector<std::shared_ptr<const ByteDfa>> automata_;
  JsonSchemaRules json_{rules_, automata_};
  std::map<const ParsedGrammar*, std::string>
      grammar_prefixes_;  // embedded grammars' rule prefixes
  int32_t count_ = 0;     // names rules and schemas
};

}  // namespace

// Reading recurses along the tag's nesting and its schemas, lowering along rules: both run on a
// large stack (core/large_stack.h), within kMaxStructuralTagDepth and the schemas' own limits.
Expected<std::shared_ptr<const EbnfGrammar>> compile_structural_tag(
    const nlohmann::ordered_json& tag) {
  std::optional<Expected<std::shared_ptr<const EbnfGrammar>>> out;
  run_on_large_stack([&] {
    Expected<StructuralFormat> format = parse_structural_tag(tag);
    if (!format.ok()) {
      out.emplace(format.error());
      return;
    }
    out.emplace(TagLowering().run(*format));
  });
  return std::move(*out);
}

}  // namespace beam
