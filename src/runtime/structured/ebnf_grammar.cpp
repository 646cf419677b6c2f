// EbnfGrammar::compile: GBNF rules (ebnf_syntax.h) → left recursion rewritten as repetition
// (left_recursion.h) → which rules are regular (they reach no cycle
// of references) → each regular rule inlined into a regex tree, and every rule the matcher needs
// lowered into alternatives of elements, with maximal runs of regular items as ByteDfa
// terminals; groups and repetitions around recursive rules become auxiliary rules → checks that
// the matcher's expansion terminates (no left recursion), that every rule can finish, and that
// the start state expands within one mask's parse budget.
#include "runtime/structured/ebnf_grammar.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "core/large_stack.h"
#include "core/strongly_connected.h"
#include "runtime/structured/ebnf_matcher.h"
#include "runtime/structured/ebnf_syntax.h"
#include "runtime/structured/grammar_literal.h"
#include "runtime/structured/lark_grammar.h"
#include "runtime/structured/left_recursion.h"
#include "runtime/structured/regex_syntax.h"

namespace beam {
namespace {

// Largest regex tree (nodes) a regular rule is inlined into; larger ones stay rules.
constexpr size_t kMaxInlineNodes = 50000;

size_t tree_size(const RegexNode& n) {
  size_t s = 1;
  for (const RegexNode& c : n.children) s += tree_size(c);
  return s;
}

// A key naming a regex tree's language exactly (equal trees share one terminal).
void append_key(const RegexNode& n, std::string& key) {
  key += static_cast<char>('a' + static_cast<int>(n.kind));
  for (const CodePointRange& r : n.set)
    key += std::to_string(r.lo) + "-" + std::to_string(r.hi) + ",";
  if (n.kind == RegexNode::Kind::kRepeat)
    key += "{" + std::to_string(n.min) + "," + std::to_string(n.max) + "}";
  key += '(';
  for (const RegexNode& c : n.children) append_key(c, key);
  key += ')';
}

void collect_refs(const EbnfExpr& e, std::vector<const EbnfExpr*>& out) {
  if (e.kind == EbnfExpr::Kind::kRef) out.push_back(&e);
  for (const EbnfExpr& c : e.children) collect_refs(c, out);
}

Error too_many_automaton_bytes() {
  return make_error("the grammar is too complex: its terminals' automata pass " +
                    std::to_string(kMaxGrammarTerminalBytes >> 20) + " MiB");
}

// The rules' index by name and, per rule, the rules it refers to; an error names a rule defined
// twice or a reference to an undefined one, with its line in `text` (where the rules were parsed).
Status index_rules(std::string_view text, const std::vector<EbnfRule>& rules,
                   std::map<std::string, int32_t>& index, std::vector<std::vector<int32_t>>& refs) {
  for (size_t r = 0; r < rules.size(); ++r) {
    const auto [it, inserted] = index.emplace(rules[r].name, static_cast<int32_t>(r));
    if (!inserted)
      return make_error(
          "grammar line " + std::to_string(text_position(text, rules[r].offset).line) + ": rule '" +
          rules[r].name + "' is defined twice (first on line " +
          std::to_string(text_position(text, rules[static_cast<size_t>(it->second)].offset).line) +
          ")");
  }
  refs.resize(rules.size());
  for (size_t r = 0; r < rules.size(); ++r) {
    std::vector<const EbnfExpr*> found;
    collect_refs(rules[r].body, found);
    for (const EbnfExpr* ref : found) {
      const auto it = index.find(ref->name);
      if (it == index.end())
        return make_error("grammar line " + std::to_string(text_position(text, ref->offset).line) +
                          ":" + std::to_string(text_position(text, ref->offset).column) +
                          ": rule '" + rules[r].name + "' refers to undefined rule '" + ref->name +
                          "'");
      refs[r].push_back(it->second);
    }
  }
  return ok_status();
}

Error no_root(std::string_view root) {
  return make_error("the grammar has no rule '" + std::string(root) + "' to start from");
}

// An error of a Lark grammar's GBNF translation, saying where its positions point.
Error in_lark_grammar(const Error& e) {
  return make_error(e.message +
                    " (a Lark grammar: lines are its own, columns its GBNF translation's)");
}

}  // namespace

Status check_automata_bytes(const std::vector<std::shared_ptr<const ByteDfa>>& automata) {
  size_t bytes = 0;
  for (const auto& dfa : automata) bytes += dfa->table_bytes();
  if (bytes > kMaxGrammarTerminalBytes) return too_many_automaton_bytes();
  return ok_status();
}

class GrammarLowering {
 public:
  // `text`: what the rules were parsed from (their offsets' positions in errors); `automata`:
  // the kDfa items' terminals.
  GrammarLowering(std::string_view text, std::vector<EbnfRule> rules,
                  std::vector<std::shared_ptr<const ByteDfa>> automata = {})
      : text_(text), src_(std::move(rules)), automata_(std::move(automata)) {
    for (const auto& dfa : automata_) terminal_bytes_ += dfa->table_bytes();
    prebuilt_.assign(automata_.size(), -1);
  }

