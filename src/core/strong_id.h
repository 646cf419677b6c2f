// Typed integer IDs: StrongId<Tag> values of different tags do not mix.
#pragma once

#include <cstdint>
#include <functional>

namespace beam {

template <typename Tag, typename Rep = int64_t>
struct StrongId {
  Rep value = -1;

  constexpr StrongId() = default;
  constexpr explicit StrongId(Rep v) : value(v) {}
  constexpr bool valid() const { return value >= 0; }
  constexpr auto operator<=>(const StrongId&) const = default;
};

}  // namespace beam

template <typename Tag, typename Rep>
struct std::hash<beam::StrongId<Tag, Rep>> {
  size_t operator()(const beam::StrongId<Tag, Rep>& id) const { return std::hash<Rep>()(id.value); }
};
