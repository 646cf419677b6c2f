#include "runtime/structured/utf8_ranges.h"

#include "core/check.h"

namespace beam {
namespace {

int encode(char32_t cp, uint8_t out[4]) {
  if (cp < 0x80) {
    out[0] = static_cast<uint8_t>(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
    out[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
    out[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
  out[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
  out[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
  out[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  return 4;
}

void split(char32_t lo, char32_t hi, std::vector<Utf8Sequence>& out) {
  // Split where the encoded length changes.
  for (char32_t edge : {char32_t{0x7F}, char32_t{0x7FF}, char32_t{0xFFFF}}) {
    if (lo <= edge && edge < hi) {
      split(lo, edge, out);
      split(edge + 1, hi, out);
      return;
    }
  }
  // Split until every continuation byte position spans a whole aligned block: then the
  // sequence's byte ranges are independent (each byte's range is the same whatever the others).
  if (hi >= 0x80) {
    for (int i = 1; i < 4; ++i) {
      const char32_t m = (char32_t{1} << (6 * i)) - 1;
      if ((lo & ~m) != (hi & ~m)) {
        if ((lo & m) != 0) {
          split(lo, lo | m, out);
          split((lo | m) + 1, hi, out);
          return;
        }
        if ((hi & m) != m) {
          split(lo, (hi & ~m) - 1, out);
          split(hi & ~m, hi, out);
          return;
        }
      }
    }
  }
  uint8_t a[4], b[4];
  const int n = encode(lo, a);
  BEAM_CHECK_EQ(n, encode(hi, b));
  Utf8Sequence seq;
  for (int i = 0; i < n; ++i) seq.push_back({a[i], b[i]});
  out.push_back(std::move(seq));
}

}  // namespace

std::vector<Utf8Sequence> utf8_sequences(char32_t lo, char32_t hi) {
  BEAM_CHECK(lo <= hi && hi <= 0x10FFFF)
      << "code point range " << static_cast<uint32_t>(lo) << ".." << static_cast<uint32_t>(hi);
  std::vector<Utf8Sequence> out;
  split(lo, hi, out);
  return out;
}

}  // namespace beam
