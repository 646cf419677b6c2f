// eliminate_left_recursion: the left edges between rules (a rule → the rules its alternatives can
// start with), their strongly connected components (Tarjan), and within each component that
// reaches itself, Paull's algorithm on the members' alternatives as item lists.
#include "runtime/structured/left_recursion.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <string>
#include <utility>

#include "core/strongly_connected.h"

namespace beam {
namespace {

using ExprKind = EbnfExpr::Kind;
using Alternative = std::vector<EbnfExpr>;  // items in order; none = the empty text

// A rule body's alternatives as item lists.
std::vector<Alternative> split_alternatives(EbnfExpr body) {
  std::vector<EbnfExpr> alts;
  if (body.kind == ExprKind::kAlternate)
    alts = std::move(body.children);
  else
    alts.push_back(std::move(body));
  std::vector<Alternative> out(alts.size());
  for (size_t k = 0; k < alts.size(); ++k) {
    if (alts[k].kind == ExprKind::kSequence)
      out[k] = std::move(alts[k].children);
    else if (alts[k].kind != ExprKind::kEmpty)
      out[k].push_back(std::move(alts[k]));
  }
  return out;
}

EbnfExpr sequence_of(Alternative items) {
  if (items.empty()) return EbnfExpr{};
  if (items.size() == 1) return std::move(items[0]);
  return EbnfExpr{.kind = ExprKind::kSequence, .children = std::move(items)};
}

EbnfExpr alternation_of(std::vector<Alternative> alts) {
  if (alts.size() == 1) return sequence_of(std::move(alts[0]));
  EbnfExpr out{.kind = ExprKind::kAlternate};
  for (Alternative& a : alts) out.children.push_back(sequence_of(std::move(a)));
  return out;
}

// The rule names an expression can start with: its first item's, through groups, sequences and
// repetitions of at least one (not through what can match nothing).
void leading_refs(const EbnfExpr& e, std::vector<const std::string*>& out) {
  switch (e.kind) {
    case ExprKind::kRef:
      out.push_back(&e.name);
      return;
    case ExprKind::kSequence:
      for (const EbnfExpr& c : e.children) {
        if (c.kind == ExprKind::kEmpty) continue;
        leading_refs(c, out);
        return;
      }
      return;
    case ExprKind::kAlternate:
      for (const EbnfExpr& c : e.children) leading_refs(c, out);
      return;
    case ExprKind::kRepeat:
      if (e.min >= 1) leading_refs(e.children[0], out);
      return;
    case ExprKind::kEmpty:
    case ExprKind::kSet:
    case ExprKind::kDfa:
      return;
  }
}

size_t count_nodes(const EbnfExpr& e) {
  size_t n = 1;
  for (const EbnfExpr& c : e.children) n += count_nodes(c);
  return n;
}

// What the rewrite may still create (kMaxRewrittenNodes in all); charge(a) pays for a new
// alternative a (one node besides its items') and says whether the budget held.
class RewriteBudget {
 public:
  bool charge(const Alternative& a) {
    size_t n = 1;
    for (const EbnfExpr& e : a) n += count_nodes(e);
    if (n > left_) return false;
    left_ -= n;
    return true;
  }

