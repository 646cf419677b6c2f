// Value, Dict and JSON import.
#include "text/jinja/value.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "text/jinja/error.h"
#include "text/jinja/js_number.h"

namespace beam::text::jinja {

Value Value::none() { return Value(Storage(None{})); }
Value Value::boolean(bool b) { return Value(Storage(b)); }
Value Value::integer(double v) { return Value(Storage(Int{v})); }
Value Value::floating(double v) { return Value(Storage(Float{v})); }
Value Value::number(double v) { return is_whole_number(v) ? integer(v) : floating(v); }
Value Value::string(std::string s) {
  return Value(Storage(std::make_shared<const std::string>(std::move(s))));
}
namespace {

void check_nesting(int nesting) {
  if (nesting > kMaxValueNesting) {
    fail_limit("value nested deeper than " + std::to_string(kMaxValueNesting) + " levels");
  }
}

}  // namespace

Value Value::list(List items) {
  int nesting = 1;
  for (const Value& item : items) nesting = std::max(nesting, 1 + item.nesting());
  check_nesting(nesting);
  return Value(Storage(std::make_shared<const ListData>(ListData{std::move(items), nesting})));
}
Value Value::dict(Dict d) { return Value(Storage(std::make_shared<const Dict>(std::move(d)))); }
Value Value::make_namespace(Dict d) {
  return Value(Storage(NamespaceRef{std::make_shared<Dict>(std::move(d))}));
}
Value Value::callable(Callable c) {
  return Value(Storage(std::make_shared<const Callable>(std::move(c))));
}

bool Value::as_bool() const {
  BEAM_CHECK(is(ValueKind::kBool)) << kind_name(kind());
  return std::get<bool>(v_);
}

double Value::as_number() const {
  if (auto* i = std::get_if<Int>(&v_)) return i->v;
  BEAM_CHECK(is(ValueKind::kFloat)) << kind_name(kind());
  return std::get<Float>(v_).v;
}

const std::string& Value::as_string() const {
  BEAM_CHECK(is_string()) << kind_name(kind());
  return *std::get<std::shared_ptr<const std::string>>(v_);
}

const Value::List& Value::as_list() const {
  BEAM_CHECK(is_list()) << kind_name(kind());
  return std::get<std::shared_ptr<const ListData>>(v_)->items;
}

const Dict& Value::as_dict() const {
  if (auto* ns = std::get_if<NamespaceRef>(&v_)) return *ns->dict;
  BEAM_CHECK(is_dict()) << kind_name(kind());
  return *std::get<std::shared_ptr<const Dict>>(v_);
}

Dict& Value::namespace_dict() const {
  BEAM_CHECK(is(ValueKind::kNamespace)) << kind_name(kind());
  return *std::get<NamespaceRef>(v_).dict;
}

const Callable& Value::as_callable() const {
  BEAM_CHECK(is(ValueKind::kCallable)) << kind_name(kind());
  return *std::get<std::shared_ptr<const Callable>>(v_);
}

const void* Value::identity() const {
  switch (kind()) {
    case ValueKind::kList: return std::get<std::shared_ptr<const ListData>>(v_).get();
    case ValueKind::kDict: return std::get<std::shared_ptr<const Dict>>(v_).get();
    case ValueKind::kNamespace: return std::get<NamespaceRef>(v_).dict.get();
    case ValueKind::kCallable: return std::get<std::shared_ptr<const Callable>>(v_).get();
    case ValueKind::kUndefined: case ValueKind::kNone: case ValueKind::kBool: case ValueKind::kInt:
    case ValueKind::kFloat: case ValueKind::kString:
      return nullptr;
  }
  return nullptr;
}

bool Value::truthy() const {
  switch (kind()) {
    case ValueKind::kUndefined: case ValueKind::kNone: return false;
    case ValueKind::kBool: return as_bool();
    case ValueKind::kInt: case ValueKind::kFloat: {
      double v = as_number();
      return v != 0 && !std::isnan(v);
    }
    case ValueKind::kString: return !as_string().empty();
    case ValueKind::kList: return !as_list().empty();
    case ValueKind::kDict: return !as_dict().empty();
    case ValueKind::kNamespace: case ValueKind::kCallable: return true;
  }
  return false;
}

int Value::nesting() const {
  switch (kind()) {
    case ValueKind::kList: return std::get<std::shared_ptr<const ListData>>(v_)->nesting;
    case ValueKind::kDict: return as_dict().nesting();
    case ValueKind::kCallable: {
      const auto* method = std::get_if<Callable::BoundMethod>(&as_callable().target);
      return method ? 1 + method->receiver.nesting() : 1;
    }
    case ValueKind::kUndefined: case ValueKind::kNone: case ValueKind::kBool: case ValueKind::kInt:
    case ValueKind::kFloat: case ValueKind::kString: case ValueKind::kNamespace:
      return 0;
  }
  return 0;
}

const char* kind_name(ValueKind kind) {
  switch (kind) {
    case ValueKind::kUndefined: return "undefined";
    case ValueKind::kNone: return "none";
    case ValueKind::kBool: return "boolean";
    case ValueKind::kInt: return "integer";
    case ValueKind::kFloat: return "float";
    case ValueKind::kString: return "string";
    case ValueKind::kList: return "list";
    case ValueKind::kDict: return "dict";
    case ValueKind::kNamespace: return "namespace";
    case ValueKind::kCallable: return "callable";
  }
  return "?";
}

size_t Dict::position(std::string_view key) const {
  if (!index_.empty()) {
    auto it = index_.find(key);
    return it == index_.end() ? kMissing : it->second;
  }
  for (size_t i = 0; i < items_.size(); ++i) {
    if (items_[i].first == key) return i;
  }
  return kMissing;
}

const Value* Dict::find(std::string_view key) const {
  size_t i = position(key);
  return i == kMissing ? nullptr : &items_[i].second;
}

void Dict::set(std::string key, Value value) {
  nesting_ = std::max(nesting_, 1 + value.nesting());
  check_nesting(nesting_);
  if (size_t i = position(key); i != kMissing) {
    items_[i].second = std::move(value);
    return;
  }
  items_.emplace_back(std::move(key), std::move(value));
  if (!index_.empty()) {
    index_.emplace(items_.back().first, items_.size() - 1);
  } else if (items_.size() > kIndexThreshold) {
    for (size_t i = 0; i < items_.size(); ++i) index_.emplace(items_[i].first, i);
  }
}

void Dict::clear() {
  items_.clear();
  index_.clear();
  nesting_ = 1;
}

Value value_from_json(const nlohmann::ordered_json& json, int max_depth) {
  if (max_depth < 0) fail_limit("JSON input nested too deeply");
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::integer(static_cast<double>(json.get<int64_t>()));
    case nlohmann::ordered_json::value_t::number_unsigned:
      return Value::integer(static_cast<double>(json.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: return Value::number(json.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::string(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Value::List items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(value_from_json(item, max_depth - 1));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (const auto& [key, item] : json.items()) d.set(key, value_from_json(item, max_depth - 1));
      return Value::dict(std::move(d));
    }
    case nlohmann::ordered_json::value_t::binary: case nlohmann::ordered_json::value_t::discarded:
      fail("unsupported JSON value (binary or discarded)");
  }
  return Value();
}

}  // namespace beam::text::jinja
