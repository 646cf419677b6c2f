// Overloaded lambdas for std::visit over the syntax tree's node variants.
#pragma once

namespace beam::text::jinja {

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

}  // namespace beam::text::jinja
