#include "core/strongly_connected.h"

#include <algorithm>
#include <functional>

namespace beam {

std::vector<std::vector<int32_t>> strongly_connected_components(
    const std::vector<std::vector<int32_t>>& edges) {
  const size_t n = edges.size();
  std::vector<int32_t> order(n, -1), low(n, 0), stack;
  std::vector<uint8_t> on_stack(n, 0);
  std::vector<std::vector<int32_t>> out;
  int32_t counter = 0;
  std::function<void(int32_t)> visit = [&](int32_t v) {
    order[v] = low[v] = counter++;
    stack.push_back(v);
    on_stack[v] = 1;
    for (int32_t w : edges[v]) {
      if (order[w] < 0) {
        visit(w);
        low[v] = std::min(low[v], low[w]);
      } else if (on_stack[w]) {
        low[v] = std::min(low[v], order[w]);
      }
    }
    if (low[v] != order[v]) return;
    std::vector<int32_t> component;
    int32_t w;
    do {
      w = stack.back();
      stack.pop_back();
      on_stack[w] = 0;
      component.push_back(w);
    } while (w != v);
    out.push_back(std::move(component));
  };
  for (size_t v = 0; v < n; ++v)
    if (order[v] < 0) visit(static_cast<int32_t>(v));
  return out;
}

}  // namespace beam
