// A range of code points as the UTF-8 byte sequences that encode it: each sequence is a list of
// byte ranges, one per byte, and a string encodes a code point of the range exactly when its
// bytes match one sequence (the construction of RE2 and Rust's regex-syntax).
#pragma once

#include <cstdint>
#include <vector>

namespace beam {

struct ByteRange {
  uint8_t lo = 0, hi = 0;  // inclusive
  bool operator==(const ByteRange&) const = default;
};
using Utf8Sequence = std::vector<ByteRange>;  // 1-4 ranges

// The sequences of code points [lo, hi] (lo <= hi <= U+10FFFF, no surrogates inside), at most a
// few per encoded length, in code point order.
std::vector<Utf8Sequence> utf8_sequences(char32_t lo, char32_t hi);

}  // namespace beam
