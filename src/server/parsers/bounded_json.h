// JSON text from requests and model output parsed within limits that keep later work on the value
// bounded: nlohmann's copies and dumps recurse once per nesting level (60,000 levels of `[` in a
// 120 KB body overflowed a thread's stack), and ordered_json finds a key by a linear search of its
// object (one object of 100,000 keys took 8.8 s to parse).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/status.h"

namespace beam::server {

// Deepest nesting of arrays and objects accepted.
inline constexpr int32_t kMaxJsonDepth = 512;
// Most keys of one object; kMaxJsonKeyWork, the key comparisons ordered_json's inserts may make
// over one text (the sum over its objects of keys² / 2, ~65 ms), allows one such object or as
// much work in several.
inline constexpr int64_t kMaxJsonObjectKeys = 10'000;
inline constexpr int64_t kMaxJsonKeyWork = kMaxJsonObjectKeys * kMaxJsonObjectKeys / 2;

// One JSON value (objects keep key order). An error's message continues "the text is ...":
// "not valid JSON: <where parsing failed>", or "refused: <the limit it passed>".
Expected<nlohmann::ordered_json> parse_bounded_json(std::string_view text);

}  // namespace beam::server
