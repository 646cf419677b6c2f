// Variable scopes: the globals, then one child per for loop, macro call and call block (the
// reference's Environment chain). `set` writes the innermost scope; lookups walk outwards.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "text/jinja/value.h"

namespace beam::text::jinja {

// Owned by one render (single thread).
class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent = nullptr) : parent_(std::move(parent)) {}

  // The innermost binding of `name`, or nullptr when no scope defines it.
  const Value* lookup(std::string_view name) const {
    for (const Scope* s = this; s; s = s->parent_.get()) {
      auto it = s->vars_.find(name);
      if (it != s->vars_.end()) return &it->second;
    }
    return nullptr;
  }
  void set(std::string name, Value value) { vars_.insert_or_assign(std::move(name), std::move(value)); }

 private:
  std::shared_ptr<Scope> parent_;
  std::map<std::string, Value, std::less<>> vars_;
};

using ScopePtr = std::shared_ptr<Scope>;

}  // namespace beam::text::jinja