  Expected<std::shared_ptr<const EbnfGrammar>> run(std::string_view root) {
    if (terminal_bytes_ > kMaxGrammarTerminalBytes) return too_complex();
    BEAM_RETURN_IF_ERROR(eliminate_left_recursion(src_));
    BEAM_RETURN_IF_ERROR(resolve_names());
    const auto it = index_.find(std::string(root));
    if (it == index_.end()) return no_root(root);
    find_regular_rules();
    lowered_.assign(src_.size(), -1);
    g_->root_ = lower_rule(it->second);
    if (error_) return *error_;
    BEAM_RETURN_IF_ERROR(check_termination());
    std::shared_ptr<const EbnfGrammar> grammar(std::move(g_));
    BEAM_RETURN_IF_ERROR(check_start(grammar));
    return grammar;
  }

  // The start state's expansion within kMaxStartParseSteps: every output's first mask, and
  // each restart after a tool call, expands it again on the engine's threads unbudgeted. Nested
  // nullable rules can need exponentially many steps there (4^8 stacks in eight lines).
  static Status check_start(const std::shared_ptr<const EbnfGrammar>& grammar) {
    ParseBudget budget{.left = kMaxStartParseSteps};
    EbnfMatcher(grammar).initial(&budget);
    if (!budget.spent()) return ok_status();
    return make_error("the grammar is too ambiguous to enforce: its start needs more than " +
                      std::to_string(kMaxStartParseSteps) + " parse steps");
  }

 private:
  Status resolve_names() { return index_rules(text_, src_, index_, refs_); }

  // regular_[r]: no cycle of references is reachable from r (Tarjan's components, sinks first).
  void find_regular_rules() {
    regular_.assign(src_.size(), 0);
    for (const std::vector<int32_t>& component : strongly_connected_components(refs_)) {
      bool regular = component.size() == 1;  // callees' components come first
      for (int32_t c : component)
        for (int32_t x : refs_[c])
          if (x == c || !regular_[x]) regular = false;
      if (regular) regular_[component[0]] = 1;
    }
  }

  // The regex tree of a regular rule, inlined, or nullptr when the rule is not regular or its
  // tree would pass kMaxInlineNodes.
  const RegexNode* rule_regex(int32_t r) {
    if (!regular_[r]) return nullptr;
    auto [it, inserted] = regex_memo_.try_emplace(r);
    if (inserted) {
      std::optional<RegexNode> tree = regex_of(src_[r].body);
      if (tree && tree_size(*tree) <= kMaxInlineNodes) it->second = std::move(tree);
    }
    return it->second ? &*it->second : nullptr;
  }

  // The regex tree of an expression that refers only to inlinable rules; nullopt otherwise.
  std::optional<RegexNode> regex_of(const EbnfExpr& e) {
    switch (e.kind) {
      case EbnfExpr::Kind::kEmpty:
        return RegexNode{};
      case EbnfExpr::Kind::kSet:
        return RegexNode{.kind = RegexNode::Kind::kSet, .set = e.set};
      case EbnfExpr::Kind::kRef: {
        const RegexNode* tree = rule_regex(index_.at(e.name));
        if (!tree) return std::nullopt;
        return *tree;
      }
      case EbnfExpr::Kind::kDfa:  // a terminal of its own
        return std::nullopt;
      case EbnfExpr::Kind::kSequence:
      case EbnfExpr::Kind::kAlternate:
      case EbnfExpr::Kind::kRepeat:
        break;
    }
    RegexNode out{.kind = e.kind == EbnfExpr::Kind::kSequence    ? RegexNode::Kind::kConcat
                          : e.kind == EbnfExpr::Kind::kAlternate ? RegexNode::Kind::kAlternate
                                                                 : RegexNode::Kind::kRepeat,
                  .min = e.min,
                  .max = e.max};
    size_t size = 1;
    for (const EbnfExpr& c : e.children) {
      std::optional<RegexNode> child = regex_of(c);
      if (!child) return std::nullopt;
      size += tree_size(*child);
      if (size > kMaxInlineNodes) return std::nullopt;
      out.children.push_back(std::move(*child));
    }
    return out;
  }

