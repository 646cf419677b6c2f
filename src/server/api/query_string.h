// Reading an HTTP request's query string (the part after '?', undecoded).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/api/api_error.h"

namespace beam::server {

// The values of `key` in an undecoded query string, in order ("level=2",
// "tags=weights&tags=kv_cache"); a key without '=' has the value "".
std::vector<std::string> query_values(std::string_view query, std::string_view key);

// The last value of boolean `key` (true / false, 1 / 0, yes / no, on / off, as FastAPI reads
// them), or `absent`; another value is a 400 naming the key.
ApiExpected<bool> query_bool(std::string_view query, const std::string& key, bool absent);

}  // namespace beam::server
