// mix64: splitmix64's finaliser, a bijection of 64-bit words whose every output bit depends on
// every input bit (hash keys, chained block hashes, counter-based random streams).
#pragma once

#include <cstdint>

namespace beam {

constexpr uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace beam