  // The terminal of a regex tree (equal trees share one), or nullopt when its automaton is past
  // ByteDfa's limits or the grammar has failed (then nothing more is keyed or built).
  std::optional<int32_t> terminal(const RegexNode& tree) {
    if (terminal_bytes_ > kMaxGrammarTerminalBytes && !error_) error_ = too_complex();
    if (error_) return std::nullopt;
    std::string key;
    append_key(tree, key);
    if (const auto it = terminal_memo_.find(key); it != terminal_memo_.end()) return it->second;
    auto dfa = ByteDfa::from_regex(tree, &dfa_budget_);
    if (!dfa.ok() && dfa_budget_.spent()) {  // not this terminal's size: the grammar's
      if (!error_)
        error_ = make_error("the grammar is too complex: its terminals take more than " +
                            std::to_string(kMaxSharedBuildSteps) + " steps to build");
      return std::nullopt;
    }
    // A failed attempt may have spent a whole determinization budget (~0.05-0.1 s): sixteen of
    // them end the grammar. A built one also counts its fixed cost, so a grammar of 200,000
    // literal alternatives (463 MB, 3.2 s) stops at ~32,000 terminals.
    terminal_bytes_ +=
        dfa.ok() ? (*dfa)->table_bytes() + kTerminalFixedBytes : kMaxGrammarTerminalBytes / 16;
    std::optional<int32_t> out;
    if (dfa.ok()) out = add_terminal(std::move(dfa).value());
    terminal_memo_.emplace(std::move(key), out);
    return out;
  }

  int32_t add_terminal(std::shared_ptr<const ByteDfa> dfa) {
    std::vector<uint8_t> continues(dfa->num_states(), 0);
    for (size_t s = 0; s < continues.size(); ++s)
      for (int b = 0; b < 256 && !continues[s]; ++b)
        continues[s] =
            dfa->next(static_cast<int32_t>(s), static_cast<uint8_t>(b)) != ByteDfa::kDead;
    g_->terminals_.push_back(std::move(dfa));
    g_->continues_.push_back(std::move(continues));
    return static_cast<int32_t>(g_->terminals_.size() - 1);
  }

  // The terminal of prebuilt automaton `index` (a kDfa item), added on first use.
  int32_t prebuilt_terminal(int32_t index) {
    int32_t& t = prebuilt_[static_cast<size_t>(index)];
    if (t < 0) t = add_terminal(automata_[static_cast<size_t>(index)]);
    return t;
  }

  static Error too_complex() { return too_many_automaton_bytes(); }

  int32_t new_rule(std::string name) {
    g_->rules_.push_back(GrammarRule{.name = std::move(name), .alternatives = {}});
    return static_cast<int32_t>(g_->rules_.size() - 1);
  }

  std::string aux_name() {
    return src_[static_cast<size_t>(current_)].name + "/" + std::to_string(++aux_count_);
  }

  void add_alternative(int32_t rule, std::vector<GrammarElement> items) {
    if (g_->elements_.size() + items.size() + 1 > static_cast<size_t>(kMaxGrammarElements)) {
      if (!error_)
        error_ = make_error("the grammar is too large (more than " +
                            std::to_string(kMaxGrammarElements) + " elements once lowered)");
      return;
    }
    g_->rules_[static_cast<size_t>(rule)].alternatives.push_back(
        static_cast<int32_t>(g_->elements_.size()));
    g_->elements_.insert(g_->elements_.end(), items.begin(), items.end());
    g_->elements_.push_back(GrammarElement{});
  }

