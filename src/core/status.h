// Errors as values at module boundaries: Error carries a message a user can act on;
// Expected<T> holds a T or an Error; Status is Expected<void>.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace beam {

struct Error {
  std::string message;
};

template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Expected(Error error) : v_(std::move(error)) {}  // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { assert(ok()); return std::get<0>(v_); }
  const T& value() const& { assert(ok()); return std::get<0>(v_); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { assert(!ok()); return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Expected<void> {
 public:
  Expected() = default;
  Expected(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { assert(!ok_); return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

using Status = Expected<void>;

inline Status ok_status() { return Status(); }
inline Error make_error(std::string message) { return Error{std::move(message)}; }

}  // namespace beam

// Propagate an error from an expression returning Status or Expected<T>.
#define BEAM_RETURN_IF_ERROR(expr)                        \
  do {                                                    \
    auto beam_status_ = (expr);                           \
    if (!beam_status_.ok()) return beam_status_.error();  \
  } while (0)

#define BEAM_CONCAT_INNER(a, b) a##b
#define BEAM_CONCAT(a, b) BEAM_CONCAT_INNER(a, b)
// Bind the value of an Expected<T> expression or return its error.
#define BEAM_ASSIGN_OR_RETURN(lhs, expr)                                     \
  auto BEAM_CONCAT(beam_expected_, __LINE__) = (expr);                       \
  if (!BEAM_CONCAT(beam_expected_, __LINE__).ok())                           \
    return BEAM_CONCAT(beam_expected_, __LINE__).error();                    \
  lhs = std::move(BEAM_CONCAT(beam_expected_, __LINE__)).value()
