// Strongly connected components of a directed graph (Tarjan's algorithm).
#pragma once

#include <cstdint>
#include <vector>

namespace beam {

// The components of the graph whose node v has edges to edges[v] (nodes 0 .. edges.size() - 1),
// each a list of its nodes, in reverse topological order: a component comes after every
// component it reaches (sinks first). Recursive: depth up to the longest path's node count.
std::vector<std::vector<int32_t>> strongly_connected_components(
    const std::vector<std::vector<int32_t>>& edges);

}  // namespace beam
