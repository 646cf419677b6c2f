// Evaluated arguments of a call, filter or test: positional values, then keyword values in the
// order written.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/jinja/value.h"

namespace beam::text::jinja {

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;

  const Value* keyword_arg(std::string_view name) const {
    for (const auto& [key, value] : keyword) {
      if (key == name) return &value;
    }
    return nullptr;
  }
  // The i-th positional argument, else the keyword argument `name`, else nullptr.
  const Value* arg(size_t i, std::string_view name) const {
    if (i < positional.size()) return &positional[i];
    return keyword_arg(name);
  }
};

}  // namespace beam::text::jinja
