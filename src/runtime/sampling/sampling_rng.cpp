// Philox4x32-10 and the per-sequence key derivation (constants from Random123's philox.h).
#include "runtime/sampling/sampling_rng.h"

#include <random>

#include "core/check.h"
#include "core/hash_mix.h"

namespace beam {
namespace {

constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;  // key bump (golden ratio)
constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;  // key bump (sqrt(3) - 1)
constexpr int kPhiloxRounds = 10;

PhiloxCounter philox_round(const PhiloxCounter& c, const PhiloxKey& k) {
  uint64_t p0 = static_cast<uint64_t>(kPhiloxM0) * c[0];
  uint64_t p1 = static_cast<uint64_t>(kPhiloxM1) * c[2];
  auto hi = [](uint64_t p) { return static_cast<uint32_t>(p >> 32); };
  auto lo = [](uint64_t p) { return static_cast<uint32_t>(p); };
  return {hi(p1) ^ c[1] ^ k[0], lo(p1), hi(p0) ^ c[3] ^ k[1], lo(p0)};
}

uint64_t splitmix64(uint64_t x) { return mix64(x + 0x9E3779B97F4A7C15ull); }

}  // namespace

PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key) {
  for (int round = 0; round < kPhiloxRounds; ++round) {
    if (round > 0) {
      key[0] += kPhiloxW0;
      key[1] += kPhiloxW1;
    }
    counter = philox_round(counter, key);
  }
  return counter;
}

SamplingRng::SamplingRng(uint64_t seed, int64_t sibling_index)
    : seed_(seed), sibling_index_(sibling_index) {
  BEAM_CHECK(sibling_index >= 0) << "sibling_index " << sibling_index;
  uint64_t k = splitmix64(splitmix64(seed) + static_cast<uint64_t>(sibling_index));
  key_ = {static_cast<uint32_t>(k), static_cast<uint32_t>(k >> 32)};
}

double SamplingRng::uniform(int64_t output_index, RngStream stream) const {
  BEAM_CHECK(output_index >= 0) << "output_index " << output_index;
  auto index = static_cast<uint64_t>(output_index);
  PhiloxCounter counter = {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
                           static_cast<uint32_t>(stream), 0u};
  PhiloxCounter out = philox4x32_10(counter, key_);
  uint64_t bits = (static_cast<uint64_t>(out[0]) << 32) | out[1];
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

uint64_t draw_random_seed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

}  // namespace beam
