// Per-render state shared by the interpreter and the builtins: limits and the work budget, the
// clock for strftime_now, and the namespaces created (cleared at the end to break reference cycles
// such as `{% set ns.self = ns %}`).
#pragma once

#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

#include "text/jinja/error.h"
#include "text/jinja/template.h"
#include "text/jinja/value.h"
#include "text/jinja/value_format.h"

namespace beam::text::jinja {

// Owned by one render (single thread).
class Runtime {
 public:
  Runtime(const RenderLimits& limits, std::time_t now) : limits_(limits), now_(now) {}
  ~Runtime() {
    for (const Value& ns : namespaces_) ns.namespace_dict().clear();
  }
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const RenderLimits& limits() const { return limits_; }
  std::time_t now() const { return now_; }
  FormatLimits format_limits() const { return FormatLimits{limits_.max_output_bytes, limits_.max_depth}; }

  // Charges `units` of work; fails once the render has used max_steps.
  void step(uint64_t units = 1) {
    steps_ += units;
    if (steps_ > limits_.max_steps) {
      fail_limit("template render exceeded " + std::to_string(limits_.max_steps) + " steps (runaway loop?)");
    }
  }
  // A new string value, size-checked and charged by its length.
  Value make_string(std::string s) {
    if (s.size() > limits_.max_output_bytes) {
      fail_limit("template built a string over " + std::to_string(limits_.max_output_bytes) + " bytes");
    }
    step(1 + s.size() / 64);
    return Value::string(std::move(s));
  }
  // A new list value, size-checked and charged by its length.
  Value make_list(Value::List items) {
    check_list_size(items.size());
    step(1 + items.size());
    return Value::list(std::move(items));
  }
  void check_list_size(size_t n) const {
    if (n > limits_.max_list_items) {
      fail_limit("template built a list over " + std::to_string(limits_.max_list_items) + " items");
    }
  }
  Value make_namespace(Dict d) {
    Value ns = Value::make_namespace(std::move(d));
    namespaces_.push_back(ns);
    return ns;
  }

 private:
  RenderLimits limits_;
  std::time_t now_;
  uint64_t steps_ = 0;
  std::vector<Value> namespaces_;
};

}  // namespace beam::text::jinja