 private:
  size_t left_ = kMaxRewrittenNodes;
};

// Rewrites alternatives until none starts with a group, a nested sequence, the empty text or a
// repetition of at least one (`x{m,n}` as `x x{m-1,n-1}`), so that each one's first item is what
// leading_refs sees. False when the budget runs out.
bool expose_first_items(std::vector<Alternative>& alts, RewriteBudget& budget) {
  std::vector<Alternative> out;
  std::vector<Alternative> work(std::make_move_iterator(alts.rbegin()),
                                std::make_move_iterator(alts.rend()));  // a stack, first on top
  while (!work.empty()) {
    Alternative a = std::move(work.back());
    work.pop_back();
    if (a.empty()) {
      out.push_back(std::move(a));
      continue;
    }
    EbnfExpr first = std::move(a.front());
    a.erase(a.begin());  // a is now the items after the first
    bool within = true;
    const auto then = [&](Alternative head) {
      head.insert(head.end(), a.begin(), a.end());
      within = within && budget.charge(head);
      return head;
    };
    switch (first.kind) {
      case ExprKind::kEmpty:
        work.push_back(std::move(a));
        break;
      case ExprKind::kSequence:
        work.push_back(then(std::move(first.children)));
        break;
      case ExprKind::kAlternate:
        for (auto c = first.children.rbegin(); c != first.children.rend(); ++c) {
          Alternative head;
          head.push_back(std::move(*c));
          work.push_back(then(std::move(head)));
        }
        break;
      case ExprKind::kRepeat:
        if (first.min >= 1) {
          Alternative head;
          head.push_back(first.children[0]);
          if (first.max != 1) {
            --first.min;
            if (first.max > 0) --first.max;
            head.push_back(std::move(first));
          }
          work.push_back(then(std::move(head)));
          break;
        }
        [[fallthrough]];
      case ExprKind::kSet:
      case ExprKind::kRef:
      case ExprKind::kDfa:
        a.insert(a.begin(), std::move(first));
        out.push_back(std::move(a));
        break;
    }
    if (!within) return false;
  }
  alts = std::move(out);
  return true;
}

bool begins_with_rule(const Alternative& a, const std::string& name) {
  return !a.empty() && a.front().kind == ExprKind::kRef && a.front().name == name;
}

Error rewrite_too_complex(const EbnfRule& rule) {
  return make_error("rule '" + rule.name + "': removing its left recursion would take more than " +
                    std::to_string(kMaxRewrittenNodes) +
                    " expressions; write the repetition with `*` or `+` instead");
}

// The strongly connected components of the left edges that can reach themselves (several
// rules, or one with an edge to itself), each in definition order.
std::vector<std::vector<int32_t>> recursive_components(
    const std::vector<std::vector<int32_t>>& left) {
  std::vector<std::vector<int32_t>> out;
  for (std::vector<int32_t>& component : strongly_connected_components(left)) {
    const int32_t v = component[0];
    const bool recursive =
        component.size() > 1 || std::find(left[v].begin(), left[v].end(), v) != left[v].end();
    if (!recursive) continue;
    std::sort(component.begin(), component.end());
    out.push_back(std::move(component));
  }
  return out;
}

// Paull's algorithm over one component's rules (definition order): each member's alternatives
// that start with an earlier member take that member's rewritten alternatives instead, then its
// direct left recursion becomes a repetition, `r ::= (b1 | ...) (x1 | ...)*`.
Status rewrite_component(std::vector<EbnfRule>& rules, const std::vector<int32_t>& members,
                         RewriteBudget& budget) {
  std::vector<std::vector<Alternative>> rewritten(members.size());  // first items exposed
  for (size_t i = 0; i < members.size(); ++i) {
    EbnfRule& rule = rules[static_cast<size_t>(members[i])];
    std::vector<Alternative> alts = split_alternatives(std::move(rule.body));
    if (!expose_first_items(alts, budget)) return rewrite_too_complex(rule);
    for (size_t j = 0; j < i; ++j) {
      const std::string& earlier = rules[static_cast<size_t>(members[j])].name;
      std::vector<Alternative> next;
      for (Alternative& a : alts) {
        if (!begins_with_rule(a, earlier)) {
          next.push_back(std::move(a));
          continue;
        }
        for (const Alternative& b : rewritten[j]) {
          Alternative c = b;
          c.insert(c.end(), a.begin() + 1, a.end());
          if (!budget.charge(c)) return rewrite_too_complex(rule);
          next.push_back(std::move(c));
        }
      }
      alts = std::move(next);
    }
    if (std::all_of(alts.begin(), alts.end(),
                    [&](const Alternative& a) { return begins_with_rule(a, rule.name); })) {
      rule.body = alternation_of(alts);  // nothing to start from: for the termination check
      rewritten[i] = std::move(alts);
      continue;
    }
    std::vector<Alternative> base, rest;
    for (Alternative& a : alts) {
      if (!begins_with_rule(a, rule.name)) {
        base.push_back(std::move(a));
      } else if (a.size() > 1) {  // `r ::= r` alone adds nothing
        a.erase(a.begin());
        rest.push_back(std::move(a));
      }
    }
    if (rest.empty()) {
      rule.body = alternation_of(base);
      rewritten[i] = std::move(base);
      continue;
    }
    const EbnfExpr loop{.kind = ExprKind::kRepeat, .children = {alternation_of(std::move(rest))}};
    rule.body = EbnfExpr{.kind = ExprKind::kSequence, .children = {alternation_of(base), loop}};
    for (Alternative& b : base) b.push_back(loop);
    rewritten[i] = std::move(base);
  }
  return ok_status();
}

}  // namespace

Status eliminate_left_recursion(std::vector<EbnfRule>& rules) {
  std::map<std::string, int32_t> index;
  for (size_t r = 0; r < rules.size(); ++r) index.emplace(rules[r].name, static_cast<int32_t>(r));
  std::vector<std::vector<int32_t>> left(rules.size());
  for (size_t r = 0; r < rules.size(); ++r) {
    std::vector<const std::string*> names;
    leading_refs(rules[r].body, names);
    for (const std::string* name : names)
      if (const auto it = index.find(*name); it != index.end()) left[r].push_back(it->second);
  }
  RewriteBudget budget;
  for (const std::vector<int32_t>& members : recursive_components(left))
    BEAM_RETURN_IF_ERROR(rewrite_component(rules, members, budget));
  return ok_status();
}

}  // namespace beam