  int32_t lower_rule(int32_t r) {
    if (lowered_[r] >= 0) return lowered_[r];
    const int32_t saved = current_;
    current_ = r;
    const int32_t rule = new_rule(src_[static_cast<size_t>(r)].name);
    lowered_[r] = rule;
    lower_body(rule, src_[static_cast<size_t>(r)].body);
    current_ = saved;
    return rule;
  }

  // The alternatives of `body` into `rule`: the whole body as one terminal when it is regular.
  void lower_body(int32_t rule, const EbnfExpr& body) {
    if (std::optional<RegexNode> tree = regex_of(body)) {
      if (std::optional<int32_t> t = terminal(*tree)) {
        add_alternative(rule, {GrammarElement{GrammarElement::Kind::kTerminal, *t}});
        return;
      }
    }
    if (body.kind != EbnfExpr::Kind::kAlternate) {
      add_alternative(rule, lower_sequence(body));
      return;
    }
    for (const EbnfExpr& alt : body.children) add_alternative(rule, lower_sequence(alt));
  }

  // One alternative's elements: maximal runs of regular items as one terminal each.
  std::vector<GrammarElement> lower_sequence(const EbnfExpr& seq) {
    if (error_) return {};  // once failed, lower nothing more (a terminal may no longer build)
    std::vector<const EbnfExpr*> items;
    if (seq.kind == EbnfExpr::Kind::kSequence) {
      for (const EbnfExpr& c : seq.children) items.push_back(&c);
    } else if (seq.kind != EbnfExpr::Kind::kEmpty) {
      items.push_back(&seq);
    }
    std::vector<GrammarElement> out;
    std::vector<std::pair<const EbnfExpr*, RegexNode>> run;
    auto flush = [&] {
      if (run.empty()) return;
      RegexNode whole{.kind = RegexNode::Kind::kConcat};
      for (auto& [expr, tree] : run) whole.children.push_back(tree);
      if (std::optional<int32_t> t = run.size() == 1 ? terminal(run[0].second) : terminal(whole)) {
        out.push_back({GrammarElement::Kind::kTerminal, *t});
      } else {
        for (auto& [expr, tree] : run) {
          if (std::optional<int32_t> single = run.size() == 1 ? std::nullopt : terminal(tree))
            out.push_back({GrammarElement::Kind::kTerminal, *single});
          else
            out.push_back(lower_item(*expr));
        }
      }
      run.clear();
    };
    for (const EbnfExpr* item : items) {
      if (error_) return {};
      if (std::optional<RegexNode> tree = regex_of(*item)) {
        run.emplace_back(item, std::move(*tree));
        continue;
      }
      flush();
      out.push_back(lower_item(*item));
    }
    flush();
    return out;
  }

  // One element for an item that is not one terminal: a rule reference, or an auxiliary rule.
  GrammarElement lower_item(const EbnfExpr& e) {
    if (error_) return {};
    switch (e.kind) {
      case EbnfExpr::Kind::kRef:
        return {GrammarElement::Kind::kRule, lower_rule(index_.at(e.name))};
      case EbnfExpr::Kind::kRepeat:
        return {GrammarElement::Kind::kRule, lower_repeat(e)};
      case EbnfExpr::Kind::kDfa:
        return {GrammarElement::Kind::kTerminal, prebuilt_terminal(e.dfa)};
      case EbnfExpr::Kind::kEmpty:
      case EbnfExpr::Kind::kSet:
      case EbnfExpr::Kind::kSequence:
      case EbnfExpr::Kind::kAlternate:
        break;
    }
    const int32_t rule = new_rule(aux_name());
    if (e.kind == EbnfExpr::Kind::kAlternate) {
      for (const EbnfExpr& alt : e.children) add_alternative(rule, lower_sequence(alt));
    } else {
      add_alternative(rule, lower_sequence(e));
    }
    return {GrammarElement::Kind::kRule, rule};
  }

