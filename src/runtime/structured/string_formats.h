// The JSON Schema `format`s constrained decoding enforces (OpenAI's structured outputs list:
// date-time, time, date, duration, email, hostname, ipv4, ipv6, uuid), each as an anchored
// regular expression for byte_dfa.h. Other formats stay annotations (draft 2020-12's default).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace beam {

// The regular expression of `format`, or nullopt for a format that is not enforced. Each accepts
// a subset of its RFC's texts (upper-case 'T' / 'Z', at most 9 digits of a fraction or a
// duration's number, no IPv4 tail or zone in IPv6, dot-atom e-mail local parts).
std::optional<std::string> format_regex(std::string_view format);

}  // namespace beam
