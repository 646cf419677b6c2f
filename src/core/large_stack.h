// Runs work whose recursion depth the input decides (a grammar's rules and groups) on a thread
// with a large stack, so that input within its documented limits cannot overflow the caller's.
#pragma once

#include <cstddef>
#include <functional>

namespace beam {

inline constexpr size_t kLargeStackBytes = size_t{256} << 20;  // reserved; touched pages only

// Calls f on a new thread whose stack holds `bytes` and waits for it to return. If no such thread
// can be made, calls f on the caller's thread.
void run_on_large_stack(const std::function<void()>& f, size_t bytes = kLargeStackBytes);

}  // namespace beam
