// The template runtime's value type: undefined, none, bool, int, float, string, list, dict
// (insertion-ordered), namespace (a mutable dict) and callables (macros, builtins, bound methods).
// Numbers are IEEE doubles, ints flagged as such: the reference renderer (@huggingface/jinja) runs on
// JavaScript numbers, so arithmetic, overflow and printing match it bit for bit.
// Strings, lists, dicts and callables are shared and immutable; copying a Value is cheap.
// Containers nest at most kMaxValueNesting levels (deeper ones fail with a TemplateError), which
// keeps printing and destruction recursion bounded.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace beam::text::jinja {

enum class ValueKind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kCallable };

constexpr int kMaxValueNesting = 1000;

class Dict;
struct Callable;

class Value {
 public:
  using List = std::vector<Value>;

  Value() = default;  // undefined
  static Value none();
  static Value boolean(bool b);
  static Value integer(double v);
  static Value floating(double v);
  // A number from arithmetic or input: an int when whole (JavaScript's Number.isInteger).
  static Value number(double v);
  static Value string(std::string s);
  static Value list(List items);
  static Value dict(Dict d);
  static Value make_namespace(Dict d);
  static Value callable(Callable c);

  ValueKind kind() const { return static_cast<ValueKind>(v_.index()); }
  bool is(ValueKind k) const { return kind() == k; }
  bool is_undefined() const { return is(ValueKind::kUndefined); }
  bool is_none() const { return is(ValueKind::kNone); }
  bool is_string() const { return is(ValueKind::kString); }
  bool is_list() const { return is(ValueKind::kList); }
  bool is_dict() const { return is(ValueKind::kDict); }
  bool is_number() const { return is(ValueKind::kInt) || is(ValueKind::kFloat); }

  bool as_bool() const;                // requires kBool
  double as_number() const;            // requires kInt or kFloat
  const std::string& as_string() const;  // requires kString
  const List& as_list() const;         // requires kList
  const Dict& as_dict() const;         // requires kDict or kNamespace
  Dict& namespace_dict() const;        // requires kNamespace
  const Callable& as_callable() const;  // requires kCallable
  // Address of the shared payload of a list, dict, namespace or callable (reference identity,
  // as JavaScript compares objects); nullptr for the other kinds.
  const void* identity() const;
  // Python/Jinja truthiness as the reference computes it (empty containers are false, a
  // namespace and a callable are true).
  bool truthy() const;
  // Levels of list / dict / bound-method nesting: 0 for scalars and namespaces (a namespace's
  // contents are released by the render that created it).
  int nesting() const;

 private:
  struct Undefined {};
  struct None {};
  struct Int {
    double v;
  };
  struct Float {
    double v;
  };
  struct NamespaceRef {
    std::shared_ptr<Dict> dict;
  };
  struct ListData {
    List items;
    int nesting;
  };
  using Storage = std::variant<Undefined, None, bool, Int, Float, std::shared_ptr<const std::string>,
                               std::shared_ptr<const ListData>, std::shared_ptr<const Dict>, NamespaceRef,
                               std::shared_ptr<const Callable>>;
  explicit Value(Storage v) : v_(std::move(v)) {}
  Storage v_;
};

// Lowercase kind name used in error messages ("string", "list", ...).
const char* kind_name(ValueKind kind);

// A string-keyed map that remembers insertion order (JavaScript Map semantics: overwriting a key
// keeps its position).
class Dict {
 public:
  using Item = std::pair<std::string, Value>;

  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);
  const std::vector<Item>& items() const { return items_; }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  void clear();
  int nesting() const { return nesting_; }  // 1 + the deepest value inside

 private:
  static constexpr size_t kIndexThreshold = 16;  // linear search below this many keys
  static constexpr size_t kMissing = static_cast<size_t>(-1);
  size_t position(std::string_view key) const;  // kMissing when absent
  std::vector<Item> items_;
  std::map<std::string, size_t, std::less<>> index_;  // key → position, once past the threshold
  int nesting_ = 1;
};

enum class BuiltinFunction { kNamespace, kRaiseException, kRange, kStrftimeNow };

// Methods reachable as attributes of strings and dicts (`s.split(',')`, `d.items()`).
enum class Method {
  kUpper, kLower, kStrip, kTitle, kCapitalize, kRstrip, kLstrip, kStartswith, kEndswith, kSplit,
  kReplace, kGet, kItems, kKeys, kValues, kDictsort,
};

struct MacroStmt;
struct CallBlockStmt;
class Scope;

struct Callable {
  struct Builtin {
    BuiltinFunction fn;
  };
  struct BoundMethod {
    Method method;
    Value receiver;
  };
  struct Macro {
    const MacroStmt* node;  // owned by the Template, which outlives every render
  };
  // `caller()` inside a macro invoked by {% call %}: the call block's body in its defining scope.
  struct Caller {
    const CallBlockStmt* node;
    std::weak_ptr<Scope> scope;
  };
  std::variant<Builtin, BoundMethod, Macro, Caller> target;
};

// JSON → Value as the reference's JSON.parse + conversion does: whole numbers become ints, objects
// keep their key order. Fails (TemplateError) past `max_depth` levels of nesting.
Value value_from_json(const nlohmann::ordered_json& json, int max_depth = 512);

}  // namespace beam::text::jinja
