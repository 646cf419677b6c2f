// Invariant checks: a broken invariant is a bug, so it aborts with file, line and context.
// User input errors never go through here; they are Expected<T> values (core/status.h).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace beam::detail {

// Collects the message of a failed check and aborts when destroyed.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* cond) {
    stream_ << file << ":" << line << ": check failed: " << cond << " ";
  }
  [[noreturn]] ~CheckFailure() {
    std::fprintf(stderr, "%s\n", stream_.str().c_str());
    std::fflush(stderr);
    std::abort();
  }
  template <typename T>
  CheckFailure& operator<<(const T& v) {
    stream_ << v;
    return *this;
  }

 private:
  std::ostringstream stream_;
};

}  // namespace beam::detail

#define BEAM_CHECK(cond) \
  if (cond) {            \
  } else                 \
    ::beam::detail::CheckFailure(__FILE__, __LINE__, #cond)

#define BEAM_CHECK_EQ(a, b) BEAM_CHECK((a) == (b)) << "(" << (a) << " vs " << (b) << ") "