  // x{min,max}: min copies of x's element, then a loop rule (S ::= x S | ε) or a chain of
  // optional rules (O_k ::= x O_(k-1) | ε).
  int32_t lower_repeat(const EbnfExpr& e) {
    const EbnfExpr& child = e.children[0];
    std::optional<int32_t> t;
    if (std::optional<RegexNode> tree = regex_of(child)) t = terminal(*tree);
    const GrammarElement x =
        t ? GrammarElement{GrammarElement::Kind::kTerminal, *t} : lower_item_or_sequence(child);
    std::vector<GrammarElement> items(static_cast<size_t>(e.min), x);
    if (e.max < 0) {
      const int32_t loop = new_rule(aux_name());
      add_alternative(loop, {x, {GrammarElement::Kind::kRule, loop}});
      add_alternative(loop, {});
      items.push_back({GrammarElement::Kind::kRule, loop});
    } else if (e.max > e.min) {
      int32_t tail = -1;
      for (int32_t k = 0; k < e.max - e.min && !error_; ++k) {
        const int32_t opt = new_rule(aux_name());
        std::vector<GrammarElement> more = {x};
        if (tail >= 0) more.push_back({GrammarElement::Kind::kRule, tail});
        add_alternative(opt, std::move(more));
        add_alternative(opt, {});
        tail = opt;
      }
      items.push_back({GrammarElement::Kind::kRule, tail});
    }
    const int32_t rule = new_rule(aux_name());
    add_alternative(rule, std::move(items));
    return rule;
  }

  // An item as one element: a sequence of several items becomes an auxiliary rule.
  GrammarElement lower_item_or_sequence(const EbnfExpr& e) {
    if (e.kind == EbnfExpr::Kind::kAlternate) return lower_item(e);
    std::vector<GrammarElement> items = lower_sequence(e);
    if (items.size() == 1) return items[0];
    const int32_t rule = new_rule(aux_name());
    add_alternative(rule, std::move(items));
    return {GrammarElement::Kind::kRule, rule};
  }

  // The user rule an (auxiliary) rule belongs to, for errors.
  static std::string source_name(const std::string& name) { return name.substr(0, name.find('/')); }

  // Expansion must consume text before a rule can meet itself again (no left recursion), and
  // every rule must be able to finish.
  Status check_termination() {
    const std::vector<GrammarRule>& rules = g_->rules_;
    const std::vector<GrammarElement>& el = g_->elements_;
    const size_t n = rules.size();
    auto nullable_element = [&](const GrammarElement& e, const std::vector<uint8_t>& nullable) {
      if (e.kind == GrammarElement::Kind::kTerminal)
        return g_->terminals_[static_cast<size_t>(e.arg)]->accepting(0);
      return e.kind == GrammarElement::Kind::kRule && nullable[static_cast<size_t>(e.arg)] != 0;
    };
    // Fixpoints: nullable (derives the empty text) and productive (derives some text).
    std::vector<uint8_t> nullable(n, 0), productive(n, 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        for (int32_t start : rules[r].alternatives) {
          bool all_nullable = true, all_productive = true;
          for (size_t k = static_cast<size_t>(start); el[k].kind != GrammarElement::Kind::kEnd;
               ++k) {
            all_nullable = all_nullable && nullable_element(el[k], nullable);
            all_productive = all_productive && (el[k].kind == GrammarElement::Kind::kTerminal ||
                                                productive[static_cast<size_t>(el[k].arg)]);
          }
          if (all_nullable && !nullable[r]) nullable[r] = changed = true;
          if (all_productive && !productive[r]) productive[r] = changed = true;
        }
      }
    }
    for (size_t r = n; r-- > 0;)  // callees come after their callers: name the innermost
      if (!productive[r])
        return make_error("rule '" + source_name(rules[r].name) +
                          "' can never finish: each of its alternatives needs it again");
    // Left edges: the rules an alternative can expand before consuming a byte.
    std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
    std::function<std::optional<std::string>(size_t)> visit =
        [&](size_t r) -> std::optional<std::string> {
      color[r] = 1;
      for (int32_t start : rules[r].alternatives) {
        for (size_t k = static_cast<size_t>(start); el[k].kind != GrammarElement::Kind::kEnd; ++k) {
          if (el[k].kind == GrammarElement::Kind::kRule) {
            const size_t t = static_cast<size_t>(el[k].arg);
            if (color[t] == 1) return source_name(rules[t].name);
            if (color[t] == 0)
              if (std::optional<std::string> cycle = visit(t)) return cycle;
          }
          if (!nullable_element(el[k], nullable)) break;
        }
      }
      color[r] = 2;
      return std::nullopt;
    };
    for (size_t r = 0; r < n; ++r) {
      if (color[r] != 0) continue;
      if (std::optional<std::string> name = visit(r))
        return make_error("rule '" + *name +
                          "' is left-recursive: it can reach itself before consuming any text "
                          "(directly, through rules that can match nothing, or by repeating "
                          "something that can match nothing); write the repetition with `*` "
                          "or `+` instead");
    }
    return ok_status();
  }

