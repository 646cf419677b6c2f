#include "server/api/query_string.h"

#include <array>

namespace beam::server {

std::vector<std::string> query_values(std::string_view query, std::string_view key) {
  std::vector<std::string> out;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const size_t eq = pair.find('=');
    if (pair.substr(0, eq) == key)
      out.emplace_back(eq == std::string_view::npos ? "" : pair.substr(eq + 1));
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
  }
  return out;
}

ApiExpected<bool> query_bool(std::string_view query, const std::string& key, bool absent) {
  const std::vector<std::string> values = query_values(query, key);
  if (values.empty()) return absent;
  const std::string& v = values.back();
  constexpr std::array<std::string_view, 4> kTrue = {"true", "1", "yes", "on"};
  constexpr std::array<std::string_view, 4> kFalse = {"false", "0", "no", "off"};
  for (std::string_view t : kTrue)
    if (v == t) return true;
  for (std::string_view f : kFalse)
    if (v == f) return false;
  return invalid_request("'" + key + "': expected true or false, got \"" + v + "\"", key);
}

}  // namespace beam::server
