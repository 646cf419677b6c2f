// bfloat16 and IEEE half storage types with exact round-to-nearest-even conversions.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace beam {

// bfloat16 storage: the top 16 bits of an IEEE float32.
struct bf16 {
  uint16_t bits = 0;

  static constexpr bf16 from_bits(uint16_t b) { return bf16{b}; }
};

// Round-to-nearest-even float32 → bf16 (as torch's .to(torch.bfloat16)); NaN stays NaN.
inline bf16 to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<uint16_t>((u >> 16) | 0x40u)};
  uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);
  return bf16{static_cast<uint16_t>((u + rounding_bias) >> 16)};
}

inline float to_float(bf16 h) { return std::bit_cast<float>(static_cast<uint32_t>(h.bits) << 16); }

// Rounds a float to the nearest bf16 value and returns it widened: bf16(x) in BEAM.md's notation.
inline float round_bf16(float f) { return to_float(to_bf16(f)); }

// IEEE 754 binary16 storage.
struct f16 {
  uint16_t bits = 0;
};

inline float to_float(f16 h) {
  uint32_t sign = (h.bits & 0x8000u) << 16;
  uint32_t exp = (h.bits >> 10) & 0x1fu;
  uint32_t mant = h.bits & 0x3ffu;
  uint32_t out;
  if (exp == 0) {
    if (mant == 0) {
      out = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        mant <<= 1;
        ++e;
      } while ((mant & 0x400u) == 0);
      out = sign | ((127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    out = sign | 0x7f800000u | (mant << 13);
  } else {
    out = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(out);
}

// Round-to-nearest-even float32 → binary16 with overflow to infinity.
inline f16 to_f16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return f16{static_cast<uint16_t>(sign | 0x7e00u)};
  if (abs >= 0x477ff000u) return f16{static_cast<uint16_t>(sign | 0x7c00u)};  // rounds to inf
  if (abs < 0x38800000u) {  // subnormal or zero in half
    float af = std::bit_cast<float>(abs);
    // 2^-24 is the smallest half subnormal; nearbyint rounds half to even.
    float scaled = af * 16777216.0f;
    uint32_t m = static_cast<uint32_t>(scaled);
    float frac = scaled - static_cast<float>(m);
    if (frac > 0.5f || (frac == 0.5f && (m & 1u))) ++m;
    return f16{static_cast<uint16_t>(sign | m)};
  }
  uint32_t mant_round = abs + 0xfffu + ((abs >> 13) & 1u);
  uint32_t h = ((mant_round >> 13) - ((127 - 15) << 10));
  return f16{static_cast<uint16_t>(sign | h)};
}

}  // namespace beam