  std::string_view text_;
  std::vector<EbnfRule> src_;
  std::vector<std::shared_ptr<const ByteDfa>> automata_;  // kDfa items' automata
  std::vector<int32_t> prebuilt_;                         // [automaton] its terminal, -1: none yet
  std::map<std::string, int32_t> index_;
  std::vector<std::vector<int32_t>> refs_;  // [rule] referenced rules
  std::vector<uint8_t> regular_;
  std::map<int32_t, std::optional<RegexNode>> regex_memo_;
  std::map<std::string, std::optional<int32_t>> terminal_memo_;
  size_t terminal_bytes_ = 0;     // built or attempted (kMaxGrammarTerminalBytes)
  DfaBuildBudget dfa_budget_;     // what the terminals may take to build together
  std::vector<int32_t> lowered_;  // [source rule] its grammar rule, -1 before lowering
  int32_t current_ = 0;           // the source rule being lowered (auxiliary rules' names)
  int32_t aux_count_ = 0;
  std::optional<Error> error_;
  std::shared_ptr<EbnfGrammar> g_{new EbnfGrammar()};
};

// Parsing and lowering recurse along rule references and groups, so they run on a large stack
// (core/large_stack.h); parse_ebnf's limits bound the depth.
Expected<std::shared_ptr<const EbnfGrammar>> EbnfGrammar::compile(std::string_view text,
                                                                  std::string_view root) {
  std::optional<Expected<std::shared_ptr<const EbnfGrammar>>> out;
  run_on_large_stack([&] {
    Expected<std::vector<EbnfRule>> rules = parse_ebnf(text, kMaxGrammarRepeat);
    if (!rules.ok()) {
      out.emplace(rules.error());
      return;
    }
    out.emplace(GrammarLowering(text, std::move(rules).value()).run(root));
  });
  return std::move(*out);
}

Expected<std::shared_ptr<const EbnfGrammar>> EbnfGrammar::compile_rules(
    std::vector<EbnfRule> rules, std::string_view root,
    std::vector<std::shared_ptr<const ByteDfa>> automata) {
  std::optional<Expected<std::shared_ptr<const EbnfGrammar>>> out;
  run_on_large_stack([&] {
    GrammarLowering lowering("", std::move(rules), std::move(automata));
    out.emplace(lowering.run(root));
  });
  return std::move(*out);
}

Expected<std::shared_ptr<const EbnfGrammar>> EbnfGrammar::compile_gbnf_or_lark(
    std::string_view text) {
  if (!looks_like_lark(text)) return compile(text);
  BEAM_ASSIGN_OR_RETURN(std::string gbnf, lark_to_gbnf(text));
  auto grammar = compile(gbnf, kLarkRoot);
  if (!grammar.ok()) return in_lark_grammar(grammar.error());
  return grammar;
}

Expected<ParsedGrammar> EbnfGrammar::parse_gbnf_or_lark(std::string_view text) {
  const bool lark = looks_like_lark(text);
  std::string gbnf;
  if (lark) {
    BEAM_ASSIGN_OR_RETURN(gbnf, lark_to_gbnf(text));
  }
  const std::string_view source = lark ? std::string_view(gbnf) : text;
  ParsedGrammar out{.rules = {}, .root = lark ? std::string(kLarkRoot) : "root"};
  std::optional<Status> read;
  run_on_large_stack([&] {
    Expected<std::vector<EbnfRule>> rules = parse_ebnf(source, kMaxGrammarRepeat);
    if (!rules.ok()) {
      read.emplace(rules.error());
      return;
    }
    out.rules = std::move(rules).value();
    std::map<std::string, int32_t> index;
    std::vector<std::vector<int32_t>> refs;
    read.emplace(index_rules(source, out.rules, index, refs));
    if (read->ok() && !index.contains(out.root)) read.emplace(no_root(out.root));
  });
  if (!read->ok()) return lark ? in_lark_grammar(read->error()) : read->error();
  return out;
}

}  // namespace beam
