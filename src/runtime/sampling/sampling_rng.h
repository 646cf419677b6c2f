// SamplingRng: the counter-based random stream of one sequence. Philox4x32-10 (Salmon et al.,
// SC'11, bit-exact with Random123) keyed by (seed, sibling index); the counter is the index of the
// output token being sampled, so a draw never depends on batching, step grouping or threads.
#pragma once

#include <array>
#include <cstdint>

namespace beam {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// One Philox4x32-10 block: 128 random bits for (counter, key).
PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key);

// Independent sub-streams of one sequence's key, written into the counter's third word. Token
// draws use kTokenDraw; speculative verification (rejection sampling) uses the other two so its
// uniforms never alias a plain draw at the same output index.
enum class RngStream : uint32_t {
  kTokenDraw = 0,
  kSpeculativeAccept = 1,
  kSpeculativeResidual = 2,
};

// Immutable after construction, so any thread may draw from it.
class SamplingRng {
 public:
  // key = splitmix64(splitmix64(seed) + sibling_index), split into two 32-bit words.
  SamplingRng(uint64_t seed, int64_t sibling_index);

  // A uniform double in [0, 1) with 53 random bits, for the token at 0-based output index
  // `output_index`: words 0 and 1 of philox(counter = {lo32(index), hi32(index), stream, 0}, key).
  double uniform(int64_t output_index, RngStream stream) const;

  uint64_t seed() const { return seed_; }
  int64_t sibling_index() const { return sibling_index_; }
  PhiloxKey key() const { return key_; }

 private:
  uint64_t seed_;
  int64_t sibling_index_;
  PhiloxKey key_;
};

// A fresh seed from std::random_device, for requests that give none (drawn once per request,
// shared by its siblings, and reported back so the output can be reproduced).
uint64_t draw_random_seed();

}  // namespace beam
