// JsonGrammar nodes → rules. Whitespace between tokens is JsonMatcher's (one space, or a newline
// and up to kMaxJsonIndent spaces or tabs) wherever the matcher takes it. An object's optional
// properties in declared order become two rules per property: F_j, the members from property j
// on when none was written yet, and R_j, the same after a member (a comma first).
#include "runtime/structured/json_schema_rules.h"

#include <algorithm>
#include <utility>

#include "runtime/structured/ebnf_grammar.h"
#include "runtime/structured/json_matcher.h"
#include "runtime/structured/json_scalar_dfa.h"

namespace beam {
namespace {

// Whitespace where the matcher allows it: none, one space, or a newline and up to
// kMaxJsonIndent spaces or tabs.
EbnfExpr ws() {
  const EbnfExpr indent{.kind = EbnfExpr::Kind::kSet, .set = {{'\t', '\t'}, {' ', ' '}}};
  return ebnf_repeat(ebnf_alt({ebnf_text(" "), ebnf_seq({ebnf_text("\n"),
                                                         ebnf_repeat(indent, 0, kMaxJsonIndent)})}),
                     0, 1);
}

std::string at(const JsonGrammar& g, GrammarNodeId id, const char* keyword) {
  return "'" + g.pointer(id) + "/" + keyword + "'";
}

}  // namespace

void JsonSchemaRules::add_rule(std::string name, EbnfExpr body) {
  rules_.push_back(EbnfRule{.name = std::move(name), .body = std::move(body)});
}

EbnfExpr JsonSchemaRules::value(GrammarNodeId id) {
  if (!seen_[static_cast<size_t>(id)]) {
    seen_[static_cast<size_t>(id)] = 1;
    pending_.push_back(id);
  }
  return ebnf_ref(name(id));
}

template <typename Build>
Expected<EbnfExpr> JsonSchemaRules::automaton(const std::string& key, Build build) {
  auto it = automaton_index_.find(key);
  if (it == automaton_index_.end()) {
    BEAM_ASSIGN_OR_RETURN(std::shared_ptr<const ByteDfa> dfa, build());
    automata_.push_back(std::move(dfa));
    BEAM_RETURN_IF_ERROR(check_automata_bytes(automata_));
    it = automaton_index_.emplace(key, static_cast<int32_t>(automata_.size() - 1)).first;
  }
  return EbnfExpr{.kind = EbnfExpr::Kind::kDfa, .dfa = it->second};
}

Expected<std::string> JsonSchemaRules::add(std::shared_ptr<const JsonGrammar> grammar,
                                           const std::string& prefix) {
  grammar_ = std::move(grammar);
  prefix_ = prefix;
  seen_.assign(grammar_->num_nodes(), 0);
  pending_.clear();
  const std::string root = prefix + ".root";
  add_rule(root, ebnf_seq({ws(), value(grammar_->root())}));
  while (!pending_.empty()) {
    const GrammarNodeId id = pending_.back();
    pending_.pop_back();
    BEAM_ASSIGN_OR_RETURN(EbnfExpr body, node_body(id));
    add_rule(name(id), std::move(body));
    if (rules_.size() > kMaxJsonSchemaRules)
      return make_error("the schemas are too large for one grammar (more than " +
                        std::to_string(kMaxJsonSchemaRules) + " rules)");
  }
  return root;
}

Expected<EbnfExpr> JsonSchemaRules::node_body(GrammarNodeId id) {
  const JsonGrammar& g = *grammar_;
  const GrammarNode& node = g.node(id);
  switch (node.kind) {
    case GrammarKind::kAny:
      return ebnf_alt({value(g.any_object_node()), value(g.any_array_node()),
                       value(g.any_string_node()), value(g.any_number_node()), value(g.true_node()),
                       value(g.false_node()), value(g.null_node())});
    case GrammarKind::kObject:
      return object_body(id);
    case GrammarKind::kArray:
      return array_body(id);
    case GrammarKind::kString: {
      const std::string key =
          "string " + std::to_string(node.min_length) + " " + std::to_string(node.max_length) +
          (node.pattern < 0 ? std::string() : " " + prefix_ + "/" + std::to_string(node.pattern));
      return automaton(key, [&] { return json_string_dfa(g, id); });
    }
    case GrammarKind::kNumber:
    case GrammarKind::kInteger: {
      const std::string key = std::string(node.kind == GrammarKind::kNumber ? "number " : "int ") +
                              std::to_string(node.min_value) + (node.min_exclusive ? "( " : "[ ") +
                              std::to_string(node.max_value) + (node.max_exclusive ? ") " : "] ") +
                              std::to_string(node.bound_decimals);
      return automaton(key, [&] { return json_number_dfa(g, id); });
    }
    case GrammarKind::kLiteral: {
      std::vector<EbnfExpr> alts;
      for (LiteralId lit : node.literals) alts.push_back(ebnf_text(g.literal(lit)));
      return ebnf_alt(std::move(alts));
    }
    case GrammarKind::kAnyOf: {
      if (node.alternatives.size() > kMaxJsonRuleBranches)
        return make_error("'" + g.pointer(id) + "': more than " +
                          std::to_string(kMaxJsonRuleBranches) +
                          " alternatives are too many for a structural tag");
      std::vector<EbnfExpr> alts;
      for (GrammarNodeId a : node.alternatives) alts.push_back(value(a));
      return ebnf_alt(std::move(alts));
    }
  }
  return EbnfExpr{};
}

// '{' then F_0 and '}' (or '}' at once when nothing is required). F_j: property j's member then
// R_(j+1), or (j optional) F_(j+1); F_n: an extra member then R_n. R_j: ',' and property j's
// member then R_(j+1), or (j optional) R_(j+1); R_n: (',' extra member)*, or nothing.
Expected<EbnfExpr> JsonSchemaRules::object_body(GrammarNodeId id) {
  const JsonGrammar& g = *grammar_;
  const GrammarNode& obj = g.node(id);
  const size_t n = obj.properties.size();
  if (n > kMaxJsonRuleBranches)
    return make_error(at(g, id, "properties") + ": more than " +
                      std::to_string(kMaxJsonRuleBranches) +
                      " properties are too many for a structural tag");
  const bool extras = obj.additional >= 0;
  auto part = [&](char kind, size_t j) { return name(id) + "." + kind + std::to_string(j); };
  auto member_tail = [&](GrammarNodeId v) {
    return std::vector<EbnfExpr>{ws(), ebnf_text(":"), ws(), value(v), ws()};
  };
  std::vector<EbnfExpr> extra;
  if (extras) {
    BEAM_ASSIGN_OR_RETURN(EbnfExpr key, node_body(g.any_string_node()));
    extra = {std::move(key)};
    for (EbnfExpr& e : member_tail(obj.additional)) extra.push_back(std::move(e));
  }
  std::vector<uint8_t> required_from(n + 1, 0);
  for (size_t j = n; j-- > 0;)
    required_from[j] = required_from[j + 1] || obj.properties[j].required;
  for (size_t j = 0; j <= n; ++j) {
    if (j == n) {
      std::vector<EbnfExpr> more = {ebnf_text(","), ws()};
      more.insert(more.end(), extra.begin(), extra.end());
      add_rule(part('r', n), extras ? ebnf_repeat(ebnf_seq(std::move(more)), 0, -1) : EbnfExpr{});
      if (extras) add_rule(part('f', n), ebnf_seq({ebnf_seq(extra), ebnf_ref(part('r', n))}));
      continue;
    }
    const GrammarProperty& p = obj.properties[j];
    std::vector<EbnfExpr> member = {ebnf_text("\"" + g.literal(p.key))};
    for (EbnfExpr& e : member_tail(p.value)) member.push_back(std::move(e));
    std::vector<EbnfExpr> first = {ebnf_seq({ebnf_seq(member), ebnf_ref(part('r', j + 1))})};
    std::vector<EbnfExpr> rest = {
        ebnf_seq({ebnf_text(","), ws(), ebnf_seq(member), ebnf_ref(part('r', j + 1))})};
    if (!p.required) {
      if (j + 1 < n || extras) first.push_back(ebnf_ref(part('f', j + 1)));
      rest.push_back(ebnf_ref(part('r', j + 1)));
    }
    add_rule(part('f', j), ebnf_alt(std::move(first)));
    add_rule(part('r', j), ebnf_alt(std::move(rest)));
  }
  std::vector<EbnfExpr> inside;
  if (!required_from[0]) inside.push_back(ebnf_text("}"));
  if (n > 0 || extras) inside.push_back(ebnf_seq({ebnf_ref(part('f', 0)), ebnf_text("}")}));
  return ebnf_seq({ebnf_text("{"), ws(), ebnf_alt(std::move(inside))});
}

// '[' then ']' (when no item is required) or item 0 and N_1; N_k (k items written): ']' when
// minItems allows, or ',' and item k then N_(k+1). Past the prefix items, the rest repeat.
Expected<EbnfExpr> JsonSchemaRules::array_body(GrammarNodeId id) {
  const JsonGrammar& g = *grammar_;
  const GrammarNode& arr = g.node(id);
  const int64_t p = static_cast<int64_t>(arr.prefix_items.size());
  for (const auto& [keyword, count] :
       {std::pair{"minItems", arr.min_items - p}, std::pair{"maxItems", arr.max_items - p}})
    if (count > kMaxGrammarRepeat)
      return make_error(at(g, id, keyword) + ": past " + std::to_string(kMaxGrammarRepeat) +
                        " items (after prefixItems) is too many for a structural tag");
  auto item = [&](int64_t k) {
    return value(k < p ? arr.prefix_items[static_cast<size_t>(k)] : arr.items);
  };
  auto more = [&](int64_t k) {  // whether item k may be written
    return (arr.max_items < 0 || k < arr.max_items) && (k < p || arr.items >= 0);
  };
  auto next = [&](int64_t k) { return name(id) + ".n" + std::to_string(k); };
  const EbnfExpr close = ebnf_text("]");
  std::vector<EbnfExpr> inside;
  if (arr.min_items == 0) inside.push_back(close);
  if (more(0) && p == 0) {  // uniform items: a repetition
    const auto lo = static_cast<int32_t>(std::max<int64_t>(arr.min_items - 1, 0));
    const auto hi = static_cast<int32_t>(arr.max_items < 0 ? -1 : arr.max_items - 1);
    inside.push_back(
        ebnf_seq({item(0), ws(),
                  ebnf_repeat(ebnf_seq({ebnf_text(","), ws(), item(1), ws()}), lo, hi), close}));
  } else if (more(0)) {
    inside.push_back(ebnf_seq({item(0), ws(), ebnf_ref(next(1))}));
    for (int64_t k = 1; k <= p; ++k) {
      std::vector<EbnfExpr> alts;
      if (k < p) {
        if (k >= arr.min_items) alts.push_back(close);
        if (more(k))
          alts.push_back(ebnf_seq({ebnf_text(","), ws(), item(k), ws(), ebnf_ref(next(k + 1))}));
      } else if (more(p)) {
        const auto lo = static_cast<int32_t>(std::max<int64_t>(arr.min_items - p, 0));
        const auto hi = static_cast<int32_t>(arr.max_items < 0 ? -1 : arr.max_items - p);
        alts.push_back(ebnf_seq(
            {ebnf_repeat(ebnf_seq({ebnf_text(","), ws(), item(p), ws()}), lo, hi), close}));
      } else {
        alts.push_back(close);
      }
      add_rule(next(k), ebnf_alt(std::move(alts)));
    }
  }
  return ebnf_seq({ebnf_text("["), ws(), ebnf_alt(std::move(inside))});
}

}  // namespace beam
